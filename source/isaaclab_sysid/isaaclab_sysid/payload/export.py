"""Export of an identified payload: both ends of every number, a stated policy per use,
an Isaac Lab mass / centre-of-mass override and a randomization range.

* ``payload_export.json``: every number's (lower, value, upper), the policy and the value it
  picked, the randomization ranges (``export.ranges.make_range`` of each interval), and the
  assumptions.
* ``payload_isaaclab.py``: a module that imports only Isaac Lab and holds every number as a
  literal (its code is ``export/templates/payload_isaaclab.py``, copied by ``export/emit.py``):
  ``PAYLOAD`` (ends), ``OVERRIDE`` (the policy's values), ``RANGES``,
  ``object_mass_cfg()`` (``sim_utils.MassCfg`` of a grasped-object asset, at the policy's
  mass), ``PayloadOverrideEventsCfg`` (startup events that add the policy's mass to the
  attach body and shift its centre of mass) and ``PayloadRandomizationEventsCfg`` (the same
  terms over the ranges).

The arm-body form adds the payload to an articulation body with Isaac Lab's
``randomize_rigid_body_mass`` (``operation="add"``) and ``randomize_rigid_body_com``
(offsets from the body's own centre). The combined body's centre moves by
``m_p (c_p - c_b) / (m_b + m_p)``, which needs the attach body's own mass ``m_b`` and centre
``c_b`` in the target asset: they default to the arm model's link (whose frame the payload's
centre is expressed in) and must be given when the asset's body differs (a USD whose hand
is a separate body from the last link: pass ``--attach_mass`` / ``--attach_com``). Isaac
Lab samples mass and centre independently (their correlation is lost) and does not add
the payload's inertia (``recompute_inertia=False`` keeps the body's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from isaaclab_sysid.cautious import UsePolicy, apply_policy, numbers_json
from isaaclab_sysid.export.emit import Literal, module_source, policy_literals
from isaaclab_sysid.export.ranges import Range, RangePolicy, make_range
from isaaclab_sysid.payload.identify import COM_LABELS, MASS_LABEL, PayloadEstimate, derived
from isaaclab_sysid.robots import LinkInertial

#: The numbers a payload policy must state.
REQUIRED = (MASS_LABEL,)


@dataclass
class PayloadExport:
    """What goes out: the ends, the policy's values, ranges and the combined-body shift.

    Attributes:
        estimate: the identification; policy: the stated policy.
        override: label -> the value at the policy's end.
        ends_used: label -> (end, stated by the user).
        ranges: randomization ranges (one per number).
        attach: name, mass [kg] and com (3,) [m] of the body the payload is added to (assumed).
        com_shift: axis -> (lower, value at the override, upper) shift of the combined body's centre [m].
        notes: assumptions and warnings, recorded in both files.
    """

    estimate: PayloadEstimate
    policy: UsePolicy
    override: dict[str, float]
    ends_used: dict[str, tuple[str, bool]]
    ranges: list[Range]
    attach: dict
    com_shift: dict[str, tuple[float, float, float]]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        e = self.estimate
        return {
            "schema": "isaaclab_sysid.payload_export/1",
            "robot": e.robot, "link": e.link, "mode": e.mode, "reference": e.reference, "level": e.level,
            "numbers": {k: {**v, "method": iv.note} for (k, v), iv in zip(numbers_json(e.intervals).items(), e.intervals)},
            "policy": self.policy.to_dict(),
            "override": self.override,
            "ends_used": {k: {"end": v[0], "stated": v[1]} for k, v in self.ends_used.items()},
            "ranges": {r.label: {"lower": r.lower, "upper": r.upper, "source": r.source} for r in self.ranges},
            "attach_body": self.attach,
            "com_shift": {k: list(v) for k, v in self.com_shift.items()},
            "flag": e.flag,
            "notes": self.notes,
        }


def build_export(estimate: PayloadEstimate, policy: UsePolicy, attach_name: str, attach: LinkInertial,
                 range_policy: RangePolicy = RangePolicy(allowance="none"), mc_samples: int = 20000,
                 seed: int = 0) -> PayloadExport:
    """The export of ``estimate`` under ``policy``.

    Args:
        attach_name, attach: the body the payload is added to and its own inertials (for the centre shift).
        range_policy: how ranges are made from intervals (``export.ranges``; no held-out allowance here).
    """
    e = estimate
    override, used, unstated = apply_policy(e.intervals, policy)
    ranges = []
    for iv in e.intervals:
        r, _ = make_range(iv, range_policy, 1.0)
        if r is not None:
            ranges.append(r)
    # centre shift of the combined body, at the override and over the Monte Carlo draws
    d = derived(e.draws(mc_samples, seed))
    m_b, c_b = float(attach.mass), np.asarray(attach.com, dtype=float)
    shift = d[:, :1] * (d[:, 1:4] - c_b) / (m_b + d[:, :1])
    a = 100 * (0.5 - e.level / 2.0)
    lo, hi = np.percentile(shift, [a, 100 - a], axis=0)
    m_o = override[MASS_LABEL]
    c_o = np.array([override[k] for k in COM_LABELS])
    s_o = m_o * (c_o - c_b) / (m_b + m_o)
    com_shift = {ax: (float(lo[i]), float(s_o[i]), float(hi[i])) for i, ax in enumerate("xyz")}
    notes = list(e.warnings)
    notes.append(f"attach body {attach_name!r} assumed to have mass {m_b:.4g} kg and centre {np.round(c_b, 5).tolist()} m "
                 "in its own frame (the arm model's link); pass --attach_mass/--attach_com when the target asset's body differs")
    notes += unstated
    if e.flag:
        notes.append(e.flag)
    return PayloadExport(e, policy, override, used, ranges,
                         {"name": attach_name, "mass": m_b, "com": c_b.tolist()}, com_shift, notes)


def isaaclab_module(exp: PayloadExport, asset_name: str = "robot") -> str:
    """The generated Isaac Lab module's source text (see module docstring): ``export/templates/payload_isaaclab.py``
    with this payload's numbers as its data."""
    e = exp.estimate
    doc = (f"Payload identified on {e.robot} link {e.link!r} ({e.mode} holds, {e.reference} reference), "
           f"level {e.level:g}.\nCreated: {datetime.now().isoformat(timespec='seconds')}\n"
           f"Policy: {exp.policy.to_dict()}\nUnits: kg, m (link frame of {e.link!r}), kg m^2 about the centre of mass.\n"
           "Assumptions:\n" + "\n".join(f"- {n}" for n in exp.notes) + "\nSee docs/payload.md of isaaclab_sysid.")
    data = [Literal("ASSET_NAME", asset_name),
            Literal("ATTACH_BODY", exp.attach),
            Literal("PAYLOAD_LINK", e.link),
            *policy_literals("PAYLOAD", e.intervals, exp.policy, exp.override, exp.ranges),
            Literal("COM_SHIFT", exp.com_shift,
                    "shift of the attach body's centre of mass when the payload is added: axis -> (lower, override, upper) [m]"),
            Literal("FLAG", e.flag)]
    return module_source("Payload configs exported by isaaclab_sysid (scripts/identify_payload.py).", doc,
                         "payload_isaaclab", data)
