"""The verdict every job runs after a fit: the residual diagnostics, then the static-friction score test.

Written once here for the fit job (:mod:`~isaaclab_sysid.jobs.fit_job`) and the twin study
(:mod:`~isaaclab_sysid.jobs.twin_study`): :func:`~isaaclab_sysid.evaluate.adequacy.assess` judges the fitted
replay's residuals (docs/fit.md, "Model adequacy"), and
:func:`~isaaclab_sysid.evaluate.friction_score.static_friction_test` asks whether the fit runs want a static
friction the model omits (a verdict it fires on is ``misfit``). Only the fit runs enter the score test. A torque
replay's verdict also gets the residual's shapes (:func:`torque_diagnostics`: an offset, a lag or sensor filter,
torque noise), from the fit runs too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.evaluate.adequacy import assess
from isaaclab_sysid.evaluate.friction_score import StaticFrictionTest, static_friction_test
from isaaclab_sysid.evaluate.noise_floor import NoiseFloor
from isaaclab_sysid.evaluate.torque_residual import TorqueResidualDiagnostics, diagnose, torque_noise_floor
from isaaclab_sysid.objective.adequacy_record import Adequacy
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.objective.torque_noise import torque_noise
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import ReplayBackend, RunRollout
from isaaclab_sysid.sim.shooting import backend_windows


def assess_fit(backend: ReplayBackend, result: FitResult, runs: Sequence[Run], rollouts: Sequence[RunRollout],
               n_fit: int, robot: Robot, floor: NoiseFloor | float | None, age_max_ms: Sequence[float],
               friction_test: StaticFrictionTest | None = None) -> Adequacy:
    """The adequacy verdict of ``result`` with the score test folded in.

    Args:
        backend: the fit's backend (the score test replays the fit runs with it).
        result: the fitted result (its best vector, loss and trajectory weights).
        runs: fit runs first, then held-out runs; ``rollouts``: their evaluation rollouts (candidate 1 = fitted).
        n_fit: how many of ``runs`` are fit runs.
        robot: the arm (EE Jacobian of the self-motion diagnostic).
        floor: the noise floor (measured, given [mrad], or None: estimated from the residual).
        age_max_ms: per run, the largest modelled state age [ms] (0 at 1 kHz).
        friction_test: the score test already run at this optimum (``--fit_groups auto`` ran it to choose the
            model); None: run it here.
    """
    adequacy = assess(list(runs), list(rollouts), n_fit, robot, floor, age_max_ms=list(age_max_ms),
                      torque_diagnostics=torque_diagnostics(backend, result, runs[:n_fit], rollouts[:n_fit], robot),
                      at_bounds=[h.describe() for h in result.at_bounds()],
                      fitted_groups=result.space.group_names)
    if friction_test is None:
        friction_test = static_friction_test(backend, result.space, result.best_x, list(runs[:n_fit]),
                                             result.loss_weights, result.traj_weights)
    return adequacy.with_static_friction_test(friction_test)


def torque_diagnostics(backend: ReplayBackend, result: FitResult, runs: Sequence[Run], rollouts: Sequence[RunRollout],
                       robot: Robot) -> TorqueResidualDiagnostics | None:
    """The fit runs' residual shapes of a torque replay (:func:`~isaaclab_sysid.evaluate.torque_residual.diagnose`:
    offset, lag or filter, torque noise) at the fitted candidate; None when the runs are controller runs."""
    windows = backend_windows(backend, runs)
    if windows is None or not all(w is not None for w in windows):
        return None
    arm = result.values.get("armature")
    sigma = torque_noise(runs)
    floor = torque_noise_floor(backend, result.space.to_batch(np.asarray([result.best_x])), runs, sigma)
    return diagnose(runs, rollouts, windows, robot, sigma, floor, None if arm is None else np.asarray(arm))
