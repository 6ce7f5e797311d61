"""Write a starting point for the replay fit from a rigid-body identification.

The armature, Coulomb friction and viscous friction per joint come from the
SDP-reconstructed standard set in an ``rb_params.json`` (``identify_rigid_body.py``), and the
per-joint torque offsets (``--fit_groups ...,torque_offset`` of ``--replay torque``) from its
offset column when the identification had one.
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


from isaaclab_sysid.rigid_body.seed_cli import SeedArgs, main_from_args
from isaaclab_sysid.utils.cli import parse, run_cli


def main(argv: list[str] | None = None) -> int:
    return main_from_args(parse(SeedArgs, argv))


if __name__ == "__main__":
    run_cli(main)
