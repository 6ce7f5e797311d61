"""The weighted replay residuals: one definition for the refinement, the intervals and anything new.

For run r (T samples, N joints) and candidate p, the residual channels are

    sqrt(w_run w_q  / (T N)) s_q  (q_sim  - q_real)     (T, N)
    sqrt(w_run w_dq / (T N)) s_dq (qd_sim - qd_real)    (T, N)
    sqrt(w_run w_x  / (T 3)) (x_sim  - x_real)     (T, 3)

so that the sum of their squares is the fit's loss
(:func:`~isaaclab_sysid.fit.loss.total_loss`) for a candidate that did not diverge (``s_q``, ``s_dq``: the
per-joint channel scales of :class:`~isaaclab_sysid.fit.loss.LossWeights`, 1 by default).
:class:`RunResiduals` holds one run's three blocks and gives the two layouts the
consumers need: per sample (P, T, C) with C = 2N + 3 (the intervals' time-series
statistics) and flat (P, M) (the Levenberg-Marquardt least squares).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.loss import LossWeights, run_weights
from isaaclab_sysid.sim.interface import RunRollout


@dataclass(frozen=True)
class RunResiduals:
    """Weighted residuals of P candidates on one run.

    Attributes:
        q, dq: (P, T, N) weighted joint position [rad] and velocity [rad/s] residuals.
        x: (P, T, 3) weighted EE position residuals [m].
        diverged: (P,) the candidate diverged on this run or produced a non-finite residual.
    """

    q: np.ndarray
    dq: np.ndarray
    x: np.ndarray
    diverged: np.ndarray

    def per_sample(self) -> np.ndarray:
        """(P, T, C) residuals, channels q, dq, x side by side."""
        return np.concatenate([self.q, self.dq, self.x], axis=2)

    def flat(self) -> np.ndarray:
        """(P, M) residuals, blocks q, dq, x one after the other (M = T (2N + 3))."""
        P = self.q.shape[0]
        return np.concatenate([self.q.reshape(P, -1), self.dq.reshape(P, -1), self.x.reshape(P, -1)], axis=1)


def run_residuals(ro: RunRollout, run: Run, weights: LossWeights = LossWeights(), w_run: float = 1.0) -> RunResiduals:
    """The weighted residuals (see module docstring) of a rollout's P candidates on one run."""
    T, N = run.q.shape
    q = math.sqrt(w_run * weights.w_q / (T * N)) * weights.scale("q") * (ro.q - run.q[None])
    dq = math.sqrt(w_run * weights.w_dq / (T * N)) * weights.scale("dq") * (ro.dq - run.dq[None])
    x = math.sqrt(w_run * weights.w_x / (T * 3)) * (ro.ee_pos - run.ee_pos[None])
    finite = np.all(np.isfinite(q), axis=(1, 2)) & np.all(np.isfinite(dq), axis=(1, 2)) & np.all(np.isfinite(x), axis=(1, 2))
    return RunResiduals(q, dq, x, np.asarray(ro.diverged, dtype=bool) | ~finite)


def weighted_residuals(
    rollouts: Sequence[RunRollout],
    runs: Sequence[Run],
    weights: LossWeights = LossWeights(),
    traj_weights: Sequence[float] | None = None,
) -> list[RunResiduals]:
    """One :class:`RunResiduals` per run, with the per-run loss weights (default 1 each)."""
    if len(rollouts) != len(runs):
        raise ValueError(f"{len(rollouts)} rollouts for {len(runs)} runs")
    tw = run_weights(traj_weights, len(runs))
    return [run_residuals(ro, run, weights, float(w)) for ro, run, w in zip(rollouts, runs, tw)]


def stacked_residuals(res: Sequence[RunResiduals]) -> tuple[np.ndarray, np.ndarray]:
    """(P, M) residuals of every run side by side (squared norm = the total loss), and divergence (P,)."""
    R = np.concatenate([r.flat() for r in res], axis=1)
    div = np.any(np.stack([r.diverged for r in res]), axis=0)
    return R, div
