#!/usr/bin/env python
"""The fit for every arm (a Franka, a UR, a servo arm or bench): the same command as the documented
``scripts/sysid_franka_osc.py`` (its docstring and ``--help`` say what it does); both call
``isaaclab_sysid.jobs.pipeline.fit_cli``.

Example (bundled runs, CPU; --export adds the intervals and the Isaac Lab export on the fit's folder):
    python scripts/fit.py --runs data/real_runs/twin_chirp_low_fit.csv data/real_runs/twin_joint_multisine_fit.csv \\
        --heldout data/real_runs/twin_heldout_multiband.csv --export
"""

from __future__ import annotations

from isaaclab_sysid.jobs.pipeline import fit_cli
from isaaclab_sysid.utils.cli import run_cli

if __name__ == "__main__":
    run_cli(fit_cli)
