#!/usr/bin/env python
"""Fit per-joint armature, friction, viscous damping and the actuator delay by CMA-ES replay.

Replays every recorded run (--real_csv) in a population of simulated arms under
the run's own controller and gains, and moves the parameters to minimize

    sum_runs w_run * (w_q MSE(q) + w_dq MSE(qd) + w_x MSE(x_ee)).

CMA-ES finds the basin; a Levenberg-Marquardt refinement (--refine_iter) then
polishes the best candidate and its neighbouring delays to the noise floor.
Then scores the best parameters against the nominal ones on the fit runs and on
held-out runs (--heldout_csv), and writes a report. With --eval_params it skips
the optimizer and only scores a given parameter file.

Outputs go to <log_dir>/<timestamp>/: config.json, progress.csv,
checkpoint_<iter>.json, sysid_best_params.json, eval_result.json,
eval_rollout_<run>.csv, PNG plots and report.md.

Example (bundled runs, CPU):
    python scripts/sysid_franka_osc.py \\
        --real_csv data/real_runs/twin_chirp_low_fit.csv --real_csv data/real_runs/twin_multiband_fit.csv \\
        --heldout_csv data/real_runs/twin_heldout_multiband.csv --num_envs 16 --max_iter 8
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from isaaclab_sysid.fit.pipeline import FIT_GROUPS_DEFAULT, FitArgs, main_from_args

Repeat = tyro.conf.UseAppendAction


@dataclass
class Args:
    """System identification of joint dynamics by CMA-ES replay (see docs/fit.md)."""

    real_csv: Annotated[list[str], Repeat] = field(default_factory=list)
    """Recorded run CSV to fit on; repeat the flag for several runs (--real_csv a.csv --real_csv b.csv)."""
    real_sidecar: Annotated[list[str], Repeat] = field(default_factory=list)
    """Sidecar JSON of each --real_csv, paired in order; omitted ones default to the CSV path with .json."""
    heldout_csv: Annotated[list[str], Repeat] = field(default_factory=list)
    """Held-out run CSV (never seen by the optimizer), scored after the fit; repeatable."""
    heldout_sidecar: Annotated[list[str], Repeat] = field(default_factory=list)
    """Sidecar JSON of each --heldout_csv, paired in order (default: CSV path with .json)."""
    traj_weights: str | None = None
    """Comma-separated weight per --real_csv run in the loss, e.g. 1.0,1.5 (dimensionless; default 1 each)."""
    num_envs: int = 64
    """CMA-ES population size = simulated envs per run block (candidates per generation)."""
    max_iter: int = 40
    """Number of CMA-ES generations."""
    refine_iter: int = 10
    """Levenberg-Marquardt iterations after CMA-ES on the replay residuals (0 = off); each costs two batched rollouts (docs/fit.md)."""
    x0: str = "low"
    """CMA-ES start: low (sliding regime: armature 20 %, friction/viscous 5 % of their ranges), center, a
    sysid_best_params.json, or a seed from scripts/seed_fit.py (rigid-body joint terms; groups missing from a file start low)."""
    sigma: float = 0.25
    """Initial CMA-ES step size in the normalized parameter space (every group scaled to [0, 1] within its bounds)."""
    seed: int = 0
    """Random seed of the optimizer (same seed and runs give the same result)."""
    backend: Literal["mujoco", "isaaclab"] = "mujoco"
    """Physics backend: mujoco (CPU, default) or isaaclab (needs the [isaaclab] extra)."""
    device: str = "cpu"
    """Device of the isaaclab backend: cpu or cuda:0 (the mujoco backend always runs on the CPU)."""
    robot: str | None = None
    """Robot config name or path (default: the runs' sidecar 'robot', e.g. franka_panda)."""
    fit_groups: str = FIT_GROUPS_DEFAULT
    """Comma-separated parameter groups to fit: armature, friction, viscous, delay (mu_static, dynamic_ratio: isaaclab only)."""
    armature_bounds: tuple[float, float] = (0.0, 0.5)
    """Bounds of the per-joint armature (reflected rotor inertia) [kg m^2]."""
    friction_bounds: tuple[float, float] = (0.0, 5.0)
    """Bounds of the per-joint Coulomb friction torque [N m]."""
    viscous_bounds: tuple[float, float] = (0.0, 5.0)
    """Bounds of the per-joint viscous friction [N m s/rad]."""
    delay_bounds: tuple[int, int] = (0, 4)
    """Bounds of the actuator delay [ticks of 1 ms], integers."""
    mu_static_bounds: tuple[float, float] = (0.0, 5.0)
    """Bounds of the per-joint static friction (PhysX-style) [N m]."""
    dynamic_ratio_bounds: tuple[float, float] = (0.0, 1.0)
    """Bounds of the per-joint dynamic/static friction ratio [-]."""
    w_q: float = 1.0
    """Loss weight of the joint position MSE [1/rad^2]."""
    w_dq: float = 0.1
    """Loss weight of the joint velocity MSE [1/(rad/s)^2]."""
    w_x: float = 0.01
    """Loss weight of the end-effector position MSE [1/m^2]."""
    warmup_ticks: int = 50
    """Ticks [1 ms] the first setpoint is held before the logged time base starts."""
    torque_clamp: bool = False
    """Clamp the simulated commanded torque to the robot's torque limits [N m]."""
    slew_limit: bool = False
    """Limit the simulated torque rate to the robot's torque_rate_limit [N m/s]."""
    save_interval: int = 5
    """Write checkpoint_<iter>.json every this many generations (and at the end)."""
    log_dir: str = "logs/sysid_franka"
    """Folder under which each fit writes <timestamp>/ with all outputs."""
    resume: str | None = None
    """Resume the fit in this output folder from its newest checkpoint (its config.json supplies every other option)."""
    eval_params: str | None = None
    """Skip the optimizer: score this sysid_best_params.json or checkpoint_<iter>.json (and the nominal parameters) on the given runs."""
    nominal: str | None = None
    """Rigid-body identification output whose link masses/inertias replace the URDF's (file from the least-squares stage)."""
    wandb: bool = False
    """Log progress to Weights & Biases (offline mode unless WANDB_MODE says otherwise)."""
    headless: bool = True
    """Accepted for Isaac Lab habit; the CPU backend never opens a window."""
    plots: bool = True
    """Write the PNG plots of the report."""
    quiet: bool = False
    """Suppress the per-generation progress line."""


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, use_underscores=True)
    fa = FitArgs.from_dict({k: getattr(args, k) for k in args.__dataclass_fields__})
    return main_from_args(fa)


if __name__ == "__main__":
    sys.exit(main())
