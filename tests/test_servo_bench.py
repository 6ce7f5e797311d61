"""BAM's real XL330 bench logs through the whole product (issue 42): imported with ``--format bam``, fitted on the
kp 100 and 200 logs with the servo motor model and the load-dependent law, and scored free-running on the held-out
kp 400 logs as BAM's ``bam.mae`` scores them. The figure to beat per trajectory kind is BAM's best published model
(m3) through BAM's own simulator, measured in tests/test_vs_bam.py (docs/benchmarks.md). Skipped without the shared
logs."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.benchmarking.bam_peer import bam_xl330_dir
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.jobs.servo_bench import fit_and_score, split_by_gain

RAW = bam_xl330_dir() / "raw"
pytestmark = pytest.mark.skipif(not RAW.is_dir(), reason=f"BAM XL330 logs not found at {RAW}")

#: BAM's published m3 on the kp 400 logs per trajectory kind [mrad] (tests/test_vs_bam.py: M3_KP400_KIND)
M3_KP400_KIND = {"sin_sin": 70.240, "lift_and_drop": 81.113, "up_and_down": 94.319, "sin_time_square": 48.278}


def test_quick_fit_beats_bams_best_published_model_on_the_held_out_gain(tmp_path):
    score = fit_and_score(RAW, (100, 200), (400,), tmp_path, quick=True, log=lambda s: None)
    assert len(score.mae) == 4 and len(score.fit_mae) == 8
    kinds = {score.runs[k][0]: 1e3 * v for k, v in score.mae.items()}
    assert set(kinds) == set(M3_KP400_KIND)
    for kind, mae in kinds.items():
        assert mae < M3_KP400_KIND[kind], f"{kind}: ours {mae:.1f} mrad, BAM m3 {M3_KP400_KIND[kind]:.1f}"
    # the motor model is physical: a torque constant and resistance inside their boxes, not at them
    kt, r = float(score.values["motor_kt"][0]), float(score.values["motor_r"][0])
    assert 0.05 < kt < 3.0 and 0.5 < r < 10.0
    assert np.mean(list(kinds.values())) < 0.8 * np.mean(list(M3_KP400_KIND.values()))


def test_split_by_gain_refuses_an_empty_or_overlapping_split(tmp_path):
    from isaaclab_sysid.importers.run_import import import_runs

    runs, _ = import_runs(RAW, "bam", None, None, log=lambda s: None)
    fit, held = split_by_gain(runs, (100, 200), (400,))
    assert len(fit) == 8 and len(held) == 4
    with pytest.raises(FitError, match="both fitted and held out"):
        split_by_gain(runs, (100, 400), (400,))
    with pytest.raises(FitError, match="no logs at kp"):
        split_by_gain(runs, (100,), (800,))
