"""Contact stiffness from a quasi-static press and damping from impacts.

The contact law is ``F_n = max(0, k_c phi + b_c phi_dot)`` with the penetration ``phi = s - s0``
(``contact.geometry``: ``s`` from the measured joints, the surface position ``s0`` unknown).

* **Stiffness** (press): where the tool is in contact (``F_n > f_min``) and moves slowly the
  damping term is negligible, so ``F_n = k_c s - k_c s0`` is a line: least squares of F_n on
  (1, s), one intercept per press run and one common slope ``k_c``. Its interval is Student-t
  on the residual's error bar, widened by the residual's integrated autocorrelation
  (``residual_stats``). Checks: the slope on the lower and upper half of the penetration range
  (a bent line is a nonlinear contact, L.D.2) and, with presses at two or more speeds, the
  slopes' agreement (the operational quasi-static test; a faster press over-estimates k, WE-L.B.d).
* **Damping** (impacts): with ``k_c`` known, ``F_n - k_c s = a + b_c s_dot`` per impact (its own
  intercept ``a = -k_c s0``); ``b_c`` is observable only while ``s_dot`` is large, during a few
  milliseconds of each impact. The impacts' estimates are pooled (inverse-variance mean); their
  error bar is the larger of the pooled one and the impacts' scatter (Birge), with Student-t of
  (impacts - 1) degrees of freedom, and adds the error ``k_c``'s uncertainty carries into each
  impact (``b_i`` is exactly linear in the ``k_c`` it was computed with). That is why the
  damping's interval is wider than the stiffness's: few, short, confounded samples.

Both are direct (linear) least-squares solves: no iteration, nothing to converge. What can fail
is the solve itself: a line whose regressor is rank-deficient (the penetration, or its rate in
an impact, did not vary) has no determined slope, and is refused naming the run instead of
returning a number (``_ols``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.signal
import scipy.stats

from isaaclab_sysid.contact.geometry import normal_coordinates
from isaaclab_sysid.contact.io import ContactRun
from isaaclab_sysid.intervals.common import Interval
from isaaclab_sysid.residual_stats import autocorr_inflation
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.utils.errors import UserError


class ContactInputError(UserError, ValueError):
    """Bad contact input: one line naming the run (file) or the flag."""


@dataclass(frozen=True)
class ContactOptions:
    """Attributes:
    f_min: normal force above which a sample is in contact [N] (well above the sensor noise).
    press_cutoff_hz: zero-phase low-pass of a press's s and F_n before the fit [Hz] (the press is slow;
        filtering both alike keeps their line and removes the position noise that would bias the slope).
    level: two-sided confidence level.
    min_samples: fewest contact samples a press or impact needs.
    max_lag: longest residual correlation looked for [samples].
    min_impact_speed: slowest approach that counts as an impact [m/s].
    """

    f_min: float = 2.0
    press_cutoff_hz: float = 3.0
    level: float = 0.95
    min_samples: int = 20
    max_lag: int = 400
    min_impact_speed: float = 0.01

    def validate(self) -> None:
        if not self.f_min > 0:
            raise ContactInputError(f"--f_min must be > 0 N; got {self.f_min}")
        if not 0 < self.level < 1:
            raise ContactInputError(f"--level must lie in (0, 1); got {self.level}")
        if self.min_samples < 5:
            raise ContactInputError(f"--min_samples must be >= 5; got {self.min_samples}")


@dataclass
class PressFit:
    """One press run's line. Attributes: run; k, k_std [N/m]; s0 [m] (the surface on the s axis);
    residual [N]; n (contact samples); speed: median |s_dot| in contact [m/s]; depth: largest
    penetration [m]; k_low, k_high (+ std): slopes on the lower / upper half of the penetration."""

    run: str
    k: float
    k_std: float
    s0: float
    residual: float
    n: int
    speed: float
    depth: float
    k_low: float
    k_low_std: float
    k_high: float
    k_high_std: float


@dataclass
class ImpactFit:
    """One impact. Attributes: run; b, b_std [N s/m] at the pooled k; speed: approach speed [m/s]
    (largest s_dot at contact onset); peak: largest normal force [N]; n: contact samples; slope_k:
    d b / d k (b is linear in the k it is computed with) [s]."""

    run: str
    b: float
    b_std: float
    speed: float
    peak: float
    n: int
    slope_k: float


@dataclass
class ContactEstimate:
    """Stiffness and damping with intervals, and what each came from.

    Attributes:
        robot; level; stiffness: Interval [N/m]; damping: Interval [N s/m] or None (no impacts).
        presses, impacts: the per-run fits.
        warnings: checks that failed (nonlinear contact, not quasi-static, speeds too alike, ...).
    """

    robot: str
    level: float
    stiffness: Interval
    damping: Interval | None
    presses: list[PressFit]
    impacts: list[ImpactFit]
    warnings: list[str] = field(default_factory=list)

    @property
    def intervals(self) -> list[Interval]:
        return [self.stiffness] + ([self.damping] if self.damping is not None else [])

    def to_json(self) -> dict:
        return {"schema": "isaaclab_sysid.contact/1", "robot": self.robot, "level": self.level,
                "stiffness": self.stiffness.to_dict(), "damping": None if self.damping is None else self.damping.to_dict(),
                "presses": [asdict(p) for p in self.presses], "impacts": [asdict(i) for i in self.impacts],
                "warnings": self.warnings}


def _ols(X: np.ndarray, y: np.ndarray, segments: list[int], max_lag: int,
         name: str = "the runs") -> tuple[np.ndarray, np.ndarray, float, int]:
    """(theta, cov (inflated for correlated residuals), residual std, dof).

    Raises:
        ContactInputError: the line is not determined (rank-deficient regressor or no residual degree of freedom).
    """
    rank = int(np.linalg.matrix_rank(X))
    if rank < X.shape[1] or X.shape[0] <= X.shape[1]:
        raise ContactInputError(
            f"{name}: the line is not determined ({X.shape[0]} samples, regressor rank {rank} of {X.shape[1]}): the "
            "penetration (or, in an impact, its rate) does not vary in contact; press deeper or impact faster")
    theta, *_ = np.linalg.lstsq(X, y, rcond=None)
    r = y - X @ theta
    dof = X.shape[0] - X.shape[1]
    s2 = float(r @ r) / dof
    cov = s2 * np.linalg.inv(X.T @ X) * autocorr_inflation(r, 1, segments, max_lag)
    return theta, cov, float(np.sqrt(s2)), dof


def _contact_rows(robot: Robot, cr: ContactRun, o: ContactOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s, sd, f = normal_coordinates(robot, cr.run, cr.test.normal, cr.test.tip_offset, cr.force)
    m = f > o.f_min
    if m.sum() < o.min_samples:
        raise ContactInputError(
            f"{cr.name}: {int(m.sum())} samples with a normal force above --f_min {o.f_min:g} N (need "
            f"{o.min_samples}); check the normal's sign and the force frame in the contact sidecar")
    return s[m], sd[m], f[m]


def _line(s: np.ndarray, f: np.ndarray, max_lag: int, name: str = "the runs") -> tuple[float, float, float, float, int]:
    theta, cov, res, dof = _ols(np.column_stack([np.ones_like(s), s]), f, [s.size], max_lag, name)
    return float(theta[1]), float(np.sqrt(cov[1, 1])), float(theta[0]), res, dof


def _press_rows(robot: Robot, cr: ContactRun, o: ContactOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, s_dot, F_n) of a press in contact: s and F_n low-passed alike; the contact samples chosen by
    penetration (``s > s0 + f_min / k`` from a first line through ``F_n > f_min``), not by force: selecting
    on the noisy force would bend the line near the threshold."""
    s_all, sd_all, f_all = normal_coordinates(robot, cr.run, cr.test.normal, cr.test.tip_offset, cr.force)
    rate = 1.0 / float(np.median(np.diff(cr.run.t)))
    if o.press_cutoff_hz < 0.5 * rate:
        sos = scipy.signal.butter(2, o.press_cutoff_hz, fs=rate, output="sos")
        s_all, f_all = scipy.signal.sosfiltfilt(sos, s_all), scipy.signal.sosfiltfilt(sos, f_all)
        sd_all = np.gradient(s_all, cr.run.t)  # the penetration rate of the filtered path
    first = f_all > o.f_min
    if first.sum() < o.min_samples:
        raise ContactInputError(
            f"{cr.name}: {int(first.sum())} samples with a normal force above --f_min {o.f_min:g} N (need "
            f"{o.min_samples}); check the normal's sign and the force frame in the contact sidecar")
    k, _, a, _, _ = _line(s_all[first], f_all[first], o.max_lag, cr.name)
    if not k > 0:
        raise ContactInputError(f"{cr.name}: the force does not grow with penetration (slope {k:.3g} N/m): "
                                "check the normal's sign in the contact sidecar")
    m = s_all > -a / k + o.f_min / k
    if m.sum() < o.min_samples:
        raise ContactInputError(f"{cr.name}: only {int(m.sum())} samples pressed deeper than --f_min / k; press deeper")
    return s_all[m], sd_all[m], f_all[m]


def fit_presses(robot: Robot, presses: list[ContactRun], o: ContactOptions) -> tuple[Interval, list[PressFit], list[str]]:
    """The common stiffness of the press runs, per-press lines and the checks' warnings."""
    fits, rows, warns = [], [], []
    z = scipy.stats.norm.ppf(0.5 + o.level / 2)
    for cr in presses:
        s, sd, f = _press_rows(robot, cr, o)
        k, k_std, a, res, _ = _line(s, f, o.max_lag, cr.name)
        lo = s <= np.median(s)
        kl = _line(s[lo], f[lo], o.max_lag, cr.name)
        kh = _line(s[~lo], f[~lo], o.max_lag, cr.name)
        s0 = -a / k
        fits.append(PressFit(cr.name, k, k_std, s0, res, int(s.size), float(np.median(np.abs(sd))), float(s.max() - s0),
                             kl[0], kl[1], kh[0], kh[1]))
        rows.append((s, f))
        if abs(kl[0] - kh[0]) > z * np.hypot(kl[1], kh[1]) and abs(kl[0] - kh[0]) > 0.05 * k:
            warns.append(f"{cr.name}: the force-penetration line is not straight (slope {kl[0]:.4g} N/m at low, "
                         f"{kh[0]:.4g} N/m at high penetration): a nonlinear contact; restrict the range or use a "
                         "nonlinear model (e.g. Hunt-Crossley)")
    # one slope, one intercept per press
    R = len(rows)
    X = np.zeros((sum(s.size for s, _ in rows), R + 1))
    y = np.concatenate([f for _, f in rows])
    start = 0
    for r, (s, _) in enumerate(rows):
        X[start : start + s.size, r] = 1.0
        X[start : start + s.size, R] = s
        start += s.size
    theta, cov, _, dof = _ols(X, y, [s.size for s, _ in rows], o.max_lag)
    k, k_std = float(theta[R]), float(np.sqrt(cov[R, R]))
    if R >= 2:
        ks = np.array([p.k for p in fits])
        w = 1.0 / np.array([p.k_std for p in fits]) ** 2
        chi2 = float(np.sum(w * (ks - np.sum(w * ks) / np.sum(w)) ** 2))
        if chi2 > scipy.stats.chi2.ppf(o.level, R - 1):
            speeds = ", ".join(f"{p.k:.4g} N/m at {1e3 * p.speed:.2g} mm/s" for p in fits)
            warns.append(f"press slopes differ with speed ({speeds}): not quasi-static, the damping adds to the force; "
                         "slow the press")
    else:
        warns.append("quasi-static condition not checked: one press; press at two speeds (the slope must not change)")
    tq = float(scipy.stats.t.ppf(0.5 + o.level / 2, dof))
    iv = Interval("contact_stiffness", "contact_stiffness", None, k, max(0.0, k - tq * k_std), k + tq * k_std, k_std, True,
                  f"press slope, {len(fits)} press(es), {dof} dof")
    return iv, fits, warns


def fit_impacts(robot: Robot, impacts: list[ContactRun], stiffness: Interval, o: ContactOptions
                ) -> tuple[Interval, list[ImpactFit], list[str]]:
    """The damping from impacts given the stiffness (see module doc)."""
    if len(impacts) < 2:
        raise ContactInputError(f"damping needs impacts at several approach speeds (got {len(impacts)}): its interval "
                                "comes from their spread")
    k = stiffness.value
    fits, warns = [], []
    for cr in impacts:
        s, sd, f = _contact_rows(robot, cr, o)
        X = np.column_stack([np.ones_like(s), sd])
        # b is linear in k: b(k) = c - k d with c, d the s_dot coefficients of regressing f and s on (1, s_dot)
        beta_f, cov, _, _ = _ols(X, f - k * s, [s.size], o.max_lag, cr.name)
        beta_s, *_ = np.linalg.lstsq(X, s, rcond=None)
        speed = float(np.max(sd[: max(3, s.size // 10)]))
        if speed < o.min_impact_speed:
            raise ContactInputError(f"{cr.name}: approach speed {speed:.3g} m/s at contact is below --min_impact_speed "
                                    f"{o.min_impact_speed:g}: not an impact (a press?)")
        fits.append(ImpactFit(cr.name, float(beta_f[1]), float(np.sqrt(cov[1, 1])), speed, float(f.max()), int(s.size),
                              -float(beta_s[1])))
    b = np.array([i.b for i in fits])
    w = 1.0 / np.array([i.b_std for i in fits]) ** 2
    b_bar = float(np.sum(w * b) / np.sum(w))
    se_int = float(1.0 / np.sqrt(np.sum(w)))
    se_ext = float(np.sqrt(np.sum(w * (b - b_bar) ** 2) / ((len(b) - 1) * np.sum(w))))
    se = max(se_int, se_ext)
    d_bar = float(np.sum(w * np.array([i.slope_k for i in fits])) / np.sum(w))
    t_b = float(scipy.stats.t.ppf(0.5 + o.level / 2, len(b) - 1))
    t_k = (stiffness.upper - stiffness.value) / stiffness.std if stiffness.std else 0.0
    hw = float(np.hypot(t_b * se, t_k * abs(d_bar) * (stiffness.std or 0.0)))
    speeds = np.array([i.speed for i in fits])
    if speeds.max() < 1.3 * speeds.min():
        warns.append(f"impact speeds {np.round(speeds, 3).tolist()} m/s are too alike to check the law's speed "
                     "dependence; impact at three or more speeds")
    iv = Interval("contact_damping", "contact_damping", None, b_bar, max(0.0, b_bar - hw), b_bar + hw,
                  float(np.hypot(se, abs(d_bar) * (stiffness.std or 0.0))), True,
                  f"{len(fits)} impacts, scatter x{se_ext / se_int:.2f} of their error bars, k's share "
                  f"{abs(d_bar) * (stiffness.std or 0.0):.3g} N s/m")
    return iv, fits, warns


def identify_contact(robot: Robot, runs: list[ContactRun], options: ContactOptions = ContactOptions()) -> ContactEstimate:
    """Stiffness from the press runs and, when impact runs are given, damping (see module doc).

    Raises:
        ContactInputError: no press run, a single impact, a run without contact, a wrong normal sign.
    """
    options.validate()
    for cr in runs:
        if cr.run.meta.robot != robot.name:
            raise ContactInputError(f"{cr.name}: recorded on {cr.run.meta.robot!r}, not {robot.name!r}")
    presses = [cr for cr in runs if cr.test.test == "press"]
    impacts = [cr for cr in runs if cr.test.test == "impact"]
    if not presses:
        raise ContactInputError("no press run: the stiffness comes from a quasi-static press (contact sidecar test: press)")
    k_iv, press_fits, warns = fit_presses(robot, presses, options)
    b_iv, impact_fits = None, []
    if impacts:
        b_iv, impact_fits, w2 = fit_impacts(robot, impacts, k_iv, options)
        warns += w2
    else:
        warns.append("no impact runs: damping not identified")
    return ContactEstimate(robot.name, options.level, k_iv, b_iv, press_fits, impact_fits, warns)
