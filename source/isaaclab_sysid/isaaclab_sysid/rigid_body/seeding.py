"""Starting values for the CMA-ES replay fit.

- :func:`estimate_delay`: the actuator delay as the lag maximizing the
  cross-correlation of command and response.
- :func:`friction_from_sweeps`: Coulomb and viscous friction of one joint from
  constant-velocity sweeps in both directions (the classic friction map: one
  steady speed per sweep, both signs),
  with error bars from the least-squares covariance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.rigid_body.estimate import ols


@dataclass(frozen=True)
class DelayEstimate:
    """Attributes: lag in samples, lag [s], normalized correlation at the lag (per lag array too)."""

    lag_samples: int
    lag_s: float
    peak_correlation: float
    correlation: np.ndarray


def estimate_delay(
    command: np.ndarray, response: np.ndarray, dt: float, max_lag: int = 20, differentiate: bool = False
) -> DelayEstimate:
    """Lag d in [0, max_lag] samples maximizing corr(command[t], response[t + d]).

    Args:
        command: (T,) or (T, N) command (e.g. target or commanded torque), evenly sampled.
        response: same shape, the response (e.g. measured position or torque).
        dt: sample interval [s].
        max_lag: largest lag tried [samples].
        differentiate: correlate first differences (removes drifts and ramps).
    Channels are mean-removed, scaled to unit variance and summed.
    """
    c = np.asarray(command, dtype=float)
    r = np.asarray(response, dtype=float)
    if c.shape != r.shape:
        raise ValueError(f"command {c.shape} and response {r.shape} must have the same shape")
    if c.ndim == 1:
        c, r = c[:, None], r[:, None]
    if differentiate:
        c, r = np.diff(c, axis=0), np.diff(r, axis=0)
    T = c.shape[0]
    if T <= 2 * max_lag + 2:
        raise ValueError(f"need more than {2 * max_lag + 2} samples for max_lag={max_lag}; got {T}")

    def _norm(x):
        x = x - x.mean(axis=0)
        s = x.std(axis=0)
        return x / np.where(s > 0, s, 1.0)

    corr = np.empty(max_lag + 1)
    for d in range(max_lag + 1):
        a = _norm(c[: T - d])
        b = _norm(r[d:])
        corr[d] = float(np.mean(a * b))
    k = int(np.argmax(corr))
    return DelayEstimate(lag_samples=k, lag_s=k * dt, peak_correlation=float(corr[k]), correlation=corr)


@dataclass(frozen=True)
class FrictionSeed:
    """Friction of one joint: tau = coulomb sign(qd) + viscous qd + offset.

    Attributes:
        coulomb [N m], viscous [N m s/rad], offset [N m] (gravity or bias left in the torque),
        std: (3,) their standard deviations, sigma: residual std [N m], n: samples used.
    """

    coulomb: float
    viscous: float
    offset: float
    std: np.ndarray
    sigma: float
    n: int


def friction_from_sweeps(
    qd: np.ndarray, tau: np.ndarray, tau_model: np.ndarray | None = None, min_speed: float = 1e-3
) -> FrictionSeed:
    """Fit Coulomb and viscous friction of one joint from constant-velocity samples.

    Args:
        qd: (K,) joint velocities [rad/s] of the constant-velocity segments (both signs needed).
        tau: (K,) measured torque [N m] at those samples.
        tau_model: (K,) torque the rigid-body model predicts there (gravity,
            inertia), subtracted first; None if already removed.
        min_speed: samples slower than this are dropped (the sign is unreliable).
    """
    qd = np.asarray(qd, dtype=float).ravel()
    tau = np.asarray(tau, dtype=float).ravel()
    if qd.shape != tau.shape:
        raise ValueError(f"qd {qd.shape} and tau {tau.shape} must match")
    if tau_model is not None:
        tau = tau - np.asarray(tau_model, dtype=float).ravel()
    keep = np.abs(qd) >= min_speed
    qd, tau = qd[keep], tau[keep]
    pos, neg = np.unique(qd[qd > 0]), np.unique(qd[qd < 0])
    if pos.size < 1 or neg.size < 1 or pos.size + neg.size < 3:
        raise ValueError(
            "friction_from_sweeps needs sweeps in both directions and at least 3 distinct velocities "
            f"(got {pos.size} positive, {neg.size} negative)"
        )
    W = np.column_stack([np.sign(qd), qd, np.ones_like(qd)])
    if W.shape[0] <= 3:
        raise ValueError(f"need more than 3 samples; got {W.shape[0]}")
    res = ols(W, tau, n_dof=1)
    return FrictionSeed(
        coulomb=float(res.theta[0]),
        viscous=float(res.theta[1]),
        offset=float(res.theta[2]),
        std=res.std,
        sigma=float(np.sqrt(res.sigma2)),
        n=int(W.shape[0]),
    )
