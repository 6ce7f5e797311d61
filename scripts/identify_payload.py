"""Payload after a grasp: mass, centre of mass and (with motion) inertia from joint torques (docs/payload.md).

Examples:
    # poses that make mass and centre separable (prints the condition number), as a target run
    python scripts/identify_payload.py design --n-poses 4 --out logs/payload/holds_target.csv
    # a twin with a hidden payload (loaded + reference runs at the same poses)
    python scripts/identify_payload.py twin --out logs/payload_twin
    # identify, flag a wrong part, export the upper-end mass for a lift check
    python scripts/identify_payload.py fit --loaded logs/payload_twin/payload_holds_loaded.csv \\
        --reference logs/payload_twin/payload_holds_reference.csv --expected-mass 0.8 --mass-tolerance 0.1 \\
        --policy payload_mass:upper --use "lift check" --out logs/payload
"""

from __future__ import annotations

from typing import Annotated

import tyro

from isaaclab_sysid.payload.cli import DesignArgs, FitArgs, TwinArgs, run_design, run_fit, run_twin
from isaaclab_sysid.utils.cli import parse, run_cli

Command = (
    Annotated[DesignArgs, tyro.conf.subcommand("design")]
    | Annotated[FitArgs, tyro.conf.subcommand("fit")]
    | Annotated[TwinArgs, tyro.conf.subcommand("twin")]
)


def main(argv: list[str] | None = None) -> int:
    args = parse(Command, argv, renames={"--signal": "--torque_signal"})
    if isinstance(args, DesignArgs):
        return run_design(args)
    if isinstance(args, FitArgs):
        return run_fit(args)
    return run_twin(args)


if __name__ == "__main__":
    run_cli(main)
