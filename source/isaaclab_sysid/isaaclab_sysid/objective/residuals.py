"""The weighted replay residuals: one definition for the refinement, the intervals and anything new.

For run r (T samples, N joints) and candidate p, the residual channels are

    sqrt(w_run w_q  / (T N)) s_q  (q_sim  - q_real)     (T, N)
    sqrt(w_run w_dq / (T N)) s_dq (qd_sim - qd_real)    (T, N)
    sqrt(w_run w_x  / (T 3)) (x_sim  - x_real)     (T, 3)

so that the sum of their squares is the fit's loss
(:func:`~isaaclab_sysid.objective.loss.total_loss`) for a candidate that did not diverge (``s_q``, ``s_dq``: the
per-joint channel scales of :class:`~isaaclab_sysid.objective.loss.LossWeights`, 1 by default).
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
from isaaclab_sysid.objective.loss import LossWeights, run_weights
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


def channel_terms(ro, run, w_run: float, weights):
    """Per channel of one run (q, qd, EE position): (coefficient, simulated (P, T, n), real (T, n), n), the
    coefficient making the sum of squared weighted residuals the run's share of the loss."""
    T, N = run.q.shape
    return ((math.sqrt(w_run * weights.w_q / (T * N)) * weights.scale("q"), ro.q, run.q, N),
            (math.sqrt(w_run * weights.w_dq / (T * N)) * weights.scale("dq"), ro.dq, run.dq, N),
            (math.sqrt(w_run * weights.w_x / (T * 3)), ro.ee_pos, run.ee_pos, 3))


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


def stacked_size(runs: Sequence[Run]) -> int:
    """M, the length of the stacked residual vector of ``runs``: per run T samples x (2N + 3) channels (q, qd, EE
    position)."""
    return sum(run.q.shape[0] * (2 * run.q.shape[1] + 3) for run in runs)


def stacked_weighted_residuals(
    rollouts: Sequence[RunRollout],
    runs: Sequence[Run],
    weights: LossWeights = LossWeights(),
    traj_weights: Sequence[float] | None = None,
) -> np.ndarray:
    """(P, M) stacked weighted residuals (the layout and bits of ``stacked_residuals(weighted_residuals(...))``),
    written run by run and channel by channel into one array: no per-run blocks and flat copies held beside it
    (issue 45: a long run's stencil held the rollouts, the blocks, their flat copy and the stacked one at once)."""
    if len(rollouts) != len(runs):
        raise ValueError(f"{len(rollouts)} rollouts for {len(runs)} runs")
    tw = run_weights(traj_weights, len(runs))
    P = rollouts[0].q.shape[0] if rollouts else 0
    R = np.empty((P, stacked_size(runs)))
    off = 0
    for ro, run, w in zip(rollouts, runs, tw):
        T, N = run.q.shape
        w_run = float(w)
        for coef, sim, real, n in channel_terms(ro, run, w_run, weights):
            R[:, off: off + T * n] = (coef * (sim - real[None])).reshape(P, -1)
            off += T * n
    return R


def stacked_residuals(res: Sequence[RunResiduals]) -> tuple[np.ndarray, np.ndarray]:
    """(P, M) residuals of every run side by side (squared norm = the total loss), and divergence (P,)."""
    R = np.concatenate([r.flat() for r in res], axis=1)
    div = np.any(np.stack([r.diverged for r in res]), axis=0)
    return R, div


def per_sample_blocks(r: np.ndarray, shapes: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """The flat residual vector ``r`` (M,) of :func:`stacked_residuals` (one candidate) cut back into one (T, C) block
    per run (C = 2N + 3: q, dq, x side by side); ``shapes``: each run's (T, N)."""
    out, off = [], 0
    for T, N in shapes:
        q = r[off: off + T * N].reshape(T, N)
        dq = r[off + T * N: off + 2 * T * N].reshape(T, N)
        x = r[off + 2 * T * N: off + 2 * T * N + 3 * T].reshape(T, 3)
        off += T * (2 * N + 3)
        out.append(np.concatenate([q, dq, x], axis=1))
    if off != r.shape[-1]:
        raise ValueError(f"{r.shape[-1]} residuals for runs of {off}")
    return out


def autocorr_time(blocks: Sequence[np.ndarray]) -> float:
    """Energy-weighted integrated autocorrelation time [samples] of residual blocks (per run, (T, C)), by FFT.

    tau = 1 + 2 sum_k rho_k over the initial positive sequence (the first non-positive lag ends it), the
    autocovariance summed over runs and channels: the estimate of ``intervals/curvature.integrated_autocorr_time``
    in O(T log T) per channel instead of O(T^2)."""
    num = None
    for b in blocks:
        T = b.shape[0]
        if T < 2:
            continue
        x = b - b.mean(axis=0, keepdims=True)
        n = 1 << int(np.ceil(np.log2(2 * T)))
        f = np.fft.rfft(x, n=n, axis=0)
        ac = np.fft.irfft(np.abs(f) ** 2, n=n, axis=0)[: T // 2 + 1].sum(axis=1)
        num = ac if num is None else num[: min(len(num), len(ac))] + ac[: min(len(num), len(ac))]
    if num is None or not num[0] > 0:
        return 1.0
    rho = num / num[0]
    nonpos = np.nonzero(rho[1:] <= 0.0)[0]
    stop = 1 + (int(nonpos[0]) if len(nonpos) else len(rho) - 1)
    return float(1.0 + 2.0 * np.sum(rho[1:stop]))


def effective_samples(r: np.ndarray, shapes: Sequence[tuple[int, int]], n_params: int = 0) -> float:
    """How many independent residuals ``r`` (M,) is worth: (M - p) / tau, tau its integrated autocorrelation time
    (:func:`autocorr_time`, at least 1). The likelihood-ratio statistic of a loss gap dL at loss L is then
    dL / (L / n_eff): the delay union's (intervals/delay_union.py) with kappa = tau, the scale the refinement's
    per-sample tests read (fit/refine.py)."""
    tau = max(1.0, autocorr_time(per_sample_blocks(r, shapes)))
    return max(1.0, (r.shape[-1] - n_params) / tau)
