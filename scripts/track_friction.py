"""Track each joint's friction over a session of runs (recursive least squares with forgetting, docs/online_friction.md).

Examples:
    # a warm-up session twin whose friction falls over 20 minutes (hidden truth), then track it
    python scripts/record_friction_twin.py --out logs/friction_twin
    python scripts/track_friction.py logs/friction_twin/session.h5 --forgetting 1.0 0.98 0.9 --readings 1 \\
        --truth logs/friction_twin/friction_truth.json --out logs/friction_track
"""

from __future__ import annotations


from isaaclab_sysid.online.cli import TrackArgs, run_track
from isaaclab_sysid.utils.cli import parse, run_cli


def main(argv: list[str] | None = None) -> int:
    return run_track(parse(TrackArgs, argv, renames={"--torque": "--torque_signal"}, positional=("--runs",)))


if __name__ == "__main__":
    run_cli(main)
