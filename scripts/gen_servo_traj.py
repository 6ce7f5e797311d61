#!/usr/bin/env python
"""Excitation for a servo arm recorded with LeRobot (SO-101 / SO-100): a joint-space multisine at the recorder's
frame rate plus one saturating step per joint, and its pre-flight (limits, torque, which parameters trade off).

Writes <out>/<name>.csv + .json (a 30 fps joint_pd target run: the commands in radians about each joint's range
middle, gains unstated) and <name>_preflight.json; exits 1 when pre-flight FAILs. See docs/servo_arms.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tyro

from isaaclab_sysid.excitation.servo_design import ServoDesignSpec
from isaaclab_sysid.utils.cli import parse, run_cli


@dataclass
class Args:
    """Generate a servo arm's excitation and check it."""

    out: Path = Path("logs/targets")
    """Folder the outputs are written to (created if missing)."""
    name: str = "servo_multisine"
    """Run name (file stem)."""
    robot: str = "so101"
    """Robot config name or path."""
    design: tyro.conf.OmitArgPrefixes[ServoDesignSpec] = field(default_factory=ServoDesignSpec)
    """The design (its fields are the flags below)."""


def main(args: Args) -> int:
    from isaaclab_sysid.excitation.servo_design import write_servo_design
    from isaaclab_sysid.robots import load_robot

    _, pf, paths = write_servo_design(load_robot(args.robot), args.design, args.out, args.name)
    print(pf.format())
    for p in paths:
        print(f"wrote {p}")
    return 0 if pf.safe else 1


if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
