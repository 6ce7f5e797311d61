"""Record a twin run: replay a target run's setpoints on the twin's true dynamics and
log it in the real run format, with the realism knobs of :class:`TwinParams`."""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.robot import EE_NAME, Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend, StribeckFriction
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.twin.params import TwinParams


def dense_run(target: Run) -> Run:
    """``target``'s setpoints as a 1 kHz log: one row per tick from 0 to the last sample tick,
    each setpoint stamped with the tick it takes effect (states are placeholders)."""
    sp_ticks, values = target.setpoints()
    last = int(target.sample_ticks()[-1])
    ticks = np.arange(last + 1, dtype=np.int64)
    idx = np.searchsorted(sp_ticks, ticks, side="right") - 1
    idx = np.maximum(idx, 0)
    n = target.n_dof
    z = np.zeros((last + 1, n))
    meta = dataclasses.replace(target.meta, log_rate_hz=float(TICK_HZ), num_samples=last + 1)
    vals = values[idx]
    pos, quat = target.ee_pos[0], target.ee_quat[0]
    return dataclasses.replace(
        target, meta=meta, t=ticks / TICK_HZ, q=np.tile(target.meta.q_init, (last + 1, 1)), dq=z, tau=z, tau_J=z,
        ee_pos=np.tile(pos, (last + 1, 1)), ee_quat=np.tile(quat, (last + 1, 1)),
        q_des=vals if target.meta.controller == "joint_pd" else None,
        x_des=vals[:, :3] if target.meta.controller == "task_impedance" else None,
        quat_des=vals[:, 3:7] if target.meta.controller == "task_impedance" else None,
        tick=ticks, setpoint_tick=sp_ticks[idx].astype(np.int64), source=None,
    )


def twin_backend(robot: Robot, params: TwinParams, warmup_ticks: int = 50) -> MujocoBackend:
    """The replay backend with the twin's friction model, integrator and limits."""
    stribeck = None
    if params.friction_model == "stribeck" and params.law_params is None:
        stribeck = StribeckFriction(np.asarray(params.static_friction), np.asarray(params.stribeck_velocity))
    opts = ReplayOptions(warmup_ticks=warmup_ticks, torque_clamp=params.torque_clamp, slew_limit=params.slew_limit)
    return MujocoBackend(robot, opts, n_threads=1, stribeck=stribeck, substeps=params.substeps)


def true_batch(params: TwinParams) -> CandidateBatch:
    """The twin's true parameters as a one-candidate batch."""
    law = params.law_batch()  # the friction law's numbers (Coulomb: friction alone)
    law.armature = np.asarray(params.armature, dtype=float)[None]
    law.viscous = np.asarray(params.viscous, dtype=float)[None]
    law.delay = np.array([int(params.delay)])
    return law


def _quantize(x: np.ndarray, step: float) -> np.ndarray:
    return np.round(x / step) * step if step > 0 else x


def record_twin(
    robot: Robot,
    target: Run,
    params: TwinParams,
    seed: int = 0,
    log_rate_hz: float | None = None,
    name: str | None = None,
    warmup_ticks: int = 50,
) -> Run:
    """Record the twin on ``target``'s controller, gains, q_init and setpoints.

    Args:
        robot: the arm (its nominal inertials are the twin's true ones).
        target: a run (or :func:`~isaaclab_sysid.twin.targets.skeleton_run`) giving the
            setpoints; its states are ignored.
        params: true parameters and realism knobs.
        seed: the only source of randomness (same seed, same twin).
        log_rate_hz: ``TICK_HZ`` (1000) for a 1 kHz log (every tick, fresh states, setpoints
            stamped), else the target's setpoint rate (one row per setpoint).
        name: run name (default: the target's).
    """
    if robot.n_dof != len(params.armature):
        raise ValueError(f"twin parameters have {len(params.armature)} joints, robot {robot.name} {robot.n_dof}")
    rng = np.random.default_rng(seed)
    noise = params.noise
    dense = dense_run(target)
    n = robot.n_dof
    last = dense.n_samples - 1
    dist = None
    if noise.actuator_tau_std > 0:
        dist = noise.actuator_tau_std * rng.standard_normal((warmup_ticks + last, n))
    be = twin_backend(robot, params, warmup_ticks)
    try:
        roll = be.rollout(true_batch(params), [dense], disturbance=[dist], with_command=True)[0]
    finally:
        be.close()
    if roll.diverged[0]:
        raise RuntimeError(f"twin diverged on '{target.name}': reduce the excitation or gains")
    q_all, dq_all, tau_app, tau_cmd = roll.q[0], roll.dq[0], roll.tau[0], roll.extra["tau_cmd"][0]
    if dist is not None:
        # the torque that acted during tick k (none after the last tick)
        tau_app = tau_app + np.vstack([dist[warmup_ticks:], np.zeros((1, n))])

    one_khz = log_rate_hz == TICK_HZ
    if one_khz:
        rows = np.arange(last + 1)
        state_tick = rows.copy()
    else:
        rows = target.sample_ticks()
        age = rng.integers(0, noise.stale_max_ms + 1, size=rows.shape[0]) if noise.stale_max_ms > 0 else 0
        state_tick = np.maximum(rows - age, 0)
    T = rows.shape[0]
    q = q_all[state_tick] + (noise.q_std * rng.standard_normal((T, n)) if noise.q_std > 0 else 0.0)
    q = _quantize(q, noise.q_quantum)
    dq = dq_all[state_tick] + (noise.dq_std * rng.standard_normal((T, n)) if noise.dq_std > 0 else 0.0)
    tau_J = tau_app[state_tick] + (noise.tau_J_std * rng.standard_normal((T, n)) if noise.tau_J_std > 0 else 0.0)
    tau_J = _quantize(tau_J, noise.tau_quantum)
    tau = tau_cmd[rows]

    # EE pose as the real arm reports it: forward kinematics of the measured q
    model = robot.build_pinocchio()
    data = model.createData()
    fid = model.getFrameId(EE_NAME)
    ee_pos = np.empty((T, 3))
    ee_quat = np.empty((T, 4))
    for i in range(T):
        pin.framesForwardKinematics(model, data, q[i])
        om = data.oMf[fid]
        qq = pin.Quaternion(om.rotation)
        ee_pos[i] = om.translation
        ee_quat[i] = [qq.x, qq.y, qq.z, qq.w]
    ee_quat[ee_quat[:, 3] < 0] *= -1

    if one_khz:
        src = dense
        t = rows / TICK_HZ
        extra = dict(tick=rows.astype(np.int64), setpoint_tick=dense.setpoint_tick)
    else:
        src = target
        t = rows / TICK_HZ
        extra = dict(tick=None, setpoint_tick=None)
    meta = dataclasses.replace(
        src.meta,
        log_rate_hz=float(TICK_HZ) if one_khz else src.meta.control_rate_hz,
        num_samples=T,
        summary={"recorder": "isaaclab_sysid twin", "seed": int(seed), "duration_s": float(rows[-1]) / TICK_HZ},
    )
    return dataclasses.replace(
        src, name=name or target.name, meta=meta, t=t, q=q, dq=dq, ee_pos=ee_pos, ee_quat=ee_quat,
        tau=tau, tau_J=tau_J, source=None, **extra,
    )
