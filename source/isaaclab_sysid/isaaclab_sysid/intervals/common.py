"""Shared types of the interval methods: one :class:`Interval` per fitted number, an :class:`IntervalSet` per method.

Conventions (docs/intervals_and_export.md):

* every interval is in decoded (physical) units: armature kg m^2, friction N m,
  viscous N m s/rad, delay ticks of 1 ms;
* ``lower``/``upper`` ``None`` means unbounded: the data cannot pin the number
  down (null space of the Jacobian, or an interval wider than the fit's whole
  search box). Such an interval always carries a warning; no number is invented;
* intervals are two-sided at ``level`` (default 0.95, z = 1.96) and clipped to the
  fit's search bounds (the fit could not have returned a value outside them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.utils.json_io import jsonable


def z_of(level: float) -> float:
    """Two-sided normal quantile, e.g. 1.96 for 0.95."""
    if not (0.0 < level < 1.0):
        raise ValueError(f"confidence level must lie in (0, 1), got {level}")
    from statistics import NormalDist

    return float(NormalDist().inv_cdf(0.5 + level / 2.0))


def chi2_1(level: float) -> float:
    """Quantile of chi^2 with one degree of freedom (= z^2)."""
    return z_of(level) ** 2


def lr_statistic(loss: float, reference: float, scale: float) -> float:
    """The likelihood-ratio statistic ``(loss - reference) / scale`` of a point against a reference loss on the
    scale ``s^2 kappa`` (with no scale: 0 where the point is no worse, else inf)."""
    return (loss - reference) / scale if scale > 0 else (0.0 if loss <= reference else math.inf)


@dataclass
class Interval:
    """The interval of one fitted number.

    Attributes:
        label: e.g. ``armature[panda_joint3]`` or ``delay``.
        group: parameter group (``armature``, ``friction``, ``viscous``, ``delay``).
        joint: joint label for per-joint groups, else None.
        value: the fitted value (decoded units).
        lower, upper: the interval; None = unbounded (not identifiable from the data).
        std: standard error (None where undefined, e.g. the integer delay or unbounded).
        identifiable: False when the data cannot pin the number down.
        note: why a number is unbounded, at a bound, etc.
        reliable: False when the interval's assumptions fail: the value sits at a search bound, or
            the model misfits the data (intervals/combine.py ``flag_intervals``); the note says why.
        at_bound: ``lower`` / ``upper`` when the fitted value sits at that search bound, else None.
    """

    label: str
    group: str
    joint: str | None
    value: float
    lower: float | None
    upper: float | None
    std: float | None = None
    identifiable: bool = True
    note: str = ""
    reliable: bool = True
    at_bound: str | None = None

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None

    def contains(self, v: float) -> bool:
        lo = -math.inf if self.lower is None else self.lower
        hi = math.inf if self.upper is None else self.upper
        return lo <= v <= hi

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Interval":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass
class IntervalSet:
    """Intervals of every fitted number from one method.

    Attributes:
        method: ``curvature``, ``bootstrap``, ``per_run``, ``cma``.
        level: two-sided confidence level.
        intervals: one per fitted number, in the parameter space's label order.
        warnings: human-readable warnings (unidentifiable numbers, optimum not converged, ...).
        diagnostics: method-specific numbers (JSON-able).
        cov: covariance of the continuous numbers in decoded units, labels in ``cov_labels``.
    """

    method: str
    level: float
    intervals: list[Interval]
    warnings: list[str] = field(default_factory=list)
    diagnostics: dict = field(default_factory=dict)
    cov: np.ndarray | None = None
    cov_labels: list[str] = field(default_factory=list)

    def by_label(self) -> dict[str, Interval]:
        return {iv.label: iv for iv in self.intervals}

    def correlation(self) -> np.ndarray | None:
        if self.cov is None:
            return None
        d = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        with np.errstate(all="ignore"):
            c = self.cov / np.outer(d, d)
        return np.where(np.isfinite(c), c, 0.0)

    def to_dict(self) -> dict:
        corr = self.correlation()
        return {
            "method": self.method,
            "level": self.level,
            "intervals": [iv.to_dict() for iv in self.intervals],
            "warnings": list(self.warnings),
            "diagnostics": jsonable(self.diagnostics),
            "cov_labels": list(self.cov_labels),
            "cov": None if self.cov is None else jsonable(self.cov),
            "correlation": None if corr is None else jsonable(corr),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "IntervalSet":
        cov = d.get("cov")
        return cls(
            method=d["method"], level=float(d["level"]), intervals=[Interval.from_dict(x) for x in d["intervals"]],
            warnings=list(d.get("warnings", [])), diagnostics=dict(d.get("diagnostics", {})),
            cov=None if cov is None else np.array([[np.nan if v is None else v for v in row] for row in cov], dtype=float),
            cov_labels=list(d.get("cov_labels", [])),
        )


def order_intervals(space: ParamSpace, ivs: Sequence[Interval]) -> list[Interval]:
    """The intervals in the parameter space's label order (labels the space lacks are dropped)."""
    by = {iv.label: iv for iv in ivs}
    return [by[lab] for lab in space.labels() if lab in by]


def gaussian_intervals(
    space: ParamSpace,
    value: np.ndarray,
    cov: np.ndarray,
    cont: np.ndarray,
    level: float,
    method: str,
    unidentified: Sequence[int] = (),
    extra_notes: Mapping[int, str] | None = None,
) -> tuple[list[Interval], list[str]]:
    """value +- z sqrt(diag cov) for the continuous entries ``cont``; clipped to the bounds.

    An entry is unbounded (with a warning) when it is listed in ``unidentified``, its
    variance is not finite, or its interval is wider than the whole search box
    (2 z std >= hi - lo: the data add nothing to the bounds).
    """
    z = z_of(level)
    lo_b, hi_b = space.bounds()
    parts = space.entries()
    out: list[Interval] = []
    warns: list[str] = []
    unid = set(int(i) for i in unidentified)
    notes = dict(extra_notes or {})
    for k, i in enumerate(cont):
        label, group, joint = parts[i].label, parts[i].group, parts[i].joint
        var = float(cov[k, k]) if cov is not None else math.nan
        std = math.sqrt(var) if math.isfinite(var) and var >= 0 else math.nan
        note = notes.get(int(i), "")
        width = hi_b[i] - lo_b[i]
        if int(i) in unid or not math.isfinite(std) or 2 * z * std >= width:
            why = ("in the null space of the Jacobian" if int(i) in unid else
                   f"interval (+-{z * std:.3g}) wider than the search box [{lo_b[i]:g}, {hi_b[i]:g}]"
                   if math.isfinite(std) else "variance undefined") + (f"; {note}" if note else "")
            warns.append(f"{method}: {label} is not identifiable from these runs ({why}); interval unbounded")
            out.append(Interval(label, group, joint, float(value[i]), None, None, None if not math.isfinite(std) else std,
                                False, why))
            continue
        lo = max(lo_b[i], value[i] - z * std)
        hi = min(hi_b[i], value[i] + z * std)
        if value[i] - z * std < lo_b[i] or value[i] + z * std > hi_b[i]:
            note = (note + "; " if note else "") + "clipped to the search bounds"
        out.append(Interval(label, group, joint, float(value[i]), float(lo), float(hi), std, True, note))
    return out, warns
