"""Randomization ranges = interval + a structure-error allowance, with a configurable policy.

The interval is the statistical uncertainty; the model's structure error (effects
the fit does not have: Stribeck friction, backlash, cable forces, timing) is an
additional bias the covariance does not see. Its size is read from the held-out
run: with rho = (held-out MSE per sample) / (fit MSE per sample), the worst of the q, dq and EE channels, a model that
is right up to noise gives rho ~ 1, and the excess rho - 1 is residual variance
the model cannot explain. The policy treats that excess as extra noise of the
same character, so it scales the statistical half-width:

    allowance = half_width * sqrt(max(rho - 1, 0))         (allowance="heldout")
    range     = value -/+ (half_width + allowance)          (combine="linear", default: a bias adds)
              = value -/+ half_width * sqrt(max(rho, 1))    (combine="quadrature")

plus an optional fixed relative margin ``rel_margin * |value|`` and an absolute
floor ``min_half_width[group]``. Ranges are clipped to the physical limits
(>= 0 for armature, friction, viscous, delay and the friction laws' levels, coefficients and
stiffness), not to the fit's search bounds; a law number's other domain limits (a dynamic
ratio <= 1, a velocity, exponent or slope > 0) are applied where the Isaac Lab module draws it
(``SAMPLED_RANGES``).

A number whose fitted value sits at a search bound gets the fit's search bounds
(its interval assumes an interior optimum), with a warning. Numbers the data
cannot pin down (unbounded interval) get, by policy:
``unidentified="bounds"`` (default) the fit's search bounds, the only range the
user stated, with a warning; or ``"skip"``: no randomization term at all (the
fitted value still goes into the actuator config).

The integer delay's range is its interval widened by ``delay_margin`` ticks
(default: 1 when rho exceeds ``delay_margin_rho``, else 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from isaaclab_sysid.intervals.common import Interval

#: physical lower limit of each group's value
PHYSICAL_MIN = {"armature": 0.0, "friction": 0.0, "viscous": 0.0, "delay": 0.0, "mu_static": 0.0, "dynamic_ratio": 0.0,
                "mass": 1e-6, "sigmoid_amplitude": 0.0, "presliding_stiffness": 0.0, "load_friction_motor": 0.0,
                "load_friction_external": 0.0}


@dataclass(frozen=True)
class RangePolicy:
    """How a randomization range is made from an interval (see module docstring).

    Attributes:
        allowance: ``heldout`` (from rho) or ``none`` (ranges = intervals).
        combine: ``linear`` (half-width + allowance; cautious) or ``quadrature``.
        rel_margin: extra margin as a fraction of |value| (0 = none).
        min_half_width: per group, the smallest half-width of a range (decoded units).
        unidentified: ``bounds`` or ``skip`` for numbers with an unbounded interval.
        delay_margin: ticks added on each side of the delay interval (None = automatic).
        delay_margin_rho: rho above which the automatic delay margin is 1 tick.
        rho_override: use this rho instead of the held-out one (None = measured).
    """

    allowance: str = "heldout"
    combine: str = "linear"
    rel_margin: float = 0.0
    min_half_width: Mapping[str, float] = field(default_factory=dict)
    unidentified: str = "bounds"
    delay_margin: int | None = None
    delay_margin_rho: float = 2.0
    rho_override: float | None = None

    def __post_init__(self) -> None:
        if self.allowance not in ("heldout", "none"):
            raise ValueError(f"allowance must be 'heldout' or 'none', got {self.allowance!r}")
        if self.combine not in ("linear", "quadrature"):
            raise ValueError(f"combine must be 'linear' or 'quadrature', got {self.combine!r}")
        if self.unidentified not in ("bounds", "skip"):
            raise ValueError(f"unidentified must be 'bounds' or 'skip', got {self.unidentified!r}")
        if self.rel_margin < 0 or (self.delay_margin is not None and self.delay_margin < 0):
            raise ValueError("rel_margin and delay_margin must be >= 0")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["min_half_width"] = dict(self.min_half_width)
        return d


@dataclass
class Range:
    """The randomization range of one number (None = no randomization term)."""

    label: str
    group: str
    joint: str | None
    value: float
    lower: float | None
    upper: float | None
    source: str
    interval: tuple[float | None, float | None]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["interval"] = list(self.interval)
        return d


def effective_rho(policy: RangePolicy, measured: float | None) -> tuple[float, list[str]]:
    """The rho the policy uses (1 = no allowance) and any warning."""
    if policy.allowance == "none":
        return 1.0, []
    if policy.rho_override is not None:
        return float(policy.rho_override), []
    if measured is None or not math.isfinite(measured):
        return 1.0, ["ranges: no held-out residual (no held-out runs in the fit): no structure-error allowance; "
                     "give held-out runs or --rho to widen the ranges"]
    return float(measured), []


def make_range(iv: Interval, policy: RangePolicy, rho: float, bounds: tuple[float, float] | None = None) -> tuple[Range | None, list[str]]:
    """The range of one interval under ``policy`` (``bounds``: the fit's search bounds for unidentified numbers)."""
    pmin = PHYSICAL_MIN.get(iv.group, -math.inf)
    warns: list[str] = []
    if iv.at_bound is not None and bounds is not None and iv.group != "delay":
        warns.append(f"ranges: {iv.label} sits at its {iv.at_bound} search bound: randomized over the fit's search "
                     f"bounds [{bounds[0]:g}, {bounds[1]:g}] instead of a point (widen the bound and refit)")
        return Range(iv.label, iv.group, iv.joint, iv.value, max(pmin, bounds[0]), bounds[1], "search bounds (at a bound)",
                     (iv.lower, iv.upper)), warns
    if not iv.bounded:
        if policy.unidentified == "skip" or bounds is None:
            warns.append(f"ranges: {iv.label} is not identifiable: no randomization term"
                         + ("" if policy.unidentified == "skip" else " (no search bounds known)"))
            return None, warns
        warns.append(f"ranges: {iv.label} is not identifiable: randomized over the fit's search bounds "
                     f"[{bounds[0]:g}, {bounds[1]:g}] (policy unidentified=bounds)")
        return Range(iv.label, iv.group, iv.joint, iv.value, max(pmin, bounds[0]), bounds[1], "search bounds (unidentified)",
                     (None, None)), warns
    if iv.group == "delay":
        margin = policy.delay_margin
        if margin is None:
            margin = 1 if (policy.allowance == "heldout" and rho > policy.delay_margin_rho) else 0
        lo, hi = max(pmin, iv.lower - margin), iv.upper + margin
        if iv.at_bound == "upper":
            hi += 1
            warns.append(f"ranges: the delay sits at its upper search bound {iv.upper:g}: its range reaches one tick "
                         "beyond (the true delay may be longer; widen --delay_bounds and refit)")
        return Range(iv.label, iv.group, iv.joint, iv.value, float(math.floor(lo)), float(math.ceil(hi)),
                     f"interval +- {margin} tick(s)", (iv.lower, iv.upper)), warns
    lo_hw, hi_hw = iv.value - iv.lower, iv.upper - iv.value
    if policy.combine == "linear":
        f = 1.0 + math.sqrt(max(rho - 1.0, 0.0))
    else:
        f = math.sqrt(max(rho, 1.0))
    extra = policy.rel_margin * abs(iv.value)
    floor = float(policy.min_half_width.get(iv.group, 0.0))
    lo = iv.value - max(f * lo_hw + extra, floor)
    hi = iv.value + max(f * hi_hw + extra, floor)
    lo = max(lo, pmin)
    src = f"interval x {f:.3g}" + (f" + {policy.rel_margin:g}|value|" if extra else "")
    return Range(iv.label, iv.group, iv.joint, iv.value, float(lo), float(hi), src, (iv.lower, iv.upper)), warns


def make_ranges(intervals, policy: RangePolicy, rho_measured: float | None,
                bounds: Mapping[str, tuple[float, float]] | None = None) -> tuple[list[Range], float, list[str]]:
    """Ranges of every interval; ``bounds`` maps group -> search bounds. Returns (ranges, rho used, warnings)."""
    rho, warns = effective_rho(policy, rho_measured)
    out = []
    for iv in intervals:
        r, w = make_range(iv, policy, rho, (bounds or {}).get(iv.group))
        warns += w
        if r is not None:
            out.append(r)
    return out, rho, warns
