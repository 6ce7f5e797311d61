"""Static holds in a run: where the arm stands still, its mean pose and mean torque.

A hold is a stretch of rows where every joint's |dq| stays below ``v_max`` for at
least ``min_s`` seconds; ``settle_s`` seconds are dropped at both ends (the arm is still
settling after the move, and the next move's first, slow rows already accelerate). A
loaded hold is paired with the reference hold (the same pose without the payload)
nearest to it in joint space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data import Run
from isaaclab_sysid.utils.errors import UserError


class PayloadInputError(UserError, ValueError):
    """Bad payload input: one line naming the run (file) and the time or flag."""


@dataclass(frozen=True)
class HoldOptions:
    """How holds are found and paired.

    Attributes:
        v_max: largest |dq| of any joint during a hold [rad/s].
        min_s: shortest hold [s] (after trimming).
        settle_s: seconds dropped at each end of a hold [s].
        pose_tol: largest joint difference between a loaded hold and its reference [rad].
    """

    v_max: float = 0.01
    min_s: float = 0.5
    settle_s: float = 0.2
    pose_tol: float = 0.02

    def validate(self) -> None:
        for name in ("v_max", "min_s", "pose_tol"):
            if not getattr(self, name) > 0:
                raise PayloadInputError(f"--{name} must be > 0; got {getattr(self, name)}")
        if self.settle_s < 0:
            raise PayloadInputError(f"--settle_s must be >= 0; got {self.settle_s}")


@dataclass(frozen=True)
class Hold:
    """One static hold.

    Attributes:
        run: the run's name (or file); t0, t1: its time span [s] (after trimming).
        q: (N,) mean joint positions [rad].
        tau: (N,) mean torque of the chosen signal [N m].
        tau_sem: (N,) standard error of that mean (within-hold scatter / sqrt(rows)) [N m].
        rows: rows averaged.
    """

    run: str
    t0: float
    t1: float
    q: np.ndarray
    tau: np.ndarray
    tau_sem: np.ndarray
    rows: int

    def where(self) -> str:
        return f"{self.run}: hold t={self.t0:.2f}-{self.t1:.2f} s"


def _signal(run: Run, signal: str) -> np.ndarray:
    if signal not in ("tau_J", "tau"):
        raise PayloadInputError(f"--torque_signal must be tau_J or tau; got {signal!r}")
    return np.asarray(getattr(run, signal), dtype=float)


def find_holds(run: Run, options: HoldOptions = HoldOptions(), signal: str = "tau_J") -> list[Hold]:
    """The static holds of ``run`` in time order (possibly none)."""
    y = _signal(run, signal)
    still = np.all(np.abs(run.dq) < options.v_max, axis=1)
    t = run.t
    name = str(run.source or run.name)
    holds: list[Hold] = []
    edges = np.flatnonzero(np.diff(np.r_[0, still.astype(np.int8), 0]))
    for a, b in zip(edges[::2], edges[1::2]):  # rows a..b-1 are still
        t_start, t_end = t[a] + options.settle_s, t[b - 1] - options.settle_s
        keep = np.arange(a, b)[(t[a:b] >= t_start - 1e-12) & (t[a:b] <= t_end + 1e-12)]
        if keep.size < 2 or t[keep[-1]] - t[keep[0]] < options.min_s - 1e-9:
            continue
        n = keep.size
        sem = y[keep].std(axis=0, ddof=1) / np.sqrt(n)
        holds.append(Hold(name, float(t[keep[0]]), float(t[keep[-1]]), run.q[keep].mean(axis=0),
                          y[keep].mean(axis=0), sem, int(n)))
    return holds


def holds_of(runs: list[Run], options: HoldOptions, signal: str, what: str) -> list[Hold]:
    """All holds of ``runs``; a run without any hold is refused (it names the run and the thresholds)."""
    out: list[Hold] = []
    for run in runs:
        h = find_holds(run, options, signal)
        if not h:
            raise PayloadInputError(
                f"{run.source or run.name}: no static hold in this {what} run (|dq| < {options.v_max:g} rad/s "
                f"for {options.min_s:g} s between {options.settle_s:g} s trimmed at each end); see --v_max / --min_s")
        out += h
    return out


def pair_holds(loaded: list[Hold], reference: list[Hold], pose_tol: float) -> list[tuple[Hold, Hold]]:
    """Each loaded hold with the reference hold nearest in joint space (max |dq_j|).

    Raises:
        PayloadInputError: a loaded hold has no reference within ``pose_tol`` (names both).
    """
    if not reference:
        raise PayloadInputError("no reference holds given")
    Q = np.stack([h.q for h in reference])
    out = []
    for h in loaded:
        d = np.max(np.abs(Q - h.q[None]), axis=1)
        k = int(np.argmin(d))
        if d[k] > pose_tol:
            raise PayloadInputError(
                f"{h.where()}: no reference hold within {pose_tol:g} rad (nearest: {reference[k].where()}, "
                f"max |dq| {d[k]:.3g} rad); record the reference at the same poses or raise --pose_tol")
        out.append((h, reference[k]))
    return out
