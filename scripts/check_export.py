#!/usr/bin/env python
"""Apply an exported Isaac Lab module in an Isaac Lab environment and read the numbers back from the simulation.

Builds a kit-less manager-based environment on Newton (a minimal scene of the fit's
arm from the project's own USD, the exported actuator and event terms), resets it
--resets times over --num_envs envs and reads each env's joint armature, friction,
viscous damping and actuator delay back from the simulation (a position servo's export,
e.g. the SO-101's: also the actuator's kp, kd and effort limit). Passes (exit 0) when
the nominal values equal the fit, every randomized number lies inside its exported
range and spreads over it, and the measured actuator latency equals the exported
delay in physics steps; prints the read-back table and writes it to --out.

Example:
    python scripts/check_export.py --fit_dir logs/sysid/2026-01-01_12-00-00
See docs/intervals_and_export.md ("Checking an export in Isaac Lab").
"""

from __future__ import annotations

from isaaclab_sysid.export.check_cli import CheckOptions as Args
from isaaclab_sysid.export.check_cli import check_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
