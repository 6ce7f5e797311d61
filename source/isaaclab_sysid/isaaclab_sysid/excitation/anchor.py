"""The default start posture and anchor pose of every design."""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.robots import Robot

#: Panda "ready" posture [rad] (libfranka's move-to-start).
Q_HOME_PANDA = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def default_q_init(robot: Robot) -> np.ndarray:
    """(N,) start posture: the Panda home posture, else the middle of the joint range."""
    if robot.n_dof == 7 and robot.name.startswith("franka"):
        return Q_HOME_PANDA.copy()
    return 0.5 * (robot.q_lower + robot.q_upper)


def anchor_pose(robot: Robot, q_init: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EE anchor (position (3,) [m], quaternion (4,) xyzw) at the start posture."""
    return robot.ee_pose(np.asarray(q_init, dtype=float))
