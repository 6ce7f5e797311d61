"""Where the tool's contact point is and how fast it moves along the surface normal.

The tip is the EE frame's point ``tip_offset`` (EE frame): ``p = x_ee + R_ee tip_offset``,
from the forward kinematics of the measured joints (Pinocchio, the robot's EE frame), and
its velocity ``v = J_lin dq + omega x (R_ee tip_offset)`` from the measured joint velocity
(no differentiation). Along the unit normal ``n`` (out of the surface) the *penetration
coordinate* is ``s = -n . p`` (it grows as the tool pushes in) and ``s_dot = -n . v``; the
penetration is ``phi = s - s0`` with the surface at ``s0`` (fitted, not assumed).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from isaaclab_sysid.data import Run
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.robots.robot import EE_NAME


def tip_kinematics(robot: Robot, run: Run, tip_offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, 3) tip position [m] and (T, 3) tip velocity [m/s] in the base frame."""
    model = robot.build_pinocchio()
    data = model.createData()
    fid = model.getFrameId(EE_NAME)
    r = np.asarray(tip_offset, dtype=float)
    T = run.n_samples
    pos, vel = np.empty((T, 3)), np.empty((T, 3))
    for k in range(T):
        J = pin.computeFrameJacobian(model, data, run.q[k], fid, pin.LOCAL_WORLD_ALIGNED)  # updates oMf
        om = data.oMf[fid]
        arm = om.rotation @ r
        tw = J @ run.dq[k]
        pos[k] = om.translation + arm
        vel[k] = tw[:3] + np.cross(tw[3:], arm)
    return pos, vel


def normal_coordinates(robot: Robot, run: Run, normal: np.ndarray, tip_offset: np.ndarray, force: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, s_dot, f_n), each (T,): penetration coordinate [m], its rate [m/s] and the normal force [N]
    (``f_n = n . F``, positive when the surface pushes the tool out)."""
    n = np.asarray(normal, dtype=float)
    pos, vel = tip_kinematics(robot, run, tip_offset)
    return -(pos @ n), -(vel @ n), np.asarray(force, dtype=float) @ n
