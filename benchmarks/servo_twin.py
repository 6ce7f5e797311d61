#!/usr/bin/env python
"""The servo arm's proof (issue 27): the SO-101 twin recorded as LeRobot records it (30 fps, normalized range,
calibration file), read by the importer, fitted by scripts/sysid_franka_osc.py (kp, kd, armature, static friction,
Stribeck velocity, delay, encoder offset; gains unknown), intervals by scripts/compute_intervals.py, and every
fitted number judged against the hidden truth (isaaclab_sysid/jobs/servo_proof.py).

    python benchmarks/servo_twin.py --out /tmp/servo_twin            # full size: 2 x 20 s fit episodes + 1 held out
    python benchmarks/servo_twin.py --out /tmp/servo_twin --ci       # the test suite's size
    python benchmarks/servo_twin.py --out /tmp/servo_twin10 --seed 10  # other designs and noise, same truth
    python benchmarks/servo_twin.py --out /tmp/servo_twin_nt --seed 10 --set actuator_tau_std=0  # no torque noise
"""

from __future__ import annotations

import argparse
import sys
import time

from isaaclab_sysid.jobs.servo_proof import run_proof, with_truth
from isaaclab_sysid.twin.servo import SO101_TRUTH
from isaaclab_sysid.utils.atomic import atomic_write_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the dataset, the runs and the fit (must not hold runs yet)")
    ap.add_argument("--ci", action="store_true", help="CI size (6 s episodes, kp/kd/armature/delay/offset only)")
    ap.add_argument("--refine_iter", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0, help="the twin's designs and noise (the hidden truth is the "
                    "same); episode e uses seed + e, so seeds 3 or more apart share no episode")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="change the hidden truth (ServoTruth), e.g. --set actuator_tau_std=0 --set viscous=0")
    a = ap.parse_args(argv)
    truth = with_truth(SO101_TRUTH, a.set)
    t0 = time.time()
    if a.ci:
        v = run_proof(a.out, duration_s=6.0, groups="kp,kd,armature,mu_static,dynamic_ratio,delay,encoder_offset",
                      refine_iter=a.refine_iter, seed=a.seed, truth=truth)
    else:
        v = run_proof(a.out, refine_iter=a.refine_iter, seed=a.seed, truth=truth)
    print(v.format())
    print(f"missed (identified, interval misses the truth): {[r.label for r in v.missed] or 'none'}; "
          f"wall {time.time() - t0:.0f} s")
    atomic_write_json(f"{a.out}/servo_verdict.json", {"rows": [r.__dict__ for r in v.rows], "delay_fit": v.delay_fit,
                                                      "delay_true": v.delay_true, "heldout_rmse_rad": v.heldout_rmse_rad,
                                                      "noise_floor_rad": v.noise_floor_rad, "notes": v.notes})
    return 0 if not v.missed and v.delay_fit == v.delay_true else 1


if __name__ == "__main__":
    sys.exit(main())
