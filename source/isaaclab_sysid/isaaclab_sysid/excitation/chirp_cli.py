"""``scripts/gen_chirp_traj.py``: a task-space linear chirp on six axes, written as a target run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from isaaclab_sysid.excitation.chirp import CHIRP_AXES, ChirpSpec, chirp
from isaaclab_sysid.excitation.cli import TaskDesignFlags, generate_task_design, start_pose


@dataclass
class ChirpOptions(TaskDesignFlags):
    """Generate a chirp excitation (defaults: the Franka tooling's fit runs at kp 200/20)."""

    band: Literal["low", "high"] = "low"
    """low: 0.1-0.7 Hz constant amplitude; high: 0.7-3 Hz tapered."""
    out: Annotated[Path, tyro.conf.arg(aliases=("--out_dir",))] = Path("logs/targets")
    """Folder the outputs are written to (created if missing; git-ignored logs/ by default, never the package's data/;
    also --out_dir)."""
    name: str | None = None
    """Run name (default chirp_<band>)."""
    robot: str = "franka_panda"
    """Robot config name or path."""
    q_init: tuple[float, ...] | None = None
    """Start posture [rad]; its EE pose is the anchor (default: Panda home)."""
    duration_s: float = 8.0
    """Sweep duration [s]."""
    f_start_hz: float | None = None
    """Sweep start [Hz] (default: the band's, 0.1 or 0.7)."""
    f_end_hz: float | None = None
    """Sweep end [Hz] (default: the band's, 0.7 or 3)."""
    amplitude: tuple[float, float, float, float, float, float] = (0.10, 0.10, 0.15, 0.50, 0.25, 0.50)
    """Amplitude per axis x, y, z [m], rx, ry, rz [rad] (world-frame rotation vector), at 0.7 Hz."""
    amp_taper_exp: float | None = None
    """p in (0.7/f)^p (default: 0 for low, 0.5 for high; use 2 at kp 500/30)."""
    ramp_up_s: float | None = None
    """Linear envelope ramp up [s] (default 2)."""
    ramp_down_s: float | None = None
    """Linear envelope ramp down [s] (default 3 low, 1 high)."""
    corner_s: float = 0.2
    """Rounding of the envelope corners so the target starts and ends at rest [s]."""
    axes: tuple[str, ...] = CHIRP_AXES
    """Active axes (x y z rx ry rz)."""
    kp_trans: float = 200.0
    """Translational stiffness [N/m] written to the sidecar."""
    kp_rot: float = 20.0
    """Rotational stiffness [N m/rad]."""
    kd_trans: float | None = None
    """Translational damping [N s/m] (default 2 sqrt(kp_trans))."""
    kd_rot: float | None = None
    """Rotational damping [N m s/rad] (default 2 sqrt(kp_rot))."""


def chirp_main(a: ChirpOptions) -> int:
    name = a.name or f"chirp_{a.band}"
    robot, q0, pos, quat = start_pose(a.robot, a.q_init)
    spec = ChirpSpec(band=a.band, f_start_hz=a.f_start_hz, f_end_hz=a.f_end_hz, duration_s=a.duration_s,
                     amplitude=a.amplitude, amp_taper_exp=a.amp_taper_exp, ramp_up_s=a.ramp_up_s,
                     ramp_down_s=a.ramp_down_s, corner_s=a.corner_s, axes=a.axes)
    if a.band == "high" and a.kp_trans >= 400 and (a.amp_taper_exp is None or a.amp_taper_exp < 2):
        print("warning: at kp >= 400 the arm follows further up the band; use --amp-taper-exp 2")
    return generate_task_design(robot, q0, lambda: chirp(spec, pos, quat), a, name,
                                (a.kp_trans, a.kp_rot, a.kd_trans, a.kd_rot), a.out)
