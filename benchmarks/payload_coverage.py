#!/usr/bin/env python
"""Payload identification on the twin (fuller than tests/test_payload.py).

    python benchmarks/payload_coverage.py --seeds 100

Prints, per exported number, the rate at which the 95 % intervals contain the twin's hidden
payload, for static holds with a measured reference, the same holds with the arm model as the
reference (the baseline: its error is not in the error bars), and slow wrist motion (inertia),
with the mean interval half-width and the wall time.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from isaaclab_sysid.payload import DesignOptions, PayloadOptions, design_poses, identify_payload
from isaaclab_sysid.payload.identify import derived
from isaaclab_sysid.payload.twin import PayloadTwin, hold_trajectory, record_payload_runs, wrist_motion
from isaaclab_sysid.robots import LinkInertial, load_robot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=100, help="noise seeds")
    ap.add_argument("--poses", type=int, default=4, help="designed static poses")
    ap.add_argument("--first", type=int, default=0, help="first seed")
    a = ap.parse_args()
    robot = load_robot("franka_panda")
    payload = LinkInertial(0.8, np.array([0.01, -0.02, 0.15]), np.diag([2e-3, 2e-3, 1e-3]))
    truth = derived(payload.to_pi())
    poses = design_poses(robot, DesignOptions(n_poses=a.poses, mass_scale=0.8)).poses
    t0 = time.perf_counter()
    cases = {"static, measured ref": [], "static, model ref": [], "motion, measured ref": []}
    widths = {k: [] for k in cases}
    for s in range(a.first, a.first + a.seeds):
        tw = PayloadTwin(payload, rate_hz=100.0)
        lo, ref = record_payload_runs(robot, hold_trajectory(poses, 1.0, 1.0, 100.0), tw, s)
        for key, r in (("static, measured ref", [ref]), ("static, model ref", None)):
            e = identify_payload(robot, [lo], r, PayloadOptions(mc_samples=4000))
            cases[key].append([iv.contains(v) for iv, v in zip(e.intervals, truth)])
            widths[key].append([(iv.upper - iv.lower) / 2 for iv in e.intervals])
        lo, ref = record_payload_runs(robot, wrist_motion(poses[0], 10.0, 100.0, s), PayloadTwin(payload, rate_hz=100.0,
                                                                                                hold_bias_std=0.0), s)
        e = identify_payload(robot, [lo], [ref], PayloadOptions(motion=True, mc_samples=4000))
        cases["motion, measured ref"].append([iv.contains(v) for iv, v in zip(e.intervals, truth)])
        widths["motion, measured ref"].append([(iv.upper - iv.lower) / 2 for iv in e.intervals])
    labels = [iv.label for iv in e.intervals]
    print(f"{'number':>22s}" + "".join(f"{k:>24s}" for k in cases))
    for i, lab in enumerate(labels):
        row = f"{lab:>22s}"
        for k in cases:
            c = np.asarray(cases[k])
            if i < c.shape[1]:
                row += f"{c[:, i].mean():>12.3f} +-{np.mean(np.asarray(widths[k])[:, i]):<9.2g}"
            else:
                row += f"{'-':>24s}"
        print(row)
    print(f"coverage (hidden truth inside the 95 % interval) +- mean half-width; nominal 0.95; {a.seeds} seeds; "
          f"wall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
