"""The command behind ``scripts/seed_fit.py``: a start point for the replay fit from ``rb_params.json``.

The armature, Coulomb friction and viscous friction per joint come from the
SDP-reconstructed standard set (:mod:`.fit_seed`), and the torque offsets (the torque
replay's ``torque_offset`` group) from its offset column when it has one; the actuator delay only on
request (``--delay N`` or ``--delay-runs FILE...``). A bad flag or file stops with
one line ``error: ...`` and exit status 2 (:func:`main_from_args`).
"""

from __future__ import annotations

import sys

from dataclasses import dataclass
from pathlib import Path

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.rigid_body.fit_seed import FitSeed, build_seed, write_seed
from isaaclab_sysid.robots.identified import RbParams
from isaaclab_sysid.rigid_body.options import require
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.config import RobotConfigError


@dataclass
class SeedArgs:
    """Seed the CMA-ES replay fit from rb_params.json (armature, friction, viscous, torque offsets; delay on request)."""

    rb_params: Path
    """rb_params.json written by identify_rigid_body.py (its joint terms seed the fit)."""
    out: Path = Path("logs/fit_seed.json")
    """Seed file (best_params_decoded layout) for sysid_franka_osc.py --x0."""
    robot: str | None = None
    """Robot config name or path (default: the robot named in rb_params.json)."""
    delay: int | None = None
    """Actuator delay to seed [1 kHz ticks]; default: not seeded (the fit starts mid-range)."""
    delay_runs: tuple[Path, ...] = ()
    """Runs (run format) whose commanded torque does not react to the response (step or open-loop
    tests): the delay is the lag maximizing the cross-correlation of d(tau) and d(tau_J)."""
    max_lag_ticks: int = 20
    """Largest delay tried by the cross-correlation [1 kHz ticks]."""


def check_flags(args: SeedArgs) -> None:
    """Refuse bad values before any file is read (:class:`~.options.RigidBodyError` naming the flag)."""
    require(args.delay is None or args.delay >= 0, f"--delay must be >= 0 ticks; got {args.delay}")
    require(args.delay is None or not args.delay_runs, "give --delay or --delay-runs, not both")
    require(args.max_lag_ticks >= 1, f"--max-lag-ticks must be >= 1; got {args.max_lag_ticks}")


def _robot_of(path: Path) -> str:
    """The robot an ``rb_params.json`` was identified on (RbParamsError, a ValueError, when it names none)."""
    rb = RbParams.read(path)
    rb.need("robot")
    return rb.robot


def main_from_args(args: SeedArgs) -> int:
    """Build and write the seed, print where each value came from; errors: one line, exit status 2."""
    try:
        check_flags(args)
        robot_name = args.robot or _robot_of(args.rb_params)
        robot = load_robot(robot_name)
        runs = [read_run(p) for p in args.delay_runs]
        seed = build_seed(args.rb_params, robot.joint_names, runs, args.max_lag_ticks, args.delay)
    except (OSError, ValueError, KeyError, RunFormatError, RobotConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = write_seed(args.out, seed)
    print_seed(seed, robot.name, path)
    return 0


def print_seed(seed: FitSeed, robot_name: str, path: Path) -> None:
    """Every seeded value with its source, what was not seeded or clipped, and the next command."""
    print(f"seed for the replay fit ({robot_name}):")
    for key, v in seed.values.items():
        shown = str(v) if key == "motor_delay_steps" else " ".join(f"{a:.4g}" for a in v)
        print(f"  {key:>17}: {shown}   <- {seed.sources[key]}")
    if "torque_offset" not in seed.values:
        print("      torque_offset: not seeded (rb_params.json has no offset column)")
    if "motor_delay_steps" not in seed.values:
        print("  motor_delay_steps: not seeded (the fit starts mid-range; --delay or --delay-runs to seed it)")
    if seed.clipped:
        print("  clipped negative values to 0: " + ", ".join(seed.clipped))
    print(f"wrote {path}; start the fit with: python scripts/sysid_franka_osc.py --x0 {path}")
    if "torque_offset" in seed.values:
        print("  a torque replay (--replay torque) with --nominal applies these offsets only when it fits them: add "
              "torque_offset to --fit_groups (auto,torque_offset with the default friction choice; the LS's gravity is its inertials and its offsets together; the "
              "inertials alone leave a constant bias where an offset is large, issue 43)")
