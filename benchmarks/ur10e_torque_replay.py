"""Real-UR10e torque replay (issue 14): URDF vs rigid-body LS vs the replay fit, window RMS on every validation file.

    python benchmarks/ur10e_torque_replay.py           # full size (5 identification runs, population 24 x 20 + LM 10)
    python benchmarks/ur10e_torque_replay.py --quick   # the CI size of tests/test_ur10e_torque_replay.py

Prints the per-joint window RMS of q [mrad] and qd [mrad/s] at 0.2 s and 0.5 s windows, pooled over the 11
validation files (on every window, and on the windows where all three models stayed finite), the fitted joint
terms, and the wall time. ``--fit_window_s 0`` lets the fit choose its window from the data (the sizes' default).
Needs ../shared/data/ur10e.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from isaaclab_sysid.jobs.ur10e_torque_study import CI, FULL, run_study
from isaaclab_sysid.data.formats.ur10e import ur10e_dir
from isaaclab_sysid.robots import load_robot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the CI size")
    ap.add_argument("--fit_window_s", type=float, default=None,
                    help="the fit's shooting window [s] (default: the size's; 0 = chosen from the data)")
    ap.add_argument("--work", type=Path, default=None, help="keep the outputs here (default: a temporary folder)")
    ap.add_argument("--refine_jacobian_reuse", type=int, default=None,
                    help="the fit's Broyden steps between finite-difference Jacobians (default 3; 0: a stencil every "
                         "LM iteration, as before issue 26's third session)")
    a = ap.parse_args()
    if not (ur10e_dir() / "validation_data").is_dir():
        print(f"skipped: no UR10e data at {ur10e_dir()} (set ISAACLAB_SYSID_SHARED)")
        return 0
    size = CI if a.quick else FULL
    if a.fit_window_s is not None:
        size = dataclasses.replace(size, fit_window_s=a.fit_window_s or None)
    if a.refine_jacobian_reuse is not None:
        size = dataclasses.replace(size, jacobian_reuse=a.refine_jacobian_reuse)
    work = a.work or Path(tempfile.mkdtemp(prefix="ur10e_torque_"))
    t0 = time.perf_counter()
    res = run_study(size, work, log=print)
    wall = time.perf_counter() - t0
    joints = load_robot("ur10e").joint_names
    print(f"\nfit runs: {', '.join(size.fit_runs)}; population {size.num_envs} x {size.max_iter} + LM {size.refine_iter}; "
          f"fit window {res.fit_window_s:g} s{' (chosen from the data)' if size.fit_window_s is None else ''}; scored on {len(res.valid_files)} validation files")
    print(res.table(joints))
    v = res.fit.values
    print("\nfitted joint terms (replay fit):")
    for g in ("armature", "friction", "viscous", "torque_offset"):
        print(f"  {g:9s} " + " ".join(f"{x:.3f}" for x in np.asarray(v[g])))
    print(f"  delay     {int(v['delay'])} ticks")
    flagged = [h.describe() for h in res.fit.at_bounds()]
    print("  at a bound: " + ("; ".join(flagged) if flagged else "none"))
    for w, by in res.scores.items():
        b, c = by["LS"], by["replay fit"]
        ac, cc = res.common[w]["URDF"], res.common[w]["replay fit"]
        worse = [j for j, x, y in zip(joints, c.q_rms_mrad, b.q_rms_mrad) if x >= y]
        print(f"ratios at {w:g} s: replay fit / LS pooled q {c.q_pooled_mrad / b.q_pooled_mrad:.3f}, "
              f"qd {c.dq_pooled_mrad_s / b.dq_pooled_mrad_s:.3f}; / URDF q on the {cc.windows} common windows "
              f"{cc.q_pooled_mrad / ac.q_pooled_mrad:.4f}; q not below LS on: {', '.join(worse) if worse else 'none'}")
    print(f"wall {wall:.0f} s (LS, fit, scoring); outputs in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
