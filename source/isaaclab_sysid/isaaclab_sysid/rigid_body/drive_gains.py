"""Drive gains (current -> torque) identified from runs with and without a known payload.

A log of motor currents fixes the rigid-body parameters only up to one scale per
joint: ``k_j i_j = tau_j`` holds for any ``k_j`` if the parameters scale with it.
A payload of known mass ``m`` breaks the tie (Gautier's method, also the UR10e
authors' ``estimate_drive_gains.m``). Per sample t and joint j::

    k_j i_tj = (W_t theta)_j + loaded_t [ (P_t psi)_j + (p_t)_j m ]

with W the base-parameter regressor (torque units, joint terms included), P the
payload's 9 unknown inertial columns (m c, I about the frame origin) and p its
mass column. The payload is a rigid body fixed to one link (default the last),
so its 10 parameters add to that link's in that link's frame: P and p are the
link's regressor columns, and where on the link the payload sits is free (its
first moment and inertia are unknowns).

Two estimators:

* ``equation_error`` (the authors' linear OLS): ``[I, -W, 0; I, -W, -P] [k; theta; psi] = [0; p m]``
  by QR. Measured currents sit in the regressor, so noise biases k toward zero.
* ``output_error`` (default): nonlinear least squares on the measured current,
  ``i_tj = tau_tj / k_j``, by Levenberg-Marquardt with the exact Jacobian,
  started from the equation-error solution. Its covariance is the Jacobian's
  (white) and the Newey-West sandwich (residuals correlated in time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.optimize

from isaaclab_sysid.rigid_body.base_params import BaseParameters
from isaaclab_sysid.rigid_body.estimate import hac_covariance
from isaaclab_sysid.rigid_body.preprocess import Processed
from isaaclab_sysid.robots.regressor import LINK_PARAM_NAMES, Regressor

#: Names of the payload's 9 unknown parameters (its mass is given).
PAYLOAD_PARAM_NAMES = LINK_PARAM_NAMES[1:]


@dataclass(frozen=True)
class Payload:
    """A rigid payload of known mass fixed to one link.

    Attributes:
        mass: payload mass [kg].
        link: link it is fixed to (default: the last link of the chain).
    """

    mass: float
    link: str | None = None


@dataclass
class DriveGainResult:
    """Identified drive gains and what came with them.

    Attributes:
        gains: (N,) drive gains k [N m / A].
        std: (N,) their standard deviation, white-noise formula [N m / A].
        std_hac: (N,) their Newey-West standard deviation [N m / A] (use this one).
        rel_std_hac: (N,) 100 std_hac / k [%].
        fixed: (N,) True where the gain was given, not identified.
        theta: (b,) base parameters in torque units (N m per regressor unit).
        payload: (R, 9) payload m c [kg m] and inertia about the link-frame origin [kg m^2],
            one row per placement (per loaded run, or one shared row).
        payload_std_hac: (R, 9) their Newey-West standard deviation.
        payload_mass: [kg]; payload_link: link name.
        equation_error_gains: (N,) the linear (authors') estimate, for comparison.
        sigma_joint: (N,) residual RMS per joint [A].
        cov_hac: covariance of all estimated unknowns (identified gains, theta, payload).
        method: "output_error" or "equation_error".
        n_obs: rows; iterations: Levenberg-Marquardt function evaluations.
        weak: joint names whose gain has a relative std above ``weak_rel_std`` [%].
        converged: the Levenberg-Marquardt stop was a convergence test (always True for
            equation_error): False when it ran out of evaluations (``max_nfev``) or ended at its
            start with no gradient test passed (every step rejected); message: its reason and, when
            not converged, what gives it more room.
    """

    gains: np.ndarray
    std: np.ndarray
    std_hac: np.ndarray
    rel_std_hac: np.ndarray
    fixed: np.ndarray
    theta: np.ndarray
    payload: np.ndarray
    payload_std_hac: np.ndarray
    payload_mass: float
    payload_link: str
    equation_error_gains: np.ndarray
    sigma_joint: np.ndarray
    cov_hac: np.ndarray
    method: str
    n_obs: int
    iterations: int
    weak: list[str] = field(default_factory=list)
    converged: bool = True
    message: str = ""

    @property
    def payload_com(self) -> np.ndarray:
        """(R, 3) payload centre of mass in the link frame [m], per placement."""
        return self.payload[:, :3] / self.payload_mass

    def payload_pi(self, placement: int = 0) -> np.ndarray:
        """(10,) one placement's full payload parameter vector (mass first, Pinocchio order)."""
        return np.concatenate([[self.payload_mass], self.payload[placement]])

    def summary(self) -> dict:
        """JSON-ready dict."""
        out = {}
        for k, v in self.__dict__.items():
            if k == "cov_hac":
                continue
            out[k] = v.tolist() if isinstance(v, np.ndarray) else v
        out["payload_com"] = self.payload_com.tolist()
        out["payload_param_names"] = list(PAYLOAD_PARAM_NAMES)
        return out


@dataclass
class _Blocks:
    W: np.ndarray  # (M, b) base regressor, torque units
    P: np.ndarray  # (M, 9) payload columns (zero on unloaded rows)
    p: np.ndarray  # (M,) payload mass column (zero on unloaded rows)
    y: np.ndarray  # (M,) measured current
    segments: list[int]


def payload_link_slice(reg: Regressor, link: str | None) -> tuple[slice, str]:
    """Standard-vector columns (10) of the link a payload is fixed to, and its name."""
    name = link or reg.link_names[-1]
    if name not in reg.link_names:
        raise ValueError(f"payload link {name!r} is not one of {list(reg.link_names)}")
    k = list(reg.link_names).index(name)
    return slice(10 * k, 10 * k + 10), name


def _blocks(
    reg: Regressor,
    base: BaseParameters,
    unloaded: list[Processed],
    loaded: list[Processed],
    cols: slice,
    signal: str,
    shared_placement: bool,
) -> _Blocks:
    """Stack unloaded then loaded runs; the payload's 9 columns are one block per loaded
    run (its placement may differ between runs) or one shared block."""
    n_blocks = 1 if shared_placement else len(loaded)
    Ws, Ps, ps, ys, seg = [], [], [], [], []
    for i, r in enumerate(list(unloaded) + list(loaded)):
        if signal not in r.signals:
            raise ValueError(f"{r.record.get('source', 'run')}: no signal {signal!r} (has {sorted(r.signals)})")
        Y = reg.matrix(r.q, r.qd, r.qdd)
        Ws.append(base.columns(Y))
        P = np.zeros((Y.shape[0], 9 * n_blocks))
        p = np.zeros(Y.shape[0])
        k = i - len(unloaded)
        if k >= 0:
            blk = 0 if shared_placement else k
            P[:, 9 * blk : 9 * blk + 9] = Y[:, cols][:, 1:]
            p = Y[:, cols][:, 0]
        Ps.append(P)
        ps.append(p)
        ys.append(np.asarray(r.signals[signal], dtype=float).ravel())
        seg.append(int(r.q.shape[0]))
    return _Blocks(np.vstack(Ws), np.vstack(Ps), np.concatenate(ps), np.concatenate(ys), seg)


def _equation_error(d: _Blocks, n: int, m: float, fixed_gains: np.ndarray) -> np.ndarray:
    """Linear OLS (by QR) of [k; theta; psi]; given gains move to the right-hand side."""
    M = d.y.size
    jrow = np.tile(np.arange(n), M // n)
    Icols = np.zeros((M, n))
    Icols[np.arange(M), jrow] = d.y
    free = np.isnan(fixed_gains)
    A = np.hstack([Icols[:, free], -d.W, -d.P])
    rhs = d.p * m - Icols[:, ~free] @ fixed_gains[~free]
    x, *_ = scipy.linalg.lstsq(A, rhs, lapack_driver="gelsy")
    k = fixed_gains.copy()
    k[free] = x[: free.sum()]
    return np.concatenate([k, x[free.sum() :]])


class _OutputError:
    """The output-error model ``i = tau / k`` on the stacked rows (M,): unknowns
    z = [identified gains (nf,); theta (b,); payload placements (9 R,)]."""

    def __init__(self, d: _Blocks, fixed: np.ndarray, mass: float) -> None:
        self.d, self.fixed, self.m = d, fixed, mass
        self.n = fixed.size
        self.free = np.isnan(fixed)
        self.nf = int(self.free.sum())
        self.M, self.b = d.W.shape
        self.jrow = np.tile(np.arange(self.n), self.M // self.n)

    def unpack(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N,) all gains [N m/A], (b,) theta, (9 R,) payload parameters."""
        k = self.fixed.copy()
        k[self.free] = z[: self.nf]
        return k, z[self.nf : self.nf + self.b], z[self.nf + self.b :]

    def torque(self, z: np.ndarray) -> np.ndarray:
        """(M,) modelled torque [N m]."""
        _, th, ps = self.unpack(z)
        return self.d.W @ th + self.d.P @ ps + self.d.p * self.m

    def residual(self, z: np.ndarray) -> np.ndarray:
        """(M,) measured minus modelled current [A]."""
        k, _, _ = self.unpack(z)
        return self.d.y - self.torque(z) / k[self.jrow]

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """(M, nf + b + 9 R) exact Jacobian of :meth:`residual`."""
        d, M, nf, b = self.d, self.M, self.nf, self.b
        k, _, _ = self.unpack(z)
        kr = k[self.jrow]
        J = np.empty((M, nf + b + d.P.shape[1]))
        tau = self.torque(z)
        Jk = np.zeros((M, self.n))
        Jk[np.arange(M), self.jrow] = tau / kr**2
        J[:, :nf] = Jk[:, self.free]
        J[:, nf : nf + b] = -d.W / kr[:, None]
        J[:, nf + b :] = -d.P / kr[:, None]
        return J

    def start(self, x_ee: np.ndarray) -> np.ndarray:
        """z0 from the equation-error solution [k; theta; psi]; a gain it left non-positive (weak
        joint) starts from the others' median, with theta and psi re-solved for those gains."""
        d, nf = self.d, self.nf
        z0 = np.concatenate([x_ee[: self.n][self.free], x_ee[self.n :]])
        k0 = z0[:nf]
        good = k0 > 0
        if not good.all():
            k0[~good] = np.median(k0[good]) if good.any() else 1.0
            k_full = self.fixed.copy()
            k_full[self.free] = k0
            lin = np.linalg.lstsq(np.hstack([d.W, d.P]), d.y * k_full[self.jrow] - d.p * self.m, rcond=None)[0]
            z0 = np.concatenate([k0, lin])
        return z0

    def covariances(self, z: np.ndarray, hac_lags: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(M,) residual at ``z``, its white-noise and Newey-West covariances of z."""
        r = self.residual(z)
        J = self.jacobian(z)
        p_est = J.shape[1]
        sigma2 = float(r @ r) / (self.M - p_est)
        _, R = np.linalg.qr(J, mode="reduced")
        Rinv = scipy.linalg.solve_triangular(R, np.eye(p_est))
        bread = Rinv @ Rinv.T
        return r, sigma2 * bread, hac_covariance(J, r, self.n, hac_lags, self.d.segments, bread=bread)


def _check_drive_gain_inputs(
    n: int, unloaded: list[Processed], loaded: list[Processed], payload: Payload, fixed_gains: np.ndarray | None,
    method: str,
) -> np.ndarray:
    """Refuse bad inputs of :func:`identify_drive_gains`; returns the (N,) held gains (NaN: identified)."""
    if payload.mass <= 0:
        raise ValueError(f"payload mass must be positive; got {payload.mass} kg")
    if not unloaded or not loaded:
        raise ValueError("drive gains need at least one run without and one run with the payload")
    if method not in ("output_error", "equation_error"):
        raise ValueError(f"method must be 'output_error' or 'equation_error'; got {method!r}")
    fixed = np.full(n, np.nan) if fixed_gains is None else np.asarray(fixed_gains, dtype=float).copy()
    if fixed.shape != (n,) or np.any(fixed[~np.isnan(fixed)] <= 0):
        raise ValueError(f"fixed_gains must be ({n},), positive or NaN; got {fixed}")
    return fixed


def identify_drive_gains(
    reg: Regressor,
    base: BaseParameters,
    unloaded: list[Processed],
    loaded: list[Processed],
    payload: Payload,
    signal: str = "current",
    fixed_gains: np.ndarray | None = None,
    method: str = "output_error",
    hac_lags: int = 25,
    weak_rel_std: float = 5.0,
    shared_placement: bool = False,
    max_nfev: int | None = None,
) -> DriveGainResult:
    """Identify drive gains k [N m / A] from current logs with and without a known payload.

    Args:
        reg: regressor (joint terms as wanted; gravity on).
        base: its base parameters.
        unloaded, loaded: preprocessed runs without / with the payload, output ``signal`` [A], (T, N) each.
        payload: the payload's known mass and the link it is fixed to.
        fixed_gains: (N,) gains to hold [N m / A], NaN where identified; None: identify all.
        method: "output_error" (default) or "equation_error".
        hac_lags: Newey-West window [samples] of the covariance.
        weak_rel_std: a gain with a larger relative std [%] is listed in ``weak``.
        shared_placement: all loaded runs carry the payload in the same place (one set
            of 9 unknowns); default False: each loaded run has its own placement.
        max_nfev: residual evaluations the output-error fit may take (None: scipy's default, 100 x unknowns).
    """
    n = reg.n_dof
    fixed = _check_drive_gain_inputs(n, unloaded, loaded, payload, fixed_gains, method)
    cols, link = payload_link_slice(reg, payload.link)
    d = _blocks(reg, base, unloaded, loaded, cols, signal, shared_placement)
    model = _OutputError(d, fixed, float(payload.mass))
    x_ee = _equation_error(d, n, model.m, fixed)
    iters, converged, message = 0, True, "linear least squares"
    if method == "output_error":
        z0 = model.start(x_ee)
        sol = scipy.optimize.least_squares(
            model.residual, z0, jac=model.jacobian, method="lm", xtol=1e-12, ftol=1e-12, max_nfev=max_nfev
        )
        z, iters = sol.x, int(sol.nfev)
        converged, message = lm_verdict(sol, z0)
    else:
        z = np.concatenate([x_ee[:n][model.free], x_ee[n:]])
    r, cov, cov_hac = model.covariances(z, hac_lags)
    k, th, ps = model.unpack(z)
    free, nf = model.free, model.nf
    std = np.zeros(n)
    std_hac = np.zeros(n)
    std[free] = np.sqrt(np.diag(cov)[:nf])
    std_hac[free] = np.sqrt(np.diag(cov_hac)[:nf])
    rel = 100.0 * std_hac / np.abs(k)
    weak = [reg.robot.joint_names[j] for j in range(n) if free[j] and (rel[j] > weak_rel_std or k[j] <= 0)]
    return DriveGainResult(
        gains=k,
        std=std,
        std_hac=std_hac,
        rel_std_hac=rel,
        fixed=~free,
        theta=th,
        payload=ps.reshape(-1, 9),
        payload_std_hac=np.sqrt(np.diag(cov_hac)[nf + model.b :]).reshape(-1, 9),
        payload_mass=model.m,
        payload_link=link,
        equation_error_gains=x_ee[:n].copy(),
        sigma_joint=np.sqrt(np.mean(r.reshape(-1, n) ** 2, axis=0)),
        cov_hac=cov_hac,
        method=method,
        n_obs=model.M,
        iterations=iters,
        weak=weak,
        converged=converged,
        message=message,
    )


#: what gives the output-error fit more room (the --identify-gains command line has no evaluation-budget flag)
GAIN_REMEDY = ("give it more evaluations (identify_drive_gains(max_nfev=...)), hold a weak gain with --fixed-gains, "
               "or use the linear estimate (--gain-method equation_error)")


def lm_verdict(sol: scipy.optimize.OptimizeResult, z0: np.ndarray) -> tuple[bool, str]:
    """(converged, message) of a ``least_squares(method="lm")`` result started at ``z0``.

    Converged only when MINPACK stopped on a tolerance (status > 0) and, if it never left ``z0``,
    on the gradient test (status 1: the start was already the optimum); a start it never left
    on the step tests means every step was rejected. Status 0 is the evaluation budget.
    """
    status, msg = int(sol.status), str(sol.message)
    if status == 0:
        return False, f"ran out of its {int(sol.nfev)} residual evaluations before a convergence test ({msg}); {GAIN_REMEDY}"
    if status < 0:
        return False, f"the solver failed ({msg}); {GAIN_REMEDY}"
    if status != 1 and np.array_equal(np.asarray(sol.x), np.asarray(z0)):
        return False, (f"ended at its start (the equation-error solution): every step was rejected ({msg}); "
                       f"{GAIN_REMEDY}")
    return True, msg


def current_from_regressor(
    Y: np.ndarray,
    pi: np.ndarray,
    gains: np.ndarray,
    payload_pi: np.ndarray | None = None,
    cols: slice | None = None,
) -> np.ndarray:
    """(T, N) motor current [A] from a torque regressor ``Y`` (T N, P) (``Regressor.matrix``):
    arm parameters ``pi`` (P,), plus a payload's 10 parameters on the link columns ``cols``, over ``gains`` (N,)."""
    g = np.asarray(gains, dtype=float)
    tau = Y @ np.asarray(pi, dtype=float)
    if payload_pi is not None:
        tau = tau + Y[:, cols] @ np.asarray(payload_pi, dtype=float)
    return tau.reshape(-1, g.size) / g[None, :]


def payload_from_regressor(
    Y: np.ndarray, current: np.ndarray, pi: np.ndarray, gains: np.ndarray, mass: float, cols: slice
) -> np.ndarray:
    """(10,) payload parameters (``mass`` [kg] given, on the link columns ``cols``) that best
    explain the measured ``current`` (T N,) [A] for a fixed arm (``pi`` (P,), ``gains`` (N,)),
    by linear LS in current units; ``Y`` (T N, P) is the torque regressor."""
    g = np.tile(np.asarray(gains, dtype=float), Y.shape[0] // len(gains))[:, None]
    Yc = Y / g
    rhs = np.asarray(current, dtype=float).ravel() - Yc @ pi - Yc[:, cols][:, 0] * mass
    psi, *_ = scipy.linalg.lstsq(Yc[:, cols][:, 1:], rhs)
    return np.concatenate([[mass], psi])


def predict_current(
    reg: Regressor,
    pi: np.ndarray,
    gains: np.ndarray,
    run: Processed,
    payload_pi: np.ndarray | None = None,
    payload_link: str | None = None,
) -> np.ndarray:
    """(T, N) motor current [A] of a run: standard parameters ``pi`` (P,) [torque units],
    plus a payload's 10 parameters ``payload_pi`` (mass first) on ``payload_link``, over ``gains`` (N,).

    Kept without a caller in the pipeline: it is the held-out check of identified gains (docs/rigid_body.md, tests)."""
    cols, _ = payload_link_slice(reg, payload_link)
    return current_from_regressor(reg.matrix(run.q, run.qd, run.qdd), pi, gains, payload_pi, cols)


def fit_payload(
    reg: Regressor,
    pi: np.ndarray,
    gains: np.ndarray,
    loaded: list[Processed],
    payload: Payload,
    signal: str = "current",
) -> np.ndarray:
    """(10,) payload parameters (mass given) that best explain ``loaded`` runs' currents
    for a fixed arm model (``pi`` (P,), ``gains`` (N,)): linear LS in current units.

    Used to give a published model without a payload the same payload treatment (kept for that comparison,
    docs/rigid_body.md; the pipeline places payloads inside :func:`identify_drive_gains`).
    """
    cols, _ = payload_link_slice(reg, payload.link)
    Y = np.vstack([reg.matrix(r.q, r.qd, r.qdd) for r in loaded])
    y = np.concatenate([np.asarray(r.signals[signal], dtype=float).ravel() for r in loaded])
    return payload_from_regressor(Y, y, pi, gains, payload.mass, cols)
