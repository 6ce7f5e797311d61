"""The registered replay task: lazy registration, and a replay identical to the backend's."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the replay task needs gymnasium (with the [isaaclab] extra)")


def test_registration_imports_neither_isaaclab_nor_torch():
    code = (
        "import sys, gymnasium as gym, isaaclab_sysid, isaaclab_sysid.tasks as t; "
        "assert t.REPLAY_TASK_ID in gym.registry, 'not registered'; "
        "bad = [m for m in ('isaaclab', 'torch', 'warp') if m in sys.modules]; "
        "assert not bad, bad; print('ok')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_replay_task_matches_the_backend(tmp_path):
    pytest.importorskip("isaaclab", reason="the replay task needs the [isaaclab] extra")
    import gymnasium as gym

    import isaaclab_sysid.tasks  # noqa: F401
    from isaaclab_sysid.data import write_run
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.interface import CandidateBatch
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
    from isaaclab_sysid.twin.targets import Q_READY, skeleton_run

    robot = load_robot("franka_panda")
    t = np.arange(15) / 50.0
    target = Q_READY + 0.1 * np.sin(2 * np.pi * np.outer(t, np.linspace(1.0, 2.0, 7)))
    run = skeleton_run(robot, "joint_pd", t, target, np.full(7, 50.0), np.full(7, 4.0), name="short")
    csv, _ = write_run(run, tmp_path / "short.csv")
    params = {"armature": [0.1] * 7, "friction": [0.2] * 7, "viscous": [0.3] * 7, "delay": 2}
    (tmp_path / "p.json").write_text(json.dumps({"best_params_decoded": params}))
    env = gym.make("Isaac-Sysid-Franka-Replay-v0", run_csv=str(csv), params_json=str(tmp_path / "p.json"), num_envs=2)
    obs, info = env.reset()
    qs = [obs["q"]]
    done = False
    while not done:
        obs, reward, done, _, info = env.step(np.zeros((2, 7)))
        qs.append(obs["q"])
    env.close()
    qs = np.stack(qs, 1)  # (P, T, N)
    assert qs.shape == (2, 15, 7)
    ref = MujocoBackend(robot, n_threads=1).rollout(
        CandidateBatch(armature=np.full((1, 7), 0.1), friction=np.full((1, 7), 0.2), viscous=np.full((1, 7), 0.3),
                       delay=np.array([2])), [run])[0]
    assert np.sqrt(np.mean((qs - ref.q) ** 2)) < 1e-5
    np.testing.assert_allclose(info["rollout"].q, qs)
