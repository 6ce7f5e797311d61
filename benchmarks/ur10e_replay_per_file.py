"""The real-UR10e torque replay scored per validation file: where does LS beat the replay fit? (issue 28)

    python benchmarks/ur10e_torque_replay.py --quick --work W   # once: LS and the replay fit in W
    python benchmarks/ur10e_replay_per_file.py W [--joint wrist_1_joint] [--windows 0.2 0.5]

Reads ``W/rigid_body`` (the LS) and the newest fit folder under ``W/fit`` that ``run_study`` wrote, replays the LS
model and the fit on each of the 11 validation files alone (same window lengths, same models as
``jobs/ur10e_torque_study.py``) and prints, per file and window length, the chosen joint's q RMS [mrad] for both,
their ratio, and the windows of the file. A fit that loses on every file points at the model; one that loses on a
few points at those trajectories. Needs ../shared/data/ur10e.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from isaaclab_sysid.arm_model import with_body_inertials
from isaaclab_sysid.data.formats.ur10e import list_runs, load_published_parameters, ur10e_dir
from isaaclab_sysid.evaluate.window_scores import window_scores
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.importers.torque_runs import TorqueSource, read_ur10e_torque_run
from isaaclab_sysid.jobs.ur10e_torque_study import fit_batch, ls_batch
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.identified import load_nominal
from isaaclab_sysid.sim.interface import ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.timebase import TICK_HZ


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="a run_study folder (benchmarks/ur10e_torque_replay.py --work)")
    ap.add_argument("--joint", default="wrist_1_joint")
    ap.add_argument("--windows", type=float, nargs="+", default=[0.2, 0.5], help="window lengths [s]")
    a = ap.parse_args()
    data = ur10e_dir()
    if not (data / "validation_data").is_dir():
        print(f"skipped: no UR10e data at {data} (set ISAACLAB_SYSID_SHARED)")
        return 0
    fits = sorted((a.work / "fit").glob("*/sysid_best_params.json"))
    if not (a.work / "rigid_body" / "rb_params.json").is_file() or not fits:
        raise SystemExit(f"{a.work}: needs rigid_body/rb_params.json and fit/*/sysid_best_params.json (run_study's)")
    fit = FitResult.read(fits[-1])
    urdf = load_robot("ur10e")
    j = urdf.joint_names.index(a.joint)
    ls_robot = with_body_inertials(urdf, load_nominal(a.work / "rigid_body" / "nominal_inertials.json"))
    gains = load_published_parameters(data / "UR10E_parameters.txt").drive_gains
    source = TorqueSource("current", includes_gravity=True, drive_gains=tuple(float(k) for k in gains))
    files = list_runs(data / "validation_data")
    runs = [read_ur10e_torque_run(f, source, urdf) for f in files]
    ls, fb = ls_batch(a.work / "rigid_body", urdf), fit_batch(fit)
    print(f"fit: {fits[-1]} ({', '.join(fit.space.group_names)}); joint {a.joint}")
    print("| window | file | windows | LS q RMS [mrad] | fit q RMS [mrad] | fit / LS |")
    print("|---|---|---|---|---|---|")
    for w in a.windows:
        be = MujocoBackend(ls_robot, ReplayOptions(window_ticks=int(round(w * TICK_HZ))))
        for f, run in zip(files, runs):
            b = window_scores(be, ls, [run])[0]
            c = window_scores(be, fb, [run])[0]
            flag = "" if b.scored and c.scored else " (diverged)"
            print(f"| {w:g} s | {f.name} | {b.windows} | {b.q_rms_mrad[j]:.2f} | {c.q_rms_mrad[j]:.2f} | "
                  f"{c.q_rms_mrad[j] / b.q_rms_mrad[j]:.2f}{flag} |")
        be.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
