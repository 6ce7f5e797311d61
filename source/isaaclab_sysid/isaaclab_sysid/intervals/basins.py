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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.intervals.common import IntervalSet, chi2_1
from isaaclab_sysid.intervals.curvature import Sensitivity, integrated_autocorr_time
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
    s2, kappa, _ = delay_scale(sens)
    scale = s2 * max(kappa, integrated_autocorr_time(sens.r))  # the more cautious of the two correlation scales
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
    stat = (float(t.loss) - ssr) / scale if scale > 0 else (0.0 if t.loss <= ssr else math.inf)
    thr = chi2_1(level)
    values = dict(zip(objective.space.labels(), (float(v) for v in objective.space.decoded_vector(t.x))))
    verdict = ref.verdict(state, stage="basins")
    return BasinSearch(groups, start_loss, float(t.loss), float(stat), thr, bool(stat <= thr), bool(stat < -thr),
                       values, int(state.iteration), bool(verdict.converged), verdict.reason)


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
