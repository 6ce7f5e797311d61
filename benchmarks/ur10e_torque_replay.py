"""Real-UR10e torque replay (issue 14): URDF vs rigid-body LS vs the replay fit, window RMS on every validation file.

    python benchmarks/ur10e_torque_replay.py           # full size (the 10 unloaded Fourier runs, population 24 x 20 + LM 10)
    python benchmarks/ur10e_torque_replay.py --quick   # the CI size of tests/test_ur10e_torque_replay.py

Prints the per-joint window RMS of q [mrad] and qd [mrad/s] at 0.2 s and 0.5 s windows, pooled over the 11
validation files (on every window, and on the windows where all three models stayed finite), the fitted joint
terms, and the wall time. ``--fit_window_s 0`` lets the fit choose its window from the data (the sizes' default).
Issue 28's experiments: ``--fit_groups static`` (Stribeck friction: mu_static, dynamic_ratio, seeded by the LS Coulomb;
``--static_seed_ratio``, ``--stribeck_velocity``) and ``--fit_runs`` (other identification logs); docs/replay.md has
what they gave. Issue 46: ``--fit_groups armature,sigmoid,viscous,delay,torque_offset`` fits the Gaz sigmoid, started
from each joint's sigmoid fitted to the LS's friction torque (the seed's ``sigmoid_*``; docs/friction.md). Needs ../shared/data/ur10e.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from isaaclab_sysid.jobs.ur10e_torque_study import CI, FULL, STATIC_FIT_GROUPS, run_study
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
    ap.add_argument("--refine_iter", type=int, default=None,
                    help="the fit's Levenberg-Marquardt budget per track and phase (default: the size's)")
    ap.add_argument("--fit_groups", default=None,
                    help="the fit's groups (default: the size's, Coulomb + viscous); 'static' = "
                         f"{STATIC_FIT_GROUPS} (Stribeck friction seeded by the LS Coulomb)")
    ap.add_argument("--stribeck_velocity", type=float, default=None,
                    help="the static group's Stribeck velocity [rad/s] when not fitted (default 0.05)")
    ap.add_argument("--static_seed_ratio", type=float, default=None,
                    help="with --fit_groups static: the seed's dynamic_ratio r (mu_static = LS Coulomb / r; default 1)")
    ap.add_argument("--sigmoid_slope_bounds", type=float, nargs=2, default=None,
                    help="the sigmoid law's slope box [s/rad] for the fit and its rigid-body seed (default 1 100)")
    ap.add_argument("--no_sigmoid_seed", action="store_true",
                    help="a sigmoid fit starts from the fit's low start, not from the rigid-body step's sigmoid (the "
                         "control)")
    ap.add_argument("--fit_runs", nargs="+", default=None,
                    help="the fit's logs (default: the size's): identification_data names or paths relative to the "
                         "UR10e data folder (jointwise_motion/ur-20_01_22-joint_4.csv)")
    a = ap.parse_args()
    if not (ur10e_dir() / "validation_data").is_dir():
        print(f"skipped: no UR10e data at {ur10e_dir()} (set ISAACLAB_SYSID_SHARED)")
        return 0
    size = CI if a.quick else FULL
    if a.fit_window_s is not None:
        size = dataclasses.replace(size, fit_window_s=a.fit_window_s or None)
    if a.refine_iter is not None:
        size = dataclasses.replace(size, refine_iter=a.refine_iter)
    if a.refine_jacobian_reuse is not None:
        size = dataclasses.replace(size, jacobian_reuse=a.refine_jacobian_reuse)
    if a.fit_groups is not None:
        size = dataclasses.replace(size, fit_groups=STATIC_FIT_GROUPS if a.fit_groups == "static" else a.fit_groups)
    if a.stribeck_velocity is not None:
        size = dataclasses.replace(size, stribeck_velocity=a.stribeck_velocity)
    if a.static_seed_ratio is not None:
        size = dataclasses.replace(size, static_seed_ratio=a.static_seed_ratio)
    if a.sigmoid_slope_bounds is not None:
        size = dataclasses.replace(size, sigmoid_slope_bounds=tuple(a.sigmoid_slope_bounds))
    if a.no_sigmoid_seed:
        size = dataclasses.replace(size, sigmoid_seed=False)
    if a.fit_runs is not None:
        if any(f.startswith("validation_data") for f in a.fit_runs):
            raise SystemExit("--fit_runs: validation_data is what the models are scored on, never fitted")
        size = dataclasses.replace(size, fit_runs=tuple(a.fit_runs))
    work = a.work or Path(tempfile.mkdtemp(prefix="ur10e_torque_"))
    t0 = time.perf_counter()
    res = run_study(size, work, log=print)
    wall = time.perf_counter() - t0
    joints = load_robot("ur10e").joint_names
    print(f"\nfit runs: {', '.join(size.fit_runs)}; population {size.num_envs} x {size.max_iter} + LM {size.refine_iter}; "
          f"groups {size.fit_groups}; fit window {res.fit_window_s:g} s"
          f"{' (chosen from the data)' if size.fit_window_s is None else ''}; scored on {len(res.valid_files)} validation files")
    print(res.table(joints))
    v = res.fit.values
    print("\nfitted joint terms (replay fit):")
    for g in ("armature", "friction", "mu_static", "dynamic_ratio", "stribeck_velocity", "sigmoid_amplitude",
              "sigmoid_slope", "sigmoid_offset", "viscous", "torque_offset"):
        if g in v:
            print(f"  {g:9s} " + " ".join(f"{x:.3f}" for x in np.asarray(v[g])))
    seed = json.loads((res.rb_dir.parent / "seed.json").read_text()) if (res.rb_dir.parent / "seed.json").is_file() \
        else None
    if seed is not None and "sigmoid_amplitude" in seed["best_params_decoded"] and "sigmoid_amplitude" in v:
        print("  the sigmoid's start (the rigid-body seed): " + "; ".join(
            f"{g} " + " ".join(f"{x:.3f}" for x in seed["best_params_decoded"][g])
            for g in ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset")))
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
