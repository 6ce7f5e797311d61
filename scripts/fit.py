#!/usr/bin/env python
"""Fit per-joint armature, friction, viscous damping and the actuator delay by CMA-ES replay.

The fit for every arm (a Franka, a UR, a servo arm or bench): the same command as the documented
``scripts/sysid_franka_osc.py``; both call ``isaaclab_sysid.jobs.pipeline.fit_cli``.

Replays every recorded run (--runs) in a population of simulated arms under
the run's own controller and gains, and moves the parameters to minimize

    sum_runs w_run * (w_q MSE(q) + w_dq MSE(qd) + w_x MSE(x_ee)).

CMA-ES finds the basin; a Levenberg-Marquardt refinement (--refine_iter) then
polishes the best candidate and its neighbouring delays to the noise floor.
Then scores the best parameters against the nominal ones on the fit runs and on
held-out runs (--heldout), and writes a report. With --eval_params it skips
the optimizer and only scores a given parameter file.

Outputs go to <log_dir>/<timestamp>/ (default logs/sysid/<timestamp>/): config.json, progress.csv,
checkpoint_<iter>.json, sysid_best_params.json, eval_result.json,
eval_rollout_<run>.csv, PNG plots and report.md.

Example (bundled runs, CPU):
    python scripts/fit.py \\
        --runs data/real_runs/twin_chirp_low_fit.csv --runs data/real_runs/twin_joint_multisine_fit.csv \\
        --heldout data/real_runs/twin_heldout_multiband.csv --num_envs 16 --max_iter 8
"""

from __future__ import annotations

from isaaclab_sysid.jobs.pipeline import fit_cli
from isaaclab_sysid.utils.cli import run_cli

if __name__ == "__main__":
    run_cli(fit_cli)
