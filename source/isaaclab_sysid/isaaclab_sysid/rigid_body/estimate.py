"""Least-squares estimation of base parameters with error bars.

All solvers work on a QR (or SVD) factorization of the regressor, never on the
normal equations ``W^T W``. Rows are sample-major: row ``t N + j`` is joint j.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import scipy.linalg


@dataclass
class LSResult:
    """An estimate and its statistics.

    Attributes:
        theta: (p,) estimate.
        cov: (p, p) covariance of the estimate.
        std: (p,) standard deviation.
        rel_std: (p,) 100 std / |theta| [%].
        sigma2: noise variance of the (weighted) output [output unit^2].
        sigma_joint: (N,) residual RMS per joint [output unit] (unweighted).
        cond: condition number of the (weighted) regressor (ratio of singular values).
        n_obs, n_params: rows and columns of the regressor.
        method: "ols", "wls", "iv" or "tls".
    """

    theta: np.ndarray
    cov: np.ndarray
    std: np.ndarray
    rel_std: np.ndarray
    sigma2: float
    sigma_joint: np.ndarray
    cond: float
    n_obs: int
    n_params: int
    method: str

    def summary(self) -> dict:
        """JSON-ready dict (lists instead of arrays)."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}


def _check(W: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    W = np.asarray(W, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if W.ndim != 2 or W.shape[0] != y.size:
        raise ValueError(f"regressor {W.shape} and output {y.shape} do not match")
    if W.shape[0] <= W.shape[1]:
        raise ValueError(f"need more rows than parameters; got {W.shape}")
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(y))):
        raise ValueError("regressor or output contains NaN/inf")
    return W, y


def _finish(theta, cov, W, y, r, n_dof, method, sigma2, cond) -> LSResult:
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    with np.errstate(divide="ignore"):
        rel = 100.0 * std / np.abs(theta)
    sig_j = np.sqrt(np.mean(r.reshape(-1, n_dof) ** 2, axis=0)) if n_dof else np.array([])
    return LSResult(theta, cov, std, rel, float(sigma2), sig_j, float(cond), W.shape[0], W.shape[1], method)


def _qr_solve(W: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """theta, R^-1 (p, p), cond via an economic QR."""
    Q, R = np.linalg.qr(W, mode="reduced")
    d = np.abs(np.diag(R))
    if d.min() <= 1e-12 * d.max():
        raise np.linalg.LinAlgError("regressor is rank deficient: use base parameters")
    theta = scipy.linalg.solve_triangular(R, Q.T @ y)
    Rinv = scipy.linalg.solve_triangular(R, np.eye(R.shape[0]))
    s = np.linalg.svd(R, compute_uv=False)
    return theta, Rinv, s[0] / s[-1]


def ols(W: np.ndarray, y: np.ndarray, n_dof: int) -> LSResult:
    """Ordinary least squares by QR.

    Args:
        W: (M, p) regressor, M = T N rows sample-major.
        y: (M,) measured output (torque [N m] or current [A]).
        n_dof: N, to report the residual per joint.
    """
    W, y = _check(W, y)
    theta, Rinv, cond = _qr_solve(W, y)
    r = y - W @ theta
    sigma2 = float(r @ r) / (W.shape[0] - W.shape[1])
    cov = sigma2 * Rinv @ Rinv.T
    return _finish(theta, cov, W, y, r, n_dof, "ols", sigma2, cond)


def wls(W: np.ndarray, y: np.ndarray, n_dof: int, sigma_joint: np.ndarray | None = None) -> LSResult:
    """Weighted least squares, rows of joint j scaled by 1 / sigma_j.

    ``sigma_joint`` (N,) is the noise std per joint; if None it is estimated
    from an OLS residual (two-step). The covariance accounts for the weights.
    """
    W, y = _check(W, y)
    if sigma_joint is None:
        first = ols(W, y, n_dof)
        dof_frac = (W.shape[0] - W.shape[1]) / W.shape[0]
        sigma_joint = first.sigma_joint / np.sqrt(dof_frac)
    s = np.asarray(sigma_joint, dtype=float)
    if s.shape != (n_dof,) or np.any(s <= 0):
        raise ValueError(f"sigma_joint must be ({n_dof},) positive; got {s}")
    w = np.tile(1.0 / s, W.shape[0] // n_dof)
    Ww, yw = W * w[:, None], y * w
    theta, Rinv, cond = _qr_solve(Ww, yw)
    rw = yw - Ww @ theta
    sigma2 = float(rw @ rw) / (W.shape[0] - W.shape[1])  # ~1 when sigma_joint is right
    cov = sigma2 * Rinv @ Rinv.T
    res = _finish(theta, cov, W, y, y - W @ theta, n_dof, "wls", sigma2, cond)
    return res


def instrumental_variables(W: np.ndarray, y: np.ndarray, Z: np.ndarray, n_dof: int) -> LSResult:
    """Instrumental-variable estimate for closed-loop data (Janot, Vandanjon and Gautier, IEEE TCST 2014).

    ``Z`` (M, p) is the regressor rebuilt from a signal correlated with W but not
    with the noise (the commanded trajectory, or a simulation of the previous
    estimate). With Z = Q R (QR), theta solves (Q^T W) theta = Q^T y; the
    covariance is sigma^2 (Q^T W)^-1 (Q^T W)^-T.
    """
    W, y = _check(W, y)
    Z = np.asarray(Z, dtype=float)
    if Z.shape != W.shape:
        raise ValueError(f"instrument {Z.shape} must match regressor {W.shape}")
    Q, _ = np.linalg.qr(Z, mode="reduced")
    A = Q.T @ W
    theta = np.linalg.solve(A, Q.T @ y)
    r = y - W @ theta
    sigma2 = float(r @ r) / (W.shape[0] - W.shape[1])
    Ainv = np.linalg.inv(A)
    cov = sigma2 * Ainv @ Ainv.T
    s = np.linalg.svd(W, compute_uv=False)
    return _finish(theta, cov, W, y, r, n_dof, "iv", sigma2, s[0] / s[-1])


def total_least_squares(W: np.ndarray, y: np.ndarray, n_dof: int) -> LSResult:
    """Total least squares (errors in the regressor too) by SVD of the scaled [W y].

    Columns are scaled to unit norm first so the implied error model is the same
    relative size in every column; the reported covariance is the OLS formula
    at the TLS estimate (first-order).
    """
    W, y = _check(W, y)
    C = np.column_stack([W, y])
    scale = np.linalg.norm(C, axis=0)
    scale[scale == 0] = 1.0
    _, _, Vt = np.linalg.svd(C / scale, full_matrices=False)
    v = Vt[-1]
    if abs(v[-1]) < 1e-14:
        raise np.linalg.LinAlgError("TLS solution does not exist (last singular vector has no output part)")
    theta = -(v[:-1] / v[-1]) * scale[-1] / scale[:-1]
    _, Rinv, cond = _qr_solve(W, y)
    r = y - W @ theta
    sigma2 = float(r @ r) / (W.shape[0] - W.shape[1])
    cov = sigma2 * Rinv @ Rinv.T
    return _finish(theta, cov, W, y, r, n_dof, "tls", sigma2, cond)


def estimate(
    W: np.ndarray, y: np.ndarray, n_dof: int, method: str = "ols", Z: np.ndarray | None = None
) -> LSResult:
    """Dispatch to :func:`ols`, :func:`wls`, :func:`instrumental_variables` or :func:`total_least_squares`."""
    if method == "ols":
        return ols(W, y, n_dof)
    if method == "wls":
        return wls(W, y, n_dof)
    if method == "iv":
        if Z is None:
            raise ValueError("method 'iv' needs the instrument regressor Z")
        return instrumental_variables(W, y, Z, n_dof)
    if method == "tls":
        return total_least_squares(W, y, n_dof)
    raise ValueError(f"unknown method {method!r}; choose ols, wls, iv or tls")


def ols_batch(W: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OLS of many outputs against one regressor with a single QR (Monte-Carlo checks).

    Kept without a caller in the pipeline: the coverage tests fit thousands of noise draws with it in one QR.

    Args:
        W: (M, p) regressor; Y: (M, D) D output vectors.

    Returns:
        thetas (D, p) and their standard deviations (D, p), each from its own residual variance.
    """
    W = np.asarray(W, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or Y.shape[0] != W.shape[0]:
        raise ValueError(f"Y must be ({W.shape[0]}, D); got {Y.shape}")
    Q, R = np.linalg.qr(W, mode="reduced")
    thetas = scipy.linalg.solve_triangular(R, Q.T @ Y)
    resid = Y - W @ thetas
    sigma2 = np.sum(resid**2, axis=0) / (W.shape[0] - W.shape[1])
    Rinv = scipy.linalg.solve_triangular(R, np.eye(R.shape[0]))
    d = np.sum(Rinv**2, axis=1)
    return thetas.T, np.sqrt(np.outer(sigma2, d))


def hac_covariance(
    W: np.ndarray,
    r: np.ndarray,
    n_dof: int,
    lags: int,
    segments: list[int] | None = None,
    bread: np.ndarray | None = None,
    instrument: np.ndarray | None = None,
) -> np.ndarray:
    """Newey-West (HAC) covariance of an OLS estimate whose residuals are correlated in time.

    Filtering and resampling make neighbouring samples' residuals correlated, and
    the joints' residuals differ in size; the plain ``sigma^2 (W^T W)^-1`` then
    understates the error. With the score per sample ``g_t = W_t^T r_t`` (W_t: the
    N rows of sample t), ``S = sum_{|l| <= L} (1 - |l| / (L + 1)) sum_t g_t g_{t+l}^T``
    (within each run only) and ``Cov = (W^T W)^-1 S (W^T W)^-1`` (computed via QR).

    Args:
        W: (M, p) regressor, rows sample-major; r: (M,) OLS residual.
        n_dof: N rows per sample.
        lags: L, the Bartlett window [samples].
        segments: samples per run (sum = M / N); lags never cross runs. None: one run.
        bread: (p, p) (W^T W)^-1 if already known (an OLS result's ``cov / sigma2``); else from a QR.
        instrument: (M, p) the instrument Z of an IV estimate: the scores are then
            ``Q_t^T r_t`` (Q: orthonormal basis of Z) and the bread ``(Q^T W)^-1``, so
            ``Cov = B S B^T`` is the IV sandwich; ``bread`` is ignored.
    """
    W = np.asarray(W, dtype=float)
    r = np.asarray(r, dtype=float).ravel()
    T = W.shape[0] // n_dof
    p = W.shape[1]
    B = None
    if instrument is not None:
        Q, _ = np.linalg.qr(np.asarray(instrument, dtype=float), mode="reduced")
        B = np.linalg.inv(Q.T @ W)
        G = (Q * r[:, None]).reshape(T, n_dof, p).sum(axis=1)
    else:
        G = (W * r[:, None]).reshape(T, n_dof, p).sum(axis=1)  # (T, p) scores
    segments = [T] if segments is None else list(segments)
    if sum(segments) != T:
        raise ValueError(f"segments sum to {sum(segments)} samples, regressor has {T}")
    S = np.zeros((p, p))
    start = 0
    for n in segments:
        g = G[start : start + n]
        S += g.T @ g
        for lag in range(1, min(lags, n - 1) + 1):
            C = g[lag:].T @ g[:-lag]
            S += (1.0 - lag / (lags + 1.0)) * (C + C.T)
        start += n
    if B is not None:
        cov = B @ S @ B.T
        return 0.5 * (cov + cov.T)
    if bread is None:
        _, R = np.linalg.qr(W, mode="reduced")
        Rinv = scipy.linalg.solve_triangular(R, np.eye(p))
        A = Rinv @ Rinv.T  # (W^T W)^-1
    else:
        A = np.asarray(bread, dtype=float)
    cov = A @ S @ A
    return 0.5 * (cov + cov.T)


def whitener(cov: np.ndarray) -> np.ndarray:
    """(b, b) L^-1 with |L^-1 e|^2 = e^T Cov^-1 e for a covariance (b, b): cov = V diag(w) V^T ->
    diag(w)^-1/2 V^T, eigenvalues floored at 1e-12 of the largest (a singular direction counts as
    1e12 times surer, not infinitely)."""
    w, V = np.linalg.eigh(0.5 * (cov + cov.T))
    floor = max(1e-12 * float(w.max()), 1e-300) if w.max() > 0 else 1.0
    return (V / np.sqrt(np.maximum(w, floor))).T


def conditioned_cov(cov: np.ndarray, cov_white: np.ndarray | None) -> np.ndarray:
    """(b, b) the LS HAC covariance with its eigenvalues, in the frame where ``cov_white`` is the identity,
    floored at their mean.

    The Newey-West covariance is estimated from a few effectively independent stretches of correlated
    residual (a few dozen for two 3-8 s runs at a 0.5 s window), fewer than the base parameters it
    covers, so it is nearly singular: against the white-noise covariance its eigenvalues run from about
    0.001 to 30 (Franka twin). Inverted as the LS term's weight, that is a thousand-fold confidence in
    the directions where the estimate merely has not seen its noise (on the twin the truth sat 1250-1740
    chi^2 units from the LS estimate on 48 parameters; docs/rigid_body.md). The mean eigenvalue is the
    average long-run variance ratio; no direction is taken as surer than that.

    Args:
        cov: (b, b) the HAC covariance; cov_white: (b, b) the white-noise (OLS) covariance of the same
            estimate, or None (``cov`` is returned as it is).
    """
    if cov_white is None:
        return cov
    Wo = whitener(cov_white)  # cov_white -> identity
    A = Wo @ cov @ Wo.T
    lam, U = np.linalg.eigh(0.5 * (A + A.T))
    lam = np.maximum(lam, float(np.mean(lam)))
    Wi = np.linalg.pinv(Wo)
    out = Wi @ (U * lam) @ U.T @ Wi.T
    return 0.5 * (out + out.T)
