"""``scripts/gen_fourier_traj.py``: the joint-space Fourier excitation optimized for the base regressor's condition
number, written as a target run."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from isaaclab_sysid.excitation.cli import start_pose, verdict_exit, write_outputs
from isaaclab_sysid.excitation.design_io import target_run
from isaaclab_sysid.excitation.fourier import FourierSpec, optimize_fourier, single_sinusoid, trajectory_condition
from isaaclab_sysid.excitation.limits import DesignLimitError
from isaaclab_sysid.excitation.plots import plot_joint_design
from isaaclab_sysid.excitation.taskspace import time_grid

#: Franka joint-impedance example gains.
PANDA_KP = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
PANDA_KD = (50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0)


@dataclass
class FourierOptions:
    """Generate an optimized joint-space Fourier excitation."""

    out: Annotated[Path, tyro.conf.arg(aliases=("--out_dir",))] = Path("logs/targets")
    """Folder the outputs are written to (created if missing; git-ignored logs/ by default, never the package's data/;
    also --out_dir)."""
    name: str = "fourier"
    """Run name (file stem)."""
    robot: str = "franka_panda"
    """Robot config name or path."""
    q_init: tuple[float, ...] | None = None
    """Start (and end) posture [rad] (default: Panda home)."""
    n_harmonics: int = 5
    """Harmonics per joint (>= 2)."""
    f_base_hz: float = 0.1
    """Fundamental frequency [Hz]; one period = 1/f_base s."""
    n_periods: int = 1
    """Periods written to the target run."""
    joint_margin_rad: float = 0.1
    """Positions stay this far inside the joint limits [rad]."""
    speed_frac: float = 0.8
    """|qd| <= this fraction of the URDF velocity limits."""
    acc_frac: float = 0.8
    """|qdd| <= this fraction of the acceleration limits (Panda datasheet unless --acc_max_rad_s2)."""
    acc_max_rad_s2: tuple[float, ...] | None = None
    """Joint acceleration limits [rad/s^2], one per joint (needed for robots other than the Panda)."""
    max_iter: int = 100
    """Optimizer iterations per start."""
    restarts: int = 2
    """Random starts; the best is kept."""
    seed: int = 0
    """Seed of the starts."""
    kp: tuple[float, ...] = PANDA_KP
    """Joint stiffness [N m/rad] written to the sidecar (joint_pd)."""
    kd: tuple[float, ...] = PANDA_KD
    """Joint damping [N m s/rad]."""
    control_rate_hz: float = 50.0
    """Setpoint rate [Hz] (held between setpoints; 1000 streams one a tick). At the stiff default gains a 50 Hz
    setpoint step is a torque step of kp x qd x 20 ms, many times the Franka's torque slew limit: the pre-flight
    says so and names what to change."""
    preflight: bool = False
    """Also replay the design and write the pre-flight report with its verdict; exit 3 when it says not safe to run."""


def fourier_main(a: FourierOptions) -> int:
    robot, q0, pos, quat = start_pose(a.robot, a.q_init)
    spec = FourierSpec(n_harmonics=a.n_harmonics, f_base_hz=a.f_base_hz, n_periods=a.n_periods,
                       joint_margin_rad=a.joint_margin_rad, speed_frac=a.speed_frac, acc_frac=a.acc_frac,
                       acc_max_rad_s2=a.acc_max_rad_s2, max_iter=a.max_iter, restarts=a.restarts, seed=a.seed)
    try:
        traj = optimize_fourier(robot, q0, spec)
        base = single_sinusoid(robot, q0, spec)
    except (DesignLimitError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cond = trajectory_condition(robot, traj)
    cond_single = trajectory_condition(robot, base)
    print(f"cond(W_b): optimized {cond:.4g}, single sinusoid on the same limits {cond_single:.4g}")
    t = time_grid(a.n_periods / a.f_base_hz)
    q, dq, ddq = traj.evaluate(t)
    info = dict(traj.info, cond_single_sinusoid=cond_single)
    run = target_run(robot, a.name, "joint_pd", t, q, dq, ddq, q, np.asarray(a.kp), np.asarray(a.kd), pos, quat,
                     info, summary={"regressor_cond": cond}, control_rate_hz=a.control_rate_hz)
    paths, verdict = write_outputs(robot, run, a.out, lambda p: plot_joint_design(t, q, dq, robot, a.name, p),
                                   a.preflight)
    for p in paths:
        print(f"wrote {p}")
    return verdict_exit(verdict)
