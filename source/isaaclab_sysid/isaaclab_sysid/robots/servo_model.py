"""The servo as a part: one identified smart servo (issue 42, docs/servo_arms.md "The servo as a part").

A bench fit (one servo on a pendulum, controller ``servo``) identifies the motor and gearbox of one servo family:
torque constant ``kt`` [N m/A], winding resistance ``R`` [Ohm], armature [kg m^2], the friction law and its
parameters, viscous friction [N m s/rad] and the bus delay [ticks of 1 ms]. :class:`ServoModel` is that servo as a
file (``servo_model`` JSON, written by ``scripts/export_dr.py --servo_model OUT.json`` through
``export/servo_part.py``), each number with its interval at the stated level where the fit computed one, and the fit
it came from. A robot config names a part per joint (``servo_model = [...]``, robots/config.py), so an arm built of
that servo reads the bench's numbers.

What a part is not: the encoder offset (a mounting's calibration, not the servo's) and the bench's own inertials.

The friction laws' parameter groups are restated here (:data:`PART_LAWS`; this layer sits below ``sim/``); a test
holds them equal to ``sim/friction.LAWS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.errors import UserError
from isaaclab_sysid.utils.json_io import read_json

#: the file's schema tag (``kind``)
SERVO_MODEL_KIND = "isaaclab_sysid.servo_model"
SERVO_MODEL_VERSION = 1
#: each friction law's parameter groups (``sim/friction.LAWS[name].fit_groups``; tests/test_servo_part.py holds them equal)
PART_LAWS: dict[str, tuple[str, ...]] = {
    "coulomb": ("friction",),
    "stribeck": ("mu_static", "dynamic_ratio", "stribeck_velocity", "stribeck_shape"),
    "sigmoid": ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset"),
    "load": ("friction", "load_friction_motor", "load_friction_external"),
    "dahl": ("friction", "presliding_stiffness"),
}
#: the scalar fields of a part and their units
UNITS = {"kt": "N m/A", "r": "Ohm", "armature": "kg m^2", "viscous": "N m s/rad", "delay": "ticks of 1 ms"}


class ServoModelFileError(UserError, ValueError):
    """A servo part file that cannot be read: one line naming the file and the key."""


@dataclass(frozen=True)
class Estimate:
    """One identified number and its interval.

    Attributes:
        value: the fitted value (the unit is the field's, :data:`UNITS`).
        lower, upper: the interval at the part's level; None where it is unbounded or was not computed.
        note: why the interval is missing or flagged ("" when none).
    """

    value: float
    lower: float | None = None
    upper: float | None = None
    note: str = ""

    def to_json(self) -> dict:
        return {"value": self.value, "lower": self.lower, "upper": self.upper, "note": self.note}


@dataclass(frozen=True)
class ServoModel:
    """One identified servo (the part file).

    Attributes:
        family: the servo family (``robots/servos.py``: ``xl330``, ``sts3215``): the firmware's duty mapping.
        kt: torque constant [N m/A] at the output shaft; r: winding resistance [Ohm].
        armature: reflected rotor inertia [kg m^2].
        friction_law: the law's name (:data:`PART_LAWS`); friction: its parameters by group name (each law's groups).
        viscous: viscous friction [N m s/rad].
        delay: bus delay [ticks of ``tick_s``] (its interval in whole ticks).
        tick_s: the tick [s].
        level: the intervals' two-sided level (0.95); interval_method: how they were computed.
        source: the fit's result file; joint: the fit's joint the servo was; notes: what the fit said about it.
    """

    family: str
    kt: Estimate
    r: Estimate
    armature: Estimate
    friction_law: str
    friction: dict[str, Estimate]
    viscous: Estimate
    delay: Estimate
    tick_s: float = 0.001
    level: float = 0.95
    interval_method: str = ""
    source: str = ""
    joint: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        groups = PART_LAWS.get(self.friction_law)
        if groups is None:
            raise ValueError(f"unknown friction law '{self.friction_law}' (known: {', '.join(PART_LAWS)})")
        if set(self.friction) != set(groups):
            raise ValueError(f"the {self.friction_law} law's parameters are {', '.join(groups)}; "
                             f"got {', '.join(sorted(self.friction)) or 'none'}")

    def values(self) -> dict[str, float]:
        """The part's values as the fit's groups name them: ``motor_kt``, ``motor_r``, ``armature``, ``viscous``,
        ``delay`` and the friction law's groups."""
        out = {"motor_kt": self.kt.value, "motor_r": self.r.value, "armature": self.armature.value,
               "viscous": self.viscous.value, "delay": self.delay.value}
        out.update({g: e.value for g, e in self.friction.items()})
        return out

    def to_json(self) -> dict:
        return {
            "kind": SERVO_MODEL_KIND, "version": SERVO_MODEL_VERSION, "family": self.family,
            "units": {**UNITS, "tick_s": "s"},
            "kt": self.kt.to_json(), "r": self.r.to_json(), "armature": self.armature.to_json(),
            "friction_law": self.friction_law, "friction": {g: e.to_json() for g, e in self.friction.items()},
            "viscous": self.viscous.to_json(), "delay": self.delay.to_json(), "tick_s": self.tick_s,
            "level": self.level, "interval_method": self.interval_method, "source": self.source, "joint": self.joint,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, body: object, where: str = "servo model") -> "ServoModel":
        """The part of a parsed file; ``where`` (the file) names every error.

        Raises:
            ServoModelFileError: one line, ``<where>: '<key>': <why>``.
        """
        def bad(key: str, why: str) -> ServoModelFileError:
            return ServoModelFileError(f"{where}: '{key}': {why}")

        if not isinstance(body, dict):
            raise ServoModelFileError(f"{where}: not a JSON object (a servo part file, docs/servo_arms.md)")
        if body.get("kind") != SERVO_MODEL_KIND:
            raise bad("kind", f"expected '{SERVO_MODEL_KIND}', got {body.get('kind')!r}: not a servo part file")
        if body.get("version") != SERVO_MODEL_VERSION:
            raise bad("version", f"expected {SERVO_MODEL_VERSION}, got {body.get('version')!r}")
        from isaaclab_sysid.robots.servos import SERVO_FAMILIES

        fam = body.get("family")
        if not isinstance(fam, str) or fam.lower() not in SERVO_FAMILIES:
            raise bad("family", f"{fam!r} is no known servo family (known: {', '.join(sorted(SERVO_FAMILIES))})")

        def est(key: str, raw: object, positive: bool = False, nonneg: bool = True) -> Estimate:
            if not isinstance(raw, dict) or "value" not in raw:
                raise bad(key, "expected an object with 'value', 'lower', 'upper'")
            vals = {}
            for k in ("value", "lower", "upper"):
                v = raw.get(k)
                if v is None and k != "value":
                    vals[k] = None
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise bad(f"{key}.{k}", f"expected a finite number, got {v!r}")
                vals[k] = float(v)
            if positive and not vals["value"] > 0:
                raise bad(f"{key}.value", f"must be > 0, got {vals['value']:g}")
            if nonneg and vals["value"] < 0:
                raise bad(f"{key}.value", f"must be >= 0, got {vals['value']:g}")
            lo, hi = vals["lower"], vals["upper"]
            if (lo is not None and lo > vals["value"]) or (hi is not None and hi < vals["value"]):
                raise bad(key, f"the interval [{lo}, {hi}] does not hold the value {vals['value']:g}")
            note = raw.get("note", "")
            return Estimate(vals["value"], lo, hi, str(note) if note is not None else "")

        law = body.get("friction_law")
        if law not in PART_LAWS:
            raise bad("friction_law", f"{law!r} is no friction law (known: {', '.join(PART_LAWS)})")
        fr = body.get("friction")
        if not isinstance(fr, dict):
            raise bad("friction", "expected an object of the law's parameters")
        missing = [g for g in PART_LAWS[law] if g not in fr]
        extra = [g for g in fr if g not in PART_LAWS[law]]
        if missing or extra:
            raise bad("friction", f"the {law} law's parameters are {', '.join(PART_LAWS[law])}"
                      + (f"; missing {', '.join(missing)}" if missing else "") + (f"; not its: {', '.join(extra)}" if extra else ""))
        for k in ("kt", "r", "armature", "viscous", "delay"):
            if k not in body:
                raise bad(k, "missing")
        delay = est("delay", body["delay"])
        if delay.value != int(delay.value):
            raise bad("delay.value", f"must be a whole number of ticks, got {delay.value:g}")
        tick = body.get("tick_s", 0.001)
        if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not tick > 0:
            raise bad("tick_s", f"must be a number > 0, got {tick!r}")
        level = body.get("level", 0.95)
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
            raise bad("level", f"must lie in (0, 1), got {level!r}")
        notes = body.get("notes", [])
        if not isinstance(notes, list):
            raise bad("notes", "expected a list of strings")
        return cls(family=fam.lower(), kt=est("kt", body["kt"], positive=True), r=est("r", body["r"], positive=True),
                   armature=est("armature", body["armature"]), friction_law=law,
                   friction={g: est(f"friction.{g}", fr[g], nonneg=g != "sigmoid_offset") for g in PART_LAWS[law]},
                   viscous=est("viscous", body["viscous"]), delay=delay, tick_s=float(tick), level=float(level),
                   interval_method=str(body.get("interval_method", "")), source=str(body.get("source", "")),
                   joint=str(body.get("joint", "")), notes=tuple(str(n) for n in notes))


def write_servo_model(path: str | Path, model: ServoModel) -> Path:
    """Write the part file atomically; returns the path."""
    return atomic_write_json(path, model.to_json())


def read_servo_model(path: str | Path) -> ServoModel:
    """The part in ``path``.

    Raises:
        ServoModelFileError: the file is missing, not JSON or not a valid part (one line naming the file and key).
    """
    try:
        body = read_json(path, "servo part")
    except ValueError as exc:
        raise ServoModelFileError(str(exc)) from None
    return ServoModel.from_json(body, str(path))


def part_values(parts: tuple["ServoModel | None", ...]) -> dict[str, list[float]]:
    """(group -> (N,) values) the parts' numbers per joint as the fit's groups name them (``float('nan')`` on a joint
    without a part; a group only where some joint's part has it). ``delay`` is per arm: present only when every
    joint has a part and they agree.
    """
    n = len(parts)
    out: dict[str, list[float]] = {}
    for j, p in enumerate(parts):
        if p is None:
            continue
        for g, v in p.values().items():
            if g == "delay":
                continue
            out.setdefault(g, [math.nan] * n)[j] = float(v)
    delays = {p.delay.value for p in parts if p is not None}
    if n and all(p is not None for p in parts) and len(delays) == 1:
        out["delay"] = [float(delays.pop())]
    return out
