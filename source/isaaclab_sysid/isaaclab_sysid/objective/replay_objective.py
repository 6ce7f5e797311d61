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
from isaaclab_sysid.objective.loss import LossBreakdown, LossWeights, WeightedLoss, run_weights, total_loss
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.residuals import stacked_weighted_residuals
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

    def states(self, X: np.ndarray) -> list[RunRollout]:
        """:meth:`rollouts` holding only what the loss reads (q, dq, ee_pos; ``ReplayBackend.rollout_states``)."""
        return list(self.backend.rollout_states(self.space.to_batch(X), self.runs))

    def loss(self, X: np.ndarray) -> LossBreakdown:
        """The loss of P normalized candidates (P, D); a backend that scores where it simulates (``scores_loss``,
        the Ray backend, docs/cluster.md) returns the same numbers without sending every state back."""
        if self.backend.scores_loss:
            return self.backend.loss(self.space.to_batch(X), self.runs, WeightedLoss(self.weights, self.traj_weights))
        return total_loss(self.states(X), self.runs, self.weights, self.traj_weights)

    def residuals(self, X: np.ndarray) -> tuple[np.ndarray, LossBreakdown]:
        """(P, M) stacked weighted residuals and the loss of P normalized candidates, from one rollout."""
        ro = self.states(X)
        R = stacked_weighted_residuals(ro, self.runs, self.weights, self.traj_weights)
        return R, total_loss(ro, self.runs, self.weights, self.traj_weights)

    def residuals_chunked(self, X: np.ndarray, chunk: int | None) -> tuple[np.ndarray, LossBreakdown]:
        """:meth:`residuals` of P candidates in backend calls of at most ``chunk`` candidates (None: one call), the
        (P, M) residuals written into one array: the rollouts of one chunk are held at a time, not of all P
        (issue 45). A deterministic backend gives the same numbers either way (each candidate is its own env)."""
        X = np.asarray(X, dtype=float)
        P = len(X)
        if chunk is None or P <= chunk:
            return self.residuals(X)
        R, parts = None, []
        for a in range(0, P, chunk):
            Rc, lb = self.residuals(X[a: a + chunk])
            if R is None:
                R = np.empty((P, Rc.shape[1]))
            R[a: a + len(Rc)] = Rc
            parts.append(lb)
            del Rc
        return R, WeightedLoss.join(parts)
