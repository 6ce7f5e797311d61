"""Residual statistics shared by the least-squares stages: the variance factor of residuals correlated in time.

Filtering a log makes neighbouring residuals correlated, so ``sigma^2 (W^T W)^-1`` understates
the spread of an estimate whose regressor varies slowly compared with that correlation. The
factor here is the residual's integrated autocorrelation ``1 + 2 sum_l rho_l`` (the ratio of
the variance of a mean of correlated samples to that of independent ones), with the sum
stopped at the first lag whose autocorrelation falls below its own noise level ``2 / sqrt(T)``.
"""

from __future__ import annotations

import numpy as np


def autocorr_inflation(r: np.ndarray, n_dof: int, segments: list[int], max_lag: int) -> float:
    """Variance factor ``1 + 2 sum_l rho_l`` of residuals (M,) = (T N,) correlated in time (pooled over
    joints, never across runs), summed while ``rho_l > 2 / sqrt(T)`` up to ``max_lag`` samples."""
    R = np.asarray(r, dtype=float).reshape(-1, n_dof)
    parts, start = [], 0
    for n in segments:
        seg = R[start : start + n]
        parts.append(seg - seg.mean(axis=0))
        start += n
    var = sum(float(np.sum(p * p)) for p in parts)
    if var <= 0:
        return 1.0
    floor = 2.0 / np.sqrt(R.shape[0])
    total = 0.0
    for lag in range(1, max_lag + 1):
        rho = sum(float(np.sum(p[lag:] * p[:-lag])) for p in parts if p.shape[0] > lag) / var
        if rho < floor:
            break
        total += rho
    return 1.0 + 2.0 * total


def geyer_inflation(r: np.ndarray, n_dof: int, segments: list[int], max_lag: int) -> float:
    """Variance factor ``1 + 2 sum_l rho_l`` of residuals (M,) = (T N,) correlated in time, by Geyer's initial
    positive sequence (Geyer 1992, "Practical Markov chain Monte Carlo", Statist. Sci. 7(4)).

    The autocovariance is pooled over the joints and the ``segments`` (runs, never across them: each segment's
    mean removed). Lags are summed in pairs ``G_m = gamma_{2m} + gamma_{2m+1}`` while ``G_m > 0`` (for a
    stationary reversible process the pair sums are positive; the first non-positive one marks where noise takes
    over), up to ``max_lag`` samples. Unlike :func:`autocorr_inflation`'s ``2 / sqrt(T)`` cutoff, a slow part that is
    a few per cent of the variance at each of many lags is counted (issue 46: the torque noise acting on an arm left
    rho 0.026-0.035 over 200 lags, a factor of about 10 the cutoff reads as 1). Returns at least 1."""
    R = np.asarray(r, dtype=float).reshape(-1, n_dof)
    acov = np.zeros(max(1, int(max_lag)) + 2)
    start = 0
    for n in segments:
        seg = R[start : start + n]
        start += n
        if seg.shape[0] < 2:
            continue
        p = seg - seg.mean(axis=0)
        size = 1 << int(np.ceil(np.log2(2 * p.shape[0])))
        f = np.fft.rfft(p, n=size, axis=0)
        ac = np.fft.irfft(np.sum(f * np.conj(f), axis=1).real, n=size)[: p.shape[0]]  # sum over joints, lag 0..T-1
        m = min(len(acov), len(ac))
        acov[:m] += ac[:m]
    if acov[0] <= 0:
        return 1.0
    total = 0.0  # sum of the pair sums, lag 0 included
    for m in range((len(acov)) // 2):
        pair = acov[2 * m] + acov[2 * m + 1]
        if pair <= 0:
            break
        total += pair
    return max(1.0, float(2.0 * total / acov[0] - 1.0))
