"""Intervals from the spread across runs, and from a moving-block bootstrap, at no extra rollout cost.

Both reuse the :class:`~isaaclab_sysid.intervals.curvature.Sensitivity` of the
curvature method (the Jacobian and residuals of every run at the optimum), so
each "refit" is one Gauss-Newton step from the joint optimum rather than a new
CMA-ES run:

* ``per_run``: theta_r = theta_hat - (J_r^T J_r)^+ J_r^T r_r, the optimum of run r
  alone to first order. With R runs, the standard error of the joint estimate
  is the spread of theta_r over sqrt(R). With the usual 2-3 runs this spread
  has 1-2 degrees of freedom: it is reported as a cross-check (runs that
  disagree beyond their curvature intervals point at model-structure error),
  not used for export.
* ``bootstrap``: the per-sample score contributions g_t of every run are cut
  into blocks of L samples (L = the HAC bandwidth, from the residual
  autocorrelation), resampled with replacement (circular moving-block
  bootstrap, runs resampled independently), and each resample gives
  theta* = theta_hat - (J^T J)^+ (sum g* - sum g). The intervals are the
  percentile intervals of theta*. Blocks keep the autocorrelation that a
  sample-wise bootstrap would destroy.
"""

from __future__ import annotations

import math

import numpy as np

from isaaclab_sysid.intervals.common import IntervalSet, gaussian_intervals, order_intervals, z_of
from isaaclab_sysid.intervals.curvature import Sensitivity, integrated_autocorr_time, pinv_normalized


#: block sums gathered at a time by :func:`block_bootstrap_intervals` (floats: 32 MB)
BOOT_GATHER = 4_000_000


def per_run_intervals(sens: Sensitivity, level: float = 0.95, rtol: float = 1e-9) -> IntervalSet:
    """Spread of the one-step per-run optima (see module docstring)."""
    W = sens.space.widths()[sens.cont]
    thetas, warns = [], []
    for name, J, r in zip(sens.run_names, sens.J, sens.r):
        H = np.einsum("tcp,tcq->pq", J, J)
        pi = pinv_normalized(H, W, rtol)
        g = np.einsum("tcp,tc->p", J, r)
        th = sens.value[sens.cont] - pi.Hinv @ g
        th[pi.null_entries] = np.nan
        if pi.null_entries:
            warns.append(f"per_run: run {name} alone cannot pin down "
                         + ", ".join(sens.labels[k] for k in pi.null_entries))
        thetas.append(th)
    T = np.asarray(thetas)
    R = T.shape[0]
    if R < 2:
        cov = np.full((len(sens.cont),) * 2, np.nan)
        warns.append("per_run: one run only; no spread across runs")
    else:
        bad = np.any(~np.isfinite(T), axis=0)  # an entry some run cannot pin down has no spread
        dev = np.where(bad, 0.0, T - np.mean(np.where(bad, 0.0, T), axis=0))
        cov = np.einsum("rp,rq->pq", dev, dev) / (R - 1) / R
        cov[bad, :] = np.nan
        cov[:, bad] = np.nan
    ivs, w2 = gaussian_intervals(sens.space, sens.value, cov, sens.cont, level, "per_run")
    diag = {"n_runs": R, "per_run_values": {n: t.tolist() for n, t in zip(sens.run_names, T)},
            "note": "one Gauss-Newton step per run from the joint optimum; spread / sqrt(R)"}
    return IntervalSet("per_run", level, order_intervals(sens.space, ivs), warns + w2, diag, cov, list(sens.labels))


def block_bootstrap_intervals(
    sens: Sensitivity,
    level: float = 0.95,
    n_boot: int = 1000,
    block: int | None = None,
    seed: int = 0,
    rtol: float = 1e-9,
) -> IntervalSet:
    """Circular moving-block bootstrap of the score contributions (see module docstring)."""
    W = sens.space.widths()[sens.cont]
    pi = pinv_normalized(sens.hessian(), W, rtol)
    tau = integrated_autocorr_time(sens.r)
    scores = [np.nan_to_num(s) for s in sens.scores()]
    Tmin = min(s.shape[0] for s in scores)
    L = int(block if block is not None else min(max(1, math.ceil(2 * tau)), max(1, Tmin // 4)))
    rng = np.random.default_rng(seed)
    G = sum(s.sum(axis=0) for s in scores)
    draws = np.zeros((n_boot, len(sens.cont)))
    for s in scores:
        T = s.shape[0]
        nb = math.ceil(T / L)
        # circular block sums: B[i] = sum of s[i : i+L] (wrapping)
        cs = np.vstack([s, s[: L - 1]]) if L > 1 else s
        csum = np.vstack([np.zeros((1, s.shape[1])), np.cumsum(cs, axis=0)])
        B = csum[L : L + T] - csum[:T]
        starts = rng.integers(0, T, size=(n_boot, nb))
        # the resamples' block sums a few resamples at a time: B[starts] whole is (n_boot, T / L, p), a GB on a long
        # run with short blocks (issue 45); each resample's sum is the same either way
        step = max(1, BOOT_GATHER // max(nb * s.shape[1], 1))
        for a in range(0, n_boot, step):
            draws[a: a + step] += B[starts[a: a + step]].sum(axis=1) * (T / (nb * L))
    dtheta = -(draws - G) @ pi.Hinv.T
    th = sens.value[sens.cont][None] + dtheta
    cov = np.cov(dtheta, rowvar=False)
    ivs, warns = gaussian_intervals(sens.space, sens.value, cov, sens.cont, level, "bootstrap",
                                    [int(sens.cont[k]) for k in pi.null_entries], sens.fd_notes)
    a = (1 - level) / 2
    qlo, qhi = np.quantile(th, a, axis=0), np.quantile(th, 1 - a, axis=0)
    for k, iv in enumerate(ivs):
        if iv.bounded:  # percentile interval, within the same clipping
            lo_b = iv.lower if iv.value - z_of(level) * iv.std < iv.lower else -np.inf
            hi_b = iv.upper if iv.value + z_of(level) * iv.std > iv.upper else np.inf
            iv.lower = float(max(qlo[k], lo_b)) if np.isfinite(lo_b) else float(qlo[k])
            iv.upper = float(min(qhi[k], hi_b)) if np.isfinite(hi_b) else float(qhi[k])
            iv.lower, iv.upper = min(iv.lower, iv.value), max(iv.upper, iv.value)
    diag = {"n_boot": n_boot, "block_samples": L, "autocorr_time_samples": tau, "seed": seed}
    return IntervalSet("bootstrap", level, order_intervals(sens.space, ivs), warns, diag, cov, list(sens.labels))
