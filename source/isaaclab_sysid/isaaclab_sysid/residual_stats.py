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
