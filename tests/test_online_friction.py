"""Friction that drifts: RLS with forgetting (exactness, windup guards, three forgetting settings), and a
warm-up session twin whose friction falls, followed within the band; bad input refused."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from conftest import load_script
from isaaclab_sysid.online import (FrictionRLS, FrictionSamples, FrictionSignal, RLSOptions, SignalOptions,
                                   TrackerError, TrackOptions, track)
from isaaclab_sysid.online.rls import friction_rows
from isaaclab_sysid.online.twin import franka_drift, record_session
from isaaclab_sysid.robots import load_robot

ROBOT = load_robot("franka_panda")
N_RUNS, SESSION_S = 24, 120.0  # 600 updates, 10x compressed in time: one reading every 0.2 s
ONE_READING = TrackOptions(chunk_s=0.2, readings=1)


@functools.lru_cache(maxsize=4)
def session(seed: int, fall: float = 0.35):
    twin = franka_drift(SESSION_S, fall)
    runs, starts = record_session(ROBOT, twin, N_RUNS, seed=seed, log_rate_hz=1000.0)
    signal = FrictionSignal(ROBOT, twin.armature)
    return twin, [signal.of_run(r) for r in runs], list(starts), runs


def _coverage(res, truth, terms=(0, 1)):
    k0 = res.t.size // 10  # after the start-up transient
    inside = np.abs(res.theta - truth) <= res.half_width
    return float(inside[k0:, :, list(terms)].mean())


def test_twin_friction_falling_is_followed_within_the_band_and_the_settings_trade_lag_for_noise():
    for seed in (0, 1):
        twin, samples, starts, _ = session(seed)
        opts = dataclasses.replace(ONE_READING, reference_s=20.0)  # the reference: still cold, converged
        res = {lam: track(samples, ROBOT.joint_names, RLSOptions(forgetting=lam), opts, starts)
               for lam in (1.0, 0.98, 0.9)}
        truth = twin.run_truth(res[1.0].t, N_RUNS)
        summ = {lam: r.summary(truth) for lam, r in res.items()}
        lag = {lam: np.mean(np.abs(s["coulomb"]["lag"])) for lam, s in summ.items()}
        shake = {lam: np.mean(s["coulomb"]["shake"]) for lam, s in summ.items()}
        # forgetting follows the fall within the band; never forgetting trails far behind it
        assert _coverage(res[0.98], truth) >= 0.85 and _coverage(res[0.9], truth) >= 0.9
        assert _coverage(res[1.0], truth) < 0.6
        assert lag[1.0] > 3 * lag[0.98] and lag[0.98] > lag[0.9]
        assert shake[0.9] > shake[0.98]
        # the fall (35 %) is larger than the band: flagged for every joint's Coulomb friction
        flagged = {(f.joint, f.term) for f in res[0.98].flags}
        assert all((j, "coulomb") in flagged for j in ROBOT.joint_names)


def test_a_steady_session_raises_no_change_flag():
    twin, samples, starts, _ = session(3, fall=0.0)
    res = track(samples, ROBOT.joint_names, RLSOptions(forgetting=0.98), dataclasses.replace(ONE_READING, reference_s=20.0),
                starts)
    assert [f for f in res.flags if f.term != "offset"] == []
    assert _coverage(res, twin.run_truth(res.t, N_RUNS)) >= 0.9


def test_recursive_equals_weighted_batch_least_squares():
    rng = np.random.default_rng(0)
    qd = rng.uniform(0.2, 2.0, (400, 2)) * rng.choice([-1, 1], (400, 2))
    y = 0.4 * np.sign(qd) + 0.25 * qd + 0.05 + 0.05 * rng.standard_normal(qd.shape)
    for lam in (1.0, 0.95):
        f = FrictionRLS(2, RLSOptions(forgetting=lam, guard="none", p0=1e9, deadband=0.0))
        for k in range(0, 400, 8):  # chunks of 8 samples
            f.update(float(k + 8), qd[k : k + 8], y[k : k + 8])
        w = lam ** (49 - np.arange(400) // 8)
        for j in range(2):
            A = friction_rows(qd[:, j])
            batch = np.linalg.solve((A * w[:, None]).T @ A, (A * w[:, None]).T @ y[:, j])
            np.testing.assert_allclose(f.theta[j], batch, rtol=1e-6, atol=1e-8)


def test_one_sample_update_is_the_seeds_rls_step():
    rng = np.random.default_rng(1)
    lam, theta, P = 0.98, np.zeros(3), 100.0 * np.eye(3)
    f = FrictionRLS(1, RLSOptions(forgetting=lam, guard="none", deadband=0.0))
    for k in range(60):
        w = rng.uniform(0.3, 2.0) * rng.choice([-1, 1])
        reading = 0.3 * w + 0.4 * np.sign(w) + 0.05 * rng.standard_normal()
        row = friction_rows(w)
        gain = P @ row / (lam + row @ P @ row)  # the textbook pseudocode
        theta = theta + gain * (reading - row @ theta)
        P = (P - np.outer(gain, row) @ P) / lam
        f.update(float(k + 1), [[w]], [[reading]])
    np.testing.assert_allclose(f.theta[0], theta, rtol=1e-9)
    np.testing.assert_allclose(np.linalg.inv(f.R[0]), P, rtol=1e-7)


def test_the_seeds_three_forgetting_settings_on_its_own_example():
    """600 readings, one every 2 s, b 0.30 -> 0.20 between readings 150 and 450, 20 random seeds."""
    k = np.arange(600)
    b = np.where(k < 150, 0.30, np.where(k < 450, 0.30 - 0.10 * (k - 150) / 300, 0.20))
    final, lag, shake = {}, {}, {}
    for lam in (1.0, 0.98, 0.9):
        f_, l_, s_ = [], [], []
        for seed in range(20):
            rng = np.random.default_rng(seed)
            w = rng.uniform(0.3, 2.0, 600) * rng.choice([-1, 1], 600)
            y = b * w + 0.4 * np.sign(w) + 0.05 * rng.standard_normal(600)
            f = FrictionRLS(1, RLSOptions(forgetting=lam, deadband=0.0))
            est = np.array([f.update(2.0 * (i + 1), [[w[i]]], [[y[i]]]).theta[0, 1] for i in range(600)])
            err = est[450:] - 0.20
            f_.append(est[-1]), l_.append(err.mean()), s_.append(err.std())
        final[lam], lag[lam], shake[lam] = np.mean(f_), np.mean(l_), np.mean(s_)
    assert final[1.0] == pytest.approx(0.258, abs=0.01) and lag[1.0] == pytest.approx(0.063, abs=0.01)  # trails
    assert 0.002 < lag[0.98] < 0.02 and lag[1.0] > 5 * lag[0.98]  # a short lag (0.98^k decay after the fall)
    assert shake[0.9] > 2 * shake[0.98]  # shakes more than twice as much


def test_windup_guards_keep_the_covariance_bounded_at_rest():
    rng = np.random.default_rng(2)
    qd = rng.uniform(0.3, 2.0, (50, 1)) * rng.choice([-1, 1], (50, 1))
    y = 0.4 * np.sign(qd) + 0.2 * qd
    rest = np.zeros((20, 1))
    out = {}
    for guard in ("none", "bound", "directional"):
        f = FrictionRLS(1, RLSOptions(forgetting=0.9, guard=guard, p0=100.0, deadband=0.05))
        for k in range(50):
            f.update(float(k + 1), qd[k : k + 1], y[k : k + 1])
        before = np.linalg.eigvalsh(np.linalg.inv(f.R[0]))[-1]
        for k in range(200):  # the arm stands still: no sample passes the deadband
            f.update(51.0 + k, rest, rest)
        out[guard] = (before, np.linalg.eigvalsh(np.linalg.inv(f.R[0]))[-1])
    assert out["none"][1] > 1e6 * out["none"][0]  # windup: P grows as lambda^-k
    assert out["bound"][1] <= 100.0 * (1 + 1e-9)
    assert out["directional"][1] == pytest.approx(out["directional"][0], rel=1e-9)
    # a joint that only turns one way: Coulomb and offset are not separable; directional forgetting keeps P
    f_dir = FrictionRLS(1, RLSOptions(forgetting=0.9, guard="directional", deadband=0.0))
    f_none = FrictionRLS(1, RLSOptions(forgetting=0.9, guard="none", deadband=0.0))
    for k in range(50):
        for f in (f_dir, f_none):
            f.update(float(k + 1), qd[k : k + 1], y[k : k + 1])
    one_way = np.abs(qd[:20])
    for k in range(100):
        for f in (f_dir, f_none):
            f.update(100.0 + k, one_way[k % 20 : k % 20 + 1], 0.4 + 0.2 * one_way[k % 20 : k % 20 + 1])
    assert f_none.state().cond[0] > 1e3 * f_dir.state().cond[0]


def test_sensor_difference_reads_the_friction_between_motor_and_link_sensor():
    twin, samples, _, runs = session(0)
    run = runs[0]
    model_sig = samples[0]
    # a Franka-like log: tau_J is the link side (gravity in, friction out), tau the command without gravity
    from isaaclab_sysid.arm_model import ArmModel

    am = ArmModel(ROBOT)
    g = am.arm_torque(run.q, gravity=True)
    truth = twin.run_truth(0.0, N_RUNS)
    friction = truth[:, 0] * np.sign(run.dq) * (np.abs(run.dq) > 1e-3) + truth[:, 1] * run.dq
    franka = dataclasses.replace(run, tau=run.tau_J - g, tau_J=run.tau_J - friction)
    sd = FrictionSignal(ROBOT, None, SignalOptions(source="sensor_difference")).of_run(franka)
    assert isinstance(sd, FrictionSamples) and sd.y.shape == model_sig.y.shape
    moving = np.abs(sd.qd) > 0.1
    expected = truth[:, 0] * np.sign(sd.qd) + truth[:, 1] * sd.qd
    assert np.median(np.abs(sd.y - expected)[moving]) < 0.05


def test_bad_input_is_refused_in_one_line(tmp_path):
    for bad, flag in ((RLSOptions(forgetting=0.0), "--forgetting"), (RLSOptions(forgetting=1.5), "--forgetting"),
                      (RLSOptions(guard="clip"), "--guard"), (RLSOptions(deadband=-1), "--deadband")):
        with pytest.raises(TrackerError, match=flag):
            FrictionRLS(7, bad)
    f = FrictionRLS(2)
    with pytest.raises(TrackerError, match=r"qd and y must both be \(k, 2\)"):
        f.update(1.0, np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(TrackerError, match="NaN"):
        f.update(1.0, np.full((1, 2), np.nan), np.zeros((1, 2)))
    f.update(1.0, np.ones((1, 2)), np.ones((1, 2)))
    with pytest.raises(TrackerError, match="update times must increase"):
        f.update(1.0, np.ones((1, 2)), np.ones((1, 2)))
    twin, samples, starts, runs = session(0)
    with pytest.raises(TrackerError, match="--start_s needs one time per run"):
        track(samples, ROBOT.joint_names, starts=[0.0, 1.0])
    with pytest.raises(TrackerError, match="starts at 1 s, before run"):
        track(samples[:2], ROBOT.joint_names, starts=[0.0, 1.0])
    ur = dataclasses.replace(runs[0], meta=dataclasses.replace(runs[0].meta, robot="ur10e"))
    with pytest.raises(TrackerError, match="recorded on 'ur10e'"):
        FrictionSignal(ROBOT).of_run(ur)
    with pytest.raises(TrackerError, match="--armature must be 7 values"):
        FrictionSignal(ROBOT, np.ones(3))
    cli = load_script("track_friction")
    assert cli.main([str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2
    assert cli.main([str(tmp_path / "missing.csv"), "--forgetting", "2.0"]) == 2
