"""Robot model: one description -> MuJoCo and Pinocchio models that agree."""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from isaaclab_sysid.robots import JointOverrides, LinkInertial, load_robot, load_robot_config
from isaaclab_sysid.robots.config import RobotConfigError
from isaaclab_sysid import timebase
from isaaclab_sysid.data import schema
from isaaclab_sysid.robots import robot as robot_mod
from isaaclab_sysid.robots.robot import EE_NAME


def _compare(robot, n_configs=100, seed=0):
    n = robot.n_dof
    mj = robot.build_mujoco(gravity=True)
    d = mujoco.MjData(mj)
    pm = robot.build_pinocchio(gravity=True)
    pd = pm.createData()
    fid = pm.getFrameId(EE_NAME)
    sid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, EE_NAME)
    rng = np.random.default_rng(seed)
    lo, hi = np.maximum(robot.q_lower, -np.pi), np.minimum(robot.q_upper, np.pi)
    worst = np.zeros(4)
    for _ in range(n_configs):
        q = rng.uniform(lo, hi)
        v = rng.normal(size=n)
        d.qpos[:], d.qvel[:] = q, v
        mujoco.mj_forward(mj, d)
        m_mj = np.zeros((n, n))
        mujoco.mj_fullM(mj, d, m_mj)
        m_pin = pin.crba(pm, pd, q)
        m_pin = np.triu(m_pin) + np.triu(m_pin, 1).T
        bias = pin.rnea(pm, pd, q, v, np.zeros(n))
        pin.framesForwardKinematics(pm, pd, q)
        worst = np.maximum(
            worst,
            [
                np.abs(m_mj - m_pin).max(),
                np.abs(d.qfrc_bias - bias).max(),
                np.abs(d.site_xpos[sid] - pd.oMf[fid].translation).max(),
                np.abs(d.site_xmat[sid].reshape(3, 3) - pd.oMf[fid].rotation).max(),
            ],
        )
    return worst


@pytest.mark.parametrize("name", ["franka_panda", "ur10e"])
def test_mujoco_and_pinocchio_agree(name):
    """Mass matrix, bias forces (gravity on) and EE pose agree at 100 random configurations."""
    robot = load_robot(name)
    worst = _compare(robot)
    assert np.all(worst < 1e-8), worst


def test_panda_description():
    robot = load_robot("franka_panda")
    assert robot.n_dof == 7
    assert robot.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    np.testing.assert_allclose(robot.tau_max, [87, 87, 87, 87, 12, 12, 12])
    assert robot.q_upper[3] == pytest.approx(-0.0698)
    mj = robot.build_mujoco()
    assert mj.nq == mj.nv == 7  # fingers locked
    assert np.allclose(mj.opt.gravity, 0.0)  # gravity-free by default
    assert mj.opt.timestep == timebase.TICK_S
    pm = robot.build_pinocchio()
    assert pm.nq == pm.nv == 7


def test_one_tick_constant():
    """The 1 ms tick is defined once (timebase); the historical names are the same objects."""
    assert timebase.TICK_S == 1e-3 and timebase.TICK_HZ == 1000
    assert isinstance(timebase.TICK_HZ, int)
    assert schema.TICK_HZ is timebase.TICK_HZ
    assert robot_mod.PHYSICS_DT is timebase.TICK_S


def test_ur10e_builds_through_same_path():
    robot = load_robot("ur10e")
    assert robot.n_dof == 6
    assert robot.link_names[0] == "shoulder_link"
    assert robot.build_mujoco().nv == 6


def test_joint_overrides_take_effect():
    robot = load_robot("franka_panda")
    ov = JointOverrides(armature=np.full(7, 0.1), friction=np.full(7, 0.4), damping=np.arange(7.0))
    mj = robot.build_mujoco(ov)
    np.testing.assert_allclose(mj.dof_armature, 0.1)
    np.testing.assert_allclose(mj.dof_frictionloss, 0.4)
    np.testing.assert_allclose(mj.dof_damping, np.arange(7.0))
    # armature changes the mass matrix diagonal by exactly its value
    d0, d1 = mujoco.MjData(robot.build_mujoco()), mujoco.MjData(mj)
    for m, d in ((robot.build_mujoco(), d0), (mj, d1)):
        d.qpos[:] = [0, -0.5, 0, -2, 0, 1.5, 0.5]
        mujoco.mj_forward(m, d)
    a0, a1 = np.zeros((7, 7)), np.zeros((7, 7))
    mujoco.mj_fullM(robot.build_mujoco(), d0, a0)
    mujoco.mj_fullM(mj, d1, a1)
    np.testing.assert_allclose(np.diag(a1 - a0), 0.1, atol=1e-12)


def test_link_inertial_override_reaches_both_models():
    robot = load_robot("franka_panda")
    new = LinkInertial(mass=5.0, com=np.array([0.01, 0.02, -0.05]), inertia=np.diag([0.03, 0.02, 0.01]))
    heavy = robot.with_inertials({"panda_link4": new})
    mj = heavy.build_mujoco()
    bid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, "panda_link4")
    assert mj.body_mass[bid] == pytest.approx(5.0)
    np.testing.assert_allclose(mj.body_ipos[bid], [0.01, 0.02, -0.05])
    worst = _compare(heavy, n_configs=10)
    assert np.all(worst < 1e-8)
    np.testing.assert_allclose(LinkInertial.from_pi(new.to_pi()).inertia, new.inertia, atol=1e-15)


def test_ee_frame_configurable(tmp_path):
    cfg = load_robot_config("franka_panda")
    text = cfg.source.read_text().replace("ee_offset = [0.0, 0.0, 0.0]", "ee_offset = [0.0, 0.0, 0.1034]")
    path = tmp_path / "panda_tcp.toml"
    path.write_text(text)
    tcp = load_robot(path)
    hand = load_robot("franka_panda")
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    p_hand, quat_hand = hand.ee_pose(q)
    p_tcp, quat_tcp = tcp.ee_pose(q)
    np.testing.assert_allclose(quat_tcp, quat_hand)
    assert np.linalg.norm(p_tcp - p_hand) == pytest.approx(0.1034)
    assert worst_ok(tcp)


def worst_ok(robot):
    return bool(np.all(_compare(robot, n_configs=5) < 1e-8))


def test_config_errors(tmp_path):
    with pytest.raises(RobotConfigError, match="not found"):
        load_robot("no_such_arm")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nurdf = "missing.urdf"\nbase_link = "a"\njoints = ["j"]\nee_link = "b"\n')
    with pytest.raises(RobotConfigError, match="does not exist"):
        load_robot(bad)
