"""Intervals of a torque replay that carry the torque noise: the logged input's noise propagated to the numbers.

A torque replay is driven by the logged torque, so that torque's noise moves the fitted numbers: the
fitted value's error is, to first order, linear in the noise realization (errors in variables). The
window-cluster sandwich of ``intervals/curvature.py`` cannot measure it on short runs: its meat has
rank at most the number of windows (15 windows of a 6 s run for 29 numbers), and on the torque twin at
0.05-0.1 N m of torque noise 15-19 of 28 truths fell inside their 95 % intervals, the misses 3-6
standard errors off and the same multiple of the error bar when the same noise was scaled (the error
scales with the noise: a variance the intervals missed, not a bias). docs/replay.md.

What this module does at the optimum x0, on the fit's torque runs (the analogue of
``intervals/process_noise.py`` for controller runs), a parametric bootstrap of the linearized fit:

1. the noise levels, measured from the logs: per run and joint, the logged torque's white part
   (:func:`~isaaclab_sysid.objective.torque_noise.white_noise_std`, per logged row: at rows slower than
   1 kHz it is interpolated onto the ticks as the log's own noise is) and the white noise of the
   measured q and qd (``mean(diff(e)^2) / 2`` of the residual inside windows);
2. ``K`` replicates: x0's own rollout (its states the stand-in truth) measured with fresh white noise
   of those levels, and replayed by x0 from those measured start states with the torque + fresh torque
   noise; each replicate's residuals give a Gauss-Newton estimate ``-(J^T J)^+ J^T r_k``;
3. their second moment is the parameter covariance the torque noise and the start states' noise
   cause; ``intervals/combine.py`` widens (never narrows) the curvature and bootstrap intervals to it.

The torque noise measured from first differences counts every white part of the logged torque (a
stiff loop's real reaction to its encoder noise too), so the intervals err wide, not narrow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights, run_weights
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.residuals import run_residuals
from isaaclab_sysid.objective.torque_noise import white_noise_std
from isaaclab_sysid.intervals.curvature import Sensitivity
from isaaclab_sysid.sim.interface import ReplayBackend, RunRollout

#: replicates of the propagation
N_REPLICATES = 64
#: replicates per batched rollout (each a copy of every run)
CHUNK = 8


@dataclasses.dataclass
class InputNoise:
    """What the propagation used and gave.

    Attributes:
        torque_std: (N,) the logged torque's white noise per joint [N m per row], pooled over the runs.
        q_std, dq_std: (N,) the measured states' white noise per joint [rad], [rad/s], pooled.
        std: (p,) standard errors of the continuous numbers (decoded units); labels: their labels.
        replicates: K.
    """

    torque_std: np.ndarray
    q_std: np.ndarray
    dq_std: np.ndarray
    std: np.ndarray
    labels: list[str]
    replicates: int


def _within_white(e: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """(N,) white-noise std of a (T, N) residual from first differences inside windows (no reset counted)."""
    d = np.concatenate([np.diff(e[a:b], axis=0) for a, b in windows if b - a > 1], axis=0)
    return np.sqrt(0.5 * np.nanmean(d**2, axis=0))


def _replicate(run: Run, base: RunRollout, tau_std: np.ndarray, q_std: np.ndarray, dq_std: np.ndarray,
               rng: np.random.Generator) -> Run:
    """A replicate log: x0's states as the truth, measured with white noise, and the torque with fresh noise."""
    q = base.q[0] + q_std[None, :] * rng.standard_normal(base.q[0].shape)
    dq = base.dq[0] + dq_std[None, :] * rng.standard_normal(base.dq[0].shape)
    tau = run.tau + tau_std[None, :] * rng.standard_normal(run.tau.shape)
    return dataclasses.replace(run, q=q, dq=dq, ee_pos=base.ee_pos[0], tau=tau)


def input_noise_covariance(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, runs: Sequence[Run],
                           sens: Sensitivity, weights: LossWeights, traj_weights: Sequence[float] | None,
                           replicates: int = N_REPLICATES, seed: int = 0) -> InputNoise:
    """Steps 1-3 of the module docstring on torque runs ``runs`` (the fit's), at the optimum ``x0`` (D,)."""
    tw = run_weights(traj_weights, len(runs))
    batch = space.to_batch(np.asarray([x0]))
    base = backend.rollout(batch, list(runs))
    wins = backend.windows_of(list(runs))
    tau_std = [white_noise_std(r.tau) for r in runs]
    q_std = [_within_white(b.q[0] - r.q, w) for b, r, w in zip(base, runs, wins)]
    dq_std = [_within_white(b.dq[0] - r.dq, w) for b, r, w in zip(base, runs, wins)]
    Hinv = sens.gauss_newton_inverse()
    rng = np.random.default_rng(seed + 7)
    est = []
    done = 0
    while done < replicates:
        k = min(CHUNK, replicates - done)
        reps = [_replicate(r, b, ts, qs, ds, rng) for _ in range(k)
                for r, b, ts, qs, ds in zip(runs, base, tau_std, q_std, dq_std)]
        outs = backend.rollout(batch, reps)
        n = len(runs)
        for i in range(k):
            res = [run_residuals(outs[i * n + j], reps[i * n + j], weights, float(tw[j])).per_sample()[0]
                   for j in range(n)]
            est.append(-Hinv @ sens.score_sum([np.nan_to_num(r) for r in res]))
        done += k
    S = np.asarray(est)
    cov = S.T @ S / len(S)

    def pool(v):
        return np.sqrt(np.mean(np.square(v), axis=0))

    return InputNoise(pool(tau_std), pool(q_std), pool(dq_std), np.sqrt(np.clip(np.diag(cov), 0.0, None)),
                      list(sens.labels), replicates)
