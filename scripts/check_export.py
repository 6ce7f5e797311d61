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
    python scripts/check_export.py --fit_dir logs/sysid_franka/2026-01-01_12-00-00
See docs/intervals_and_export.md ("Checking an export in Isaac Lab").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from isaaclab_sysid.utils.cli import parse, run_cli


@dataclass
class Args:
    """Check an exported sysid_dr_isaaclab.py in a real Isaac Lab environment (CPU Newton by default)."""

    fit_dir: str
    """Fit output folder (its config.json names the robot); the module defaults to <fit_dir>/export/sysid_dr_isaaclab.py."""
    module: str | None = None
    """The exported module to check (default: <fit_dir>/export/sysid_dr_isaaclab.py)."""
    num_envs: int = 16
    """Environments (16 or more: the spread check needs draws)."""
    resets: int = 4
    """Resets read back; every reset redraws the event terms (switched to mode 'reset' for the check)."""
    decimation: int = 2
    """Physics steps per env step of the check environment (the delay must not depend on it)."""
    sim_dt: float | None = None
    """The task's physics step [s] (default: the module's PHYSICS_DT); another step is refused with the re-export command."""
    seed: int = 0
    """Environment seed (the draws are deterministic for a seed)."""
    device: str = "cpu"
    """cpu or cuda:0."""
    out: str | None = None
    """Where to write the read-back table (markdown; default: check_export.md beside the module)."""


def main(args: Args) -> int:
    from pathlib import Path

    from isaaclab_sysid.export.check import CheckError, check_module, load_export_module, robot_of_fit
    from isaaclab_sysid.utils.atomic import atomic_write_text

    try:
        if args.num_envs < 1 or args.resets < 1 or args.decimation < 1:
            raise CheckError("--num_envs, --resets and --decimation must be >= 1")
        module = Path(args.module) if args.module else Path(args.fit_dir) / "export" / "sysid_dr_isaaclab.py"
        try:
            import isaaclab  # noqa: F401
        except ImportError:
            raise CheckError("the check needs Isaac Lab: pip install -e '.[isaaclab]'") from None
        mod = load_export_module(module)
        robot = robot_of_fit(args.fit_dir)
        report = check_module(mod, robot, args.num_envs, args.resets, args.decimation, args.sim_dt, args.seed, args.device)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = report.table()
    out = Path(args.out) if args.out else module.with_name("check_export.md")
    atomic_write_text(out, f"# Read-back of {module}\n\n{table}\n")
    print(table)
    for f in report.failures:
        print(f"FAIL: {f}", file=sys.stderr)
    for r in report.rows:
        for f in r.failures:
            print(f"FAIL {r.label}: {f}", file=sys.stderr)
    print(f"{'PASS' if report.ok else 'FAIL'}: wrote {out}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
