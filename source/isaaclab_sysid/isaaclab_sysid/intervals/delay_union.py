"""The delay's uncertainty carried into the continuous intervals: the profile-likelihood union.

The actuator delay is an integer number of 1 ms ticks, fitted by profile (fit/refine.py: one
Levenberg-Marquardt track per delay). The curvature sandwich and the block bootstrap are computed at
the fitted delay only, so they are *conditional* on it: where the runs cannot tell delay d from its
neighbours, the continuous numbers (a servo's kp, kd, armature) absorb the difference and their
conditional intervals miss the truth while looking confident. This module makes them unconditional:

1. **The test's scale** (:func:`delay_scale`). The delay gets one more Jacobian column, the change of the
   residuals over one tick (r(d0 + 1) - r(d0), and r(d0 - 1) - r(d0): the sensitivity rollout already holds
   them), and the sandwich of that augmented problem (the same Newey-West bandwidth, or the same window
   clusters, as the curvature intervals) gives the delay's HAC variance V_hac and its white-noise variance
   V_naive = s^2 (J^T J)^+_dd. With kappa = max(1, V_hac / V_naive), the larger of the two columns',
   the likelihood-ratio statistic of a delay d is

       LR(d) = (L(d) - L_min) / (s^2 kappa),

   L(d) the fit loss (``sum r^2``) with the continuous numbers re-optimized at delay d. For a quadratic
   profile this is the Wald statistic with the HAC variance; d is *accepted* when LR(d) <= chi^2_1(level).
2. **The profile walk** (:func:`profile_delays`). The walk starts at the fitted delay and, when the
   screening profile (below) has its minimum elsewhere, at that minimum too; it then steps outward one
   tick at a time from every accepted delay. A delay is re-optimized by the refiner
   (:class:`~isaaclab_sysid.fit.refine.LMRefiner`, its delay held fixed, its phase 1 only, ``max_iter``
   its per-phase budget) from the better (lower loss) of two starts: the nearest re-optimized delay's
   optimum moved to d, and the fit's own track at d when the refinement left one; the delays of one round
   share one refiner (batched rollouts). Before that, a delay is *screened out* without re-optimization
   when both cheap estimates of its profile loss, the fit's track at that delay and one Gauss-Newton step
   from the optimum (curvature.py's profile), put it above ``screen_factor`` x chi^2_1(level): a sharp
   delay costs nothing. At most ``max_delays`` delays are re-optimized (the walk says so when it stops
   there). Cost: per round one rollout of the starts (two per delay at most), then per iteration and
   delay a finite-difference Jacobian (p + 1 candidates, p the continuous entries; the refiner may reuse
   it with Broyden updates) and one to three trial steps; the record keeps the LM iterations and the
   rollout candidates spent.
3. **The union** (:func:`union_intervals`, called by ``combine.compute_all``): at each accepted delay other
   than the fitted one the continuous numbers get their own curvature and bootstrap intervals (one
   sensitivity rollout of 2p + 1 candidates there, widened as at the fitted delay); each continuous
   interval becomes the union over the fitted and the accepted delays, and the delay interval the hull of
   them. An interval the union widens by more than :data:`DEPENDS_RATIO` is noted "depends on the
   delay". When only the fitted delay is accepted nothing changes (bit for bit).

When the fitted delay is itself rejected (another delay's re-optimized loss is lower by more than the
threshold) the fit did not find the delay's optimum: the union still spans the fitted value and the
accepted delays' optima, every interval is marked unreliable, and a warning says which delay the data
prefer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.intervals.common import IntervalSet, chi2_1, lr_statistic, z_of
from isaaclab_sysid.intervals.curvature import (
    Sensitivity,
    cluster_meat,
    hac_bandwidth,
    hac_meat,
    integrated_autocorr_time,
    pinv_normalized,
)

#: a delay whose cheap profile estimates both exceed this multiple of chi^2_1(level) is not re-optimized
SCREEN_FACTOR = 4.0
#: a continuous interval the union widens by more than this factor "depends on the delay"
DEPENDS_RATIO = 1.5


@dataclass
class DelayPoint:
    """One delay of the profile.

    Attributes:
        delay: [ticks of 1 ms]. loss: the fit loss (``sum r^2``) there, continuous numbers re-optimized
            (or the screening estimate when ``x`` is None). source: how ``loss`` was obtained.
        x: (D,) normalized vector at that delay (None for a screened-out delay). statistic: LR(d).
    """

    delay: int
    loss: float
    source: str
    x: np.ndarray | None = None
    statistic: float = math.nan
    accepted: bool = False


@dataclass
class DelayProfile:
    """The re-optimized delay profile and its likelihood-ratio test (module docstring)."""

    fitted: int
    points: dict[int, DelayPoint]
    level: float
    threshold: float
    s2: float
    kappa: float
    scale_note: str
    lm_iterations: int = 0
    candidates: int = 0
    truncated: bool = False
    max_iter: int = 0

    @property
    def accepted(self) -> list[int]:
        """The delays not rejected at ``level`` (sorted)."""
        return sorted(d for d, p in self.points.items() if p.accepted)

    @property
    def union_delays(self) -> list[int]:
        """The delays the intervals span: the accepted ones and the fitted one (sorted)."""
        return sorted(set(self.accepted) | {self.fitted})

    @property
    def fitted_rejected(self) -> bool:
        return not self.points[self.fitted].accepted

    @property
    def best(self) -> int:
        """The delay of the lowest profile loss among the re-optimized delays (and the fitted one)."""
        return min((p for p in self.points.values() if p.x is not None), key=lambda p: p.loss).delay

    def to_json(self, space: ParamSpace | None = None) -> dict:
        """JSON-able record (``intervals.json`` ``structure.delay``); with ``space`` each re-optimized delay's decoded
        optimum (label -> value) is included."""
        pts = {}
        for d, p in sorted(self.points.items()):
            e = {"loss": p.loss, "statistic": p.statistic, "accepted": p.accepted, "source": p.source}
            if p.x is not None and space is not None:
                e["values"] = dict(zip(space.labels(), (float(v) for v in space.decoded_vector(p.x))))
            pts[str(d)] = e
        return {"fitted": self.fitted, "accepted": self.accepted, "union_delays": self.union_delays,
                "interval": [min(self.union_delays), max(self.union_delays)], "level": self.level,
                "threshold_chi2_1": self.threshold, "s2": self.s2, "kappa": self.kappa,
                "scale": self.s2 * self.kappa, "scale_note": self.scale_note, "profile": pts,
                "cost": {"lm_iterations": self.lm_iterations, "rollout_candidates": self.candidates,
                         "max_iter_per_round": self.max_iter, "truncated": self.truncated},
                "note": "LR(d) = (L(d) - L_min) / (s2 kappa), L(d) the fit loss re-optimized at delay d; accepted: "
                        "LR <= chi2_1(level) (intervals/delay_union.py)"}


def delay_scale(sens: Sensitivity) -> tuple[float, float, str]:
    """(s^2, kappa, note): the white-noise variance s^2 = SSR / (n - p) of the curvature intervals and the
    delay's HAC-to-white variance ratio kappa >= 1 (module docstring, step 1).

    The delay's column is the change of the residuals over one tick, r(d0 + 1) - r(d0) and r(d0 - 1) - r(d0)
    (both from the sensitivity rollout); kappa is the larger of the two columns' ratios (the cautious one; a
    central difference would vanish where the profile is symmetric about d0). Falls back to the residuals'
    integrated autocorrelation time when no neighbouring delay was profiled or every column lies in the null
    space of the augmented J^T J.
    """
    n, p = sens.n_obs, len(sens.cont)
    s2 = sens.ssr / max(n - p, 1)
    tau = integrated_autocorr_time(sens.r)
    L = hac_bandwidth(sens.r, tau)
    d0 = sens.delay0
    J0 = sens.finite_J()
    scale = np.append(sens.space.widths()[sens.cont], 1.0)
    kappas = []
    # the augmented Jacobian [J, r(nb) - r(d0)] is never formed (issue 45: a copy of J, hundreds of MB on a long run):
    # its curvature and scores are assembled from J's blocks and the delay column's, each the same einsum on the same
    # numbers as on the augmented array (the delay column paired with itself: two equal columns, which numpy sums as
    # it sums a column of the augmented array; tests/test_intervals_streamed.py holds it to the augmented form)
    H_J = [np.einsum("tcp,tcq->pq", J, J) for J in J0]
    g_J = [np.einsum("tcp,tc->tp", J, r) for J, r in zip(J0, sens.r)]
    for nb in (d0 - 1, d0 + 1):
        rn = sens.r_delay.get(nb)
        if rn is None:
            continue
        H = 0
        gs = []
        for J, HJ, gJ, a, b, r in zip(J0, H_J, g_J, rn, sens.r, sens.r):
            D = np.repeat((a - b)[..., None], 2, axis=2)
            Hr = np.empty((p + 1, p + 1))
            Hr[:p, :p] = HJ
            Hr[:p, p] = np.einsum("tcp,tcq->pq", J, D)[:, 0]
            Hr[p, :p] = np.einsum("tcp,tcq->pq", D, J)[0]
            Hr[p, p] = np.einsum("tcp,tcq->pq", D, D)[0, 0]
            H = H + Hr
            g = np.empty((gJ.shape[0], p + 1))
            g[:, :p] = gJ
            g[:, p] = np.einsum("tcp,tc->tp", D, r)[:, 0]
            gs.append(g)
            del D
        pi = pinv_normalized(H, scale)
        M = np.zeros((p + 1, p + 1))
        for g, w in zip(gs, sens.windows or [None] * len(sens.r)):
            g[:, -1] -= g[:, -1].mean()  # a discrete optimum: the delay's score need not sum to zero there
            M += cluster_meat(g, w) if w is not None and len(w) > 1 else hac_meat([g], L)
        v_naive = s2 * pi.Hinv[-1, -1]
        v_hac = (pi.Hinv @ M @ pi.Hinv)[-1, -1]
        if p not in pi.null_entries and np.isfinite(v_hac) and v_naive > 0:
            kappas.append(float(v_hac / v_naive))
    if not kappas:
        return s2, max(1.0, tau), "no usable one-tick delay column (none profiled, or in the null space): kappa = " \
                                  "the residuals' autocorrelation time"
    return s2, max(1.0, *kappas), ("kappa = the larger V_hac / V_naive of the one-tick delay columns "
                                   f"({', '.join(f'{k:.3g}' for k in kappas)}), at least 1")


def one_step_profile(sens: Sensitivity) -> dict[int, float]:
    """Per profiled delay, the loss after one Gauss-Newton step of the continuous numbers from the optimum
    (``SSR(d) - g_d^T (J^T J)^+ g_d``; curvature.py's delay profile)."""
    Hinv = sens.gauss_newton_inverse()
    out = {}
    for d, rs in sens.r_delay.items():
        g = np.nan_to_num(sens.score_sum(rs))
        out[d] = max(float(sum(np.sum(r**2) for r in rs)) - float(g @ Hinv @ g), 0.0)
    return out


def screening(sens: Sensitivity, result: FitResult | None, lo: int, hi: int) -> tuple[dict, dict[int, float]]:
    """The fit's refinement tracks per delay (delay -> track, finite ones of this space) and, per delay in
    [lo, hi] other than the fitted one, the cheaper of the two profile-loss estimates: that track's loss and one
    Gauss-Newton step from the optimum (:func:`one_step_profile`)."""
    gn = one_step_profile(sens)
    tracks = {}
    if result is not None and result.refine is not None:
        tracks = {int(d): t for d, t in result.refine.best_per_delay().items()
                  if t.x.size == sens.space.dim and np.isfinite(t.loss)}
    screen = {d: min(gn.get(d, math.inf), tracks[d].loss if d in tracks else math.inf)
              for d in range(lo, hi + 1) if d != sens.delay0}
    return tracks, screen


def profile_delays(objective: ReplayObjective, sens: Sensitivity, result: FitResult | None = None,
                   level: float = 0.95, max_iter: int = 5, max_delays: int = 8,
                   screen_factor: float = SCREEN_FACTOR) -> DelayProfile | None:
    """The re-optimized delay profile around the fitted delay and its likelihood-ratio test (module docstring).

    Args:
        objective: the fit's objective (the one ``sens`` was rolled out on).
        sens: the sensitivity at the fit's optimum (with its delay profile: ``profile_delay=True``).
        result: the fit result whose refinement tracks (one per delay) are the warm starts; None: none.
        max_iter: LM iterations per round of re-optimized delays.
        max_delays: at most this many delays are re-optimized.
    Returns None when the delay is not fitted.
    """
    if sens.delay0 is None:
        return None
    space = objective.space
    d0 = int(sens.delay0)
    g = space.group("delay")
    lo_b, hi_b = int(g.lower), int(g.upper)
    s2, kappa, note = delay_scale(sens)
    scale = s2 * kappa
    thr = chi2_1(level)
    tracks, screen = screening(sens, result, lo_b, hi_b)
    prof = DelayProfile(d0, {d0: DelayPoint(d0, sens.ssr, "the fit's optimum", sens.x0.copy())}, level, thr, s2,
                        kappa, note, max_iter=max_iter)
    n_reopt = 0

    def lmin() -> float:
        return min(p.loss for p in prof.points.values() if p.x is not None)

    def restat() -> None:
        m = lmin()
        for p in prof.points.values():
            p.statistic = lr_statistic(p.loss, m, scale)
            p.accepted = p.x is not None and p.statistic <= thr

    def reoptimize(ds: list[int]) -> None:
        nonlocal n_reopt
        starts, labels = [], []
        for d in ds:  # two starts per delay: the fit's own track there and the nearest re-optimized delay's optimum
            near = min((p for p in prof.points.values() if p.x is not None), key=lambda p: (abs(p.delay - d), p.loss))
            starts.append(space.with_delay(near.x, d))
            labels.append(f"delay {near.delay}'s optimum")
            if d in tracks:
                starts.append(space.with_delay(tracks[d].x, d))
                labels.append(f"the fit's track at delay {d}")
        ref = LMRefiner(objective, RefineSettings(max_iter=max_iter, delay_neighbours=0))
        state = ref.start(starts[0], starts[1:], labels)
        prof.candidates += len(starts)
        for d in ds:  # refine only the better start of each delay
            ts = sorted((t for t in state.tracks if t.delay == d and t.active), key=lambda t: t.loss)
            for t in ts[1:]:
                t.active = False
                t.stop = "the other start of this delay is better"
        while state.phase == 1 and not state.done:  # phase 1 only: each track at its own delay
            rec = ref.step(state)
            prof.candidates += int(rec["evaluations"])
        prof.lm_iterations += state.iteration
        for d in ds:
            ts = [t for t in state.tracks if t.delay == d and np.isfinite(t.loss)]
            n_reopt += 1
            if not ts:
                prof.points[d] = DelayPoint(d, math.inf, "diverged from every start")
                continue
            t = min(ts, key=lambda t: t.loss)
            prof.points[d] = DelayPoint(d, float(t.loss), f"re-optimized: {t.accepted} LM steps from {t.start}",
                                        t.x.copy())

    if screen:
        ds = min(screen, key=screen.get)
        if screen[ds] < sens.ssr:  # the cheap profile's minimum is elsewhere: walk from there too
            reoptimize([ds])
    while True:
        restat()
        m = lmin()
        frontier = sorted({d + s for d, p in prof.points.items() if p.accepted for s in (-1, 1)}
                          - set(prof.points))
        frontier = [d for d in frontier if lo_b <= d <= hi_b]
        todo = []
        for d in frontier:
            est = screen.get(d, math.inf)
            stat = (est - m) / scale if scale > 0 else math.inf
            if stat > screen_factor * thr:
                src = "screened out: one Gauss-Newton step" + (" / the fit's track" if d in tracks else "")
                prof.points[d] = DelayPoint(d, est, src, None, stat, False)
            else:
                todo.append(d)
        if not todo:
            break
        room = max_delays - n_reopt
        if room <= 0:
            prof.truncated = True
            break
        if len(todo) > room:
            prof.truncated = True
            todo = sorted(todo, key=lambda d: screen.get(d, math.inf))[:room]
        reoptimize(todo)
    restat()
    return prof


def conditional_width(lo: float | None, hi: float | None) -> float | None:
    """hi - lo in the number's decoded units (None when unbounded)."""
    return None if lo is None or hi is None else hi - lo


def union_intervals(base: IntervalSet, at: Mapping[int, IntervalSet], prof: DelayProfile,
                    values: Mapping[int, Mapping[str, float]]) -> dict[str, float]:
    """Widen ``base`` (the set at the fitted delay) in place to the union over ``at`` (delay -> the same
    method's set at that delay) and set its delay interval to the hull of ``prof.union_delays``.

    ``values``: per delay, label -> the decoded optimum there (the union holds each). Returns, per continuous
    label, the union's width over the conditional width (inf when the union is unbounded and the conditional
    interval was not; labels that did not widen are left out).
    """
    z = z_of(base.level)
    ratios: dict[str, float] = {}
    ds = prof.union_delays
    others = [d for d in ds if d != prof.fitted]
    for iv in base.intervals:
        if iv.group == "delay":
            if iv.bounded:
                iv.lower, iv.upper = float(min(iv.lower, ds[0])), float(max(iv.upper, ds[-1]))
            iv.note = "; ".join(n for n in (iv.note, f"re-optimized profile accepts delays {prof.accepted}") if n)
            continue
        w0 = conditional_width(iv.lower, iv.upper)
        cond = [at[d].by_label().get(iv.label) for d in others if d in at]
        if not iv.bounded:
            continue
        if any(c is None or not c.bounded for c in cond):
            iv.lower = iv.upper = None
            iv.std = None
            iv.identifiable = False
            iv.note = "; ".join(n for n in (iv.note, f"unbounded at an accepted delay {others}") if n)
            ratios[iv.label] = math.inf
            continue
        vals = [values[d][iv.label] for d in others if iv.label in values.get(d, {})]
        lo = min([iv.lower, *(c.lower for c in cond), *vals])
        hi = max([iv.upper, *(c.upper for c in cond), *vals])
        if lo == iv.lower and hi == iv.upper:
            continue
        ratio = (hi - lo) / w0 if w0 and w0 > 0 else math.inf
        iv.lower, iv.upper = float(lo), float(hi)
        iv.std = float(max(iv.std or 0.0, (hi - lo) / (2 * z)))
        tag = f"union over delays {ds} (x{ratio:.2f} the interval at the fitted delay {prof.fitted} alone)"
        if ratio > DEPENDS_RATIO:
            tag += ": depends on the delay"
        iv.note = "; ".join(n for n in (iv.note, tag) if n)
        ratios[iv.label] = float(ratio)
    base.diagnostics["delay_union"] = {"delays": ds, "width_ratio": dict(ratios)}
    return ratios


def union_warnings(prof: DelayProfile, ratios: Mapping[str, float]) -> list[str]:
    """The report's warnings about an ambiguous or mis-fitted delay (none when only the fitted one is accepted)."""
    out: list[str] = []
    acc = prof.accepted
    lv = f"{100 * prof.level:g} %"
    moved = sorted(((k, v) for k, v in ratios.items() if v > DEPENDS_RATIO), key=lambda kv: -kv[1])
    names = ", ".join(f"{k} (x{v:.1f})" if math.isfinite(v) else f"{k} (unbounded)" for k, v in moved) or "none"
    span = f"[{prof.union_delays[0]}, {prof.union_delays[-1]}]"
    union = (f" The delay interval is {span} and every continuous interval is the union over delays "
             f"{prof.union_delays}; these move with the delay (union wider than {DEPENDS_RATIO:g}x the interval at "
             f"the fitted delay {prof.fitted} alone): {names}")
    if len(acc) > 1:
        out.append(f"intervals: the delay is not pinned by these runs: delays {acc} pass the likelihood-ratio test at "
                   f"{lv} (continuous numbers re-optimized at each; statistics "
                   + ", ".join(f"{d}: {prof.points[d].statistic:.2g}" for d in acc)
                   + f" against {prof.threshold:.3g}), so no interval may be read at one delay." + union)
    if prof.fitted_rejected:
        out.append(f"intervals: the fitted delay {prof.fitted} is rejected by the re-optimized delay profile (LR "
                   f"{prof.points[prof.fitted].statistic:.3g} > {prof.threshold:.3g}): delay(s) {acc} fit the runs "
                   f"better (best {prof.best}); the fit did not reach the delay's optimum and every interval is marked "
                   f"unreliable; refit with --delay_bounds {min(acc)} {max(acc)}."
                   + (union if len(acc) == 1 else ""))
    if prof.truncated:
        out.append(f"intervals: the delay profile walk stopped after re-optimizing its maximum number of delays; "
                   f"delays beyond {sorted(d for d, p in prof.points.items() if p.x is not None)} were not tested and "
                   "may be plausible too")
    return out


def mark_unreliable(sets: Sequence[IntervalSet], why: str) -> None:
    """Mark every interval of ``sets`` unreliable with ``why`` appended to its note."""
    for s in sets:
        for iv in s.intervals:
            iv.reliable = False
            iv.note = "; ".join(n for n in (iv.note, why) if n)


@dataclass
class DelayUnion:
    """What :func:`combine.compute_all` records under ``structure["delay"]``: the profile, the union's per-label
    widening (``width_ratio``: union width / conditional width) and ``conditional``: per delay of the union (the
    fitted one included), label -> the curvature interval [lower, upper] at that delay alone (after the same
    widening as at the fitted delay; None: unbounded)."""

    profile: DelayProfile
    width_ratio: dict[str, float] = field(default_factory=dict)
    conditional: dict[int, dict[str, list]] = field(default_factory=dict)

    def to_json(self, space: ParamSpace) -> dict:
        """:meth:`DelayProfile.to_json` plus the union's widening, the numbers that depend on the delay and the
        conditional intervals."""
        d = self.profile.to_json(space)
        d["width_ratio"] = {k: (v if math.isfinite(v) else None) for k, v in self.width_ratio.items()}
        d["depends_on_delay"] = sorted(k for k, v in self.width_ratio.items() if v > DEPENDS_RATIO)
        d["conditional_curvature"] = {str(k): v for k, v in self.conditional.items()}
        return d
