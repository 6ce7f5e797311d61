#!/usr/bin/env python
"""The servo twin's short-episode delay case (docs/servo_arms.md section 6; issue 27): the intervals at the fitted
delay alone against the intervals that carry the delay's uncertainty (intervals/delay_union.py).

The frictionless SO-101 twin, one ``--duration_s`` episode of multisine + saturating steps and one held out,
imported from its LeRobot dataset. By default it is fitted as a user fits it (scripts/sysid_franka_osc.py,
``kp,kd,armature,delay``, ``--refine_iter``); ``--fit_delay D`` instead takes the truth refined at delay D (the
CI test's shortcut, tests/test_servo_proof.py). Both interval reports are judged against the truth; the figures
and the delay profile go to ``<out>/delay_union.json``.

    python benchmarks/servo_delay_union.py --out /tmp/delay_union              # the fit as a user runs it
    python benchmarks/servo_delay_union.py --out /tmp/delay_union_5 --fit_delay 5
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass

import tyro

from isaaclab_sysid.jobs.servo_proof import CI_GROUPS, ServoVerdict, delay_case
from isaaclab_sysid.utils.atomic import atomic_write_json


@dataclass
class Args:
    """The short-episode delay case, judged before and after the delay union."""

    out: str
    """Folder for the dataset, the runs and the fit (must not hold runs yet)."""
    duration_s: float = 4.0
    """Episode length [s] (the fit episode and the held-out one)."""
    fit_delay: int | None = None
    """None: fit with scripts/sysid_franka_osc.py; else the truth refined at this delay [ticks of 1 ms]."""
    refine_iter: int = 15
    """--refine_iter of the fit (with --fit_delay: LM iterations per phase at that delay)."""
    groups: str = CI_GROUPS
    """The fitted groups (--fit_groups; the default: the CI-size proof's)."""


def counts(v: ServoVerdict) -> dict:
    """How many kp, kd, armature numbers are covered, flagged (identifiable=False or reliable=False) or missed."""
    rows = [r for r in v.rows if r.label.startswith(("kp[", "kd[", "armature["))]
    return {"numbers": len(rows), "covered": sum(r.covered for r in rows),
            "flagged": sum(not r.covered and r.unidentified is not None for r in rows),
            "missed": [r.label for r in rows if not r.covered and r.unidentified is None]}


def main(a: Args) -> int:
    case = delay_case(a.out, a.duration_s, a.fit_delay, a.groups, a.refine_iter)
    for name, v in (("conditional on the fitted delay (before)", case.conditional),
                    ("with the delay's uncertainty (after)", case.union)):
        print(f"== {name}\n{v.format()}\n{counts(v)}\n")
    print(f"delay profile: accepted {case.delay.get('accepted')}, interval {case.delay.get('interval')}, "
          f"kappa {case.delay.get('kappa')}, cost {case.delay.get('cost')}; seconds {case.seconds}")
    atomic_write_json(f"{a.out}/delay_union.json", {
        "args": asdict(a), "seconds": case.seconds, "delay": case.delay,
        "conditional": {"counts": counts(case.conditional), "rows": [r.__dict__ for r in case.conditional.rows]},
        "union": {"counts": counts(case.union), "rows": [r.__dict__ for r in case.union.rows],
                  "notes": case.union.notes}})
    return 0 if not counts(case.union)["missed"] else 1


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args, use_underscores=True)))
