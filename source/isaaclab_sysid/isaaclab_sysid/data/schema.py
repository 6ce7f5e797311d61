"""Column names and constants of the run format (schema version 1; schema 2 is read by ``franka_v2``). See docs/data_format.md.

``TICK_HZ`` (the physics rate every replay runs at [Hz]) is re-exported from
:mod:`isaaclab_sysid.timebase`, where it is defined.
"""

from __future__ import annotations

from collections.abc import Sequence

from isaaclab_sysid.timebase import TICK_HZ  # noqa: F401 - re-exported (rigid_body/ and excitation/ import it from here)

SCHEMA_VERSION = 1
#: 1: the project's own schema; 2: the Franka tooling's logs (read by :mod:`isaaclab_sysid.data.formats.franka_v2`).
SUPPORTED_SCHEMA_VERSIONS = (1, 2)
#: ``servo``: a smart servo's own firmware position loop (``q_des`` = the goal position, ``kp`` the firmware's register
#: gain, docs/data_format.md); joint-space like ``joint_pd``.
CONTROLLERS = ("joint_pd", "task_impedance", "servo")
#: The controllers whose setpoint is a joint target ``q_des`` (N gains each).
JOINT_SPACE_CONTROLLERS = ("joint_pd", "servo")
#: Optional per-joint signals a run may carry (all N columns of one or none), in column order after ``tau_J``:
#: ``torque_enable`` (0/1: the servo applied torque; absent = always on), ``supply_v`` (the servo's measured input
#: voltage [V]), ``pwm`` (its present PWM duty, a fraction in [-1, 1]; diagnostic).
OPTIONAL_SIGNALS = ("torque_enable", "supply_v", "pwm")
#: Orientation-error conventions, named by what they compute (docs/data_format.md):
#: ``rotvec`` = rotation vector of R_des R^T; ``quat_vec`` = vec(q_des q^-1) (libfranka's and
#: franka_ros's cartesian_impedance_example); ``quat_2vec`` = 2 vec(q_des q^-1).
ORIENTATION_ERRORS = ("rotvec", "quat_vec", "quat_2vec")
#: Deprecated names still read from schema-1 sidecars (with a one-line note): old name -> convention.
LEGACY_ORIENTATION_ERRORS = {"quat": "quat_2vec"}
#: State-age models a sidecar may state (``"state_age": {"model": "uniform", "max_ms": N}``): ``uniform`` = each
#: row's state is the newest frame of a state stream, 0..N ms old, uniform (docs/data_format.md).
STATE_AGE_MODELS = ("uniform",)
#: Tolerance on |quaternion| - 1 before a row is refused.
QUAT_NORM_TOL = 1e-3
#: Joint positions may exceed the URDF limits by this much [rad] (encoder/limit slack).
JOINT_LIMIT_SLACK = 0.05

EE_POS = ("ee_x", "ee_y", "ee_z")
EE_QUAT = ("ee_qx", "ee_qy", "ee_qz", "ee_qw")
X_DES = ("x_des_x", "x_des_y", "x_des_z")
QUAT_DES = ("quat_des_x", "quat_des_y", "quat_des_z", "quat_des_w")
TICK_COLS = ("tick", "setpoint_tick")


def joint_cols(prefix: str, n: int) -> tuple[str, ...]:
    """``prefix1..prefixN``."""
    return tuple(f"{prefix}{i + 1}" for i in range(n))


def expected_columns(n_dof: int, controller: str, is_1khz: bool, optional: Sequence[str] = ()) -> tuple[str, ...]:
    """The exact CSV header for a run, in order; ``optional``: the :data:`OPTIONAL_SIGNALS` the run carries."""
    cols: list[str] = ["t_s"]
    if is_1khz:
        cols += TICK_COLS
    cols += joint_cols("q", n_dof) + joint_cols("dq", n_dof) + EE_POS + EE_QUAT
    if controller == "task_impedance":
        cols += X_DES + QUAT_DES
    else:
        cols += joint_cols("q_des", n_dof)
    cols += joint_cols("tau", n_dof) + joint_cols("tau_J", n_dof)
    for sig in OPTIONAL_SIGNALS:
        if sig in optional:
            cols += joint_cols(sig, n_dof)
    return tuple(cols)


def torque_cols(n: int) -> tuple[str, ...]:
    """``tau1..N, tau_J1..N``: the columns that may be NaN in every row (a torque the source did not record)."""
    return joint_cols("tau", n) + joint_cols("tau_J", n)
