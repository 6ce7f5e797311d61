"""Payload mass, centre of mass and (with motion) inertia from measured joint torques.

The arm holds the part in a few poses (and, optionally, moves). The torque the
payload causes is the loaded torque minus the torque without it, and it is linear
in the payload's parameters (:mod:`.model`)::

    dtau_k = tau_loaded_k - tau_reference_k = Y_link(q_k, qd_k, qdd_k) pi_payload

* ``reference="measured"``: the same poses (or the same trajectory) recorded without
  the payload; whatever the arm model gets wrong (link inertials, cable forces, sensor
  offsets) is the same in both and cancels. A small pose difference between the
  two is corrected with the arm model's torque at each pose.
* ``reference="model"``: no reference runs; the arm's rigid-body model predicts the
  unloaded torque. Its error is *not* in the error bars (a warning says so).

Static holds give the mass and the first moment m c (4 unknowns; inertia does not act
at rest). Motion (``motion=True``: every preprocessed sample of runs recorded on the
same trajectory with and without the payload) adds the 6 inertia parameters.

Error bars: least squares by QR, the covariance from the residual
(``sigma^2 (W^T W)^-1``; Newey-West for motion samples, whose residuals are correlated
after filtering), Student-t quantiles with the residual's degrees of freedom. The
centre of mass ``c = (m c) / m`` and the inertia about it are not linear in the
fitted parameters: each derived number's interval is carried through the formula to
first order *and* by Monte Carlo (multivariate-t draws of the parameters); when the two
disagree (half-widths or centres more than 10 % apart) the Monte Carlo percentiles are
used.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.stats

from isaaclab_sysid.arm_model import gravity_in_signal
from isaaclab_sysid.data import Run
from isaaclab_sysid.excitation.conditioning import cond_of
from isaaclab_sysid.intervals.common import Interval
from isaaclab_sysid.payload.holds import HoldOptions, PayloadInputError, holds_of, pair_holds
from isaaclab_sysid.payload.model import PAYLOAD_PARAMS, STATIC_PARAMS, PayloadModel
from isaaclab_sysid.residual_stats import autocorr_inflation
from isaaclab_sysid.rigid_body.estimate import ols
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.rigid_body.runs_input import process_run
from isaaclab_sysid.robots import LinkInertial, Robot

#: Labels of the exported numbers (inertia about the centre of mass, link-frame axes).
MASS_LABEL = "payload_mass"
COM_LABELS = ("payload_com_x", "payload_com_y", "payload_com_z")
INERTIA_LABELS = tuple(f"payload_inertia_{a}" for a in ("xx", "xy", "yy", "xz", "yz", "zz"))
#: Relative disagreement of first-order and Monte Carlo intervals above which Monte Carlo is used.
MC_AGREE_TOL = 0.10


@dataclass(frozen=True)
class PayloadOptions:
    """Choices of one payload identification.

    Attributes:
        link: link the payload is fixed to (default: the last link).
        signal: ``tau_J`` (measured joint torque) or ``tau`` (commanded).
        motion: also fit the inertia from every (preprocessed) sample of runs recorded on the
            same trajectory with and without the payload (else: static holds only).
        level: two-sided confidence level of the intervals.
        mc_samples: Monte Carlo draws for the propagation check; seed: their seed.
        holds: how static holds are found and paired.
        preprocess: filtering / resampling of motion runs (rigid_body.preprocess).
        motion_stride: use every k-th preprocessed sample of motion runs.
        max_lag_s: longest residual correlation the motion covariance looks for [s].
        run_offsets: with motion, fit a constant torque offset per joint and run (nuisance parameters;
            only for motions that turn the link through gravity on every joint, else the mass is lost).
        motion_correction: with motion, subtract the arm model's torque difference between the loaded
            and reference samples. Off by default: sample by sample that difference is mostly
            measurement noise, and its acceleration noise, correlated with the regressor, biases the
            fit (the holds' averages are quiet enough and always get the correction).
        max_traj_diff: largest |q_loaded - q_reference| on a motion pair [rad].
        expected_mass: the part's expected mass [kg] (None: no check).
        mass_tolerance: how far from ``expected_mass`` the interval may sit [kg].
    """

    link: str | None = None
    signal: str = "tau_J"
    motion: bool = False
    level: float = 0.95
    mc_samples: int = 20000
    seed: int = 0
    holds: HoldOptions = field(default_factory=HoldOptions)
    preprocess: PreprocessOptions = field(default_factory=lambda: PreprocessOptions(dt=0.01, trim_s=0.5))
    motion_stride: int = 1
    max_lag_s: float = 5.0
    run_offsets: bool = False
    motion_correction: bool = False
    max_traj_diff: float = 0.02
    expected_mass: float | None = None
    mass_tolerance: float | None = None

    def validate(self) -> None:
        """Refuse bad values naming the flag."""
        self.holds.validate()
        if self.signal not in ("tau_J", "tau"):
            raise PayloadInputError(f"--torque_signal must be tau_J or tau; got {self.signal!r}")
        if not 0.0 < self.level < 1.0:
            raise PayloadInputError(f"--level must lie in (0, 1); got {self.level}")
        if self.mc_samples < 1000:
            raise PayloadInputError(f"--mc_samples must be >= 1000; got {self.mc_samples}")
        if self.motion_stride < 1:
            raise PayloadInputError(f"--motion_stride must be >= 1; got {self.motion_stride}")
        if (self.expected_mass is None) != (self.mass_tolerance is None):
            raise PayloadInputError("give --expected_mass and --mass_tolerance together (kg both)")
        if self.expected_mass is not None and not (self.expected_mass > 0 and self.mass_tolerance >= 0):
            raise PayloadInputError("--expected_mass must be > 0 and --mass_tolerance >= 0 (kg)")


@dataclass
class PropagationCheck:
    """First-order propagation vs Monte Carlo for one derived number (is the linearization good enough?).

    Attributes:
        label: the number; value: its estimate.
        linear: (lower, upper) first-order interval; monte_carlo: (lower, upper) percentiles.
        linear_std, mc_std: the two spreads; used: which interval was kept.
    """

    label: str
    value: float
    linear: tuple[float, float]
    monte_carlo: tuple[float, float]
    linear_std: float
    mc_std: float
    used: str


@dataclass
class PayloadEstimate:
    """The identified payload.

    Attributes:
        robot, link: the arm and the link the payload is fixed to (its frame holds com and inertia).
        mode: ``static`` (holds: mass + com) or ``motion`` (+ inertia).
        reference: ``measured`` (reference runs) or ``model`` (the arm model predicts the unloaded torque).
        names: fitted parameter names (Pinocchio's m, mcx, ...); theta (p,), cov (p, p): estimate and covariance.
        sigma: residual std [N m]; dof: residual degrees of freedom; n_rows: equations; n_holds: holds used.
        sigma_joint: (N,) residual RMS per joint [N m].
        cond: condition number of the column-normalized regressor (scale-free; inf = not separable).
        level: confidence level; intervals: mass, com (3) [, inertia about the com (6)].
        checks: first-order vs Monte Carlo per derived number.
        flag: the wrong-part message when the mass is far from the expected one, else None.
        warnings: what the user must know (model reference, unidentified inertia, ...).
    """

    robot: str
    link: str
    mode: str
    reference: str
    names: tuple[str, ...]
    theta: np.ndarray
    cov: np.ndarray
    sigma: float
    dof: int
    n_rows: int
    n_holds: int
    sigma_joint: np.ndarray
    cond: float
    level: float
    intervals: list[Interval]
    checks: list[PropagationCheck]
    flag: str | None = None
    warnings: list[str] = field(default_factory=list)

    def interval(self, label: str) -> Interval:
        for iv in self.intervals:
            if iv.label == label:
                return iv
        raise KeyError(f"no interval {label!r} (have {[iv.label for iv in self.intervals]})")

    @property
    def mass(self) -> float:
        return float(self.theta[0])

    @property
    def com(self) -> np.ndarray:
        """(3,) centre of mass in the link frame [m]."""
        return np.asarray(self.theta[1:4]) / self.theta[0]

    def inertial(self) -> LinkInertial:
        """The payload as a :class:`LinkInertial` (inertia zero when only static holds were used)."""
        if self.mode == "motion":
            return LinkInertial.from_pi(self.theta)
        return LinkInertial(self.mass, self.com, np.zeros((3, 3)))

    def draws(self, n: int, seed: int) -> np.ndarray:
        """(n, p) multivariate-t draws of the parameters (the Monte Carlo of the intervals)."""
        return _draw_t(self.theta, self.cov, self.dof, n, seed)

    def to_json(self) -> dict:
        d = asdict(self)
        d["theta"] = self.theta.tolist()
        d["cov"] = self.cov.tolist()
        d["sigma_joint"] = self.sigma_joint.tolist()
        d["intervals"] = [iv.to_dict() for iv in self.intervals]
        d["names"] = list(self.names)
        return {"schema": "isaaclab_sysid.payload/1", **d}

    @classmethod
    def from_json(cls, d: dict) -> "PayloadEstimate":
        body = {k: v for k, v in d.items() if k != "schema"}
        body["theta"] = np.asarray(body["theta"], dtype=float)
        body["cov"] = np.asarray(body["cov"], dtype=float)
        body["sigma_joint"] = np.asarray(body["sigma_joint"], dtype=float)
        body["names"] = tuple(body["names"])
        body["intervals"] = [Interval.from_dict(iv) for iv in body["intervals"]]
        body["checks"] = [PropagationCheck(**{**c, "linear": tuple(c["linear"]), "monte_carlo": tuple(c["monte_carlo"])})
                          for c in body["checks"]]
        body["cond"] = math.inf if body["cond"] is None else float(body["cond"])
        return cls(**body)


# ------------------------------------------------------------------ equations
def _static_equations(model: PayloadModel, loaded: list[Run], reference: list[Run] | None,
                      o: PayloadOptions) -> tuple[np.ndarray, np.ndarray, int]:
    """(W (K N, 4), y (K N,), K holds)."""
    hl = holds_of(loaded, o.holds, o.signal, "loaded")
    grav = gravity_in_signal(loaded[0], o.signal)
    ql = np.stack([h.q for h in hl])
    y = np.stack([h.tau for h in hl])
    if reference:
        hr = holds_of(reference, o.holds, o.signal, "reference")
        pairs = pair_holds(hl, hr, o.holds.pose_tol)
        qr = np.stack([r.q for _, r in pairs])
        y = y - np.stack([r.tau for _, r in pairs])
        # the two poses differ slightly (the payload makes the arm sag): the arm model's difference
        y = y - (model.arm_torque(ql, gravity=grav) - model.arm_torque(qr, gravity=grav))
    else:
        y = y - model.arm_torque(ql, gravity=grav)
    W = model.columns(ql)[:, :, :4].reshape(-1, 4)
    return W, y.ravel(), len(hl)


def _motion_equations(model: PayloadModel, loaded: list[Run], reference: list[Run] | None,
                      o: PayloadOptions) -> tuple[np.ndarray, np.ndarray, list[int], float]:
    """(W (M, 10), y (M,), samples per run, dt) from preprocessed motion runs."""
    if reference is not None and len(reference) != len(loaded):
        raise PayloadInputError(f"--motion pairs loaded and reference runs in order: got {len(loaded)} loaded and "
                                f"{len(reference)} reference runs")
    Ws, ys, segs, dt = [], [], [], None
    for k, run in enumerate(loaded):
        grav = gravity_in_signal(run, o.signal)
        pl = process_run(run, o.preprocess, o.signal, use_logged_velocity=False)
        sl = slice(None, None, o.motion_stride)
        q, qd, qdd, tl = pl.q[sl], pl.qd[sl], pl.qdd[sl], pl.t[sl]
        y = pl.signals[o.signal][sl]
        if reference is not None:
            ref = reference[k]
            pr = process_run(ref, o.preprocess, o.signal, use_logged_velocity=False)
            if tl[0] < pr.t[0] - 1e-9 or tl[-1] > pr.t[-1] + 1e-9:
                raise PayloadInputError(f"{ref.source or ref.name}: reference run spans t={pr.t[0]:.2f}-{pr.t[-1]:.2f} s, "
                                        f"shorter than loaded run {run.source or run.name} ({tl[0]:.2f}-{tl[-1]:.2f} s)")

            def at(x: np.ndarray) -> np.ndarray:
                return np.stack([np.interp(tl, pr.t, x[:, j]) for j in range(x.shape[1])], axis=1)

            qr, qdr, qddr = at(pr.q), at(pr.qd), at(pr.qdd)
            diff = np.abs(q - qr)
            if diff.max() > o.max_traj_diff:
                i, j = np.unravel_index(int(np.argmax(diff)), diff.shape)
                raise PayloadInputError(
                    f"{ref.source or ref.name}: t={tl[i]:.3f} s, joint {j + 1}: reference trajectory differs from "
                    f"loaded run {run.source or run.name} by {diff[i, j]:.3g} rad (> --max_traj_diff "
                    f"{o.max_traj_diff:g}); record the reference on the same trajectory")
            y = y - at(pr.signals[o.signal])
            if o.motion_correction:
                y = y - (model.arm_torque(q, qd, qdd, gravity=grav) - model.arm_torque(qr, qdr, qddr, gravity=grav))
        else:
            y = y - model.arm_torque(q, qd, qdd, gravity=grav)
        cols = model.columns(q, qd, qdd).reshape(-1, 10)
        if o.run_offsets:
            # a constant torque offset per joint and run (sensor offset drift between sessions)
            off = np.zeros((cols.shape[0], model.n_dof * len(loaded)))
            off[:, model.n_dof * k : model.n_dof * (k + 1)] = np.tile(np.eye(model.n_dof), (q.shape[0], 1))
            cols = np.hstack([cols, off])
        Ws.append(cols)
        ys.append(y.ravel())
        segs.append(q.shape[0])
        dt = float(np.median(np.diff(tl)))
    return np.vstack(Ws), np.concatenate(ys), segs, float(dt)


# --------------------------------------------------------------- the numbers
def _draw_t(theta: np.ndarray, cov: np.ndarray, dof: int, n: int, seed: int) -> np.ndarray:
    """Multivariate-t draws (the predictive spread of an LS estimate with unknown noise)."""
    rng = np.random.default_rng(seed)
    w, V = np.linalg.eigh(0.5 * (cov + cov.T))
    L = V * np.sqrt(np.clip(w, 0.0, None))
    z = rng.standard_normal((n, theta.size)) @ L.T
    scale = np.sqrt(dof / rng.chisquare(dof, size=n)) if dof < 1e6 else np.ones(n)
    return theta[None] + z * scale[:, None]


def derived(theta: np.ndarray) -> np.ndarray:
    """(..., 4 or 10) exported numbers from (..., 4 or 10) parameters: mass, com (3)
    [, inertia about the com: xx, xy, yy, xz, yz, zz]."""
    theta = np.asarray(theta, dtype=float)
    m = theta[..., 0]
    c = theta[..., 1:4] / m[..., None]
    out = [m[..., None], c]
    if theta.shape[-1] == 10:
        io = theta[..., 4:10]
        cx, cy, cz = c[..., 0], c[..., 1], c[..., 2]
        # I_com = I_origin + m [c]x [c]x  (parallel axis, as LinkInertial.from_pi)
        ixx = io[..., 0] - m * (cy**2 + cz**2)
        ixy = io[..., 1] + m * cx * cy
        iyy = io[..., 2] - m * (cx**2 + cz**2)
        ixz = io[..., 3] + m * cx * cz
        iyz = io[..., 4] + m * cy * cz
        izz = io[..., 5] - m * (cx**2 + cy**2)
        out.append(np.stack([ixx, ixy, iyy, ixz, iyz, izz], axis=-1))
    return np.concatenate(out, axis=-1)


def _jacobian(theta: np.ndarray) -> np.ndarray:
    p = theta.size
    f0 = derived(theta)
    J = np.zeros((f0.size, p))
    for i in range(p):
        h = 1e-6 * max(abs(theta[i]), 1e-3)
        e = np.zeros(p)
        e[i] = h
        J[:, i] = (derived(theta + e) - derived(theta - e)) / (2 * h)
    return J


def propagate(theta: np.ndarray, cov: np.ndarray, dof: int, level: float, n: int, seed: int,
              labels: tuple[str, ...]) -> tuple[list[Interval], list[PropagationCheck]]:
    """Intervals of the derived numbers: first order, checked against Monte Carlo (see module doc)."""
    value = derived(theta)
    J = _jacobian(theta)
    lin_std = np.sqrt(np.clip(np.diag(J @ cov @ J.T), 0.0, None))
    tq = float(scipy.stats.t.ppf(0.5 + level / 2.0, dof))
    draws = derived(_draw_t(theta, cov, dof, n, seed))
    a = 100 * (0.5 - level / 2.0)
    lo_mc, hi_mc = np.percentile(draws, [a, 100 - a], axis=0)
    mc_std = draws.std(axis=0)
    intervals, checks = [], []
    for i, label in enumerate(labels):
        lin = (value[i] - tq * lin_std[i], value[i] + tq * lin_std[i])
        hw_lin, hw_mc = tq * lin_std[i], 0.5 * (hi_mc[i] - lo_mc[i])
        centre_mc = 0.5 * (hi_mc[i] + lo_mc[i])
        agree = hw_lin > 0 and abs(hw_mc / hw_lin - 1) <= MC_AGREE_TOL and abs(centre_mc - value[i]) <= MC_AGREE_TOL * hw_lin
        lo, hi = lin if agree else (float(lo_mc[i]), float(hi_mc[i]))
        used = "linear" if agree else "monte carlo"
        group = "mass" if label == MASS_LABEL else ("com" if label in COM_LABELS else "inertia")
        intervals.append(Interval(label, group, None, float(value[i]), float(lo), float(hi), float(lin_std[i]), True,
                                  f"{used} (first order vs Monte Carlo half-widths {hw_lin:.3g} / {hw_mc:.3g})"))
        checks.append(PropagationCheck(label, float(value[i]), (float(lin[0]), float(lin[1])),
                                       (float(lo_mc[i]), float(hi_mc[i])), float(lin_std[i]), float(mc_std[i]), used))
    return intervals, checks


def mass_flag(iv: Interval, expected: float | None, tol: float | None) -> str | None:
    """The wrong-part message when the mass interval misses ``expected +- tol`` [kg], else None."""
    if expected is None or tol is None:
        return None
    if iv.upper < expected - tol or iv.lower > expected + tol:
        return (f"payload mass {iv.value:.3f} kg [{iv.lower:.3f}, {iv.upper:.3f}] is far from the expected "
                f"{expected:.3f} +- {tol:.3f} kg: wrong part, two parts or slipping grasp")
    return None


def identify_payload(robot: Robot, loaded: list[Run], reference: list[Run] | None = None,
                     options: PayloadOptions = PayloadOptions()) -> PayloadEstimate:
    """Identify a payload from runs with it (and, ideally, reference runs without it).

    Args:
        robot: the arm, with its link inertials (the URDF's or the LS result's).
        loaded: runs with the payload (static holds; with ``options.motion``, any motion).
        reference: the same poses / trajectory without the payload (None: the model predicts them).
        options: see :class:`PayloadOptions`.

    Raises:
        PayloadInputError: bad options or data (one line naming the run or flag).
    """
    o = options
    o.validate()
    if not loaded:
        raise PayloadInputError("no loaded runs given (--loaded)")
    for run in list(loaded) + list(reference or []):
        if run.meta.robot != robot.name or run.n_dof != robot.n_dof:
            raise PayloadInputError(f"{run.source or run.name}: recorded on {run.meta.robot!r} ({run.n_dof} joints), "
                                    f"not {robot.name!r}; pass the matching --robot")
    model = PayloadModel(robot, o.link)
    warnings: list[str] = []
    if o.motion:
        W, y, segs, dt = _motion_equations(model, loaded, reference, o)
        names, n_holds = PAYLOAD_PARAMS, 0
    else:
        W, y, n_holds = _static_equations(model, loaded, reference, o)
        names, segs, dt = STATIC_PARAMS, None, None
        warnings.append("inertia not identified: static holds only show gravity (m, m c); pass --motion with runs "
                        "that move, recorded with and without the payload")
    if reference is None:
        warnings.append("no reference runs: the arm model predicts the unloaded torque; its error enters the payload "
                        "and is NOT in the error bars (record the same poses without the payload: --reference)")
    p = len(names)
    norms = np.linalg.norm(W, axis=0)
    cond = cond_of(W / np.where(norms > 0, norms, 1.0)) if np.all(norms > 0) else math.inf
    if not math.isfinite(cond) or cond > 1e8 or W.shape[0] <= W.shape[1]:
        raise PayloadInputError(
            f"the {n_holds or len(segs)} {'holds' if not o.motion else 'runs'} cannot separate the payload's "
            f"{', '.join(names)} (condition number {cond:.3g}, {W.shape[0]} equations): add poses that turn the "
            "last link (python scripts/identify_payload.py design)")
    ls = ols(W, y, robot.n_dof)
    cov = ls.cov
    if o.motion:
        factor = autocorr_inflation(y - W @ ls.theta, robot.n_dof, segs, max(1, int(round(o.max_lag_s / dt))))
        cov = cov * factor
        if factor > 1.5:
            warnings.append(f"motion residuals are correlated in time (filtering): error bars widened x{np.sqrt(factor):.2f}")
    dof = W.shape[0] - W.shape[1]
    theta, cov = ls.theta[:p], cov[:p, :p]  # the payload's parameters (offsets are nuisance)
    labels = (MASS_LABEL, *COM_LABELS) + (INERTIA_LABELS if o.motion else ())
    intervals, checks = propagate(theta, cov, dof, o.level, o.mc_samples, o.seed, labels)
    m_iv = intervals[0]
    if m_iv.lower <= 0:
        warnings.append(f"the mass interval [{m_iv.lower:.3g}, {m_iv.upper:.3g}] kg includes 0: the data cannot tell "
                        "this payload from none")
    if o.motion:
        ev = np.linalg.eigvalsh(LinkInertial.from_pi(theta).inertia)
        if ev[0] <= 0 or ev[2] > ev[0] + ev[1]:
            warnings.append(f"the inertia estimate is not physical (eigenvalues {np.round(ev, 6).tolist()}): the "
                            "motion does not excite it enough; use its interval, not its value")
    flag = mass_flag(m_iv, o.expected_mass, o.mass_tolerance)
    return PayloadEstimate(robot.name, model.link, "motion" if o.motion else "static",
                           "model" if reference is None else "measured", tuple(names), theta, cov,
                           float(np.sqrt(ls.sigma2)), int(dof), int(W.shape[0]), int(n_holds), ls.sigma_joint,
                           float(cond), float(o.level), intervals, checks, flag, warnings)
