"""The randomization record: what ``sysid_dr.json`` holds and the Isaac Lab module is generated from.

``export.build.build_dr_record`` makes it from a fit, its intervals and a range policy;
``to_json`` is ``sysid_dr.json`` (``export/neutral.py`` writes it and its YAML twin),
``from_json`` reads it back. Not the grasped part: that is ``payload.export.PayloadExport``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


def _opt_float(v) -> float | None:
    return None if v is None else float(v)


@dataclass
class SpanRow:
    """One number's interval or randomization range.

    Attributes:
        value: the fitted (point) value, or None where the file has none.
        lower, upper: the ends in the number's units (None: unbounded, not identifiable).
        extra: the row's other fields in file order (intervals: ``std``, ``identifiable``, ``note``;
            ranges: ``source``), written back as they were read.
    """

    value: float | None
    lower: float | None
    upper: float | None
    extra: dict = field(default_factory=dict)

    @property
    def ends(self) -> tuple[float | None, float | None]:
        """(lower, upper)."""
        return self.lower, self.upper

    def to_json(self) -> dict:
        return {"value": self.value, "lower": self.lower, "upper": self.upper, **self.extra}

    @classmethod
    def from_json(cls, d: Mapping) -> "SpanRow":
        return cls(d.get("value"), d.get("lower"), d.get("upper"),
                   {k: v for k, v in d.items() if k not in ("value", "lower", "upper")})


@dataclass
class DelayRow:
    """The actuator delay in ticks of ``tick_s`` [s]: fitted, its interval and its randomization range (None: fixed)."""

    value_ticks: float
    interval_ticks: list | None = None
    range_ticks: list | None = None
    tick_s: float = 0.001

    def to_json(self) -> dict:
        return {"value_ticks": self.value_ticks, "interval_ticks": self.interval_ticks,
                "range_ticks": self.range_ticks, "tick_s": self.tick_s}

    @classmethod
    def from_json(cls, d: Mapping) -> "DelayRow":
        return cls(d["value_ticks"], d.get("interval_ticks"), d.get("range_ticks"), float(d.get("tick_s", 0.001)))


@dataclass
class MassRow:
    """One link mass the export randomizes: its label (``ranges``' key), the link [body name] and the value [kg]."""

    label: str
    link: str
    value: float

    def to_json(self) -> dict:
        return {"label": self.label, "link": self.link, "value": self.value}


@dataclass
class DrRecord:
    """The randomization record (``sysid_dr.json``).

    Attributes:
        joint_names: the fit's joints (the robot config's), the order of every per-joint list.
        fitted: group -> per-joint fitted values (SI units: ``units``).
        labels_per_joint: group -> the labels of its numbers, in joint order (``intervals``/``ranges`` keys).
        intervals: label -> the chosen method's interval.
        ranges: label -> the randomization range (the policy's; labels without one are not randomized).
        delay: the delay in 1 ms ticks, or None (not fitted).
        masses: the link masses with intervals (``--rb_params``), in the order written.
        source: the fit's result file; level, interval_method, range_policy, rho, rho_used: how the ranges were made.
        meta: the record's other sections in file order (``units``, ``intervals_all_methods``, ``structure``,
            ``unreliable``, ``adequacy``, ``warnings``, ``isaaclab``), carried as written.
    """

    joint_names: list[str]
    fitted: dict[str, list[float]]
    labels_per_joint: dict[str, list[str]]
    intervals: dict[str, SpanRow]
    ranges: dict[str, SpanRow]
    delay: DelayRow | None = None
    masses: list[MassRow] = field(default_factory=list)
    source: str | None = None
    level: float | None = None
    interval_method: str | None = None
    range_policy: dict | None = None
    rho: float | None = None
    rho_used: float | None = None
    meta: dict = field(default_factory=dict)

    def range_of(self, label: str | None) -> tuple[float, float] | None:
        """(lower, upper) of ``label``'s randomization range as floats, or None (no range, or no label)."""
        r = self.ranges.get(label) if label else None
        return None if r is None else (float(r.lower), float(r.upper))

    #: the order of the sections in sysid_dr.json
    _ORDER = ("source", "robot_joint_names", "joint_names", "units", "fitted", "delay", "level", "interval_method",
              "intervals", "intervals_all_methods", "range_policy", "rho", "rho_used", "ranges", "masses",
              "labels_per_joint", "structure", "unreliable", "adequacy", "warnings", "isaaclab")

    def to_json(self) -> dict:
        """``sysid_dr.json``'s object."""
        own = {
            "source": self.source,
            "robot_joint_names": list(self.joint_names),
            "joint_names": list(self.joint_names),
            "fitted": self.fitted,
            "delay": None if self.delay is None else self.delay.to_json(),
            "level": self.level,
            "interval_method": self.interval_method,
            "intervals": {k: v.to_json() for k, v in self.intervals.items()},
            "range_policy": self.range_policy,
            "rho": self.rho,
            "rho_used": self.rho_used,
            "ranges": {k: v.to_json() for k, v in self.ranges.items()},
            "masses": [m.to_json() for m in self.masses],
            "labels_per_joint": self.labels_per_joint,
        }
        body = {**own, **self.meta}
        return {k: body[k] for k in self._ORDER if k in body} | {k: v for k, v in body.items() if k not in self._ORDER}

    @classmethod
    def from_json(cls, d: Mapping) -> "DrRecord":
        """The record of ``sysid_dr.json``'s object (``joint_names``, ``fitted``, ``labels_per_joint``, ``ranges`` required).

        Raises:
            KeyError: a required section is missing.
        """
        own = {"source", "robot_joint_names", "joint_names", "fitted", "delay", "level", "interval_method", "intervals",
               "range_policy", "rho", "rho_used", "ranges", "masses", "labels_per_joint"}
        return cls(
            joint_names=list(d["joint_names"]),
            fitted={g: [float(v) for v in vals] for g, vals in d["fitted"].items()},
            labels_per_joint={g: list(v) for g, v in d["labels_per_joint"].items()},
            intervals={k: SpanRow.from_json(v) for k, v in (d.get("intervals") or {}).items()},
            ranges={k: SpanRow.from_json(v) for k, v in d["ranges"].items()},
            delay=None if d.get("delay") is None else DelayRow.from_json(d["delay"]),
            masses=[MassRow(m["label"], m["link"], float(m["value"])) for m in d.get("masses") or []],
            source=d.get("source"), level=_opt_float(d.get("level")), interval_method=d.get("interval_method"),
            range_policy=d.get("range_policy"), rho=_opt_float(d.get("rho")), rho_used=_opt_float(d.get("rho_used")),
            meta={k: v for k, v in d.items() if k not in own},
        )
