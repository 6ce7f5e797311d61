"""The replay objective: a parameter space, a backend, the fit runs and the loss weights, scored in one call.

Every search stage (CMA-ES, the refinement) and the intervals evaluate candidates
through one :class:`ReplayObjective`, so the rollout, the loss and the weighted
residuals are computed the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.loss import LossBreakdown, LossWeights, WeightedLoss, run_weights, total_loss
from isaaclab_sysid.fit.param_space import ParamSpace
from isaaclab_sysid.fit.residuals import stacked_residuals, weighted_residuals
from isaaclab_sysid.sim.interface import ReplayBackend, RunRollout


@dataclass
class ReplayObjective:
    """What a candidate is scored against.

    Attributes:
        space: the parameter space (normalized vectors decode through it).
        backend: the replay backend.
        runs: the fit runs.
        weights: the MSE term weights.
        traj_weights: (R,) per-run loss weights (None: 1 each; checked against the runs).
    """

    space: ParamSpace
    backend: ReplayBackend
    runs: Sequence[Run]
    weights: LossWeights = field(default_factory=LossWeights)
    traj_weights: np.ndarray | Sequence[float] | None = None

    def __post_init__(self) -> None:
        self.runs = list(self.runs)
        self.traj_weights = run_weights(self.traj_weights, len(self.runs))

    @property
    def run_names(self) -> list[str]:
        return [r.name for r in self.runs]

    def rollouts(self, X: np.ndarray) -> list[RunRollout]:
        """Roll out P normalized candidates (P, D) on every run in one backend call."""
        return list(self.backend.rollout(self.space.to_batch(X), self.runs))

    def loss(self, X: np.ndarray) -> LossBreakdown:
        """The loss of P normalized candidates (P, D); a backend that scores where it simulates (``scores_loss``,
        the Ray backend, docs/cluster.md) returns the same numbers without sending every state back."""
        if self.backend.scores_loss:
            return self.backend.loss(self.space.to_batch(X), self.runs, WeightedLoss(self.weights, self.traj_weights))
        return total_loss(self.rollouts(X), self.runs, self.weights, self.traj_weights)

    def residuals(self, X: np.ndarray) -> tuple[np.ndarray, LossBreakdown]:
        """(P, M) stacked weighted residuals and the loss of P normalized candidates, from one rollout."""
        ro = self.rollouts(X)
        R, _ = stacked_residuals(weighted_residuals(ro, self.runs, self.weights, self.traj_weights))
        return R, total_loss(ro, self.runs, self.weights, self.traj_weights)
