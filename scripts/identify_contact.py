"""Contact stiffness from a quasi-static press and damping from impacts; MuJoCo and Isaac Lab parameters (docs/contact.md).

Examples:
    # a MuJoCo twin with a table contact (hidden truth): two presses and three impacts
    python scripts/identify_contact.py twin --out logs/contact_twin
    # identify, and export the upper-end stiffness for a force limit
    python scripts/identify_contact.py fit --runs logs/contact_twin/*.csv --policy contact_stiffness:upper \\
        --use "force limit" --out logs/contact
"""

from __future__ import annotations

from typing import Annotated

import tyro

from isaaclab_sysid.contact.cli import FitArgs, TwinArgs, run_fit, run_twin
from isaaclab_sysid.utils.cli import parse, run_cli

Command = Annotated[FitArgs, tyro.conf.subcommand("fit")] | Annotated[TwinArgs, tyro.conf.subcommand("twin")]


def main(argv: list[str] | None = None) -> int:
    args = parse(Command, argv)
    return run_fit(args) if isinstance(args, FitArgs) else run_twin(args)


if __name__ == "__main__":
    run_cli(main)
