#!/usr/bin/env python
"""Excitation for a servo arm recorded with LeRobot (SO-101 / SO-100): a joint-space multisine at the recorder's
frame rate plus one saturating step per joint, and its pre-flight (limits, torque, which parameters trade off).

Writes <out>/<name>.csv + .json (a 30 fps joint_pd target run: the commands in radians about each joint's range
middle, gains unstated) and <name>_preflight.json; exits 1 when pre-flight FAILs. See docs/servo_arms.md.
"""

from __future__ import annotations

from isaaclab_sysid.excitation.servo_cli import ServoTrajOptions as Args
from isaaclab_sysid.excitation.servo_cli import servo_traj_main as main
from isaaclab_sysid.excitation.servo_cli import ServoDesignSpec  # noqa: F401 (tests build the options with it)
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
