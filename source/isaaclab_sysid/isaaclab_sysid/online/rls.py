"""Recursive least squares with forgetting over the joint-friction regressor.

Per joint j the friction torque is ``y = c_j sign(qd) + b_j qd + o_j`` (Coulomb [N m], viscous
[N m s/rad], offset [N m]): a 3-parameter linear model, independent across joints, so the
tracker holds one 3 x 3 problem per joint. Samples with ``|qd| < deadband`` do not update
(the stiction zone, where the friction torque is anywhere between -c and c).

Each update takes one sample or a chunk of k samples (rows Phi (k, 3), readings y (k,)) in
information form, ``R = P^-1``::

    forget:  R <- lambda R                                    (guard "none" / "bound")
             R <- R - (1 - lambda) R Phi^T (Phi R Phi^T)^+ Phi R   (guard "directional")
    learn:   R <- R + Phi^T Phi
             theta <- theta + R^-1 Phi^T (y - Phi theta)
    bound:   eigenvalues of P = R^-1 clipped to p_max            (guard "bound")

With one sample and plain forgetting this is the textbook ``rls_step`` (gain P phi / (lambda +
phi^T P phi), P <- (P - gain phi^T P) / lambda). Plain forgetting shrinks the information in
*every* direction at every update, so directions the data do not excite (a joint that only
turns one way leaves Coulomb and offset indistinguishable; a joint at rest excites nothing)
blow up: covariance windup. Directional forgetting only forgets information along the
directions the new rows carry (Kulhavy's rule; the result stays positive semidefinite); the
bound keeps P below ``p_max``.

The band: ``theta +- (z sqrt(f sigma^2 P_ii) + |slope_i| tau)``. ``sigma^2`` is the
exponentially weighted variance of the a-posteriori residuals, ``f`` their integrated
autocorrelation (residuals of a filtered log are correlated, ``residual_stats``), ``sigma^2 P``
the covariance of the forgetting estimate read as a Kalman filter whose parameters walk
randomly. A parameter that drifts steadily is followed with a lag: the estimate is about
``tau = dt lambda / (1 - lambda)`` old (dt: the update interval; with lambda = 1, half the
elapsed time), so the band adds the lag allowance ``|slope| tau`` with the estimate's own
exponentially weighted slope.

Converged means the data pin every term down (:meth:`FrictionRLS.verdict`): a joint's estimate
counts as converged only while its information ``R`` exceeds the prior's (``1 / min(p0, p_max)``)
by :data:`EXCITED_INFO` in every direction. A joint that rested (every sample inside the
deadband), turned only one way (Coulomb and offset inseparable) or wound up (plain forgetting,
``--guard none``) is not, and its verdict says which terms and what gives it room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.intervals.common import z_of
from isaaclab_sysid.residual_stats import autocorr_inflation
from isaaclab_sysid.utils.errors import UserError

#: The three friction terms of each joint, in the parameter order.
FRICTION_TERMS = ("coulomb", "viscous", "offset")
#: a joint's estimate is data-driven when its information beats the prior's this many times in every direction
EXCITED_INFO = 10.0
GUARDS = ("directional", "bound", "none")


class TrackerError(UserError, ValueError):
    """Bad tracker options or input (one line naming the flag or the array)."""


@dataclass(frozen=True)
class RLSOptions:
    """Attributes:
    forgetting: lambda per update, in (0, 1]; the tracker remembers about 1 / (1 - lambda) updates.
    guard: ``directional`` (forget only along excited directions), ``bound`` (P <= p_max) or ``none``.
    p0: initial P = p0 I ("I know almost nothing": 100).
    p_max: bound on P's eigenvalues for guard ``bound`` (default p0).
    deadband: |qd| [rad/s] below which a sample does not update.
    level: two-sided level of the band.
    lag_allowance: add ``|slope| tau`` to the band (see module doc).
    max_lag: longest residual correlation looked for within a chunk [samples].
    """

    forgetting: float = 0.98
    guard: str = "bound"
    p0: float = 100.0
    p_max: float | None = None
    deadband: float = 0.05
    level: float = 0.95
    lag_allowance: bool = True
    max_lag: int = 20

    def validate(self) -> None:
        if not 0.0 < self.forgetting <= 1.0:
            raise TrackerError(f"--forgetting must lie in (0, 1]; got {self.forgetting}")
        if self.guard not in GUARDS:
            raise TrackerError(f"--guard must be one of {', '.join(GUARDS)}; got {self.guard!r}")
        if not self.p0 > 0 or (self.p_max is not None and not self.p_max > 0):
            raise TrackerError("--p0 and --p_max must be > 0")
        if self.deadband < 0:
            raise TrackerError(f"--deadband must be >= 0 rad/s; got {self.deadband}")
        z_of(self.level)

    @property
    def memory(self) -> float:
        """Updates remembered, 1 / (1 - lambda) (inf without forgetting)."""
        return math.inf if self.forgetting >= 1.0 else 1.0 / (1.0 - self.forgetting)


@dataclass
class FrictionState:
    """The tracker's estimate after an update.

    Attributes:
        t: time of the update [s].
        theta: (N, 3) Coulomb [N m], viscous [N m s/rad], offset [N m] per joint.
        std: (N, 3) standard deviation (noise only) [same units].
        half_width: (N, 3) band half-width (noise at the level + lag allowance).
        sigma: (N,) residual std [N m]; used: (N,) samples the update used per joint.
        cond: (N,) condition number of P per joint (windup shows as a growing value).
    """

    t: float
    theta: np.ndarray
    std: np.ndarray
    half_width: np.ndarray
    sigma: np.ndarray
    used: np.ndarray
    cond: np.ndarray


def friction_rows(qd: np.ndarray) -> np.ndarray:
    """(..., 3) regressor rows ``[sign(qd), qd, 1]`` of velocities (...,) [rad/s]."""
    qd = np.asarray(qd, dtype=float)
    return np.stack([np.sign(qd), qd, np.ones_like(qd)], axis=-1)


class FrictionRLS:
    """Tracks every joint's friction, one sample or one chunk at a time.

    Args:
        n_joints: N.
        options: forgetting, guard, band.
        theta0: (N, 3) start (default zeros), e.g. the replay fit's Coulomb and viscous friction.
    """

    def __init__(self, n_joints: int, options: RLSOptions = RLSOptions(), theta0: np.ndarray | None = None) -> None:
        options.validate()
        self.options = options
        self.n = int(n_joints)
        self.theta = np.zeros((self.n, 3)) if theta0 is None else np.array(theta0, dtype=float).reshape(self.n, 3)
        self.R = np.tile(np.eye(3) / options.p0, (self.n, 1, 1))
        self.s2 = np.zeros(self.n)  # weighted sum of squared residuals
        self.w = np.zeros(self.n)  # their weight
        self.infl = np.ones(self.n)
        self.slope = np.zeros((self.n, 3))
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.dt_mean = 0.0
        self.updates = 0
        self._z = z_of(options.level)

    # ------------------------------------------------------------ the update
    def _forget(self, R: np.ndarray, Phi: np.ndarray) -> np.ndarray:
        lam, guard = self.options.forgetting, self.options.guard
        if lam >= 1.0:
            return R
        if guard == "directional":
            if Phi.shape[0] == 0:
                return R
            RP = R @ Phi.T
            return R - (1.0 - lam) * RP @ np.linalg.pinv(Phi @ RP) @ RP.T
        return lam * R

    def _bound(self, R: np.ndarray) -> np.ndarray:
        if self.options.guard != "bound":
            return R
        p_max = self.options.p_max or self.options.p0
        w, V = np.linalg.eigh(0.5 * (R + R.T))
        return (V * np.maximum(w, 1.0 / p_max)) @ V.T

    def _average(self, old: float, new: float, count: int) -> float:
        """Exponentially weighted (lambda < 1) or running (lambda = 1, ``count`` earlier values) mean."""
        lam = self.options.forgetting
        return lam * old + (1 - lam) * new if lam < 1 else (old * count + new) / (count + 1)

    def update(self, t: float, qd: np.ndarray, y: np.ndarray) -> FrictionState:
        """Feed readings: qd, y (k, N) or (N,) velocity [rad/s] and friction torque [N m] at time t [s]."""
        qd = np.atleast_2d(np.asarray(qd, dtype=float))
        y = np.atleast_2d(np.asarray(y, dtype=float))
        if qd.shape != y.shape or qd.shape[1] != self.n:
            raise TrackerError(f"qd and y must both be (k, {self.n}); got {qd.shape} and {y.shape}")
        if not (np.all(np.isfinite(qd)) and np.all(np.isfinite(y))):
            raise TrackerError("qd or y holds NaN/inf")
        lam = self.options.forgetting
        if self.t_last is not None:
            dt = float(t) - self.t_last
            if dt <= 0:
                raise TrackerError(f"update times must increase: {t} after {self.t_last}")
            self.dt_mean = dt if self.updates == 1 else self._average(self.dt_mean, dt, self.updates - 1)
        else:
            self.t_first = float(t)
        used = np.zeros(self.n, dtype=int)
        for j in range(self.n):
            keep = np.abs(qd[:, j]) >= max(self.options.deadband, 1e-12)
            Phi, yj = friction_rows(qd[keep, j]), y[keep, j]
            R = self._bound(self._forget(self.R[j], Phi) + Phi.T @ Phi)
            old = self.theta[j].copy()
            self.theta[j] = old + np.linalg.solve(R, Phi.T @ (yj - Phi @ old))
            self.R[j] = R
            eps = yj - Phi @ self.theta[j]
            self.s2[j] = lam * self.s2[j] + float(eps @ eps)
            self.w[j] = lam * self.w[j] + eps.size
            if eps.size > 5:
                f = autocorr_inflation(eps, 1, [eps.size], self.options.max_lag)
                self.infl[j] = f if self.updates == 0 else self._average(self.infl[j], f, self.updates)
            if self.t_last is not None:
                inc = (self.theta[j] - old) / (float(t) - self.t_last)
                self.slope[j] = lam * self.slope[j] + (1 - lam) * inc if lam < 1 else self.slope[j]
            used[j] = eps.size
        self.t_last = float(t)
        self.updates += 1
        return self.state(used)

    # ------------------------------------------------------- the verdict
    def excitation(self) -> np.ndarray:
        """(N,) smallest eigenvalue of each joint's information R over the prior's, 1 / min(p0, p_max)."""
        o = self.options
        p_ref = min(o.p0, o.p_max) if o.p_max is not None else o.p0
        return np.linalg.eigvalsh(0.5 * (self.R + np.transpose(self.R, (0, 2, 1))))[:, 0] * p_ref

    def verdict(self, joint_names: tuple[str, ...] | None = None) -> tuple[np.ndarray, list[str]]:
        """((N,) converged per joint, warnings): converged where the data beat the prior :data:`EXCITED_INFO`
        times in every direction; each warning names the joint, the terms it cannot tell apart and the remedy."""
        names = joint_names or tuple(f"joint {j + 1}" for j in range(self.n))
        ratio = self.excitation()
        ok = ratio >= EXCITED_INFO
        warns = []
        for j in np.flatnonzero(~ok):
            _, V = np.linalg.eigh(0.5 * (self.R[j] + self.R[j].T))
            v = np.abs(V[:, 0])
            terms = " / ".join(t for t, c in zip(FRICTION_TERMS, v) if c > 0.3 * v.max())
            why = ("its covariance wound up (information below half the prior's: plain forgetting at rest); use --guard "
                   "bound or directional" if ratio[j] < 0.5 else
                   f"its covariance was never excited along {terms} (the data carry {ratio[j]:.2g}x the prior's "
                   f"information, < {EXCITED_INFO:g}): the joint rested or turned only one way")
            warns.append(f"{names[j]}: friction estimate not converged: {why}; move it both ways faster than "
                         f"--deadband ({self.options.deadband:g} rad/s) or lower it, or remember longer (--forgetting "
                         "closer to 1)")
        return ok, warns

    # ------------------------------------------------------------- the band
    def lag_time(self) -> float:
        """How old the estimate is on average [s] (the lag of a steady drift)."""
        lam = self.options.forgetting
        if self.t_last is None:
            return 0.0
        if lam >= 1.0:
            return 0.5 * (self.t_last - (self.t_first or self.t_last))
        return self.dt_mean * lam / (1.0 - lam)

    def state(self, used: np.ndarray | None = None) -> FrictionState:
        """The current estimate, its std and band (see module doc)."""
        sigma2 = np.where(self.w > 3, self.s2 / np.maximum(self.w - 3, 1e-12), np.nan)
        P = np.linalg.inv(self.R)
        var = np.diagonal(P, axis1=1, axis2=2) * (sigma2 * self.infl)[:, None]
        std = np.sqrt(np.clip(var, 0.0, None))
        hw = self._z * std
        if self.options.lag_allowance:
            hw = hw + np.abs(self.slope) * self.lag_time()
        ev = np.linalg.eigvalsh(P)
        return FrictionState(float(self.t_last if self.t_last is not None else 0.0), self.theta.copy(), std, hw,
                             np.sqrt(sigma2), np.zeros(self.n, dtype=int) if used is None else used,
                             ev[:, -1] / np.maximum(ev[:, 0], 1e-300))
