#!/usr/bin/env python
"""The servo motor model's twin (issue 42): an XL330 on BAM's bench with hidden truth (kt, R, armature, the
load-dependent friction, viscous, delay, encoder offset), logged as BAM's recorder logs it (about 190 Hz irregular,
torque-off phases, 4096-count encoder, 0.229 rpm speed unit, a noisy sagging supply voltage), imported with
scripts/import_runs.py --format bam, fitted by scripts/sysid_franka_osc.py (--fit_groups auto) on kp 100 and 200,
held out at kp 400, intervals by scripts/compute_intervals.py, every fitted number judged against the truth
(isaaclab_sysid/jobs/servo_motor_proof.py).

    python benchmarks/servo_motor_twin.py --out /tmp/smt           # 4 trajectories x kp 100, 200 fitted; 4 x kp 400 held out
    python benchmarks/servo_motor_twin.py --out /tmp/smt_ci --ci   # the test's size: 2 fit logs, 1 held out
    python benchmarks/servo_motor_twin.py --out /tmp/smt --json    # the verdict as JSON on stdout

Exit 0 when every fitted number is inside its 95 % interval or flagged with a reason, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from isaaclab_sysid.jobs.servo_motor_proof import CI_FIT, CI_HELDOUT, FULL_FIT, FULL_HELDOUT, run_proof
from isaaclab_sysid.twin.servo_motor import XL330_TRUTH


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the logs, the runs and the fit (must not hold runs yet)")
    ap.add_argument("--ci", action="store_true", help="CI size: sin_time_square at kp 100, lift_and_drop at kp 200, sin_sin at kp 400 held out")
    ap.add_argument("--seed", type=int, default=0, help="the twin's noise and loop timing (the truth is the same)")
    ap.add_argument("--json", action="store_true", help="print the verdict as JSON instead of the table")
    a = ap.parse_args(argv)
    t0 = time.time()
    say = (lambda s: print(s, file=sys.stderr)) if a.json else print
    if a.ci:
        v = run_proof(a.out, CI_FIT, CI_HELDOUT, seed=a.seed, log=say)
    else:
        v = run_proof(a.out, FULL_FIT, FULL_HELDOUT, seed=a.seed, log=say)
    v.seconds["total"] = time.time() - t0
    if a.json:
        print(json.dumps(v.to_dict() | {"truth": XL330_TRUTH.as_dict()}, indent=1))
    else:
        print(v.format())
    return 0 if not v.failures else 1


if __name__ == "__main__":
    sys.exit(main())
