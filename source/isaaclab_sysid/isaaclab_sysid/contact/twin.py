"""A MuJoCo contact twin: the Franka pressing and striking a table, in the run format with its contact force.

The arm (the robot's MuJoCo model, gravity compensated, joint PD at 1 kHz) moves its tool tip
(``tip_offset`` in the EE frame, pointing down) along a vertical line into a table below it:

* ``press``: from ``above`` mm over the surface down at ``speed`` (slow: quasi-static) to a target
  ``depth`` below it, then held (the arm's PD stiffness sets the force);
* ``impact``: from ``above`` down at ``speed`` (ramped in over 0.1 s) to ``depth`` below, then held.

Two contact laws:

* ``explicit`` (the hidden truth): ``F_n = max(0, k phi + b phi_dot)`` on the tip, ``phi`` = the
  table height minus the tip height, applied each tick at the tip point (``mj_applyFT``);
* ``mujoco``: MuJoCo's own soft contact between a sphere at the tip and a table plane
  (frictionless), with the ``solref``/``solimp`` of ``contact.mapping.to_mujoco`` for (k, b):
  the check that the mapping reproduces the identified numbers.

The logged force is the force on the tool (base frame) plus white sensor noise; the joints get
encoder and velocity noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from isaaclab_sysid.contact.io import ContactRun, ContactTest
from isaaclab_sysid.contact.mapping import body_invweight, to_mujoco
from isaaclab_sysid.excitation.ik import joint_reference
import pinocchio as pin

from isaaclab_sysid.robots import JointOverrides, Robot
from isaaclab_sysid.robots.robot import EE_NAME
from isaaclab_sysid.timebase import TICK_HZ, TICK_S
from isaaclab_sysid.twin.targets import Q_READY, skeleton_run

KP = np.array([600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0])
KD = np.array([50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0])
#: rotor inertia of the twin's joints [kg m^2] (the replay twin's; the explicit PD of light wrist links needs it)
ARMATURE = np.array([0.32, 0.28, 0.21, 0.17, 0.075, 0.06, 0.035])


@dataclass(frozen=True)
class ContactTwin:
    """The twin's hidden truth and knobs.

    Attributes:
        stiffness [N/m], damping [N s/m]: the true contact law.
        law: ``explicit`` or ``mujoco`` (module doc); impedance: MuJoCo's d for ``mujoco``.
        tip_offset: (3,) tool tip in the EE frame [m]; radius: the tip sphere [m] (``mujoco`` only).
        table_below: the table surface below the tip at the ready posture [m].
        force_std [N], q_std [rad], dq_std [rad/s]: sensor noise.
    """

    stiffness: float = 2.0e4
    damping: float = 30.0
    law: str = "explicit"
    impedance: float = 0.001
    tip_offset: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.12]))
    radius: float = 0.002
    table_below: float = 0.01
    force_std: float = 0.2
    q_std: float = 1e-5
    dq_std: float = 2e-3


def tip_path(test: str, speed: float, above: float, depth: float, hold_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(t (T,) [s], height of the tip target over the surface (T,) [m]) at 1 kHz."""
    if not speed > 0:
        raise ValueError(f"speed must be > 0 m/s; got {speed}")
    travel = above + depth
    ramp = 0.1 if test == "impact" else 0.0
    move = travel / speed + ramp / 2
    t = np.arange(int(round((move + hold_s) * TICK_HZ))) * TICK_S
    v = speed * np.clip(t / ramp, 0.0, 1.0) if ramp > 0 else np.full_like(t, speed)
    h = above - np.cumsum(v) * TICK_S
    return t, np.maximum(h, -depth)


def _model(robot: Robot, twin: ContactTwin, table_z: float) -> tuple[mujoco.MjModel, float | None]:
    spec = robot.build_mjspec(JointOverrides(armature=ARMATURE), gravity=False)
    if twin.law == "mujoco":
        spec.option.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        hand = spec.body(robot.config.ee_link)
        ee = np.asarray(robot.config.ee_offset, dtype=float)
        hand.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[twin.radius, 0, 0], condim=1,
                      pos=list(ee + twin.tip_offset - np.array([0.0, 0.0, twin.radius])))
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2.0, 2.0, 0.1], pos=[0.0, 0.0, table_z], condim=1)
        model = spec.compile()
        inv = body_invweight(model, robot.config.ee_link)
        mc = to_mujoco(twin.stiffness, twin.damping, inv, twin.impedance, model.opt.timestep)
        model.geom_solref[:] = mc.solref
        model.geom_solimp[:] = mc.solimp
        return model, inv
    if twin.law != "explicit":
        raise ValueError(f"law must be 'explicit' or 'mujoco'; got {twin.law!r}")
    return spec.compile(), None


def record_contact_run(robot: Robot, twin: ContactTwin, test: str, speed: float, seed: int = 0,
                       above: float = 0.005, depth: float = 0.008, hold_s: float = 0.5,
                       name: str | None = None) -> ContactRun:
    """One press or impact run of the twin (module doc), in the run format with its contact force."""
    rng = np.random.default_rng(seed)
    pos0, quat0 = robot.ee_pose(Q_READY)
    from scipy.spatial.transform import Rotation

    R0 = Rotation.from_quat(quat0).as_matrix()
    tip0 = pos0 + R0 @ twin.tip_offset
    table_z = float(tip0[2] - twin.table_below)
    model, _ = _model(robot, twin, table_z)
    data = mujoco.MjData(model)
    t, h = tip_path(test, speed, above, depth, hold_s)
    tips = np.tile(tip0, (t.size, 1))
    tips[:, 2] = table_z + h
    ref = joint_reference(robot, t, tips - R0 @ twin.tip_offset, np.tile(quat0, (t.size, 1)), Q_READY)
    n = robot.n_dof
    data.qpos[:n] = ref.q[0]
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, EE_NAME)
    body = int(model.site_bodyid[site])
    T = t.size
    q, dq, tau, force = np.empty((T, n)), np.empty((T, n)), np.empty((T, n)), np.zeros((T, 3))
    jacp = np.zeros((3, model.nv))
    f6 = np.zeros(6)
    for k in range(T):
        mujoco.mj_step1(model, data)
        q[k], dq[k] = data.qpos[:n], data.qvel[:n]
        u = KP * (ref.q[k] - data.qpos[:n]) + KD * (ref.dq[k] - data.qvel[:n])
        tau[k] = u
        data.qfrc_applied[:n] = u
        if twin.law == "explicit":
            tip = data.site_xpos[site] + data.site_xmat[site].reshape(3, 3) @ twin.tip_offset
            mujoco.mj_jac(model, data, jacp, None, tip, body)
            phi, phid = table_z - tip[2], -(jacp @ data.qvel)[2]
            fn = max(0.0, twin.stiffness * phi + twin.damping * phid)
            force[k, 2] = fn
            if fn > 0:
                mujoco.mj_applyFT(model, data, np.array([0.0, 0.0, fn]), np.zeros(3), tip, body, data.qfrc_applied)
        mujoco.mj_step2(model, data)
        if twin.law == "mujoco":
            for i in range(data.ncon):
                mujoco.mj_contactForce(model, data, i, f6)
                fw = data.contact[i].frame.reshape(3, 3).T @ f6[:3]
                force[k] += fw if fw[2] >= 0 else -fw
    run = skeleton_run(robot, "joint_pd", t, ref.q, KP, KD, q_init=ref.q[0], control_rate_hz=float(TICK_HZ),
                       name=name or f"{test}_{1e3 * speed:g}mmps",
                       excitation={"kind": f"contact_{test}", "speed_mps": speed, "generator": "isaaclab_sysid.contact.twin"})
    run.q = q + twin.q_std * rng.standard_normal(q.shape)
    run.dq = dq + twin.dq_std * rng.standard_normal(dq.shape)
    run.tau, run.tau_J = tau, tau.copy()
    pm = robot.build_pinocchio()
    pd = pm.createData()
    fid = pm.getFrameId(EE_NAME)
    ee_pos, ee_quat = np.empty((T, 3)), np.empty((T, 4))
    for k in range(T):
        pin.framesForwardKinematics(pm, pd, run.q[k])
        qq = pin.Quaternion(pd.oMf[fid].rotation)
        ee_pos[k], ee_quat[k] = pd.oMf[fid].translation, (qq.x, qq.y, qq.z, qq.w)
    ee_quat[ee_quat[:, 3] < 0] *= -1
    run.ee_pos, run.ee_quat = ee_pos, ee_quat
    run.tick = np.arange(T, dtype=np.int64)
    run.setpoint_tick = run.tick.copy()
    run.meta.log_rate_hz = float(TICK_HZ)
    run.meta.num_samples = T
    noisy = force + twin.force_std * rng.standard_normal(force.shape)
    return ContactRun(run, ContactTest(test, np.array([0.0, 0.0, 1.0]), "base", np.asarray(twin.tip_offset, dtype=float)),
                      noisy)
