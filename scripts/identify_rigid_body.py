"""Identify rigid-body parameters by least squares and seed the simulator's nominal inertials.

Reads real logs (the UR10e CSV format of shared/data/ur10e, or runs in the project's
run format with --runs, e.g. Franka logs: output signal tau_J), preprocesses
them (time-axis correction, zero-phase Butterworth, resampling, central
differences), builds the Pinocchio joint-torque regressor with armature,
viscous, Coulomb and offset columns, reduces it to base parameters (pivoted QR),
solves least squares by QR with covariance and condition number, audits M(q)
over all poses, reconstructs physically consistent link parameters by SDP, and
predicts every held-out run.

Writes into --out: rb_params.json, nominal_inertials.json (for
Robot.with_inertials and the fit's --nominal FILE), report.md and plots/*.png.

Examples:
    python scripts/identify_rigid_body.py --out logs/rigid_body/ur10e
    python scripts/identify_rigid_body.py --identify-gains --max-corrupt-head-rows 25 \
        --payload-heldout ur-20_02_19_15harm50secLoad.csv --out logs/rigid_body/ur10e_gains
    python scripts/identify_rigid_body.py --runs a.csv b.csv --heldout c.csv --out logs/rigid_body/franka
"""

from __future__ import annotations



from isaaclab_sysid.rigid_body.cli import IdentifyArgs, main_from_args
from isaaclab_sysid.utils.cli import parse, run_cli


def main(argv: list[str] | None = None) -> int:
    return main_from_args(parse(IdentifyArgs, argv, renames={"--signal": "--torque_signal"}))


if __name__ == "__main__":
    run_cli(main)
