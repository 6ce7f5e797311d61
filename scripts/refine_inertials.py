"""Refine the link inertials through the replay of the measured closed loop (CLIE: closed-loop input error).

After the rigid-body identification (LS, SDP, audit) and the joint fit:

    python scripts/identify_rigid_body.py --runs a.csv b.csv --heldout c.csv --out logs/rigid_body/franka
    python scripts/refine_inertials.py --rb-params logs/rigid_body/franka/rb_params.json \
        --runs a.csv b.csv --heldout c.csv --joint-fit logs/fit/sysid_best_params.json --out logs/clie/franka

writes clie.json, nominal_inertials.json (the accepted set, for the fit's --nominal) and
fit_seed.json (its --x0). See docs/rigid_body.md, "Closed-loop refinement (CLIE)".
"""

from __future__ import annotations


from isaaclab_sysid.rigid_body.clie import RefineArgs, main_from_args
from isaaclab_sysid.utils.cli import parse, run_cli


def main(argv: list[str] | None = None) -> int:
    return main_from_args(parse(RefineArgs, argv))


if __name__ == "__main__":
    run_cli(main)
