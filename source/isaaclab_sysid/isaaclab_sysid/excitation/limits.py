"""The limits a design is checked against; a generator refuses a design that breaks one.

Two kinds of limits:

* joint position limits (always): the joint reference (IK of a task-space
  design, or the Fourier trajectory itself) must stay ``joint_margin_rad``
  inside the URDF limits;
* caps given by the user (each None = not checked): peak EE speed and
  acceleration of the reference, linear and angular, its largest excursion
  from the anchor, and joint velocity / acceleration of the joint reference.

For a task-space impedance design the reference is not the motion: above the
loop bandwidth the arm follows only a fraction of it, so reference speed and
acceleration are not capped by default; the pre-flight report's replay
(predicted torque and torque steps) is the check of what the arm will do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.robots import Robot
from isaaclab_sysid.utils.errors import UserError

#: Franka Panda joint acceleration limits [rad/s^2] (datasheet); used by the Fourier design.
PANDA_DDQ_MAX = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])


class DesignLimitError(UserError, ValueError):
    """A design breaks a limit it was given; the message names the limit, the axis/joint and the time."""


@dataclass(frozen=True)
class DesignLimits:
    """Caps on a design (None = not checked). Units in the names.

    Attributes:
        joint_margin_rad: the joint reference stays this far inside the joint limits [rad].
        max_ee_speed_m_s, max_ee_acc_m_s2: reference EE linear speed / acceleration norm.
        max_ee_ang_speed_rad_s, max_ee_ang_acc_rad_s2: reference EE angular speed / acceleration norm.
        max_translation_m: largest distance of the target from the anchor.
        max_rotation_rad: largest rotation of the target from the anchor orientation.
        joint_speed_frac: |dq| of the joint reference <= this fraction of the URDF velocity limit.
        max_joint_acc_rad_s2: |ddq| of the joint reference <= this (one value for all joints).
    """

    joint_margin_rad: float = 0.05
    max_ee_speed_m_s: float | None = None
    max_ee_acc_m_s2: float | None = None
    max_ee_ang_speed_rad_s: float | None = None
    max_ee_ang_acc_rad_s2: float | None = None
    max_translation_m: float | None = 0.3
    max_rotation_rad: float | None = 1.0
    joint_speed_frac: float | None = None
    max_joint_acc_rad_s2: float | None = None


def check_task_peaks(peaks: dict[str, float], limits: DesignLimits) -> list[str]:
    """Violations (one sentence each) of the task-space caps by a design's ``TaskDesign.peaks()``."""
    out = []
    for key, cap, unit in (
        ("ee_speed_m_s", limits.max_ee_speed_m_s, "m/s"),
        ("ee_acc_m_s2", limits.max_ee_acc_m_s2, "m/s^2"),
        ("ee_ang_speed_rad_s", limits.max_ee_ang_speed_rad_s, "rad/s"),
        ("ee_ang_acc_rad_s2", limits.max_ee_ang_acc_rad_s2, "rad/s^2"),
        ("max_translation_m", limits.max_translation_m, "m"),
        ("max_rotation_rad", limits.max_rotation_rad, "rad"),
    ):
        if cap is not None and peaks[key] > cap:
            out.append(f"{key} = {peaks[key]:.3f} {unit} exceeds the limit {cap:g} {unit}")
    return out


def check_joint_reference(
    robot: Robot, t: np.ndarray, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, limits: DesignLimits
) -> list[str]:
    """Violations (one sentence each, naming joint and time) of the joint-space limits."""
    out = []
    lo = robot.q_lower + limits.joint_margin_rad
    hi = robot.q_upper - limits.joint_margin_rad
    for j in range(robot.n_dof):
        bad = np.flatnonzero((q[:, j] < lo[j]) | (q[:, j] > hi[j]))
        if bad.size:
            k = int(bad[0])
            out.append(
                f"joint {j + 1} reaches {q[k, j]:.3f} rad at t = {t[k]:.3f} s, outside "
                f"[{lo[j]:.3f}, {hi[j]:.3f}] (joint limits minus {limits.joint_margin_rad:g} rad margin)"
            )
        if limits.joint_speed_frac is not None:
            cap = limits.joint_speed_frac * robot.v_max[j]
            bad = np.flatnonzero(np.abs(dq[:, j]) > cap)
            if bad.size:
                k = int(np.argmax(np.abs(dq[:, j])))
                out.append(
                    f"joint {j + 1} speed {abs(dq[k, j]):.3f} rad/s at t = {t[k]:.3f} s exceeds "
                    f"{limits.joint_speed_frac:g} x {robot.v_max[j]:g} rad/s"
                )
        if limits.max_joint_acc_rad_s2 is not None:
            bad = np.flatnonzero(np.abs(ddq[:, j]) > limits.max_joint_acc_rad_s2)
            if bad.size:
                k = int(np.argmax(np.abs(ddq[:, j])))
                out.append(
                    f"joint {j + 1} acceleration {abs(ddq[k, j]):.2f} rad/s^2 at t = {t[k]:.3f} s exceeds "
                    f"{limits.max_joint_acc_rad_s2:g} rad/s^2"
                )
    return out


def refuse_if(violations: list[str], what: str) -> None:
    """Raise :class:`DesignLimitError` listing every violation, if any."""
    if violations:
        raise DesignLimitError(f"{what} refused: " + "; ".join(violations))
