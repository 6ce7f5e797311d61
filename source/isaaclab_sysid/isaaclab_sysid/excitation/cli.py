"""Shared steps of the generator CLIs: anchor, IK, limit checks, target run, plot, pre-flight."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.excitation.anchor import anchor_pose, default_q_init
from isaaclab_sysid.excitation.design_io import impedance_gains, task_target_run, write_target
from isaaclab_sysid.excitation.ik import joint_reference
from isaaclab_sysid.excitation.limits import (
    DesignLimitError,
    DesignLimits,
    check_joint_reference,
    check_task_peaks,
    refuse_if,
)
from isaaclab_sysid.excitation.verdict import EXIT_FAIL
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.errors import UserError
from isaaclab_sysid.utils.json_io import jsonable


def start_pose(robot_name: str, q_init: tuple[float, ...] | None):
    robot = load_robot(robot_name)
    q0 = default_q_init(robot) if q_init is None else np.asarray(q_init, dtype=float)
    if q0.shape != (robot.n_dof,):
        raise UserError(f"--q-init needs {robot.n_dof} values, got {q0.size}")
    pos, quat = anchor_pose(robot, q0)
    return robot, q0, pos, quat


def build_task_run(robot: Robot, q0, design, limits: DesignLimits, name: str, kp_trans, kp_rot, kd_trans, kd_rot,
                   control_rate_hz: float = 50.0):
    """IK + limit checks (refusing with DesignLimitError) + the target run (setpoints held at ``control_rate_hz``)."""
    peaks = design.peaks()
    refuse_if(check_task_peaks(peaks, limits), f"design '{name}'")
    jref = joint_reference(robot, design.t, design.position(), design.quat(), q0)
    refuse_if(check_joint_reference(robot, jref.t, jref.q, jref.dq, jref.ddq, limits), f"design '{name}'")
    kp, kd = impedance_gains(kp_trans, kp_rot, kd_trans, kd_rot)
    run = task_target_run(robot, design, jref, name, kp, kd, summary={"reference_peaks": peaks},
                          control_rate_hz=control_rate_hz)
    return run, jref, peaks


def write_outputs(robot, run, out_dir: Path, plot_fn, preflight_on: bool, peaks=None) -> tuple[list[Path], str | None]:
    """Write the target run, its plot and (optionally) the pre-flight report (its verdict printed and in its JSON).

    Returns the paths and the pre-flight's overall line (``safe to run: yes|no ...``; None without the pre-flight).
    """
    csv, side = write_target(run, out_dir)
    paths = [csv, side, plot_fn(out_dir / f"{run.name}.png")]
    verdict = None
    if preflight_on:
        from isaaclab_sysid.excitation.plots import plot_preflight
        from isaaclab_sysid.excitation.preflight import preflight

        rep = preflight(robot, run, peaks=peaks)
        print(rep.format())
        p = out_dir / f"{run.name}_preflight.json"
        atomic_write_json(p, jsonable(rep.to_dict()))
        paths += [p, plot_preflight(rep, robot, out_dir / f"{run.name}_preflight.png")]
        verdict = rep.verdict.overall_line()
    return paths, verdict


def verdict_exit(verdict: str | None) -> int:
    """Print the pre-flight's overall line last (after the paths) and return the exit status: EXIT_FAIL (3) when
    a check FAILed (the design is written, but not safe to run as it is), else 0."""
    if verdict is None:
        return 0
    print(f"pre-flight: {verdict}")
    return EXIT_FAIL if verdict.startswith("safe to run: no") else 0


@dataclass
class TaskDesignFlags:
    """Refusal limits and pre-flight of a task-space design: the flags every task-space
    generator shares (its own Args inherit them)."""

    max_translation_m: float = 0.3
    """Refuse a design whose target leaves the anchor by more than this [m]."""
    max_rotation_rad: float = 1.0
    """Refuse a design whose target rotates from the anchor by more than this [rad]."""
    max_ee_speed_m_s: float | None = None
    """Refuse a reference faster than this [m/s] (default: unchecked)."""
    max_ee_acc_m_s2: float | None = None
    """Refuse a reference accelerating more than this [m/s^2] (default: unchecked)."""
    joint_margin_rad: float = 0.05
    """Refuse a joint reference closer than this to a joint limit [rad]."""
    preflight: bool = False
    """Also replay the design and write the pre-flight report with its verdict (needs the MuJoCo backend); exit 3 when
    it says not safe to run."""
    control_rate_hz: float = 50.0
    """Setpoint rate [Hz] the target run holds each setpoint for; rows are at 1 kHz."""

    def limits(self) -> DesignLimits:
        """The :class:`DesignLimits` these flags set."""
        return DesignLimits(joint_margin_rad=self.joint_margin_rad, max_translation_m=self.max_translation_m,
                            max_rotation_rad=self.max_rotation_rad, max_ee_speed_m_s=self.max_ee_speed_m_s,
                            max_ee_acc_m_s2=self.max_ee_acc_m_s2)


def generate_task_design(
    robot: Robot,
    q0,
    make_design: Callable[[], object],
    flags: TaskDesignFlags,
    name: str,
    gains: tuple,
    out_dir: Path,
) -> int:
    """Design, IK, limit checks, target run, plot and optional pre-flight; prints the peaks
    and the files written. ``gains`` = (kp_trans, kp_rot, kd_trans, kd_rot). Returns the exit
    code: 2 with a one-line error when the design is refused, 3 (EXIT_FAIL) when the
    pre-flight's verdict is ``safe to run: no`` (the files are written)."""
    from isaaclab_sysid.excitation.plots import plot_task_design

    try:
        design = make_design()
        run, jref, peaks = build_task_run(robot, q0, design, flags.limits(), name, *gains, flags.control_rate_hz)
    except (DesignLimitError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    paths, verdict = write_outputs(robot, run, out_dir, lambda p: plot_task_design(design, jref, robot, p),
                                   flags.preflight, peaks)
    print(f"peaks: EE {peaks['ee_speed_m_s']:.3f} m/s, {peaks['ee_acc_m_s2']:.2f} m/s^2")
    for p in paths:
        print(f"wrote {p}")
    return verdict_exit(verdict)
