"""Configuration of the replay task (a plain dataclass: importing it needs no Isaac Lab)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SysidReplayEnvCfg:
    """Settings of :class:`~isaaclab_sysid.tasks.replay_env.SysidReplayEnv`.

    Attributes:
        run_csv: recorded run to replay (CSV; sidecar next to it unless ``run_sidecar``).
        run_sidecar: sidecar JSON of the run, or None for ``<csv>.json``.
        params_json: fitted parameters (``sysid_best_params.json`` or a checkpoint:
            its ``best_params_decoded``), or None for zero armature/friction/viscous and no delay.
        robot: robot config name or path (default: the run's sidecar ``robot``).
        num_envs: identical copies of the arm (e.g. to add different disturbances).
        device: ``"cpu"`` or ``"cuda:0"``.
        warmup_ticks: ticks [1 ms] the first setpoint is held before the log starts.
        gravity: simulate gravity; None = as the run's ``gravity_compensated`` says.
        torque_clamp, slew_limit: the real arm's torque limits (as in the fit).
    """

    run_csv: str = ""
    run_sidecar: str | None = None
    params_json: str | None = None
    robot: str | None = None
    num_envs: int = 1
    device: str = "cpu"
    warmup_ticks: int = 50
    gravity: bool | None = None
    torque_clamp: bool = False
    slew_limit: bool = False
