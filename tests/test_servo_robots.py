"""SO-101 / SO-100 robot configs: LeRobot's joint names, the servo's limits, MuJoCo == Pinocchio."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.robots import load_robot
from test_robots import _compare

LEROBOT_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


@pytest.mark.parametrize("name", ["so101", "so100"])
def test_servo_arm_builds_and_models_agree(name):
    """Six joints named as LeRobot names its motors; mass matrix, gravity and EE pose agree."""
    robot = load_robot(name)
    assert robot.joint_names == LEROBOT_JOINTS
    assert robot.build_mujoco().nv == 6 and robot.build_pinocchio().nv == 6
    # STS3215 stall torque (1.91 N m), the gripper at LeRobot's Max_Torque_Limit 500 (50 %)
    np.testing.assert_allclose(robot.tau_max, [1.91] * 5 + [0.96])
    assert not robot.config.gravity_compensated  # the servo loop does not cancel gravity
    assert np.all(robot.q_lower < robot.q_upper)
    worst = _compare(robot, n_configs=50)
    assert np.all(worst < 1e-8), worst


def test_so101_limits_and_mass_are_the_urdf():
    robot = load_robot("so101")
    assert robot.q_upper[0] == pytest.approx(1.91986)
    assert robot.q_lower[5] == pytest.approx(-0.174533)
    mj = robot.build_mujoco(gravity=True)
    # base 0.147 + links: the arm weighs about 0.63 kg; gravity is on for servo replays
    assert mj.body_mass.sum() == pytest.approx(0.632, abs=1e-3)
    assert mj.opt.gravity[2] == pytest.approx(-9.81)


def test_so100_link_named_like_a_joint():
    """SO-100's EE link is named 'gripper' like its last joint: the EE frame is the link's."""
    robot = load_robot("so100")
    assert robot.link_names[-2:] == ("gripper", "jaw")
    p, _ = robot.ee_pose(np.zeros(6))
    assert np.all(np.isfinite(p)) and np.linalg.norm(p) > 0.1
