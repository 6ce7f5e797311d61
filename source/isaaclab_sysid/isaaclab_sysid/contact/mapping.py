"""From the identified ``k_c`` [N/m] and ``b_c`` [N s/m] to simulator contact parameters, with the assumptions.

**MuJoCo** (``solref``, ``solimp``; MuJoCo's ``engine_core_constraint.c``: ``mj_makeImpedance``,
``mj_referenceConstraint``). A soft contact with impedance ``d`` (``solimp = (d, d, ...)``: flat)
and direct ``solref = (-K, -B)`` has the reference acceleration ``aref = (K phi + B phi_dot) / d``
and the regularizer ``R = (1 - d) / d * A0`` with ``A0 = body_invweight0`` (the tool body's
translational inverse weight at ``qpos0``, plus the other body's: 0 for a world-fixed table).
For one frictionless (or elliptic-cone) contact the solver's normal force is exactly
``f = (aref - a_n) / R``::

    f = (K phi + B phi_dot) / ((1 - d) A0)  -  d / ((1 - d) A0) * a_n

so ``solref = (-k_c (1 - d) A0, -b_c (1 - d) A0)`` gives ``k_c`` and ``b_c`` in force units, plus a
virtual mass ``m_v = d / ((1 - d) A0)`` times the contact point's normal acceleration ``a_n``
(small for small ``d``: the default ``d = 0.001`` makes it 0.1 % of ``1 / A0``; a 1 % one biased the
damping identified back by -7 % in the twin, the contact acceleration of an impact being large). The equivalent
standard form ``solref = (timeconst, dampratio) = (2 / ((1 - d) A0 b_c), 1 / (timeconst sqrt((1 - d)
A0 k_c)))`` exists only when ``timeconst >= 2 timestep`` (MuJoCo clamps it otherwise).
Assumptions: one contact point (a sphere or a rounded tip on a plane; a flat face gives several
points, each with the full stiffness), ``margin = 0``, ``cone = "elliptic"`` or ``condim = 1``
(the pyramidal cone re-scales the normal's regularizer with the friction), and MuJoCo's soft
contact being linear (the flat ``solimp``).

**Isaac Lab (PhysX)**: ``PhysxRigidBodyMaterialCfg(compliant_contact_stiffness=k_c,
compliant_contact_damping=b_c, compliant_contact_acceleration_spring=False)``: PhysX's compliant
contact is an implicit spring-damper per contact point in force units. Assumptions: one contact
point (divide by the points of a patch), the material on one of the two shapes (PhysX combines
two compliant materials by its combine mode); Newton's USD importer reads the same attributes as
its fallback contact stiffness and damping (not checked here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco


@dataclass(frozen=True)
class MujocoContact:
    """MuJoCo parameters of an identified contact.

    Attributes:
        solref: direct form (-K, -B); solimp: (d, d, width, midpoint, power), flat.
        solref_standard: (timeconst, dampratio) or None when timeconst < 2 timestep.
        invweight: the A0 used [1/kg]; virtual_mass: d / ((1 - d) A0) [kg].
    """

    solref: tuple[float, float]
    solimp: tuple[float, float, float, float, float]
    solref_standard: tuple[float, float] | None
    invweight: float
    virtual_mass: float

    def to_json(self) -> dict:
        return {"solref": list(self.solref), "solimp": list(self.solimp),
                "solref_standard": None if self.solref_standard is None else list(self.solref_standard),
                "invweight0": self.invweight, "virtual_mass_kg": self.virtual_mass}


def body_invweight(model: mujoco.MjModel, body: str) -> float:
    """The translational ``body_invweight0`` of ``body`` [1/kg] (MuJoCo's A0 for its contacts)."""
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if bid < 0:
        raise ValueError(f"no body {body!r} in the MuJoCo model")
    return float(model.body_invweight0[bid, 0])


def to_mujoco(k_c: float, b_c: float, invweight: float, impedance: float = 0.001, timestep: float = 0.001) -> MujocoContact:
    """``solref``/``solimp`` that give force-unit stiffness ``k_c`` [N/m] and damping ``b_c`` [N s/m] (module doc).

    Args:
        invweight: A0 of the contact (``body_invweight``; sum both bodies' for two moving bodies).
        impedance: d in (0, 1): smaller makes the virtual mass smaller.
        timestep: the model's step [s], for the standard form's validity.
    """
    if not (k_c > 0 and b_c >= 0 and invweight > 0 and 0 < impedance < 1):
        raise ValueError(f"need k_c > 0, b_c >= 0, invweight > 0 and 0 < impedance < 1; got {k_c}, {b_c}, {invweight}, {impedance}")
    s = (1.0 - impedance) * invweight
    solref = (-k_c * s, -b_c * s)
    standard = None
    if b_c > 0:
        tc = 2.0 / (s * b_c)
        dr = 1.0 / (tc * math.sqrt(s * k_c))
        standard = (tc, dr) if tc >= 2 * timestep else None
    return MujocoContact(solref, (impedance, impedance, 0.001, 0.5, 2.0), standard, float(invweight),
                         impedance / s)


def to_physx(k_c: float, b_c: float, points: int = 1) -> dict[str, float | bool]:
    """Isaac Lab ``PhysxRigidBodyMaterialCfg`` fields for stiffness ``k_c`` and damping ``b_c`` shared by
    ``points`` contact points (module doc)."""
    if points < 1:
        raise ValueError(f"points must be >= 1; got {points}")
    return {"compliant_contact_stiffness": k_c / points, "compliant_contact_damping": b_c / points,
            "compliant_contact_acceleration_spring": False}
