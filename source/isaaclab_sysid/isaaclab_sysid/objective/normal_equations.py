"""The Levenberg-Marquardt normal equations of a finite-difference stencil, accumulated run by run and window by
window (issue 45: bounded memory on long recordings).

The refinement's step needs only A = J^T J (p, p), g = J^T r (p,) and the loss at the stencil's point; the dense
Jacobian J (M, p), M = sum over runs of T (2N + 3) samples, is needed only by the Broyden updates
(``RefineSettings.jacobian_reuse``). :func:`stencil_normal_equations` forms A and g from the stencil's rollouts one
run and one window of ``window`` samples at a time, with the residual definition of
:func:`~isaaclab_sysid.objective.residuals.stacked_weighted_residuals` (same coefficients, same channels), so the (P, M)
residual matrix and the (M, p) Jacobian are never held: beside the backend's rollouts, the memory is one window's
(P, window, 2N + 3) block and the point's own residual vector (M,) (the effective sample count reads it). The sums are
the dense ones in another order: equal to rounding (``tests/test_normal_equations.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.jacobian import Stencil
from isaaclab_sysid.objective.loss import LossWeights, run_weights
from isaaclab_sysid.objective.residuals import channel_terms, stacked_size
from isaaclab_sysid.sim.interface import RunRollout

#: samples per accumulation window (a window's block is P x WINDOW x (2N + 3) floats: 1.3 MB for a 22-candidate
#: stencil of a 7-joint arm)
WINDOW = 512


@dataclass
class NormalEquations:
    """The normal equations of one stencil.

    Attributes:
        A: (p, p) J^T J [residual^2 per normalized unit^2].
        g: (p,) J^T r at the stencil's point.
        r: (M,) the point's stacked weighted residuals (the layout of ``stacked_weighted_residuals``).
    """

    A: np.ndarray
    g: np.ndarray
    r: np.ndarray


def stencil_normal_equations(rollouts: Sequence[RunRollout], runs: Sequence[Run], st: Stencil,
                             diverged: np.ndarray, weights: LossWeights = LossWeights(),
                             traj_weights: Sequence[float] | None = None, offset: int = 0,
                             window: int = WINDOW) -> NormalEquations:
    """A = J^T J and g = J^T r of the stencil ``st`` whose K candidates are rows ``offset .. offset + K`` of
    ``rollouts`` (one :class:`RunRollout` per run, (P, T, .) each), accumulated run by run and window by window.

    Args:
        diverged: (P,) rows whose rollout diverged: a column whose difference reads one is 0 (the refinement's
            ``on_diverged="zero"``: unobservable, not moved).
        window: samples per window.
    Returns:
        The normal equations; the Jacobian is that of ``Stencil.jacobian`` (per normalized unit).
    """
    if len(rollouts) != len(runs):
        raise ValueError(f"{len(rollouts)} rollouts for {len(runs)} runs")
    tw = run_weights(traj_weights, len(runs))
    p = len(st.index)
    plus, minus = st.plus + offset, st.minus + offset
    bad = np.asarray(diverged, dtype=bool)[plus] | np.asarray(diverged, dtype=bool)[minus]
    rows = np.concatenate([[offset], plus, minus])
    h = st.h[:, None]
    A = np.zeros((p, p))
    g = np.zeros(p)
    r = np.empty(stacked_size(runs))
    off = 0
    for ro, run, w in zip(rollouts, runs, tw):
        T, N = run.q.shape
        w_run = float(w)
        for coef, sim, real, n in channel_terms(ro, run, w_run, weights):
            for a in range(0, T, window):
                b = min(T, a + window)
                blk = (coef * (sim[rows, a:b] - real[None, a:b])).reshape(len(rows), -1)
                r0 = blk[0]
                with np.errstate(all="ignore"):
                    D = (blk[1: 1 + p] - blk[1 + p:]) / h
                D[bad] = 0.0
                A += D @ D.T
                g += D @ r0
                r[off + a * n: off + b * n] = r0
            off += T * n
    return NormalEquations(A, g, r)
