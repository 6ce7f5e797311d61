#!/usr/bin/env python
"""Multiband task-space excitation: three stationary tones per axis under a half-cosine fade.

Writes <out-dir>/<name>.csv + .json (a 1 kHz target run in the run format, setpoints
held at 50 Hz), <name>.png (the design) and, with --preflight, the pre-flight report.
See docs/excitation.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from isaaclab_sysid.excitation.cli import build_task_run, start_pose, write_outputs
from isaaclab_sysid.excitation.limits import DesignLimitError, DesignLimits
from isaaclab_sysid.excitation.multiband import MULTIBAND_AXES, MultibandSpec, multiband
from isaaclab_sysid.excitation.plots import plot_task_design


@dataclass
class Args:
    """Generate a multiband excitation (defaults: seed 004's held-out validation run)."""

    out_dir: Path = Path("data/targets")
    """Folder the target run, plot and report are written to (created if missing)."""
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
    """Translational stiffness [N/m] written to the sidecar (seed 004: 500 for the validation run)."""
    kp_rot: float = 30.0
    """Rotational stiffness [N m/rad]."""
    kd_trans: float | None = None
    """Translational damping [N s/m] (default 2 sqrt(kp_trans))."""
    kd_rot: float | None = None
    """Rotational damping [N m s/rad] (default 2 sqrt(kp_rot))."""
    control_rate_hz: float = 50.0
    """Setpoint rate [Hz]; rows are at 1 kHz."""
    max_translation_m: float = 0.3
    """Refuse a design whose target leaves the anchor by more than this [m]."""
    max_rotation_rad: float = 1.0
    """Refuse a design whose target rotates from the anchor by more than this [rad]."""
    max_ee_speed_m_s: float | None = None
    """Refuse a reference faster than this [m/s] (default: unchecked)."""
    max_ee_acc_m_s2: float | None = None
    """Refuse a reference accelerating more than this [m/s^2] (default: unchecked)."""
    joint_margin_rad: float = 0.05
    """Refuse a joint reference closer than this to a joint limit [rad]."""
    preflight: bool = False
    """Also replay the design and write the pre-flight report (needs the MuJoCo backend)."""


def main(a: Args) -> int:
    robot, q0, pos, quat = start_pose(a.robot, a.q_init)
    spec = MultibandSpec(duration_s=a.duration_s, fade_s=a.fade_s, amplitude=a.amplitude, axes=a.axes,
                         corner_hz=a.corner_hz, seed=a.seed)
    limits = DesignLimits(joint_margin_rad=a.joint_margin_rad, max_translation_m=a.max_translation_m,
                          max_rotation_rad=a.max_rotation_rad, max_ee_speed_m_s=a.max_ee_speed_m_s,
                          max_ee_acc_m_s2=a.max_ee_acc_m_s2)
    try:
        design = multiband(spec, pos, quat)
        run, jref, peaks = build_task_run(robot, q0, design, limits, a.name, a.kp_trans, a.kp_rot, a.kd_trans, a.kd_rot)
    except (DesignLimitError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    paths = write_outputs(robot, run, a.out_dir, lambda p: plot_task_design(design, jref, robot, p), a.preflight, peaks)
    print(f"peaks: EE {peaks['ee_speed_m_s']:.3f} m/s, {peaks['ee_acc_m_s2']:.2f} m/s^2")
    for p in paths:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
