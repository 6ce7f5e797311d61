"""Export of an identified contact: both ends, a stated policy per use, MuJoCo and Isaac Lab parameters.

* ``contact_export.json``: every number's (lower, value, upper), the policy and the values it picked,
  randomization ranges, the MuJoCo ``solref``/``solimp`` and the PhysX material fields at the picked
  values and at both ends of the ranges, and the mapping's assumptions (``contact.mapping``).
* ``contact_isaaclab.py``: imports only Isaac Lab (``isaaclab_physx``'s ``PhysxRigidBodyMaterialCfg``)
  and holds every number as a literal (its code is ``export/templates/contact_isaaclab.py``, copied by
  ``export/emit.py``): ``CONTACT`` (ends), ``OVERRIDE``, ``RANGES``, ``MUJOCO``, ``PHYSX_MATERIAL`` and
  ``surface_material_cfg()`` (the compliant material at the policy's values, for the table or the
  tool, not both). Isaac Lab has no event term that randomizes compliant stiffness, so ``RANGES`` is
  for the task's own randomization.

The seed's rule for a force limit: the force is the stiffness times the squeeze distance, so work
the distance out from the *upper* end of the stiffness (``--policy contact_stiffness:upper``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from isaaclab_sysid.cautious import UsePolicy, apply_policy, numbers_json
from isaaclab_sysid.contact.identify import ContactEstimate
from isaaclab_sysid.contact.mapping import MujocoContact, to_mujoco, to_physx
from isaaclab_sysid.export.emit import Literal, module_source, policy_literals
from isaaclab_sysid.export.ranges import Range, RangePolicy, make_range

#: The numbers a contact policy must state.
REQUIRED = ("contact_stiffness",)
ASSUMPTIONS = (
    "MuJoCo: one contact point (sphere or rounded tip on a plane), margin 0, cone elliptic or condim 1, flat solimp "
    "(d, d); the virtual mass d/((1-d) invweight0) times the contact's normal acceleration adds to the force",
    "PhysX: compliant contact in force units (acceleration spring off), per contact point (divide by the points of a "
    "patch), the material on one of the two shapes; Newton reads the same attributes as fallback (not checked here)",
    "the contact law is linear (F = k phi + b phi_dot): check the press's straight-line warning",
)


@dataclass
class ContactExport:
    """Attributes: estimate; policy; override (label -> value at its end); ends_used; ranges; mujoco (at the
    override) and mujoco_range (at the ranges' low and high ends); physx (at the override); notes."""

    estimate: ContactEstimate
    policy: UsePolicy
    override: dict[str, float]
    ends_used: dict[str, tuple[str, bool]]
    ranges: list[Range]
    mujoco: MujocoContact
    mujoco_range: tuple[MujocoContact, MujocoContact]
    physx: dict
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        e = self.estimate
        return {"schema": "isaaclab_sysid.contact_export/1", "robot": e.robot, "level": e.level,
                "numbers": numbers_json(e.intervals),
                "policy": self.policy.to_dict(), "override": self.override,
                "ends_used": {k: {"end": v[0], "stated": v[1]} for k, v in self.ends_used.items()},
                "ranges": {r.label: {"lower": r.lower, "upper": r.upper} for r in self.ranges},
                "mujoco": self.mujoco.to_json(),
                "mujoco_range": {"low": self.mujoco_range[0].to_json(), "high": self.mujoco_range[1].to_json()},
                "physx_material": self.physx, "assumptions": list(ASSUMPTIONS), "notes": self.notes}


def build_export(estimate: ContactEstimate, policy: UsePolicy, invweight: float, impedance: float = 0.001,
                 points: int = 1, range_policy: RangePolicy = RangePolicy(allowance="none"),
                 default_damping: float | None = None) -> ContactExport:
    """The export under ``policy``.

    Args:
        invweight: MuJoCo's ``body_invweight0`` of the tool body (``contact.mapping.body_invweight``).
        impedance: MuJoCo's d; points: contact points sharing the stiffness (PhysX).
        default_damping: the damping to map when none was identified (None: refuse: it must be stated).
    """
    e = estimate
    override, used, unstated = apply_policy(e.intervals, policy)
    notes = list(e.warnings) + unstated
    if e.damping is None:
        if default_damping is None:
            raise ValueError("no damping identified (no impact runs): give impacts, or state the damping to map "
                             "with --damping")
        override["contact_damping"] = float(default_damping)
        notes.append(f"contact_damping {default_damping:g} N s/m stated by the user (not identified)")
    ranges = [r for r in (make_range(iv, range_policy, 1.0)[0] for iv in e.intervals) if r is not None]
    rng = {r.label: r for r in ranges}
    k, b = override["contact_stiffness"], override["contact_damping"]
    mj = to_mujoco(k, b, invweight, impedance)
    k_r = rng["contact_stiffness"]
    b_lo, b_hi = (rng["contact_damping"].lower, rng["contact_damping"].upper) if "contact_damping" in rng else (b, b)
    lo = to_mujoco(max(k_r.lower, 1e-9), max(b_lo, 0.0), invweight, impedance)
    hi = to_mujoco(k_r.upper, b_hi, invweight, impedance)
    return ContactExport(e, policy, override, used, ranges, mj, (lo, hi), to_physx(k, b, points), notes)


def isaaclab_module(exp: ContactExport) -> str:
    """The generated module's source text (see module docstring): ``export/templates/contact_isaaclab.py`` with
    this contact's numbers as its data."""
    e = exp.estimate
    doc = (f"Contact identified on {e.robot} (level {e.level:g}).\nCreated: {datetime.now().isoformat(timespec='seconds')}\n"
           f"Policy: {exp.policy.to_dict()}\nUnits: stiffness N/m, damping N s/m.\nAssumptions:\n"
           + "\n".join(f"- {a}" for a in ASSUMPTIONS + tuple(exp.notes)) + "\nSee docs/contact.md of isaaclab_sysid.")
    px = exp.physx
    data = [*policy_literals("CONTACT", e.intervals, exp.policy, exp.override, exp.ranges),
            Literal("MUJOCO", exp.mujoco.to_json(),
                    "(RANGES are for the task's own randomization: no Isaac Lab event term randomizes compliant contact)\n"
                    "MuJoCo geom/pair parameters at OVERRIDE (direct solref), and at the ranges' ends"),
            Literal("MUJOCO_RANGE", {"low": exp.mujoco_range[0].to_json(), "high": exp.mujoco_range[1].to_json()}),
            Literal("PHYSX_MATERIAL", {k: px[k] for k in ("compliant_contact_stiffness", "compliant_contact_damping",
                                                          "compliant_contact_acceleration_spring")},
                    "PhysxRigidBodyMaterialCfg's compliant-contact fields at OVERRIDE (per contact point)")]
    return module_source("Contact configs exported by isaaclab_sysid (scripts/identify_contact.py).", doc,
                         "contact_isaaclab", data)
