"""``scripts/gen_servo_traj.py``: a servo arm's 30 fps multisine with saturating steps and its pre-flight."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tyro

from isaaclab_sysid.excitation.servo_design import ServoDesignSpec


@dataclass
class ServoTrajOptions:
    """Generate a servo arm's excitation and check it."""

    out: Path = Path("logs/targets")
    """Folder the outputs are written to (created if missing)."""
    name: str = "servo_multisine"
    """Run name (file stem)."""
    robot: str = "so101"
    """Robot config name or path."""
    design: tyro.conf.OmitArgPrefixes[ServoDesignSpec] = field(default_factory=ServoDesignSpec)
    """The design (its fields are the flags below)."""


def servo_traj_main(args: ServoTrajOptions) -> int:
    from isaaclab_sysid.excitation.servo_design import write_servo_design
    from isaaclab_sysid.robots import load_robot

    _, pf, paths = write_servo_design(load_robot(args.robot), args.design, args.out, args.name)
    print(pf.format())
    for p in paths:
        print(f"wrote {p}")
    return 0 if pf.safe else 1
