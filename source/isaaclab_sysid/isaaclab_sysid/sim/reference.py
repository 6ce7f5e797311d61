"""A slow, plain-Python replay of one candidate on one run: the executable spec.

It implements docs/replay.md tick by tick with numpy and MuJoCo's Python
bindings, on a model compiled from the MjSpec with the candidate's parameters
(no constant recomputation tricks), and with its own controller code (numpy
quaternions, ``mj_rne`` on a gravity-free copy for the Coriolis term, a numpy
pseudo-inverse for the null-space projector). Tests check the native backend
against it; nothing in the fit uses it.
"""

from __future__ import annotations

import mujoco
import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.robots.robot import EE_NAME, Robot
from isaaclab_sysid.sim.friction import FrictionLaw, applied_force, budget, dahl_step
from isaaclab_sysid.sim.interface import ReplayOptions
from isaaclab_sysid.sim.schedule import schedule_of
from isaaclab_sysid.sim.servo import servo_torque
from isaaclab_sysid.timebase import TICK_S


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of wxyz quaternions."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def orientation_error(quat_des_xyzw: np.ndarray, xmat: np.ndarray, convention: str) -> np.ndarray:
    """(3,) orientation error toward the target, world frame, the short way (docs/data_format.md).

    Args:
        quat_des_xyzw: (4,) target orientation (normalized here).
        xmat: (3, 3) current orientation R.
        convention: ``"rotvec"`` (rotation vector of R_des R^T [rad]), ``"quat_vec"``
            (vec(q_des q^-1): libfranka's cartesian_impedance_example, sin(angle/2) x axis) or
            ``"quat_2vec"`` (2 vec(q_des q^-1); ``"quat"`` is its old name).
    """
    qd = np.array([quat_des_xyzw[3], *quat_des_xyzw[:3]])
    qd = qd / np.linalg.norm(qd)
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(xmat).ravel())
    qe = _qmul(qd, np.array([q[0], -q[1], -q[2], -q[3]]))
    if qe[0] < 0:
        qe = -qe
    if convention == "quat_vec":
        return qe[1:].copy()
    if convention in ("quat_2vec", "quat"):
        return 2.0 * qe[1:]
    if convention != "rotvec":
        raise ValueError(f"unknown orientation_error {convention!r}")
    s = np.linalg.norm(qe[1:])
    if s < 1e-15:
        return 2.0 * qe[1:]
    return qe[1:] / s * 2.0 * np.arctan2(s, qe[0])


def _clip(v: np.ndarray, limit: float | None) -> np.ndarray:
    if limit:
        n = np.linalg.norm(v)
        if n > limit:
            return v * (limit / n)
    return v


def reference_replay(
    robot: Robot,
    run: Run,
    params: JointOverrides,
    delay: int = 0,
    options: ReplayOptions | None = None,
    friction_law: tuple[FrictionLaw, np.ndarray] | None = None,
    servo: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Replay ``run`` for one candidate; returns q, dq, ee_pos, tau at the sample ticks.

    Args:
        params: armature, the Coulomb (sliding) level ``friction`` and viscous damping, (N,) each.
        friction_law: a friction law (sim/friction.py) and its (N, 4) packed parameters; None: Coulomb. Constraint
            laws set the model's frictionloss every tick (Stribeck from the velocity before the step; the load law
            from the tick's applied and external torques, with the gravity a gravity-free replay leaves out carried
            by the gearbox); force laws add their torque to the applied torque (the Dahl state advanced per tick).
        servo: a servo run's (N, 6) motor table (sim/servo.py: ``servo_table``): the firmware duty and DC motor of
            :func:`~isaaclab_sysid.sim.servo.servo_torque` from the delayed goal row; no clamp or slew limit.
    """
    opts = options or ReplayOptions()
    s = schedule_of(run, robot.n_dof)
    gravity = opts.gravity if opts.gravity is not None else not s.gravity_compensated
    flaw, law_p = friction_law if friction_law is not None else (None, None)
    fc = np.zeros(robot.n_dof) if params.friction is None else np.asarray(params.friction, dtype=float)
    if flaw is not None and flaw.acts_as == "force":  # the force laws replace the frictionloss constraint
        params = JointOverrides(params.armature, np.zeros(robot.n_dof), params.damping)
    m = robot.build_mujoco(params, gravity=gravity)
    if flaw is not None and flaw.name == "load" and not gravity:  # the gravity torque a gravity-free replay omits
        mg = robot.build_mujoco(params, gravity=True)
        dg = mujoco.MjData(mg)
    dahl = np.zeros(robot.n_dof)
    m0 = robot.build_mujoco(params, gravity=False)  # for C(q, qd) qd
    d, d0 = mujoco.MjData(m), mujoco.MjData(m0)
    site = m.site(EE_NAME).id
    n = m.nv
    d.qpos[:] = s.q_init
    if s.qd_init is not None:  # a window of a run: it starts moving, without a warm-up
        d.qvel[:] = s.qd_init
    W = s.warmup(opts.warmup_ticks)
    # the law and gains as the run records them (the backends get an equivalent form: schedule.backend_law)
    law = run.meta.impedance if run.meta.controller == "task_impedance" else s.law
    kp_task = np.asarray(run.meta.kp, dtype=float)
    samples = {int(k): i for i, k in enumerate(s.sample_ticks)}
    out = {k: np.full((s.n_samples, w), np.nan) for k, w in (("q", n), ("dq", n), ("ee_pos", 3), ("tau", n))}
    cmd_hist: list[np.ndarray] = []
    prev = np.zeros(n)
    rate = np.asarray(robot.config.torque_rate_limit or np.full(n, np.inf), dtype=float) * TICK_S

    def setpoint(k: int) -> np.ndarray:
        i = int(np.searchsorted(s.sp_ticks, max(k, 0), side="right")) - 1
        return s.sp_values[max(i, 0)]

    for k in range(-W, s.last_tick + 1):
        if flaw is not None and flaw.name == "stribeck":
            m.dof_frictionloss[:] = budget(flaw, fc, law_p, d.qvel)
        mujoco.mj_forward(m, d)
        if s.controller == "joint_pd":
            sp = setpoint(max(k - delay, -W))
            applied = s.kp * (sp - d.qpos) - s.kd * d.qvel
        elif s.controller == "servo":
            if servo is None:
                raise ValueError(f"run '{run.name}' is a servo run: give its motor table (servo=)")
            sp = setpoint(max(k - delay, -W))
            applied = servo_torque(servo, s.kp, sp[:n], sp[n:2 * n], sp[2 * n:], d.qpos.copy(), d.qvel.copy())
        else:
            sp = setpoint(k)
            jacp, jacr = np.zeros((3, n)), np.zeros((3, n))
            mujoco.mj_jacSite(m, d, jacp, jacr, site)
            jac = np.vstack([jacp, jacr])
            e = np.concatenate([
                _clip(sp[:3] - d.site_xpos[site], law.max_position_error),
                _clip(orientation_error(sp[3:], d.site_xmat[site].reshape(3, 3), law.orientation_error),
                      law.max_orientation_error),
            ])
            tau = jac.T @ (kp_task * e - s.kd * (jac @ d.qvel))
            if law.coriolis_compensation:
                d0.qpos[:], d0.qvel[:] = d.qpos, d.qvel
                mujoco.mj_forward(m0, d0)
                tau = tau + d0.qfrc_bias
            if law.nullspace_stiffness:
                k_ns = law.nullspace_stiffness
                y = k_ns * (s.q_rest - d.qpos) - 2.0 * np.sqrt(k_ns) * d.qvel
                tau = tau + (np.eye(n) - jac.T @ np.linalg.pinv(jac.T)) @ y
            cmd_hist.append(tau)
            applied = cmd_hist[max(len(cmd_hist) - 1 - delay, 0)]
        if opts.slew_limit and s.controller != "servo":
            applied = prev + np.clip(applied - prev, -rate, rate)
        if opts.torque_clamp and s.controller != "servo":
            applied = np.clip(applied, -robot.tau_max, robot.tau_max)
        prev = applied
        if k in samples:
            i = samples[k]
            out["q"][i], out["dq"][i] = d.qpos, d.qvel
            out["ee_pos"][i], out["tau"][i] = d.site_xpos[site], applied
        if k == s.last_tick:
            break
        fric = np.zeros(n)
        if flaw is not None and flaw.name == "sigmoid":
            fric = applied_force(flaw, law_p, d.qvel, dahl)
        elif flaw is not None and flaw.name == "dahl":
            fric = applied_force(flaw, law_p, d.qvel, dahl)
            dahl = dahl_step(fc, law_p, d.qvel.copy(), dahl, TICK_S)
        elif flaw is not None and flaw.name == "load":
            g_acting = np.zeros(n)
            if not gravity:  # the gravity torque on each joint at rest (bias = -gravity torque at zero velocity): mg
                dg.qpos[:] = d.qpos
                dg.qvel[:] = 0.0
                mujoco.mj_forward(mg, dg)
                g_acting = -dg.qfrc_bias.copy()
            m.dof_frictionloss[:] = budget(flaw, fc, law_p, d.qvel, tau_motor=applied - g_acting,
                                           tau_ext=-d.qfrc_bias + g_acting)
        d.qfrc_applied[:] = applied + fric
        mujoco.mj_step(m, d)
    return out
