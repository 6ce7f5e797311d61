"""Configuration of the replay task ``Isaac-Sysid-Replay-v0`` (an Isaac Lab ``DirectRLEnvCfg``).

Importing this module imports Isaac Lab; ``isaaclab_sysid.tasks`` names it only in a
string (the gym entry point), so registering the task does not.
"""

from __future__ import annotations

from isaaclab.assets import ArticulationCfg
from isaaclab.envs import DirectRLEnvCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sim import SimulationCfg
from isaaclab.utils import configclass

from isaaclab_sysid.timebase import TICK_S


@configclass
class SysidReplaySceneCfg(InteractiveSceneCfg):
    """E arms, no ground, no contacts; ``robot`` is set by the env from the replay backend
    (the fit's arm from the project's own USD, one delayed-PD actuator group ``"arm"``)."""

    robot: ArticulationCfg | None = None


@configclass
class SysidReplayEnvCfg(DirectRLEnvCfg):
    """Settings of :class:`~isaaclab_sysid.tasks.replay_env.SysidReplayEnv`.

    The env has one block of envs per run and one env per candidate in each block
    (env ``r * P + p`` replays run r with candidate p; P = len(params_json) x copies),
    so ``scene.num_envs``, ``decimation``, ``episode_length_s`` and the spaces are
    derived from the runs and candidates when the env is built.

    Attributes:
        run_csv: recorded runs to replay (CSV; sidecar next to each unless ``run_sidecar``).
        run_sidecar: sidecar JSON per run, in order (empty: ``<csv>.json``).
        params_json: one candidate per file (``sysid_best_params.json`` or a checkpoint); empty:
            one candidate with zero armature/friction/viscous and no delay.
        copies: envs per (run, candidate), e.g. to add different disturbances to identical replays.
        robot: robot config name or path (default: the first run's sidecar ``robot``).
        warmup_ticks: ticks [1 ms] the first setpoint is held before the log starts.
        gravity: simulate gravity; None = as the runs' ``gravity_compensated`` says (must agree).
        torque_clamp, slew_limit: the real arm's torque limits (as in the fit).
        max_delay: the actuator delay buffer depth [ticks] (at least the candidates' delays).
        ticks_per_step: physics ticks (1 ms) per env step (``decimation``); 0 = the runs' sample period
            (20 for 50 Hz logs), so one env step advances one logged sample.
    """

    run_csv: list[str] = []
    run_sidecar: list[str] = []
    params_json: list[str] = []
    copies: int = 1
    robot: str | None = None
    warmup_ticks: int = 50
    gravity: bool | None = None
    torque_clamp: bool = False
    slew_limit: bool = False
    max_delay: int = 8
    ticks_per_step: int = 0

    # DirectRLEnvCfg fields (derived from the runs when the env is built)
    sim: SimulationCfg = SimulationCfg(dt=TICK_S, device="cpu")
    scene: SysidReplaySceneCfg = SysidReplaySceneCfg(num_envs=1, env_spacing=2.0)
    decimation: int = 1
    episode_length_s: float = 1.0
    action_space: int = 7
    observation_space: int = 14
    seed: int | None = 0
