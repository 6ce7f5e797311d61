"""A payload twin with hidden truth: runs with and without a known payload, in the run format.

The arm follows a planned joint trajectory exactly (a stiff position controller);
its measured torque ``tau_J`` is the inverse dynamics (Pinocchio RNEA, gravity
included, as libfranka's link-side sensor reads it) of the *true* arm, plus:

* the true arm's own link inertials differ from the model's (``arm_seed``: masses
  x U(0.9, 1.2), com +- 1 cm, inertia x 1.1): what a reference run cancels and a
  model reference does not;
* joint friction (Coulomb + viscous, the same with and without the payload);
* a torque offset per joint that changes at every hold and move (sensor hysteresis,
  stiction: ``hold_bias_std``), white torque noise ``tau_std``, encoder noise ``q_std``
  and velocity noise ``dq_std``.

The loaded arm is the true arm with the payload's 10 parameters added to its link.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from isaaclab_sysid.data import Run
from isaaclab_sysid.arm_model import ArmModel, with_body_inertials
from isaaclab_sysid.payload.model import PayloadModel
from isaaclab_sysid.robots import LinkInertial, Robot
from isaaclab_sysid.robots.robot import EE_NAME
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.twin.targets import skeleton_run


@dataclass(frozen=True)
class PayloadTwin:
    """The twin's hidden truth and realism knobs.

    Attributes:
        payload: the true payload (mass [kg], com [m] and inertia about it [kg m^2], link frame).
        link: link it is fixed to (default: the last).
        arm_seed: seed of the true arm's inertial perturbation (None: the model's own inertials).
        friction, viscous: (N,) joint Coulomb [N m] and viscous [N m s/rad] friction (None: zero).
        tau_std: white torque noise [N m]; hold_bias_std: offset per hold / move segment [N m].
        q_std: encoder noise [rad]; dq_std: velocity noise [rad/s].
        rate_hz: log (= setpoint) rate [Hz]; 1000 writes a 1 kHz log.
    """

    payload: LinkInertial
    link: str | None = None
    arm_seed: int | None = 7
    friction: np.ndarray | None = None
    viscous: np.ndarray | None = None
    tau_std: float = 0.05
    hold_bias_std: float = 0.03
    q_std: float = 1e-5
    dq_std: float = 1e-3
    rate_hz: float = 200.0


def true_arm(robot: Robot, seed: int | None) -> Robot:
    """The arm with perturbed 'true' body inertials (None: unchanged)."""
    if seed is None:
        return robot
    rng = np.random.default_rng(seed)
    out = {}
    for name, li in ArmModel(robot).body_inertials().items():
        out[name] = LinkInertial(li.mass * rng.uniform(0.9, 1.2), li.com + rng.normal(0, 0.01, 3), li.inertia * 1.1)
    return with_body_inertials(robot, out)


def with_payload(robot: Robot, payload: LinkInertial, link: str | None = None) -> Robot:
    """``robot`` with ``payload`` rigidly added to ``link``'s body (parameters add in the link frame)."""
    model = PayloadModel(robot, link)
    li = model.link_inertial()
    return with_body_inertials(robot, {model.link: LinkInertial.from_pi(li.to_pi() + payload.to_pi())})


def _min_jerk(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return 10 * s**3 - 15 * s**4 + 6 * s**5, 30 * s**2 - 60 * s**3 + 30 * s**4, 60 * s - 180 * s**2 + 120 * s**3


def hold_trajectory(poses: np.ndarray, hold_s: float, move_s: float, rate_hz: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hold each pose ``hold_s`` seconds, moving between them along minimum-jerk paths of ``move_s`` s.

    Returns:
        t (T,) [s], q, qd, qdd (T, N) exact, and segment (T,) int: 2k = hold k, 2k+1 = move after it.
    """
    poses = np.atleast_2d(np.asarray(poses, dtype=float))
    n_hold, n_move = int(round(hold_s * rate_hz)), int(round(move_s * rate_hz))
    qs, qds, qdds, seg = [], [], [], []
    for k, pose in enumerate(poses):
        qs.append(np.tile(pose, (n_hold, 1)))
        qds.append(np.zeros((n_hold, pose.size)))
        qdds.append(np.zeros((n_hold, pose.size)))
        seg.append(np.full(n_hold, 2 * k))
        if k + 1 < len(poses):
            s = (np.arange(n_move) + 0.5) / n_move
            p, v, a = _min_jerk(s)
            d = poses[k + 1] - pose
            qs.append(pose + p[:, None] * d)
            qds.append(v[:, None] * d / move_s)
            qdds.append(a[:, None] * d / move_s**2)
            seg.append(np.full(n_move, 2 * k + 1))
    q = np.vstack(qs)
    return np.arange(q.shape[0]) / rate_hz, q, np.vstack(qds), np.vstack(qdds), np.concatenate(seg)


def wrist_motion(q0: np.ndarray, duration: float, rate_hz: float, seed: int = 0, amp: float = 0.6,
                 f0: float = 0.25, joints: tuple[int, ...] = (4, 5, 6),
                 limits: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """A smooth motion of the wrist joints (3 harmonics, fade in/out) around ``q0``: what makes the
    payload's inertia visible. A joint whose motion would leave ``limits`` (lower, upper) [rad] (less
    0.05 rad) is scaled down to fit. Returns t, q, qd, qdd (exact derivatives) and segment (all 1)."""
    t = np.arange(int(round(duration * rate_hz))) / rate_hz
    T = duration
    rng = np.random.default_rng(seed)
    env = np.sin(np.pi * t / T) ** 2
    denv = np.pi / T * np.sin(2 * np.pi * t / T)
    ddenv = 2 * (np.pi / T) ** 2 * np.cos(2 * np.pi * t / T)
    n = len(q0)
    q = np.tile(np.asarray(q0, dtype=float), (t.size, 1))
    qd = np.zeros_like(q)
    qdd = np.zeros_like(q)
    for j in joints:
        for h in (1, 2, 3):
            w = 2 * np.pi * f0 * h
            a, ph = amp * rng.uniform(0.5, 1.0) / h, rng.uniform(0, 2 * np.pi)
            s, ds, dds = a * np.sin(w * t + ph), a * w * np.cos(w * t + ph), -a * w * w * np.sin(w * t + ph)
            q[:, j] += env * s
            qd[:, j] += denv * s + env * ds
            qdd[:, j] += ddenv * s + 2 * denv * ds + env * dds
    if limits is not None:
        off = q - q[:1]
        room_hi = np.asarray(limits[1]) - 0.05 - q[0]
        room_lo = q[0] - (np.asarray(limits[0]) + 0.05)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.minimum(np.where(off.max(0) > 0, room_hi / off.max(0), np.inf),
                           np.where(off.min(0) < 0, room_lo / -off.min(0), np.inf))
        f = np.clip(f, 0.0, 1.0)
        q, qd, qdd = q[:1] + off * f, qd * f, qdd * f
    return t, q, qd, qdd, np.ones(t.size, dtype=int)


def _measure(robot_true: Robot, robot_model: Robot, t, q, qd, qdd, seg, twin: PayloadTwin, rng,
             name: str, kp: np.ndarray, kd: np.ndarray) -> Run:
    n = robot_true.n_dof
    model = robot_true.build_pinocchio(gravity=True)
    data = model.createData()
    tau = np.array([pin.rnea(model, data, q[k], qd[k], qdd[k]) for k in range(q.shape[0])])
    fc = np.zeros(n) if twin.friction is None else np.asarray(twin.friction, dtype=float)
    fv = np.zeros(n) if twin.viscous is None else np.asarray(twin.viscous, dtype=float)
    tau = tau + fc * np.sign(np.round(qd, 9)) + fv * qd
    bias = twin.hold_bias_std * rng.standard_normal((int(seg.max()) + 1, n))
    tau_J = tau + bias[seg] + twin.tau_std * rng.standard_normal(tau.shape)
    q_meas = q + twin.q_std * rng.standard_normal(q.shape)
    dq_meas = qd + twin.dq_std * rng.standard_normal(q.shape)
    run = skeleton_run(robot_model, "joint_pd", t, q, kp, kd, q_init=q[0], control_rate_hz=twin.rate_hz, name=name,
                       excitation={"kind": "payload_twin", "generator": "isaaclab_sysid.payload.twin"})
    gmodel = robot_model.build_pinocchio(gravity=True)
    gdata = gmodel.createData()
    fid = gmodel.getFrameId(EE_NAME)
    ee_pos = np.empty((q.shape[0], 3))
    ee_quat = np.empty((q.shape[0], 4))
    g_arm = np.empty_like(q)
    for k in range(q.shape[0]):
        pin.framesForwardKinematics(gmodel, gdata, q_meas[k])
        om = gdata.oMf[fid]
        qq = pin.Quaternion(om.rotation)
        ee_pos[k], ee_quat[k] = om.translation, (qq.x, qq.y, qq.z, qq.w)
        g_arm[k] = pin.computeGeneralizedGravity(gmodel, gdata, q_meas[k])
    ee_quat[ee_quat[:, 3] < 0] *= -1
    run.q, run.dq, run.ee_pos, run.ee_quat = q_meas, dq_meas, ee_pos, ee_quat
    run.tau_J = tau_J
    run.tau = tau_J - g_arm  # the controller compensates the configured arm's gravity
    if twin.rate_hz == TICK_HZ:
        run.tick = np.arange(q.shape[0], dtype=np.int64)
        run.setpoint_tick = run.tick.copy()
        run.meta.log_rate_hz = float(TICK_HZ)
    run.meta.num_samples = q.shape[0]
    return run


def record_payload_runs(robot: Robot, trajectory: tuple[np.ndarray, ...], twin: PayloadTwin, seed: int = 0,
                        name: str = "payload") -> tuple[Run, Run]:
    """(loaded run, reference run) of the twin on one trajectory (``hold_trajectory`` / ``wrist_motion``).

    Both runs follow the same trajectory; their noise and per-segment offsets are independent.
    ``robot`` is the model (its nominal inertials); the truth is :func:`true_arm` of it.
    """
    t, q, qd, qdd, seg = trajectory
    arm = true_arm(robot, twin.arm_seed)
    loaded_arm = with_payload(arm, twin.payload, twin.link)
    kp = np.full(robot.n_dof, 600.0)
    kd = np.full(robot.n_dof, 50.0)
    rng_l = np.random.default_rng([seed, 1])
    rng_r = np.random.default_rng([seed, 2])
    loaded = _measure(loaded_arm, robot, t, q, qd, qdd, seg, twin, rng_l, f"{name}_loaded", kp, kd)
    reference = _measure(arm, robot, t, q, qd, qdd, seg, twin, rng_r, f"{name}_reference", kp, kd)
    return loaded, reference
