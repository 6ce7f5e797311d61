"""Forward kinematics of a robot's EE point over a joint trajectory (what a log without EE columns is given)."""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.robots.robot import EE_NAME, Robot


def ee_poses(robot: Robot, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, 3) EE positions [m] and (T, 4) xyzw orientations (w >= 0) at the robot's EE point, for (T, N) joint
    positions ``q`` [rad] (Pinocchio forward kinematics)."""
    import pinocchio as pin

    model = robot.build_pinocchio()
    data = model.createData()
    fid = model.getFrameId(EE_NAME)
    pos, quat = np.empty((len(q), 3)), np.empty((len(q), 4))
    for i, qi in enumerate(q):
        pin.framesForwardKinematics(model, data, qi)
        m = data.oMf[fid]
        pos[i] = m.translation
        qq = pin.Quaternion(m.rotation)
        quat[i] = [qq.x, qq.y, qq.z, qq.w]
    quat[quat[:, 3] < 0] *= -1
    return pos, quat
