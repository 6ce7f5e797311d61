"""The replay loss: weighted MSE between simulated and recorded states, summed over runs.

    L_run = w_q MSE(s_q (q_sim - q_real)) + w_dq MSE(s_dq (qd_sim - qd_real)) + w_x MSE(x_sim - x_real)
    L     = sum_runs w_run L_run

Each MSE is the mean over samples and components ([rad^2], [(rad/s)^2], [m^2]). ``s_q``, ``s_dq`` are per-joint
channel scales (dimensionless, 1 by default; ``--channel_scale rms``: :func:`channel_scales`).
A candidate whose simulation diverged (or whose loss is not finite) gets the
finite :data:`DIVERGENCE_PENALTY` on that run instead, so CMA-ES ranks it last
without ever seeing NaN or inf.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import RunRollout

#: Loss of one run for a diverged candidate (finite; larger than any sane MSE sum).
DIVERGENCE_PENALTY = 1.0e4


@dataclass(frozen=True)
class LossWeights:
    """Weights of the three MSE terms (defaults from the original Franka fit), and optional per-joint scales of the
    q and qd channels: (N,) dimensionless factors on each joint's error (None: 1 each; see :func:`channel_scales`)."""

    w_q: float = 1.0
    w_dq: float = 0.1
    w_x: float = 0.01
    q_scale: tuple[float, ...] | None = None
    dq_scale: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("q_scale", "dq_scale"):
            v = getattr(self, name)
            if v is not None:
                v = tuple(float(x) for x in v)
                if not all(np.isfinite(v)) or min(v) <= 0:
                    raise ValueError(f"LossWeights.{name} must be finite and > 0, got {v}")
                object.__setattr__(self, name, v)

    def scale(self, name: str) -> np.ndarray | float:
        """The (N,) scale of channel ``q`` or ``dq`` (1.0 when none is set)."""
        v = getattr(self, f"{name}_scale")
        return 1.0 if v is None else np.asarray(v, dtype=float)


#: the largest ratio between two joints' channel scales (a joint that barely moves would otherwise weigh its noise)
MAX_SCALE_RATIO = 10.0


def channel_scales(runs: Sequence[Run], mode: str = "none") -> dict[str, tuple[float, ...] | None]:
    """Per-joint channel scales of the fit runs: ``none`` (every joint 1), or ``rms`` (mujoco.sysid's choice: each
    joint's q and qd channel divided by that joint's measured RMS motion over the runs, q about its mean; capped so no
    joint weighs more than :data:`MAX_SCALE_RATIO` x another, and normalized to a mean square of 1 so the loss keeps
    its size). Returns ``{"q_scale": (N,), "dq_scale": (N,)}`` (None each for ``none``)."""
    if mode == "none":
        return {"q_scale": None, "dq_scale": None}
    if mode != "rms":
        raise ValueError(f"unknown channel scaling '{mode}' (none, rms)")
    q = np.concatenate([r.q - np.mean(r.q, axis=0) for r in runs])
    dq = np.concatenate([r.dq for r in runs])
    out = {}
    for name, x in (("q_scale", q), ("dq_scale", dq)):
        rms = np.sqrt(np.mean(x**2, axis=0))
        rms = np.maximum(rms, np.max(rms) / MAX_SCALE_RATIO)
        s = 1.0 / rms
        out[name] = tuple(float(v) for v in s / np.sqrt(np.mean(s**2)))
    return out


def _scaled(e: np.ndarray, scale: tuple[float, ...] | None) -> np.ndarray:
    """``e`` (..., N) times the per-joint ``scale`` (no pass over ``e`` when there is none)."""
    return e if scale is None else e * np.asarray(scale)


def _mean_square(sim: np.ndarray, real: np.ndarray, scale: tuple[float, ...] | None) -> np.ndarray:
    """(P,) mean over samples and joints of the scaled squared error of ``sim`` (P, T, n) against ``real`` (T, n),
    one candidate at a time: the temporaries are one candidate's (T, n), not the (P, T, n) of a whole stencil (issue
    45: three of those beside the rollouts set a 96 s fit's peak). The bits of the mean over axes (1, 2)."""
    out = np.empty(sim.shape[0])
    for p in range(sim.shape[0]):
        out[p] = np.mean(_scaled(sim[p] - real, scale) ** 2)
    return out


def run_loss(rollout: RunRollout, run: Run, weights: LossWeights = LossWeights()) -> tuple[np.ndarray, np.ndarray]:
    """Loss (P,) of each candidate on one run, and its divergence flags (P,).

    A diverged or non-finite candidate scores :data:`DIVERGENCE_PENALTY`; finite
    losses are capped at the penalty so a diverged candidate never ranks better.
    """
    with np.errstate(all="ignore"):
        e_q = _mean_square(rollout.q, run.q, weights.q_scale)
        e_dq = _mean_square(rollout.dq, run.dq, weights.dq_scale)
        e_x = _mean_square(rollout.ee_pos, run.ee_pos, None)
        loss = weights.w_q * e_q + weights.w_dq * e_dq + weights.w_x * e_x
    diverged = np.asarray(rollout.diverged, dtype=bool) | ~np.isfinite(loss)
    loss = np.where(diverged, DIVERGENCE_PENALTY, np.minimum(loss, DIVERGENCE_PENALTY))
    return loss.astype(float), diverged


@dataclass
class LossBreakdown:
    """Loss of P candidates on R runs.

    Attributes:
        total: (P,) sum over runs of w_run * L_run.
        contrib: (R, P) w_run * L_run.
        per_run: (R, P) unweighted L_run.
        diverged: (P,) the candidate diverged on at least one run.
    """

    total: np.ndarray
    contrib: np.ndarray
    per_run: np.ndarray
    diverged: np.ndarray


def run_weights(traj_weights: Sequence[float] | None, n_runs: int) -> np.ndarray:
    """(n_runs,) loss weight per run (dimensionless): ``traj_weights``, or 1 each when None.

    Raises:
        ValueError: the count does not match the runs.
    """
    tw = np.ones(n_runs) if traj_weights is None else np.asarray(traj_weights, dtype=float)
    if tw.shape != (n_runs,):
        raise ValueError(f"{tw.size} trajectory weights for {n_runs} runs")
    return tw


def total_loss(
    rollouts: Sequence[RunRollout],
    runs: Sequence[Run],
    weights: LossWeights = LossWeights(),
    traj_weights: Sequence[float] | None = None,
) -> LossBreakdown:
    """Sum the per-run losses with the run weights (default 1 each)."""
    if len(rollouts) != len(runs):
        raise ValueError(f"{len(rollouts)} rollouts for {len(runs)} runs")
    tw = run_weights(traj_weights, len(runs))
    per_run, div = [], []
    for ro, run in zip(rollouts, runs):
        l, d = run_loss(ro, run, weights)
        per_run.append(l)
        div.append(d)
    per = np.stack(per_run)
    contrib = tw[:, None] * per
    return LossBreakdown(total=contrib.sum(axis=0), contrib=contrib, per_run=per, diverged=np.any(np.stack(div), axis=0))



@dataclass(frozen=True)
class WeightedLoss:
    """:func:`total_loss` with fixed weights as a picklable function of (rollouts, runs): the
    :class:`~isaaclab_sysid.sim.interface.LossScore` a backend that scores where it simulates (the Ray backend's
    workers) runs on each slice of candidates; :meth:`join` puts the slices' breakdowns back in candidate order."""

    weights: LossWeights
    traj_weights: Sequence[float] | None = None

    def __call__(self, rollouts: Sequence[RunRollout], runs: Sequence[Run]) -> LossBreakdown:
        return total_loss(rollouts, runs, self.weights, self.traj_weights)

    @staticmethod
    def join(parts: Sequence[LossBreakdown]) -> LossBreakdown:
        """The slices' loss breakdowns joined in candidate order."""
        return LossBreakdown(total=np.concatenate([p.total for p in parts]),
                             contrib=np.concatenate([p.contrib for p in parts], axis=1),
                             per_run=np.concatenate([p.per_run for p in parts], axis=1),
                             diverged=np.concatenate([p.diverged for p in parts]))
