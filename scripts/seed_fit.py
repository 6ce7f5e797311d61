"""Write a starting point for the replay fit from a rigid-body identification.

The armature, Coulomb friction and viscous friction per joint come from the
SDP-reconstructed standard set in an ``rb_params.json`` (``identify_rigid_body.py``).
The actuator delay is seeded only on request: ``--delay N`` [1 kHz ticks], or
``--delay-runs FILE...`` for a cross-correlation of commanded and measured torque
on runs whose command does not react to the response (steps, open loop; on
closed-loop runs the peak sits at lag 0 whatever the delay, see docs/rigid_body.md).

Then start the fit there:

    python scripts/identify_rigid_body.py --runs a.csv b.csv --out logs/rigid_body/franka
    python scripts/seed_fit.py --rb-params logs/rigid_body/franka/rb_params.json --out logs/seed.json
    python scripts/sysid_franka_osc.py --x0 logs/seed.json --nominal logs/rigid_body/franka/nominal_inertials.json
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro
from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.rigid_body.fit_seed import build_seed, write_seed
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.config import RobotConfigError
from isaaclab_sysid.utils.json_io import read_json


@dataclass
class Args:
    """Seed the CMA-ES replay fit from rb_params.json (armature, friction, viscous; delay on request)."""

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


def main(args: Args) -> int:
    try:
        robot_name = args.robot or read_json(args.rb_params, "rigid-body parameters")["robot"]
        robot = load_robot(robot_name)
        runs = [read_run(p) for p in args.delay_runs]
        seed = build_seed(args.rb_params, robot.joint_names, runs, args.max_lag_ticks, args.delay)
    except (OSError, ValueError, KeyError, RunFormatError, RobotConfigError) as exc:
        print(f"error: {exc}")
        return 2
    path = write_seed(args.out, seed)
    print(f"seed for the replay fit ({robot.name}):")
    for key, v in seed.values.items():
        shown = str(v) if key == "motor_delay_steps" else " ".join(f"{a:.4g}" for a in v)
        print(f"  {key:>17}: {shown}   <- {seed.sources[key]}")
    if "motor_delay_steps" not in seed.values:
        print("  motor_delay_steps: not seeded (the fit starts mid-range; --delay or --delay-runs to seed it)")
    if seed.clipped:
        print("  clipped negative values to 0: " + ", ".join(seed.clipped))
    print(f"wrote {path}; start the fit with: python scripts/sysid_franka_osc.py --x0 {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
