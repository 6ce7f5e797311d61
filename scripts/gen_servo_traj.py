#!/usr/bin/env python
"""Excitation for a servo arm recorded with LeRobot (SO-101 / SO-100): a joint-space multisine at the recorder's
frame rate plus one saturating step per joint, and its pre-flight (limits, torque, which parameters trade off).

Writes <out>/<name>.csv + .json (a 30 fps joint_pd target run: the commands in radians about each joint's range
middle, gains unstated) and <name>_preflight.json; exits 1 when pre-flight FAILs. See docs/servo_arms.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro


@dataclass
class Args:
    """Generate a servo arm's excitation and check it."""

    out: Path = Path("logs/targets")
    """Folder the outputs are written to (created if missing)."""
    name: str = "servo_multisine"
    """Run name (file stem)."""
    robot: str = "so101"
    """Robot config name or path."""
    duration_s: float = 20.0
    """Length of the multisine [s] (the steps follow it)."""
    fps: float = 30.0
    """Frame rate of the commands [Hz] (LeRobot records at 30)."""
    f_min_hz: float = 0.1
    """Lowest sine [Hz]."""
    f_max_hz: float = 6.0
    """Highest sine [Hz] (below fps / 2)."""
    n_sines: int = 6
    """Sines per joint (each joint its own frequencies)."""
    range_frac: float = 0.3
    """Peak excursion as a fraction of each joint's half range."""
    speed_max_rad_s: float = 1.5
    """Peak commanded joint speed [rad/s]."""
    step_rad: float = 0.3
    """Saturating step per joint after the multisine [rad] (0: none)."""
    step_hold_s: float = 0.8
    """Hold after each step edge [s]."""
    seed: int = 0
    """Phase seed."""


def main(args: Args) -> int:
    from isaaclab_sysid.excitation.servo_design import ServoDesignSpec, write_servo_design
    from isaaclab_sysid.robots import load_robot

    spec = ServoDesignSpec(duration_s=args.duration_s, fps=args.fps, f_min_hz=args.f_min_hz, f_max_hz=args.f_max_hz,
                           n_sines=args.n_sines, range_frac=args.range_frac, speed_max_rad_s=args.speed_max_rad_s,
                           step_rad=args.step_rad, step_hold_s=args.step_hold_s, seed=args.seed)
    _, pf, paths = write_servo_design(load_robot(args.robot), spec, args.out, args.name)
    print(pf.format())
    for p in paths:
        print(f"wrote {p}")
    return 0 if pf.safe else 1


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args, use_underscores=True)))
