"""Isaac Lab / gymnasium tasks of isaaclab_sysid.

``Isaac-Sysid-Franka-Replay-v0`` replays one recorded run with fitted joint
parameters inside an Isaac Lab simulation (Newton; CPU or GPU), so the fit can be
checked, or the replay reused, in a user's own Isaac Lab workflow:

    import gymnasium as gym
    import isaaclab_sysid.tasks  # registers the id (imports neither isaaclab nor torch)
    env = gym.make("Isaac-Sysid-Franka-Replay-v0", run_csv="data/real_runs/twin_multiband_fit.csv",
                   params_json="logs/sysid_franka/<stamp>/sysid_best_params.json", num_envs=1, device="cpu")

Registration is lazy: the entry point is a string, so importing this package
needs only gymnasium (and does nothing without it).
"""

from __future__ import annotations

REPLAY_TASK_ID = "Isaac-Sysid-Franka-Replay-v0"


def register() -> bool:
    """Register the replay task with gymnasium; False when gymnasium is not installed."""
    try:
        import gymnasium as gym
    except ImportError:  # optional dependency guard: gymnasium is not a core requirement
        return False
    if REPLAY_TASK_ID not in gym.registry:
        gym.register(
            id=REPLAY_TASK_ID,
            entry_point="isaaclab_sysid.tasks.replay_env:SysidReplayEnv",
            disable_env_checker=True,
            kwargs={"env_cfg_entry_point": "isaaclab_sysid.tasks.replay_env_cfg:SysidReplayEnvCfg"},
        )
    return True


register()
