"""Shared steps of the generator CLIs: anchor, IK, limit checks, target run, plot, pre-flight."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from isaaclab_sysid.excitation.anchor import anchor_pose, default_q_init
from isaaclab_sysid.excitation.design_io import impedance_gains, task_target_run, write_target
from isaaclab_sysid.excitation.ik import joint_reference
from isaaclab_sysid.excitation.limits import DesignLimits, check_joint_reference, check_task_peaks, refuse_if
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.utils.atomic import atomic_write_json


def start_pose(robot_name: str, q_init: tuple[float, ...] | None):
    robot = load_robot(robot_name)
    q0 = default_q_init(robot) if q_init is None else np.asarray(q_init, dtype=float)
    if q0.shape != (robot.n_dof,):
        raise SystemExit(f"error: --q-init needs {robot.n_dof} values, got {q0.size}")
    pos, quat = anchor_pose(robot, q0)
    return robot, q0, pos, quat


def build_task_run(robot: Robot, q0, design, limits: DesignLimits, name: str, kp_trans, kp_rot, kd_trans, kd_rot):
    """IK + limit checks (refusing with DesignLimitError) + the target run."""
    peaks = design.peaks()
    refuse_if(check_task_peaks(peaks, limits), f"design '{name}'")
    jref = joint_reference(robot, design.t, design.position(), design.quat(), q0)
    refuse_if(check_joint_reference(robot, jref.t, jref.q, jref.dq, jref.ddq, limits), f"design '{name}'")
    kp, kd = impedance_gains(kp_trans, kp_rot, kd_trans, kd_rot)
    run = task_target_run(robot, design, jref, name, kp, kd, summary={"reference_peaks": peaks})
    return run, jref, peaks


def write_outputs(robot, run, out_dir: Path, plot_fn, preflight_on: bool, peaks=None) -> list[Path]:
    """Write the target run, its plot and (optionally) the pre-flight report; return the paths."""
    csv, side = write_target(run, out_dir)
    paths = [csv, side, plot_fn(out_dir / f"{run.name}.png")]
    if preflight_on:
        from isaaclab_sysid.excitation.plots import plot_preflight
        from isaaclab_sysid.excitation.preflight import preflight

        rep = preflight(robot, run, peaks=peaks)
        print(rep.format())
        p = out_dir / f"{run.name}_preflight.json"
        atomic_write_json(p, rep.to_dict())
        paths += [p, plot_preflight(rep, robot, out_dir / f"{run.name}_preflight.png")]
    return paths
