"""Recovery of a friction law the fit was not tuned on (CI size of benchmarks/friction_laws.py): a Franka twin whose
hidden friction is the Gaz sigmoid law identified on a real Panda (1 kHz logs, noise on q, qd and the torque),
fitted with that law by Levenberg-Marquardt from the fit's low start. Required: the delay exact, the held-out run
within 1.5x the noise floor, every group's median error under 25 %, and the Coulomb model, fitted the same way,
clearly worse on the held-out run (the law matters on this arm)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import friction_laws  # noqa: E402


def test_sigmoid_twin_recovered_by_the_sigmoid_law_and_not_by_coulomb():
    out = friction_laws.recover("sigmoid", friction_laws.CI)
    law, coulomb = out["law"], out["coulomb"]
    print(out)
    assert law["delay"] == friction_laws.DELAY
    assert law["heldout_over_floor"] <= 1.5
    for g, e in law["median_rel_error"].items():
        assert e < 0.25, (g, e)
    assert coulomb["heldout_over_floor"] > 2.0 * law["heldout_over_floor"]
