"""``scripts/check_export.py``: an exported Isaac Lab module applied in a kit-less Isaac Lab environment and its numbers
read back from the simulation (export/check.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass



@dataclass
class CheckOptions:
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


def check_main(args: CheckOptions) -> int:
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
