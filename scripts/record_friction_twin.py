"""Write a warm-up session twin: runs whose joint friction falls over the session, with the hidden truth.

Example (a 20-minute warm-up; about 2 minutes to simulate):
    python scripts/record_friction_twin.py --session-s 1200 --runs 40 --out logs/friction_twin
"""

from __future__ import annotations


from isaaclab_sysid.online.cli import TwinArgs, run_twin
from isaaclab_sysid.utils.cli import parse, run_cli


def main(argv: list[str] | None = None) -> int:
    return run_twin(parse(TwinArgs, argv, renames={"--runs": "--n_runs"}))


if __name__ == "__main__":
    run_cli(main)
