"""The simulated twin: determinism, self-consistency with the replay engine, realism knobs, CLI."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from isaaclab_sysid.data import read_run, write_run
from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch
from isaaclab_sysid.twin.demo import task_target
from isaaclab_sysid.twin.params import TwinNoise, TwinParams, load_twin_params
from isaaclab_sysid.twin.recorder import record_twin, true_batch, twin_backend

N = 7
NOISY = TwinNoise(q_std=1e-4, dq_std=2e-3, tau_J_std=0.05, actuator_tau_std=0.05, q_quantum=1e-5,
                  tau_quantum=1e-3, stale_max_ms=10)


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


def params(model="coulomb", substeps=1, noise=TwinNoise(), delay=2):
    fr = np.array([0.6, 0.5, 0.45, 0.4, 0.2, 0.18, 0.1])
    return TwinParams(
        robot="franka_panda", armature=np.array([0.3, 0.25, 0.2, 0.15, 0.07, 0.06, 0.03]), friction=fr,
        viscous=np.array([0.4, 0.35, 0.3, 0.25, 0.1, 0.08, 0.05]), delay=delay, friction_model=model,
        static_friction=1.3 * fr if model == "stribeck" else None,
        stribeck_velocity=np.full(N, 0.05) if model == "stribeck" else None,
        substeps=substeps, noise=noise,
    )


@pytest.fixture(scope="module")
def target(robot):
    return task_target(robot, "multiband", 3.0, 200.0, 20.0, seed=5, name="t")


def test_same_seed_same_twin(robot, target):
    p = params("stribeck", 2, NOISY)
    a = record_twin(robot, target, p, seed=7)
    b = record_twin(robot, target, p, seed=7)
    c = record_twin(robot, target, p, seed=8)
    for f in ("q", "dq", "ee_pos", "ee_quat", "tau", "tau_J"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.q, c.q)


@pytest.mark.parametrize("model,substeps,log_1khz", [("coulomb", 1, False), ("stribeck", 4, False), ("coulomb", 2, True)])
def test_zero_noise_twin_replays_itself(robot, target, tmp_path, model, substeps, log_1khz):
    p = params(model, substeps)
    twin = record_twin(robot, target, p, seed=0, log_rate_hz=1000.0 if log_1khz else None)
    csv, _ = write_run(twin, tmp_path / "twin.csv")
    run = read_run(csv)
    assert run.is_1khz == log_1khz
    be = twin_backend(robot, p)  # same friction model, integrator and limits
    out = be.rollout(true_batch(p), [run])[0]
    assert not out.diverged[0]
    np.testing.assert_allclose(out.q[0], run.q, atol=1e-12, rtol=0)
    np.testing.assert_allclose(out.dq[0], run.dq, atol=1e-10, rtol=0)
    np.testing.assert_allclose(out.ee_pos[0], run.ee_pos, atol=1e-12, rtol=0)
    np.testing.assert_allclose(out.tau[0], run.tau_J, atol=1e-9, rtol=0)
    # and the arm did move
    assert np.ptp(run.q, axis=0).max() > 0.05


def test_wrong_parameters_do_not_reproduce(robot, target):
    p = params()
    twin = record_twin(robot, target, p)
    be = twin_backend(robot, p)
    b = true_batch(p)
    wrong = CandidateBatch(armature=b.armature * 0.5, friction=b.friction, viscous=b.viscous, delay=b.delay)
    out = be.rollout(wrong, [twin])[0]
    assert np.sqrt(np.mean((out.q[0] - twin.q) ** 2)) > 1e-4  # far above numerical precision


def test_realism_knobs(robot, target):
    clean = record_twin(robot, target, params("stribeck", 2))
    stale = record_twin(robot, target, params("stribeck", 2, TwinNoise(stale_max_ms=10)), seed=3)
    # stale states lag the fresh ones: moving rows differ, and every stale row is a state
    # of the fresh 1 kHz stream at most 10 ticks earlier
    dense = record_twin(robot, target, params("stribeck", 2), log_rate_hz=1000.0)
    diff = np.abs(stale.q - clean.q).max(axis=1)
    assert (diff > 0).mean() > 0.5
    for i in range(1, stale.n_samples):
        k = int(stale.sample_ticks()[i])
        ages = [a for a in range(11) if np.array_equal(dense.q[k - a], stale.q[i])]
        assert ages, f"row {i} is not a state 0..10 ms old"
    noisy = record_twin(robot, target, params("stribeck", 2, TwinNoise(q_std=1e-4, q_quantum=1e-5)), seed=1)
    err = noisy.q - clean.q
    assert 0.5e-4 < err.std() < 2e-4
    np.testing.assert_allclose(noisy.q / 1e-5, np.round(noisy.q / 1e-5), atol=1e-6)
    # a finer integrator and the Stribeck model change the motion, slightly
    coarse = record_twin(robot, target, params("stribeck", 1))
    coul = record_twin(robot, target, params("coulomb", 2))
    for other in (coarse, coul):
        d = np.abs(other.q - clean.q).max()
        assert 1e-7 < d < 0.05


def test_demo_config_and_bundled_runs(robot):
    p = load_twin_params(REPO_ROOT / "configs" / "twin" / "franka_demo.json")
    assert p.friction_model == "stribeck" and p.substeps > 1 and p.delay > 0
    from isaaclab_sysid.twin.demo import DEMO_RUNS, demo_targets

    for (name, kind, *_rest, rate), (target, seed, _) in zip(DEMO_RUNS, demo_targets(robot)):
        run = read_run(REPO_ROOT / "data" / "real_runs" / f"{name}.csv")
        assert run.meta.log_rate_hz == rate and run.meta.controller == target.meta.controller
        assert run.meta.controller == ("joint_pd" if kind == "joint_multisine" else "task_impedance")
        assert np.ptp(run.q, axis=0).max() > 0.1
    # the bundled files are what `record_twin.py --demo` writes (reproducible from the JSON truth and the seeds)
    target, seed, rate = demo_targets(robot)[1]
    again = record_twin(robot, target, p, seed=seed, log_rate_hz=rate, name=target.name)
    bundled = read_run(REPO_ROOT / "data" / "real_runs" / f"{target.name}.csv")
    np.testing.assert_allclose(again.q, bundled.q, rtol=0, atol=1e-8)


def test_bad_twin_json_refused(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"robot": "franka_panda", "armature": [1,1,1,1,1,1,1], "friction": [0,0,0,0,0,0,0], '
                 '"viscous": [0,0,0,0,0,0,0], "delay": 1.5}')
    with pytest.raises(ValueError, match="delay"):
        load_twin_params(f)
    f.write_text('{"robot": "franka_panda", "armature": [1,1,1,1,1,1,1], "friction": [0,0,0,0,0,0,0], '
                 '"viscous": [0,0,0,0,0,0,0], "armatur": 3}')
    with pytest.raises(ValueError, match="armatur"):
        load_twin_params(f)


def test_record_twin_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "record_twin.py"), "--waveform", "chirp", "--duration", "2",
         "--out", str(tmp_path), "--name", "cli_chirp", "--log-1khz"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    run = read_run(tmp_path / "cli_chirp.csv")
    assert run.is_1khz and run.n_samples == 2001
