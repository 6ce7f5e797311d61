"""Column names and constants of the run format (schema version 1). See docs/data_format.md.

``TICK_HZ`` (the physics rate every replay runs at [Hz]) is re-exported from
:mod:`isaaclab_sysid.timebase`, where it is defined.
"""

from __future__ import annotations

from isaaclab_sysid.timebase import TICK_HZ  # noqa: F401 - re-exported (rigid_body/ and excitation/ import it from here)

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
CONTROLLERS = ("joint_pd", "task_impedance")
ORIENTATION_ERRORS = ("quat", "rotvec")
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


def expected_columns(n_dof: int, controller: str, is_1khz: bool) -> tuple[str, ...]:
    """The exact CSV header for a run, in order."""
    cols: list[str] = ["t_s"]
    if is_1khz:
        cols += TICK_COLS
    cols += joint_cols("q", n_dof) + joint_cols("dq", n_dof) + EE_POS + EE_QUAT
    if controller == "task_impedance":
        cols += X_DES + QUAT_DES
    else:
        cols += joint_cols("q_des", n_dof)
    cols += joint_cols("tau", n_dof) + joint_cols("tau_J", n_dof)
    return tuple(cols)
