"""``scripts/gen_excitation_traj.py``: the multiband task-space excitation (3 tones per axis, fades), written as a
target run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from isaaclab_sysid.excitation.cli import TaskDesignFlags, generate_task_design, start_pose
from isaaclab_sysid.excitation.multiband import MULTIBAND_AXES, MultibandSpec, multiband


@dataclass
class MultibandOptions(TaskDesignFlags):
    """Generate a multiband excitation (defaults: the Franka tooling's held-out validation run)."""

    out: Annotated[Path, tyro.conf.arg(aliases=("--out_dir",))] = Path("logs/targets")
    """Folder the outputs are written to (created if missing; git-ignored logs/ by default, never the package's data/;
    also --out_dir)."""
    name: str = "multiband"
    """Run name (file stem)."""
    robot: str = "franka_panda"
    """Robot config name (configs/robots/<robot>.toml) or path."""
    q_init: tuple[float, ...] | None = None
    """Start posture [rad], one per joint; its EE pose is the anchor (default: Panda home)."""
    duration_s: float = 12.0
    """Total duration including fades [s]."""
    fade_s: float = 2.0
    """Half-cosine fade in and out [s]."""
    amplitude: tuple[float, float, float, float, float, float] = (0.06, 0.06, 0.06, 0.20, 0.15, 0.25)
    """Base amplitude per axis: x, y, z [m], tilt about world x, tilt about world y, base yaw [rad]."""
    axes: tuple[str, ...] = MULTIBAND_AXES
    """Active axes (x y z tilt_x tilt_y yaw); e.g. --axes x y z for translation only."""
    corner_hz: float = 0.35
    """Tones above this frequency get amplitude x corner/f [Hz]."""
    seed: int = 0
    """Seed of the tone frequencies and phases."""
    kp_trans: float = 500.0
    """Translational stiffness [N/m] written to the sidecar (500 for the Franka tooling's validation run)."""
    kp_rot: float = 30.0
    """Rotational stiffness [N m/rad]."""
    kd_trans: float | None = None
    """Translational damping [N s/m] (default 2 sqrt(kp_trans))."""
    kd_rot: float | None = None
    """Rotational damping [N m s/rad] (default 2 sqrt(kp_rot))."""


def multiband_main(a: MultibandOptions) -> int:
    robot, q0, pos, quat = start_pose(a.robot, a.q_init)
    spec = MultibandSpec(duration_s=a.duration_s, fade_s=a.fade_s, amplitude=a.amplitude, axes=a.axes,
                         corner_hz=a.corner_hz, seed=a.seed)
    return generate_task_design(robot, q0, lambda: multiband(spec, pos, quat), a, a.name,
                                (a.kp_trans, a.kp_rot, a.kd_trans, a.kd_rot), a.out)
