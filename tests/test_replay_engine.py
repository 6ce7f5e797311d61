"""The MuJoCo replay engine: semantics (ticks, delay, hold), parameters, batching, divergence."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.data.run import ImpedanceLaw
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, UnsupportedParameterError
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.reference import reference_replay
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets

N = 7
KP6 = np.array([200.0, 200.0, 200.0, 20.0, 20.0, 20.0])
KD6 = 2 * np.sqrt(KP6)
KPJ = np.array([60.0, 60.0, 60.0, 60.0, 25.0, 15.0, 6.0])
KDJ = np.array([5.0, 5.0, 5.0, 5.0, 2.0, 1.5, 0.6])


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


@pytest.fixture(scope="module")
def backend(robot):
    be = MujocoBackend(robot, n_threads=2)
    yield be
    be.close()


def task_run(robot, kind="multiband", duration=1.0, law=None, seed=0, scale=1.0):
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets(kind, duration, 50.0, seed=seed, scale=scale)
    x, qd = task_targets(pos, quat, off)
    return skeleton_run(robot, "task_impedance", t, np.hstack([x, qd]), KP6, KD6, law=law, name=f"task_{kind}")


def step_run(robot, duration=0.4, step_row=5, joint=3, amp=0.05, rate=50.0):
    t = np.arange(int(duration * rate)) / rate
    target = np.tile(Q_READY, (len(t), 1))
    target[step_row:, joint] += amp
    return skeleton_run(robot, "joint_pd", t, target, KPJ, KDJ, control_rate_hz=rate, name="step")


def batch(p=1, arm=0.1, fr=0.1, visc=0.2, delay=0):
    return CandidateBatch(
        armature=np.full((p, N), arm), friction=np.full((p, N), fr), viscous=np.full((p, N), visc),
        delay=np.full(p, delay, dtype=int),
    )


def one_khz(run):
    """The same setpoints as a 1 kHz log: every tick a row, setpoints stamped."""
    import dataclasses

    k = run.ticks_per_setpoint
    T = run.n_samples * k
    rep = lambda a: None if a is None else np.repeat(a, k, axis=0)  # noqa: E731
    meta = dataclasses.replace(run.meta, log_rate_hz=float(TICK_HZ), num_samples=T)
    ticks = np.arange(T, dtype=np.int64) + 5000
    return dataclasses.replace(
        run, meta=meta, t=np.arange(T) / TICK_HZ, q=rep(run.q), dq=rep(run.dq), ee_pos=rep(run.ee_pos),
        ee_quat=rep(run.ee_quat), tau=rep(run.tau), tau_J=rep(run.tau_J), q_des=rep(run.q_des),
        x_des=rep(run.x_des), quat_des=rep(run.quat_des), tick=ticks, setpoint_tick=(ticks // k) * k,
    )


def test_matches_python_reference_joint_pd(robot, backend):
    run = step_run(robot)
    out = backend.rollout(batch(delay=2), [run])[0]
    ref = reference_replay(robot, run, JointOverrides(np.full(N, 0.1), np.full(N, 0.1), np.full(N, 0.2)), delay=2)
    np.testing.assert_allclose(out.q[0], ref["q"], atol=1e-10)
    np.testing.assert_allclose(out.tau[0], ref["tau"], atol=1e-8)


@pytest.mark.parametrize(
    "law",
    [
        ImpedanceLaw(),
        ImpedanceLaw(coriolis_compensation=False, orientation_error="rotvec", max_position_error=0.02,
                     max_orientation_error=0.05, nullspace_stiffness=5.0, q_rest=Q_READY + 0.1),
    ],
)
@pytest.mark.parametrize("gravity", [False, True])
def test_matches_python_reference_task_impedance(robot, law, gravity):
    run = task_run(robot, duration=0.6, law=law, scale=2.0)
    opts = ReplayOptions(gravity=gravity, torque_clamp=True, slew_limit=True)
    be = MujocoBackend(robot, opts, n_threads=1)
    out = be.rollout(batch(delay=3), [run])[0]
    ref = reference_replay(robot, run, JointOverrides(np.full(N, 0.1), np.full(N, 0.1), np.full(N, 0.2)), 3, opts)
    assert not out.diverged[0]
    np.testing.assert_allclose(out.q[0], ref["q"], atol=1e-9)
    np.testing.assert_allclose(out.ee_pos[0], ref["ee_pos"], atol=1e-9)
    np.testing.assert_allclose(out.tau[0], ref["tau"], atol=1e-6)


def test_samples_start_at_q_init_and_ee_pose(robot, backend):
    run = task_run(robot, duration=0.5)
    out = backend.rollout(batch(), [run])[0]
    assert out.q.shape == (1, run.n_samples, N) and out.ee_quat.shape == (1, run.n_samples, 4)
    pos, quat = robot.ee_pose(out.q[0, -1])
    np.testing.assert_allclose(out.ee_pos[0, -1], pos, atol=1e-10)
    assert abs(abs(np.dot(out.ee_quat[0, -1], quat)) - 1) < 1e-10


@pytest.mark.parametrize("rate", [50.0, 1000.0])
def test_setpoint_step_starts_response_at_its_tick(robot, backend, rate):
    run = step_run(robot, step_row=5)
    if rate == 1000.0:
        run = one_khz(run)
        ticks = run.sample_ticks()
        out = backend.rollout(batch(fr=0.0), [run])[0]
        moving = np.abs(out.dq[0, :, 3]) > 1e-12
        # step at tick 100: torque changes at tick 100, velocity from tick 101 on
        assert ticks[np.argmax(moving)] == 101
        assert not moving[ticks <= 100].any()
    else:
        out = backend.rollout(batch(fr=0.0), [run])[0]
        # rows every 20 ticks: row 5 (tick 100) is still at rest, row 6 moves
        assert np.all(np.abs(out.dq[0, :6, 3]) < 1e-12)
        assert abs(out.dq[0, 6, 3]) > 1e-4
        assert out.tau[0, 5, 3] > 0.05 * KPJ[3] * 0.99


def test_delay_shifts_response_by_exactly_d_ticks(robot, backend):
    run = one_khz(step_run(robot, step_row=5))
    outs = backend.rollout(
        CandidateBatch(armature=np.full((5, N), 0.1), friction=np.zeros((5, N)), viscous=np.full((5, N), 0.2),
                       delay=np.arange(5)),
        [run],
    )[0]
    for d in range(1, 5):
        np.testing.assert_array_equal(outs.q[d, d:], outs.q[0, :-d])
        np.testing.assert_array_equal(outs.tau[d, d:], outs.tau[0, :-d])


def test_task_impedance_delay_shifts_effort(robot, backend):
    run = one_khz(task_run(robot, duration=0.3))
    out = backend.rollout(batch(p=1, delay=0), [run])[0]
    out3 = backend.rollout(batch(p=1, delay=3), [run])[0]
    # the response differs, and the first tick of motion moves by 3 (feedback is delayed too)
    first = lambda o: int(np.argmax(np.abs(o.dq[0, :, :]).max(axis=1) > 1e-9))  # noqa: E731
    assert first(out3) == first(out) + 3


def _rms_motion(out, j):
    return float(np.sqrt(np.mean((out.q[:, :, j] - Q_READY[j]) ** 2, axis=1))[0])


def test_parameters_change_response_in_physical_direction(robot, backend):
    run = step_run(robot, duration=0.6, step_row=3, amp=0.1)
    base = backend.rollout(batch(arm=0.05, fr=0.0, visc=0.0), [run])[0]
    heavy = backend.rollout(batch(arm=0.5, fr=0.0, visc=0.0), [run])[0]
    # more armature: slower initial acceleration toward the target
    assert heavy.q[0, 4, 3] - Q_READY[3] < base.q[0, 4, 3] - Q_READY[3]
    # viscous friction: lower peak velocity
    visc = backend.rollout(batch(arm=0.05, fr=0.0, visc=3.0), [run])[0]
    assert np.abs(visc.dq[0, :, 3]).max() < np.abs(base.dq[0, :, 3]).max()
    # Coulomb friction: dissipates (lower peak velocity, the joint comes to rest within
    # Fc / kp of the target), and a step smaller than Fc / kp barely moves the joint
    fric = backend.rollout(batch(arm=0.05, fr=1.0, visc=0.0), [run])[0]
    assert np.abs(fric.dq[0, :, 3]).max() < np.abs(base.dq[0, :, 3]).max()
    assert abs(fric.dq[0, -1, 3]) < 1e-3 < abs(base.dq[0, -1, 3])
    assert abs(fric.q[0, -1, 3] - (Q_READY[3] + 0.1)) <= 1.0 / KPJ[3] + 1e-6
    small = step_run(robot, duration=0.3, step_row=3, amp=0.01)  # kp * 0.01 = 0.6 N m < 1 N m
    stuck = backend.rollout(batch(arm=0.05, fr=1.0, visc=0.0), [small])[0]
    free = backend.rollout(batch(arm=0.05, fr=0.0, visc=0.0), [small])[0]
    # MuJoCo's friction constraint is soft: it creeps, but an order of magnitude less
    assert np.abs(stuck.q[0, :, 3] - Q_READY[3]).max() < 0.1 * np.abs(free.q[0, :, 3] - Q_READY[3]).max()


def test_same_candidate_alone_batch_and_chunks(robot):
    rng = np.random.default_rng(1)
    runs = [task_run(robot, duration=0.4, seed=3), step_run(robot, duration=0.3)]
    P = 7
    b = CandidateBatch(armature=rng.uniform(0, 0.5, (P, N)), friction=rng.uniform(0, 1, (P, N)),
                       viscous=rng.uniform(0, 1, (P, N)), delay=rng.integers(0, 5, P))
    whole = MujocoBackend(robot, n_threads=2, chunk_size=64).rollout(b, runs)
    chunked = MujocoBackend(robot, n_threads=3, chunk_size=2).rollout(b, runs)
    alone = MujocoBackend(robot, n_threads=1).rollout(b.take(slice(4, 5)), runs)
    for r in range(2):
        np.testing.assert_array_equal(whole[r].q, chunked[r].q)
        np.testing.assert_array_equal(whole[r].ee_quat, chunked[r].ee_quat)
        np.testing.assert_array_equal(whole[r].q[4], alone[r].q[0])
        np.testing.assert_array_equal(whole[r].tau[4], alone[r].tau[0])


def test_diverging_candidate_flagged_neighbours_unaffected(robot):
    import dataclasses

    # 50x stiffer impedance: stable with armature and no delay, unstable with zero
    # armature and a 4-tick delay (candidate 1)
    run = task_run(robot, duration=0.5)
    stiff = dataclasses.replace(run, meta=dataclasses.replace(run.meta, kp=KP6 * 50, kd=KD6 * 50))
    be = MujocoBackend(robot, ReplayOptions(max_joint_velocity=50.0), n_threads=2)
    good = batch(p=3)
    bad = batch(p=3)
    bad.armature[1] = bad.friction[1] = bad.viscous[1] = 0.0
    bad.delay[1] = 4
    out = be.rollout(bad, [stiff])[0]
    ref = be.rollout(good, [stiff])[0]
    assert out.diverged.tolist() == [False, True, False]
    assert not ref.diverged.any()
    assert np.isnan(out.q[1, -1]).all()
    np.testing.assert_array_equal(out.q[[0, 2]], ref.q[[0, 2]])


def test_static_friction_group_is_the_twins_stribeck_model(robot, backend):
    """mu_static + dynamic_ratio (+ stribeck_velocity) per candidate replays exactly like a backend built with
    that Stribeck friction (the twin's), and ambiguous or incomplete groups are refused."""
    from isaaclab_sysid.sim.mujoco_backend import StribeckFriction

    run = step_run(robot, amp=0.2)
    fs, fc, vs = np.full(N, 0.6), np.full(N, 0.4), np.linspace(0.03, 0.07, N)
    fixed = MujocoBackend(robot, ReplayOptions(), n_threads=1, stribeck=StribeckFriction(fs, vs))
    ref = fixed.rollout(batch(fr=0.4), [run])[0]
    b = CandidateBatch(armature=np.full((2, N), 0.1), viscous=np.full((2, N), 0.2), delay=np.zeros(2, dtype=int),
                       mu_static=np.tile(fs, (2, 1)), dynamic_ratio=np.tile(fc / fs, (2, 1)), stribeck_velocity=np.tile(vs, (2, 1)))
    out = backend.rollout(b, [run])[0]
    np.testing.assert_allclose(out.q[1], ref.q[0], rtol=0, atol=1e-12)
    coulomb = backend.rollout(batch(fr=0.4), [run])[0]
    assert np.max(np.abs(coulomb.q[0] - ref.q[0])) > 1e-6  # the static part changes the motion
    fixed.close()
    for bad in (dict(friction=np.ones((1, N)), mu_static=np.ones((1, N))), dict(dynamic_ratio=np.ones((1, N))),
                dict(mu_static=np.ones((1, N)), dynamic_ratio=np.full((1, N), 1.5))):
        with pytest.raises(ValueError):
            backend.rollout(CandidateBatch(armature=np.full((1, N), 0.1), **bad), [run])


def test_bad_batches_refused(robot, backend):
    run = step_run(robot)
    with pytest.raises(ValueError, match="delay"):
        backend.rollout(CandidateBatch(delay=np.array([1.5])), [run])
    with pytest.raises(ValueError, match="armature"):
        backend.rollout(CandidateBatch(armature=-np.ones((1, N))), [run])


def test_device_other_than_cpu_refused(robot):
    """The MuJoCo backend takes a device so callers can pass one to any backend, but only the CPU."""
    be = MujocoBackend(robot, n_threads=1, device="cpu")
    assert be.device == "cpu"
    be.close()
    for dev in ("cuda:0", "cuda", "gpu"):
        with pytest.raises(ValueError, match=r"CPU only; --device .* needs --backend isaaclab"):
            MujocoBackend(robot, device=dev)
