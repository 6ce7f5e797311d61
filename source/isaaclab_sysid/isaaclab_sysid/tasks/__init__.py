"""Isaac Lab tasks of isaaclab_sysid.

``Isaac-Sysid-Replay-v0`` (also registered under its older id ``Isaac-Sysid-Franka-Replay-v0``; it serves every
arm) is an Isaac Lab ``DirectRLEnv`` that replays
recorded runs with fitted joint parameters, one block of envs per run and one
candidate per env, with the fit's own per-tick replay (Newton; CPU or GPU), so a
fit can be checked, or the replay reused, in a user's own Isaac Lab workflow:

    import gymnasium as gym, torch
    import isaaclab_sysid.tasks  # registers the id (imports neither isaaclab nor torch)
    env = gym.make("Isaac-Sysid-Replay-v0", run_csv=["data/real_runs/twin_joint_multisine_fit.csv"],
                   params_json=["logs/sysid/<stamp>/sysid_best_params.json"], device="cpu")
    obs, _ = env.reset()
    obs, reward, terminated, truncated, extras = env.step(torch.zeros(env.unwrapped.num_envs, 7))

or ``gym.make(..., cfg=SysidReplayEnvCfg(...))`` (``tasks/replay_env_cfg.py``). See
docs/backends.md ("The replay task").

Registration is lazy: the entry point is a string, so importing this package
needs only gymnasium (and does nothing without it).
"""

from __future__ import annotations

REPLAY_TASK_ID = "Isaac-Sysid-Replay-v0"
#: the task's older id (it serves every arm, not only the Franka), registered too
REPLAY_TASK_ALIASES = ("Isaac-Sysid-Franka-Replay-v0",)


def register() -> bool:
    """Register the replay task with gymnasium; False when gymnasium is not installed."""
    try:
        import gymnasium as gym
    except ImportError:  # optional dependency guard: gymnasium is not a core requirement
        return False
    for task_id in (REPLAY_TASK_ID, *REPLAY_TASK_ALIASES):
        if task_id not in gym.registry:
            gym.register(
                id=task_id,
                entry_point="isaaclab_sysid.tasks.replay_env:SysidReplayEnv",
                disable_env_checker=True,
                kwargs={"env_cfg_entry_point": "isaaclab_sysid.tasks.replay_env_cfg:SysidReplayEnvCfg"},
            )
    return True


register()
