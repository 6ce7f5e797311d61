#!/usr/bin/env python
"""Friction that drifts, full size: a 20-minute warm-up on the Franka twin, and a worked example
beside its reference numbers.

    python benchmarks/friction_drift.py --session-s 1200 --runs 40

Part 1, the worked example: 600 readings, one every 2 s, true viscous friction 0.30
falling to 0.20 between readings 150 and 450, averaged over --seeds; printed beside the numbers
of the reference. Part 2, the Franka twin: a session of --runs back-to-back runs
whose Coulomb and viscous friction fall by 35 % over --session-s seconds, tracked with one
reading every 2 s; per forgetting factor the lag (mean error over the last quarter), the noise
(its spread), the band's mean half-width and the coverage of the truth by the band.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from isaaclab_sysid.online import FrictionRLS, FrictionSignal, RLSOptions, TrackOptions, track
from isaaclab_sysid.online.twin import franka_drift, record_session
from isaaclab_sysid.robots import load_robot

REFERENCE_NUMBERS = {1.0: (0.258, 0.063, None), 0.98: (0.207, 0.017, 0.010), 0.9: (None, None, 0.022)}


def worked_example(seeds: int) -> None:
    k = np.arange(600)
    b = np.where(k < 150, 0.30, np.where(k < 450, 0.30 - 0.10 * (k - 150) / 300, 0.20))
    print("the worked example (600 readings, one every 2 s):")
    print(f"{'lambda':>7s}{'final b':>10s}{'lag':>8s}{'shake':>8s}   reference (final, lag, shake)")
    for lam in (1.0, 0.98, 0.9):
        out = []
        for s in range(seeds):
            rng = np.random.default_rng(s)
            w = rng.uniform(0.3, 2.0, 600) * rng.choice([-1, 1], 600)
            y = b * w + 0.4 * np.sign(w) + 0.05 * rng.standard_normal(600)
            f = FrictionRLS(1, RLSOptions(forgetting=lam, deadband=0.0))
            est = np.array([f.update(2.0 * (i + 1), [[w[i]]], [[y[i]]]).theta[0, 1] for i in range(600)])
            out.append((est[-1], (est[450:] - 0.2).mean(), (est[450:] - 0.2).std()))
        m = np.mean(out, axis=0)
        print(f"{lam:>7g}{m[0]:>10.3f}{m[1]:>8.3f}{m[2]:>8.3f}   {REFERENCE_NUMBERS[lam]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--session-s", type=float, default=1200.0, help="session length [s]")
    ap.add_argument("--runs", type=int, default=40, help="back-to-back runs in the session")
    ap.add_argument("--chunk-s", type=float, default=2.0, help="seconds per update (one reading each)")
    ap.add_argument("--seeds", type=int, default=20, help="random seeds of the worked example")
    a = ap.parse_args()
    t0 = time.perf_counter()
    worked_example(a.seeds)
    robot = load_robot("franka_panda")
    twin = franka_drift(a.session_s)
    runs, starts = record_session(robot, twin, a.runs, seed=0, log_rate_hz=1000.0)
    samples = [FrictionSignal(robot, twin.armature).of_run(r) for r in runs]
    t_sim = time.perf_counter() - t0
    print(f"\nFranka twin: {a.runs} runs over {a.session_s / 60:g} min, friction -35 %, one reading every {a.chunk_s:g} s")
    print(f"{'lambda':>7s}{'term':>9s}{'lag':>9s}{'noise':>9s}{'band':>9s}{'coverage':>10s}   (means over joints, N m or N m s/rad)")
    for lam in (1.0, 0.98, 0.9):
        res = track(samples, robot.joint_names, RLSOptions(forgetting=lam), TrackOptions(a.chunk_s, 1), list(starts))
        truth = twin.run_truth(res.t, a.runs)
        s = res.summary(truth)
        k0 = res.t.size // 10
        for i, term in enumerate(("coulomb", "viscous")):
            cov = (np.abs(res.theta - truth) <= res.half_width)[k0:, :, i].mean()
            print(f"{lam:>7g}{term:>9s}{np.mean(np.abs(s[term]['lag'])):>9.4f}{np.mean(s[term]['shake']):>9.4f}"
                  f"{np.mean(s[term]['half_width']):>9.4f}{cov:>10.3f}")
    print(f"wall {time.perf_counter() - t0:.0f} s (twin {t_sim:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
