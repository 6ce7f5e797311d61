"""The position-servo replay (issue 27): 30 Hz setpoints held, PD in N m/rad with per-joint gains the run
may leave unstated (the candidate's kp / kd fill them), the torque limit, the bus delay, the encoder offset.
Checked against physics computed independently (Pinocchio's gravity at the equilibrium)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.schedule import schedule_of
from isaaclab_sysid.twin.recorder import dense_run
from isaaclab_sysid.twin.targets import skeleton_run

N = 6
KP = np.array([12.0, 18.0, 15.0, 8.0, 6.0, 4.0])
KD = np.array([0.25, 0.35, 0.3, 0.12, 0.08, 0.05])
ARM = np.array([0.012, 0.015, 0.012, 0.008, 0.006, 0.004])


@pytest.fixture(scope="module")
def robot():
    return load_robot("so101")


def servo_run(robot, targets, kp=KP, kd=KD, q_init=None, rate=30.0, name="servo"):
    """A joint-PD run at ``rate`` [Hz], gravity not compensated (the servo's loop does not)."""
    t = np.arange(len(targets)) / rate
    q0 = targets[0] if q_init is None else q_init
    run = skeleton_run(robot, "joint_pd", t, targets, kp, kd, q_init=q0, control_rate_hz=rate, name=name)
    return dataclasses.replace(run, meta=dataclasses.replace(run.meta, gravity_compensated=False))


def backend(robot, **kw):
    return MujocoBackend(robot, ReplayOptions(warmup_ticks=0, torque_clamp=True), n_threads=1, **kw)


def batch(**groups):
    base = dict(armature=ARM[None], friction=np.zeros((1, N)), viscous=np.zeros((1, N)), delay=np.array([0]))
    base.update(groups)
    return CandidateBatch(**base)


def test_30hz_rows_and_setpoints_are_held_not_interpolated(robot):
    """Frame k of a 30 Hz log sits at the tick nearest k * 33.3 ms; its setpoint holds until the next frame."""
    targets = np.zeros((7, N))
    targets[:, 1] = np.arange(7) * 0.05
    s = schedule_of(servo_run(robot, targets), N)
    np.testing.assert_array_equal(s.sample_ticks, [0, 33, 67, 100, 133, 167, 200])
    np.testing.assert_array_equal(s.sp_ticks, s.sample_ticks)
    # replayed and sampled on every tick: the commanded torque steps only where a frame starts
    be = backend(robot)
    try:
        tau = be.rollout(batch(), [dense_run(servo_run(robot, targets))], with_command=True)[0].extra["tau_cmd"][0]
    finally:
        be.close()
    # the commanded torque jumps only at the frame ticks (held setpoint, no interpolation between frames)
    jump = np.flatnonzero(np.abs(np.diff(tau[:, 1])) > KP[1] * 0.05 * 0.5) + 1
    assert set(jump.tolist()) == {33, 67, 100, 133, 167, 200}, jump


def test_candidate_gains_fill_unstated_gains_only(robot):
    """A run that leaves its gains unstated (NaN) replays with the candidate's kp/kd, bit for bit the same as a
    run stating them; a run that states its gains keeps them whatever the candidate says."""
    rng = np.random.default_rng(0)
    targets = np.cumsum(rng.normal(0, 0.02, (45, N)), axis=0) + np.array([0, 0.3, -0.4, 0.2, 0, 0.5])
    stated = servo_run(robot, targets)
    unstated = servo_run(robot, targets, kp=np.full(N, np.nan), kd=np.full(N, np.nan), name="unstated")
    be = backend(robot)
    try:
        ref = be.rollout(batch(), [stated])[0]
        fit = be.rollout(batch(kp=KP[None], kd=KD[None]), [unstated])[0]
        kept = be.rollout(batch(kp=2 * KP[None], kd=KD[None]), [stated])[0]
        with pytest.raises(ValueError, match="does not state its kp"):
            be.rollout(batch(), [unstated])
        with pytest.raises(ValueError, match="kp must be finite and >= 0"):
            be.rollout(batch(kp=-KP[None], kd=KD[None]), [unstated])
    finally:
        be.close()
    np.testing.assert_array_equal(fit.q, ref.q)
    np.testing.assert_array_equal(kept.q, ref.q)
    assert np.abs(ref.q[0, -1] - ref.q[0, 0]).max() > 0.05  # the arm moved


def test_encoder_offset_equilibrium_matches_pinocchio_gravity(robot):
    """Held still, the servo balances gravity on its encoder: kp (q* - (q + off)) = g(q) at the true q, and
    the log reads q + off. Checked with Pinocchio's gravity torque at q = q_logged - off."""
    sp = np.array([0.3, 0.6, -0.8, 0.5, 0.2, 0.3])
    off = np.array([0.03, -0.04, 0.05, -0.02, 0.01, 0.02])
    targets = np.tile(sp, (120, 1))  # 4 s at 30 Hz
    run = servo_run(robot, targets)
    be = backend(robot)
    try:
        roll = be.rollout(batch(viscous=np.full((1, N), 0.05), encoder_offset=off[None]), [run])[0]
        roll0 = be.rollout(batch(viscous=np.full((1, N), 0.05)), [run])[0]
    finally:
        be.close()
    pm = robot.build_pinocchio(gravity=True)
    pd = pm.createData()
    for r, o in ((roll, off), (roll0, np.zeros(N))):
        q_log = r.q[0, -1]
        assert np.abs(r.dq[0, -1]).max() < 1e-5  # settled
        g = pin.rnea(pm, pd, q_log - o, np.zeros(N), np.zeros(N))
        np.testing.assert_allclose(KP * (sp - q_log), g, atol=1e-6)
    # the offset moves the true arm (and so what gravity does), and the log is the encoder's
    assert np.abs(roll.q[0, -1] - roll0.q[0, -1]).max() > 1e-4


def test_torque_limit_and_bus_delay(robot):
    """A far step saturates at the STS3215's 1.91 N m (gripper 0.96); with a bus delay of d ticks the
    torque answers the step d ticks later."""
    targets = np.zeros((30, N))
    targets[10:] = [1.0, 1.0, -1.0, 1.0, 1.0, 1.0]
    run = servo_run(robot, targets, kp=np.full(N, 20.0), kd=np.full(N, 0.2))
    s = schedule_of(run, N)
    step_tick = int(s.sp_ticks[10])
    be = MujocoBackend(robot, ReplayOptions(warmup_ticks=0, torque_clamp=True, gravity=False), n_threads=1)
    dense = []
    try:
        for d in (0, 7):
            out = be.rollout(batch(delay=np.array([d])), [dense_run(run)], with_command=True)[0]
            dense.append(out)
    finally:
        be.close()
    for d, out in zip((0, 7), dense):
        tau = out.tau[0]
        first = int(np.flatnonzero(np.abs(tau[:, 0]) > 1e-9)[0])
        assert first == step_tick + d
        np.testing.assert_allclose(np.abs(tau).max(axis=0), robot.tau_max, rtol=1e-12)
        assert np.abs(out.extra["tau_cmd"][0]).max() > 10.0  # the PD law asked for far more


def test_30hz_run_with_unstated_gains_round_trips(robot, tmp_path):
    """A 30 Hz servo run whose gains are unknown is a valid run file: gains null in the sidecar, NaN in memory."""
    from isaaclab_sysid.data import read_run, write_run

    targets = np.tile([0.1, 0.5, -0.5, 0.3, 0.0, 0.2], (20, 1))
    run = servo_run(robot, targets, kp=np.full(N, np.nan), kd=np.full(N, np.nan))
    csv, side = write_run(run, tmp_path / "servo.csv")
    import json

    assert json.loads(side.read_text())["gains"] == {"kp": [None] * N, "kd": [None] * N}
    back = read_run(csv)
    assert back.meta.control_rate_hz == 30.0
    assert np.all(np.isnan(back.meta.kp)) and np.all(np.isnan(back.meta.kd))
    np.testing.assert_array_equal(back.sample_ticks(), run.sample_ticks())
    np.testing.assert_allclose(back.q_des, run.q_des)
