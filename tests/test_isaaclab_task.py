"""The registered replay task: lazy registration, and a DirectRLEnv whose env blocks replay like MuJoCo.

``Isaac-Sysid-Replay-v0`` (and its older id) is an Isaac Lab ``DirectRLEnv`` running the
backend's own per-tick replay (``ReplayProgram``): two runs (joint PD and task
impedance) x two candidates = four envs, env ``r * P + p`` = run r, candidate p.
Each block must match the MuJoCo backend's replay of the same run and candidates
(the conformance bound of docs/backends.md), a restarted episode must repeat the
first bit for bit, and the action (an extra torque) must reach only its env.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the replay task needs gymnasium (with the [isaaclab] extra)")


def test_registration_imports_neither_isaaclab_nor_torch():
    code = (
        "import sys, gymnasium as gym, isaaclab_sysid, isaaclab_sysid.tasks as t; "
        "assert t.REPLAY_TASK_ID in gym.registry and all(a in gym.registry for a in t.REPLAY_TASK_ALIASES), 'not registered'; "
        "bad = [m for m in ('isaaclab', 'torch', 'warp') if m in sys.modules]; "
        "assert not bad, bad; print('ok')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


CANDIDATES = [
    {"armature": [0.1] * 7, "friction": [0.2] * 7, "viscous": [0.3] * 7, "delay": 2},
    {"armature": [0.2] * 7, "friction": [0.05] * 7, "viscous": [0.6] * 7, "delay": 4},
]


def _runs(robot, tmp_path):
    from isaaclab_sysid.data import write_run
    from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets

    t = np.arange(15) / 50.0
    target = Q_READY + 0.1 * np.sin(2 * np.pi * np.outer(t, np.linspace(1.0, 2.0, 7)))
    pd = skeleton_run(robot, "joint_pd", t, target, np.full(7, 50.0), np.full(7, 4.0), name="pd")
    pos, quat = robot.ee_pose(Q_READY)
    tt, off = pose_offsets("multiband", 0.3, 50.0, seed=0, scale=3.0)
    x, qu = task_targets(pos, quat, off)
    kp6 = np.array([300.0, 300.0, 300.0, 30.0, 30.0, 30.0])
    task = skeleton_run(robot, "task_impedance", tt, np.hstack([x, qu]), kp6, 2 * np.sqrt(kp6), name="task")
    return [pd, task], [str(write_run(r, tmp_path / f"{r.name}.csv")[0]) for r in (pd, task)]


def _write_fit(robot, values, folder):
    """A ``sysid_best_params.json`` holding ``values`` (what a fit writes)."""
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.fit.run_folder import RunFolder

    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in values}, 7, robot.joint_names)
    x = space.normalize({g: np.asarray(v) if g != "delay" else v for g, v in values.items()})
    folder.mkdir()
    return RunFolder(folder).write_result(
        FitResult.from_search(space, x, 0.0, run_names=[], weighted_loss=np.zeros(0), traj_weights=np.zeros(0)))


def _episode(env, action):
    """Step one episode with ``action`` (E, N); returns (steps, rewards, the rollouts)."""
    steps, rewards, done = 0, [], False
    while not done:
        obs, rew, term, trunc, extras = env.step(action)
        assert obs["policy"].shape == (4, 14) and not bool(term.any())
        rewards.append(rew.numpy().copy())
        steps += 1
        done = bool(trunc.all())
    return steps, np.array(rewards), extras["rollouts"]


def test_replay_task_env_blocks_match_mujoco(tmp_path):
    pytest.importorskip("isaaclab", reason="the replay task needs the [isaaclab] extra")
    import gymnasium as gym
    import torch

    import isaaclab_sysid.tasks  # noqa: F401
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.interface import CandidateBatch
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    robot = load_robot("franka_panda")
    runs, csvs = _runs(robot, tmp_path)
    params = [str(_write_fit(robot, c, tmp_path / f"fit{k}")) for k, c in enumerate(CANDIDATES)]
    env = gym.make("Isaac-Sysid-Replay-v0", run_csv=csvs, params_json=params, device="cpu")
    try:
        u = env.unwrapped
        assert (u.num_envs, u.cfg.decimation, u.P, u.R) == (4, 20, 2, 2)  # 50 Hz logs: one sample per env step
        env.reset()
        zero = torch.zeros(4, 7)
        steps, rewards, outs = _episode(env, zero)
        n_ticks = 50 + max(int(s.sample_ticks[-1]) for s in u.scheds) + 1  # warm-up + up to the last sample
        assert steps == int(np.ceil(n_ticks / 20)) and np.all(rewards <= 0) and np.all(np.isfinite(rewards))
        batch = CandidateBatch(**{g: np.array([c[g] for c in CANDIDATES]) for g in ("armature", "friction", "viscous")},
                               delay=np.array([c["delay"] for c in CANDIDATES]))
        ref = MujocoBackend(robot, n_threads=1).rollout(batch, runs)
        for r in range(2):  # block r = run r; within it env p = candidate p
            assert outs[r].q.shape == (2, runs[r].n_samples, 7)
            rms = np.sqrt(np.mean((outs[r].q - ref[r].q) ** 2, axis=(1, 2)))
            assert np.all(rms < 1e-5), (r, rms)
        assert np.sqrt(np.mean((outs[0].q[0] - outs[0].q[1]) ** 2)) > 1e-3  # the two candidates differ
        # the env reset itself at the end: the next episode repeats the first; an extra torque reaches env 0 only
        push = zero.clone()
        push[0, 6] = 1.0
        _, _, again = _episode(env, push)
        assert not np.allclose(again[0].q[0], outs[0].q[0], atol=1e-6)
        np.testing.assert_array_equal(again[0].q[1], outs[0].q[1])
        np.testing.assert_array_equal(again[1].q, outs[1].q)
    finally:
        env.close()
