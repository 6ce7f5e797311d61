"""Act on the cautious end: which end of an interval one use of a number takes.

A fitted number with an interval is a range; a decision needs one value, and the
safe habit is the end that fails gently if the number is wrong. Which end that is
depends on the use, not on the number:

* payload mass for a lift or speed check: ``upper`` (a heavier part needs more torque to stop);
* friction for feed-forward: ``lower`` (too much added torque makes the joint push itself);
* contact stiffness to stay under a force limit: ``upper`` (the distance is worked out from it).

A :class:`UsePolicy` maps number labels (or a group prefix of labels, e.g. ``payload_com``
for ``payload_com_x/y/z``) to one of :data:`ENDS`. It is parsed from ``KEY:END`` strings
(``--policy payload_mass:upper``); a key the export does not know is refused, and a key
the export requires but the user did not state is refused naming the flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from isaaclab_sysid.intervals.common import Interval
from isaaclab_sysid.utils.errors import UserError

#: The ends a policy can choose: the interval's lower end, the point estimate, the upper end.
ENDS = ("lower", "value", "upper")


class PolicyError(UserError, ValueError):
    """A ``--policy`` entry is malformed, unknown or missing (one line naming the flag)."""


@dataclass(frozen=True)
class UsePolicy:
    """Which end each exported number takes.

    Attributes:
        ends: label or label prefix -> ``lower`` | ``value`` | ``upper`` (as the user stated it).
        use: free-form name of the use (``lift check``, ``feed-forward``), recorded with the export.
    """

    ends: Mapping[str, str] = field(default_factory=dict)
    use: str = ""

    def end_of(self, label: str) -> tuple[str, bool]:
        """(end, stated) for ``label``: the longest stated key that is the label or a prefix
        of it (``payload_com`` matches ``payload_com_x``); ``("value", False)`` if none."""
        best = None
        for key in self.ends:
            if label == key or label.startswith(key + "_"):
                if best is None or len(key) > len(best):
                    best = key
        return (self.ends[best], True) if best is not None else ("value", False)

    def to_dict(self) -> dict:
        return {"ends": dict(self.ends), "use": self.use}


def parse_policy(items: Sequence[str], labels: Sequence[str], required: Sequence[str] = (),
                 use: str = "", flag: str = "--policy") -> UsePolicy:
    """A :class:`UsePolicy` from ``KEY:END`` strings.

    Args:
        items: e.g. ``["payload_mass:upper", "payload_com:value"]``.
        labels: every exported number's label; a key must be one of them or a prefix of some.
        required: keys whose end must be stated (e.g. ``payload_mass``).
        use: the use's name, recorded.
        flag: the command-line flag, named in errors.

    Raises:
        PolicyError: a malformed item, an unknown key or end, or a required key not stated.
    """
    ends: dict[str, str] = {}
    for item in items:
        key, sep, end = str(item).partition(":")
        key, end = key.strip(), end.strip()
        if not sep or not key or not end:
            raise PolicyError(f"{flag} {item!r}: expected KEY:END, e.g. payload_mass:upper")
        if end not in ENDS:
            raise PolicyError(f"{flag} {item!r}: end must be one of {', '.join(ENDS)}")
        if not any(lab == key or lab.startswith(key + "_") for lab in labels):
            raise PolicyError(f"{flag} {item!r}: unknown number {key!r} (known: {', '.join(labels)})")
        ends[key] = end
    missing = [k for k in required if k not in ends]
    if missing:
        raise PolicyError(
            f"{flag}: state the end to act on for {', '.join(missing)} (e.g. {flag} {missing[0]}:upper for a "
            "lift or speed check, :lower where too little is the safe side, :value for the point estimate)"
        )
    return UsePolicy(ends, use)


def pick(iv: Interval, end: str) -> float:
    """The value of ``iv`` at ``end``.

    Raises:
        PolicyError: the chosen end is unbounded (the data cannot pin the number down).
    """
    if end == "value":
        return float(iv.value)
    v = iv.lower if end == "lower" else iv.upper
    if v is None:
        raise PolicyError(f"{iv.label}: its {end} end is unbounded ({iv.note or 'not identifiable'}); "
                          "measure better or choose another end")
    return float(v)


def apply_policy(intervals: Sequence[Interval], policy: UsePolicy) -> tuple[dict[str, float], dict[str, tuple[str, bool]], list[str]]:
    """(label -> value at its end, label -> (end, stated), notes on the ends not stated) for ``intervals``."""
    override, used = {}, {}
    for iv in intervals:
        end, stated = policy.end_of(iv.label)
        override[iv.label] = pick(iv, end)
        used[iv.label] = (end, stated)
    notes = [f"{k}: {v[0]} (not stated: the point estimate)" for k, v in used.items() if not v[1]]
    return override, used, notes


def numbers_json(intervals: Sequence[Interval]) -> dict:
    """label -> {lower, value, upper, std}: every exported number with both ends."""
    return {iv.label: {"lower": iv.lower, "value": iv.value, "upper": iv.upper, "std": iv.std} for iv in intervals}

