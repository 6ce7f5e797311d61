"""A friction law's other basins: every interval holds each basin the data cannot tell from the fit's.

A law's *shape* numbers (the Stribeck velocity and shape exponent, the sigmoid's slope and offset, the Dahl
stiffness: :data:`SHAPE_GROUPS`) can fit about equally well in two places. On the servo twin the Stribeck shape did,
with one joint's static friction at 0 in the other basin. Intervals built from the local curvature see one basin only.

This step searches the other side. It restarts the refinement (:class:`~isaaclab_sysid.fit.refine.LMRefiner`, the
fitted delay held, ``max_iter`` iterations) from the optimum with every shape entry moved to the other side of its
box: coordinate 0.8 where the fit's is below 0.5, else 0.2. The basin it reaches is scored with the delay profile's
likelihood-ratio statistic (intervals/delay_union.py: ``(loss - loss_min) / (s^2 kappa)`` against chi^2_1 at the
level), kappa the larger of the delay's HAC ratio and the residual's integrated autocorrelation time.

- **A basin within the noise.** Every curvature and bootstrap interval becomes the union of itself and that basin's
  value; the numbers that moved are named in a warning.
- **A basin that fits better.** The fit stopped in a worse basin. The union is taken all the same, and the warning
  says to refit from there.
- **A basin the data reject.** Nothing changes. ``structure.basins`` in ``intervals.json`` records the search either
  way.

The load law has no shape group; its other basin is the law step's refit from the start it did not keep
(fit/law_starts.py: the Coulomb corner or the split start, written as ``law_load/other_start.json``).
:func:`score_lines` scores the line from the fit through that optimum, and beyond both, with the same statistic,
and the same line one joint at a time (that joint's law entries moving, the rest held; one batched rollout for all;
``structure.alternatives``). Every interval holds each point of them within the noise (:func:`widen_for_line`);
where the other optimum lies beyond the noise on the same slope as the fit (no ridge between), every interval that
does not hold it is marked unreliable.
On the 1 kHz task-impedance load twin the two starts end 0.4 N m apart on joint 4's Coulomb level, whose local
interval was +-0.03: the line stays within the noise from 0.38 to 1.14 N m (truth 0.54), a valley between the
constant level and the load term that the local curvature does not see; on the 50 Hz twin the whole line crosses a
ridge (joints 1 and 7 switch sides), and joint 4's line alone stays within the noise from 0.04 to 1.26 N m.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.objective.loss import WeightedLoss
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.intervals.common import IntervalSet, chi2_1, lr_statistic
from isaaclab_sysid.intervals.curvature import Sensitivity, candidates_per_call, integrated_autocorr_time
from isaaclab_sysid.intervals.delay_union import delay_scale

#: the groups that set a friction law's shape (sim/friction.py)
SHAPE_GROUPS = ("stribeck_velocity", "stribeck_shape", "sigmoid_slope", "sigmoid_offset", "presliding_stiffness")
#: a number counts as moved when the other basin puts it this share of its half-width away (or more)
NAMED_SHARE = 0.5


@dataclass
class BasinSearch:
    """The search for a law's other basin.

    Attributes:
        groups: the shape groups moved; start_loss / loss: the restart's loss at its start and where it ended.
        statistic: ``(loss - fit loss) / (s^2 kappa)`` (negative: the basin fits better); threshold: chi^2_1.
        accepted: the basin is within the noise (or better); better: it fits better beyond the noise.
        values: the basin's decoded value per label; iterations: LM iterations spent.
        converged: the restart stopped on a convergence test (False: it ran out of budget, ``stop`` says how, and a
            rejected basin is not excluded).
    """

    groups: list[str]
    start_loss: float
    loss: float
    statistic: float
    threshold: float
    accepted: bool
    better: bool
    values: dict[str, float] = field(default_factory=dict)
    iterations: int = 0
    converged: bool = True
    stop: str = ""

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()}


def shape_groups(objective: ReplayObjective) -> list[str]:
    """The shape groups the fit has (none: the step does not apply)."""
    return [g for g in SHAPE_GROUPS if g in objective.space.group_names]


def other_side(x: np.ndarray, objective: ReplayObjective, groups: list[str]) -> np.ndarray:
    """(D,) ``x`` with every entry of ``groups`` on the other side of its box (0.8 below the middle, else 0.2)."""
    y = np.clip(np.asarray(x, dtype=float), 0.0, 1.0).copy()
    for g in groups:
        sl = objective.space.slice(g)
        y[sl] = np.where(y[sl] < 0.5, 0.8, 0.2)
    return y


def search_basin(objective: ReplayObjective, sens: Sensitivity, level: float = 0.95, max_iter: int = 6,
                 release_jacobian: bool = False) -> BasinSearch | None:
    """The refinement restarted on the other side of the shape groups (module docstring); None when the fit has no
    shape group or the restart did not replay finitely. ``release_jacobian``: drop ``sens``'s Jacobian once its
    scale is read, before the restart (for a caller that reads it no more: its stencils do not then sit beside it;
    issue 45, the interval stage's peak on a long run)."""
    groups = shape_groups(objective)
    if not groups:
        return None
    scale = basin_scale(sens)
    ssr = sens.ssr
    if release_jacobian:
        sens.release_jacobian()
    start = other_side(sens.x0, objective, groups)
    ref = LMRefiner(objective, RefineSettings(max_iter=max_iter, delay_neighbours=0))
    state = ref.start(start, labels=["the other side of the law's shape"])
    start_loss = float(state.tracks[0].loss)
    while state.phase == 1 and not state.done:  # phase 1 only: the fitted delay
        ref.step(state)
    t = state.best()
    if not np.isfinite(t.loss):
        return None
    stat = lr_statistic(float(t.loss), ssr, scale)
    thr = chi2_1(level)
    values = dict(zip(objective.space.labels(), (float(v) for v in objective.space.decoded_vector(t.x))))
    verdict = ref.verdict(state, stage="basins")
    return BasinSearch(groups, start_loss, float(t.loss), float(stat), thr, bool(stat <= thr), bool(stat < -thr),
                       values, int(state.iteration), bool(verdict.converged), verdict.reason)


def basin_scale(sens: Sensitivity) -> float:
    """``s^2 kappa``, the statistic's scale: the residual variance times the larger of the delay's HAC ratio and the
    residual's integrated autocorrelation time (the more cautious of the two correlation scales)."""
    s2, kappa, _ = delay_scale(sens)
    return float(s2 * max(kappa, integrated_autocorr_time(sens.r)))


#: the steps along the line through the fit (0) and another start's optimum (1) that :func:`score_lines` scores;
#: negative steps go beyond the fit, away from the other optimum
LINE_STEPS = (-3.0, -2.0, -1.5, -1.0, -0.75, -0.5, -0.25, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


@dataclass
class LineScan:
    """The line from the fit through an optimum found elsewhere (the load law's other start), scored point by point.

    Attributes:
        origin: where the other optimum came from; steps: (K,) t of each point, ``x0 + t (x_other - x0)`` clipped to
        the box (1: the other optimum); statistics: (K,) each point's ``(loss - fit loss) / (s^2 kappa)`` (inf: it
        did not replay finitely); threshold: chi^2_1 at the level; points: each point's decoded value per label;
        whole: the line through the other optimum itself (False: restricted to one joint's entries, whose t = 1 is no
        refit's end).
    """

    origin: str
    steps: list[float]
    statistics: list[float]
    threshold: float
    points: list[dict[str, float]] = field(default_factory=list)
    whole: bool = True

    def accepted(self) -> list[int]:
        """The points within the noise (or better)."""
        return [i for i, st in enumerate(self.statistics) if st <= self.threshold]

    def better(self) -> list[int]:
        """The points that fit better than the fit beyond the noise."""
        return [i for i, st in enumerate(self.statistics) if st < -self.threshold]

    def no_ridge(self) -> bool:
        """Whether the other optimum (t = 1) lies beyond the noise on the same slope as the fit: no point between
        them (0 < t < 1) scores above it, and the slope goes on down past the fit (a point at t < 0 fits better than
        the fit). Two refits that stop at two points of one slope, with no ridge between, stop where the slope
        flattens, not at an optimum: the numbers they disagree on depend on where the refit started. A heuristic
        on 13 points of one line, which errs toward marking."""
        if not self.whole or 1.0 not in self.steps:
            return False
        far = self.statistics[self.steps.index(1.0)]
        inner = [st for t, st in zip(self.steps, self.statistics) if 0.0 < t < 1.0]
        beyond = [st for t, st in zip(self.steps, self.statistics) if t < 0.0]
        return bool(math.isfinite(far) and far > self.threshold and inner and max(inner) <= far
                    and beyond and min(beyond) < 0.0)

    def to_json(self) -> dict:
        return {"origin": self.origin, "steps": self.steps, "threshold": self.threshold,
                "statistics": [None if not math.isfinite(v) else v for v in self.statistics],
                "accepted_steps": [self.steps[i] for i in self.accepted()], "no_ridge": self.no_ridge()}


def joint_masks(space: ParamSpace, groups: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """Per joint, (its name, (D,) mask of its entries of ``groups``): the directions :func:`score_lines` scans one
    joint at a time."""
    out = []
    for j, name in enumerate(space.joint_names):
        m = np.zeros(space.dim)
        for g in groups:
            if g in space.group_names:
                m[space.slice(g).start + j] = 1.0
        if m.any():
            out.append((name, m))
    return out


def score_lines(objective: ReplayObjective, sens: Sensitivity, x_other: np.ndarray, origin: str,
                masks: Sequence[tuple[str, np.ndarray]] = (), level: float = 0.95,
                steps: tuple[float, ...] = LINE_STEPS) -> list[LineScan]:
    """The line from the fit (``sens.x0``) through ``x_other`` ((D,) normalized, in ``objective``'s space), and the
    same line restricted to each of ``masks`` (one joint's law entries moving, the rest held at the fit), each
    scored at ``steps`` with :func:`search_basin`'s statistic: one batched rollout for all. Points within the noise
    are a one-dimensional profile along a direction two starts found: the numbers not moving are not re-optimized, so
    the loss there is at least the profile's and every such point lies inside the profile-likelihood region of every
    number. Masks along which nothing moves are skipped. Call it while ``sens`` still holds its residual."""
    space = objective.space
    x0 = np.asarray(sens.x0, dtype=float)
    d = np.asarray(x_other, dtype=float) - x0
    k = space.delay_index
    if k is not None and space.delay_of(x0) == space.delay_of(np.asarray(x_other, dtype=float)):
        d[k] = 0.0  # the same delay: the line keeps the fit's (a bin's centre is not the fit's coordinate)
    t = np.asarray(steps, dtype=float)[:, None]
    lines = [(origin, d)] + [(f"{origin}, {name}'s entries alone", d * m) for name, m in masks
                             if np.any(d * m != 0) and np.any(d * (1 - m) != 0)]
    X = np.concatenate([np.clip(x0[None, :] + t * dd[None, :], 0.0, 1.0) for _, dd in lines])
    scale, ssr = basin_scale(sens), sens.ssr
    per = candidates_per_call(objective.runs)  # the memory cap of issue 45: the Jacobian is still held
    lb = WeightedLoss.join([objective.loss(X[i:i + per]) for i in range(0, len(X), per)])
    stats = [math.inf if div or not np.isfinite(loss) else float(lr_statistic(loss, ssr, scale))
             for loss, div in zip(np.asarray(lb.total, dtype=float), lb.diverged)]
    labels, K = objective.space.labels(), len(steps)
    points = [dict(zip(labels, (float(v) for v in objective.space.decoded_vector(x)))) for x in X]
    return [LineScan(name, [float(v) for v in steps], stats[i * K:(i + 1) * K], chi2_1(level), points[i * K:(i + 1) * K],
                     whole=i == 0) for i, (name, _) in enumerate(lines)]


def widen_for_line(sets: dict[str, IntervalSet], scan: LineScan) -> list[str]:
    """Each curvature / bootstrap interval made the union of itself and every point of ``scan`` within the noise;
    where a point fits better beyond the noise, the intervals it moves by at least :data:`NAMED_SHARE` of their
    half-width are marked unreliable (the fit stopped short of the data's optimum along that line); where the other
    optimum lies beyond the noise with no ridge between (:meth:`LineScan.no_ridge`), every interval that does not hold
    its value is marked unreliable (the two refits stopped on one slope). Returns the warnings (none when nothing
    moves or is marked)."""
    ok, better = scan.accepted(), scan.better()
    far = scan.points[scan.steps.index(1.0)] if scan.no_ridge() else None
    named: dict[str, float] = {}
    sloped: list[str] = []
    for m in ("curvature", "bootstrap"):
        for iv in sets[m].intervals:
            if not iv.bounded or iv.group == "delay":
                continue
            half = 0.5 * (iv.upper - iv.lower)
            v1 = None if far is None else far.get(iv.label)
            if v1 is not None and not iv.lower <= v1 <= iv.upper:  # the other refit's end, outside, on one slope
                iv.reliable = False
                iv.note = "; ".join(n for n in (iv.note, f"{scan.origin} stopped at {v1:.4g} on the same slope (no "
                                                "ridge between): where the refit stops depends on its start") if n)
                if m == "curvature":
                    sloped.append(iv.label)
            vals = [scan.points[i].get(iv.label) for i in ok]
            vals = [v for v in vals if v is not None]
            if not vals:
                continue
            share = max(abs(v - iv.value) for v in vals) / half if half > 0 else math.inf
            vb = [v for v in (scan.points[i].get(iv.label) for i in better) if v is not None]
            moved_by_better = bool(vb) and (half <= 0 or max(abs(v - iv.value) for v in vb) / half >= NAMED_SHARE)
            iv.lower, iv.upper = float(min(iv.lower, *vals)), float(max(iv.upper, *vals))
            if moved_by_better:
                iv.reliable = False
            if share >= NAMED_SHARE:
                iv.note = "; ".join(n for n in (iv.note, "union with the line to " + scan.origin) if n)
                if m == "curvature":
                    named[iv.label] = share
    out = []
    if sloped:
        out.append(f"intervals: {scan.origin} stopped on the same slope as the fit, beyond the noise (statistic "
                   f"{scan.statistics[scan.steps.index(1.0)]:.1f}, no ridge between): a refit stops where the slope "
                   "flattens, not at an optimum, so these numbers depend on its start and are marked unreliable: "
                   + ", ".join(sloped[:8]) + (f" and {len(sloped) - 8} more" if len(sloped) > 8 else ""))
    if not named and not better:
        return out
    span = "t " + ", ".join(f"{scan.steps[i]:+g}" for i in ok)
    moved = ", ".join(f"{lab} ({s:.2f})" for lab, s in sorted(named.items(), key=lambda t: -t[1])[:8])
    more = f" and {len(named) - 8} more" if len(named) > 8 else ""
    head = (f"intervals: on the line from the fit (t 0) to {scan.origin} (t 1) the loss is within the noise at "
            f"{span} (statistic <= {scan.threshold:.2f})")
    if better:
        best = min(scan.statistics)
        head += (f"; a point on it fits better (statistic {best:.1f}): the fit stopped short of the data's optimum "
                 "there, and the intervals that point moves are marked unreliable; refit from it")
    return out + [head + (f"; every interval holds those points, and these move (share of their half-width): "
                          f"{moved}{more}" if named else "")]


def widen_for_basin(sets: dict[str, IntervalSet], basin: BasinSearch) -> list[str]:
    """Each curvature / bootstrap interval made the union of itself and an accepted basin's value; the warning naming
    the numbers the basin moves by at least :data:`NAMED_SHARE` of their half-width (none when nothing moves)."""
    if not basin.accepted:
        if basin.converged:
            return []
        return [f"intervals: the restart on the other side of the friction law's shape ({', '.join(basin.groups)}) "
                f"ran out of its budget at statistic {basin.statistic:.1f} (> {basin.threshold:.2f}; {basin.stop}): "
                "another basin within the noise is not excluded, and the intervals do not hold one"]
    named: dict[str, float] = {}
    for m in ("curvature", "bootstrap"):
        for iv in sets[m].intervals:
            v = basin.values.get(iv.label)
            if v is None or not iv.bounded or iv.group == "delay":
                continue
            half = 0.5 * (iv.upper - iv.lower)
            share = abs(v - iv.value) / half if half > 0 else math.inf
            iv.lower, iv.upper = float(min(iv.lower, v)), float(max(iv.upper, v))
            if share >= NAMED_SHARE:
                iv.note = "; ".join(n for n in (iv.note, f"union with the law's other basin ({v:.4g})") if n)
                if m == "curvature":
                    named[iv.label] = share
    if not named and not basin.better:
        return []
    moved = ", ".join(f"{lab} ({s:.2f})" for lab, s in sorted(named.items(), key=lambda t: -t[1]))
    head = (f"intervals: the friction law's shape ({', '.join(basin.groups)}) has another basin that fits better "
            f"(statistic {basin.statistic:.1f} below -{basin.threshold:.2f}): the fit stopped in a worse one; refit from "
            "there (--x0 with its values)" if basin.better else
            f"intervals: the friction law's shape ({', '.join(basin.groups)}) fits within the noise in another basin "
            f"(statistic {basin.statistic:.2f} <= {basin.threshold:.2f})")
    return [head + (f"; every interval holds both, and these move (share of their half-width): {moved}" if moved
                    else "")]
