"""Which Coulomb friction does each UR10e log ask of one joint, the other terms held? (issue 28, a diagnostic)

    python benchmarks/ur10e_torque_replay.py --quick --work W      # once: LS and the replay fit in W
    python benchmarks/ur10e_coulomb_scan.py W [--joint wrist_1_joint] [--coulomb 1.9 2.0 ...] [--windows 0.05 0.5]
    python benchmarks/ur10e_coulomb_scan.py W --terms terms.json   # other joint terms than W's fit

Replays each log (the unloaded Fourier runs, the January unload, free-motion and jointwise runs, and the moving
validation file ``ptp_10_points``) by its motor current x the authors' drive gains with the LS inertials of
``W/rigid_body`` and the joint terms of W's replay fit (or ``--terms``: a JSON object with ``armature``,
``friction``, ``viscous``, ``torque_offset`` (N each, joint order) and ``delay`` [ticks]), the chosen joint's Coulomb
friction [N m] swept over a grid, and prints that joint's q RMS [mrad] per log, window length and Coulomb, and the
best grid point. Not a fit: it shows where each log's optimum lies when everything else is held. Needs
../shared/data/ur10e.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from isaaclab_sysid.arm_model import with_body_inertials
from isaaclab_sysid.data.formats.ur10e import load_published_parameters, ur10e_dir
from isaaclab_sysid.evaluate.window_scores import window_scores
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.importers.torque_runs import TorqueSource, read_ur10e_torque_run
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.identified import load_nominal
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.timebase import TICK_HZ

#: the logs scanned, relative to the UR10e data folder
LOGS = ("identification_data/ur-20_02_06-20sec_5harm.csv", "identification_data/ur-20_02_05-20sec_8harm.csv",
        "identification_data/ur-20_02_06-20sec_10harm.csv", "identification_data/ur-20_02_05-20sec_12harm.csv",
        "identification_data/ur-20_02_10-20sec_7harm.csv", "identification_data/ur-20_02_12-50sec_12harm.csv",
        "identification_data/ur-20_02_19_15harm50sec.csv", "identification_data/ur-20_01_31-unload.csv",
        "identification_data/ur-19_12_23_free.csv", "jointwise_motion/ur-20_01_22-joint_4.csv",
        "validation_data/ur-20_01_17-ptp_10_points.csv")
GROUPS = ("armature", "friction", "viscous", "torque_offset")


def joint_terms(work: Path, terms: Path | None, n: int) -> dict[str, np.ndarray]:
    """The held joint terms: ``terms`` (JSON) if given, else W's newest replay fit (Coulomb groups; a static fit's
    sliding friction dynamic_ratio x mu_static stands for its Coulomb)."""
    if terms is not None:
        d = json.loads(terms.read_text())
        missing = [g for g in (*GROUPS, "delay") if g not in d]
        if missing:
            raise SystemExit(f"{terms}: missing {', '.join(missing)}")
        out = {g: np.asarray(d[g], dtype=float) for g in GROUPS}
        bad = [g for g in GROUPS if out[g].shape != (n,)]
        if bad:
            raise SystemExit(f"{terms}: {', '.join(bad)} must have {n} values (one per joint)")
        out["delay"] = np.asarray(int(d["delay"]))
        return out
    fits = sorted((work / "fit").glob("*/sysid_best_params.json"))
    if not fits:
        raise SystemExit(f"{work}: no fit/*/sysid_best_params.json "
                         f"(run benchmarks/ur10e_torque_replay.py --work {work})")
    v = FitResult.read(fits[-1]).values
    friction = v["friction"] if "friction" in v else v["mu_static"] * v["dynamic_ratio"]
    return {"armature": v["armature"], "friction": friction, "viscous": v["viscous"],
            "torque_offset": v.get("torque_offset", np.zeros(n)), "delay": np.asarray(int(v.get("delay", 0)))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="a run_study folder (benchmarks/ur10e_torque_replay.py --work)")
    ap.add_argument("--joint", default="wrist_1_joint")
    ap.add_argument("--coulomb", type=float, nargs="+", default=[1.9, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7],
                    help="the joint's Coulomb friction grid [N m]")
    ap.add_argument("--windows", type=float, nargs="+", default=[0.05, 0.2, 0.5], help="window lengths [s]")
    ap.add_argument("--terms", type=Path, default=None, help="JSON joint terms to hold instead of W's fit")
    a = ap.parse_args()
    data = ur10e_dir()
    if not (data / "validation_data").is_dir():
        print(f"skipped: no UR10e data at {data} (set ISAACLAB_SYSID_SHARED)")
        return 0
    urdf = load_robot("ur10e")
    j, n = urdf.joint_names.index(a.joint), urdf.n_dof
    held = joint_terms(a.work, a.terms, n)
    ls_robot = with_body_inertials(urdf, load_nominal(a.work / "rigid_body" / "nominal_inertials.json"))
    gains = load_published_parameters(data / "UR10E_parameters.txt").drive_gains
    source = TorqueSource("current", includes_gravity=True, drive_gains=tuple(float(k) for k in gains))
    grid = np.asarray(a.coulomb, dtype=float)
    friction = np.repeat(held["friction"][None], len(grid), axis=0)
    friction[:, j] = grid
    batch = CandidateBatch(**{g: np.repeat(held[g][None], len(grid), axis=0) for g in GROUPS if g != "friction"},
                           friction=friction, delay=np.full(len(grid), int(held["delay"]), dtype=np.int64))
    runs = [(f, read_ur10e_torque_run(data / f, source, urdf)) for f in LOGS]
    print(f"{a.joint} q RMS [mrad] per log; the other terms held ({a.terms or 'the fit in ' + str(a.work)})")
    print("| window | log | best Coulomb [N m] | " + " | ".join(f"{c:g}" for c in grid) + " |")
    print("|---|---|---|" + "---|" * len(grid))
    for w in a.windows:
        be = MujocoBackend(ls_robot, ReplayOptions(window_ticks=int(round(w * TICK_HZ))))
        for f, run in runs:
            e = np.array([s.q_rms_mrad[j] for s in window_scores(be, batch, [run])])
            print(f"| {w:g} s | {Path(f).name} | {grid[int(np.argmin(e))]:g} | " + " | ".join(f"{x:.2f}" for x in e)
                  + " |", flush=True)
        be.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
