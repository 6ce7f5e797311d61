"""The load law's second start: both load coefficients inside their box, where a refit can tell them apart.

The load law's budget is ``Fc + |k_ext tau_ext - k_motor tau_motor|`` (sim/friction.py). Its refit in the law step
(jobs/auto_model.py) starts from the Coulomb optimum with both coefficients at 0, which replays the Coulomb fit
exactly. That start is the law's corner: a forward difference in either coefficient only adds ``h |tau|`` of friction
there, so the first steps cannot tell the motor-side coefficient from the external one, and the refit can settle in a
basin with the friction on the wrong side. Measured on the 50 Hz task-impedance load twin (docs/benchmarks.md,
"Issue 46, tenth pass"): from the corner, joint 1's external coefficient went to 0.29 (truth 0.02) with its motor
coefficient at 0 (truth 0.03), at a loss 4 % above a basin near the truth, and the held-out run's loss was twice as
high.

The *split start* moves half of each joint's Coulomb level into the load term: the level halved, both coefficients at
one common level ``c`` of their boxes (equal values where the two boxes are equal, as by default: the budget is then
``k |tau_ext - tau_motor|``, whose derivative in each coefficient has its own sign). ``c`` is chosen among :data:`LOAD_SPLIT_LEVELS` as the one whose replay fits
the runs best (one batched rollout): a level too high makes the joints stick and leaves the refit no gradient, too low
puts back the corner. The law step refits from both starts and keeps the better (a Coulomb truth stays reachable from
the corner); the interval stage's basin search (intervals/basins.py) restarts from it to look for the other basin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.replay_objective import ReplayObjective

#: the load law's coefficient groups
LOAD_GROUPS = ("load_friction_motor", "load_friction_external")
#: the common level of both coefficients tried for the split start, as a fraction of their box (normalized coordinate)
LOAD_SPLIT_LEVELS = (0.4, 0.2, 0.1, 0.05, 0.025)
#: the share of each joint's Coulomb level the split start keeps as its constant level
LOAD_SPLIT_KEEP = 0.5


@dataclass(frozen=True)
class SplitStart:
    """The load law's split start.

    Attributes:
        x: (D,) the normalized start; level: the coefficients' common level (a fraction of their box);
        loss: its replay loss on the objective's runs; levels: (L,) every level tried, losses: (L,) their losses.
    """

    x: np.ndarray
    level: float
    loss: float
    levels: tuple[float, ...]
    losses: tuple[float, ...]

    def describe(self) -> str:
        """One phrase for the log."""
        return (f"each Coulomb level x{LOAD_SPLIT_KEEP:g}, both load coefficients at {self.level:g} of their box "
                f"(replay loss {self.loss:.4g}, the best of levels "
                + ", ".join(f"{c:g}" for c in self.levels) + ")")


def load_split_candidates(space: ParamSpace, x: np.ndarray,
                          levels: tuple[float, ...] = LOAD_SPLIT_LEVELS) -> np.ndarray:
    """(L, D) ``x`` (a normalized vector of a load-law space) with each joint's Coulomb level scaled by
    :data:`LOAD_SPLIT_KEEP` and both load coefficients at each of ``levels`` (normalized coordinates in [0, 1]).

    Raises:
        ValueError: ``space`` is not a load-law space (no ``friction`` or no load coefficient group).
    """
    missing = [g for g in ("friction", *LOAD_GROUPS) if g not in space.group_names]
    if missing:
        raise ValueError(f"the split start is the load law's: the space lacks {', '.join(missing)}")
    out = []
    for c in levels:
        dec = space.decode(np.clip(np.asarray(x, dtype=float), 0.0, 1.0))
        dec["friction"] = np.asarray(dec["friction"], dtype=float) * LOAD_SPLIT_KEEP
        y = space.normalize(dec)
        for g in LOAD_GROUPS:
            y[space.slice(g)] = float(c)
        out.append(y)
    return np.asarray(out)


def load_split_start(objective: ReplayObjective, x: np.ndarray,
                     levels: tuple[float, ...] = LOAD_SPLIT_LEVELS) -> SplitStart | None:
    """The split start of ``x`` (module docstring): the candidate of :func:`load_split_candidates` whose replay on
    ``objective``'s runs has the lowest loss (one batched rollout of ``len(levels)`` candidates). None when no
    candidate replays finitely."""
    X = load_split_candidates(objective.space, x, levels)
    lb = objective.loss(X)
    losses = np.where(lb.diverged, np.inf, np.asarray(lb.total, dtype=float))
    if not np.isfinite(losses).any():
        return None
    i = int(np.argmin(losses))
    return SplitStart(X[i], float(levels[i]), float(losses[i]), tuple(float(c) for c in levels),
                      tuple(float(v) for v in losses))
