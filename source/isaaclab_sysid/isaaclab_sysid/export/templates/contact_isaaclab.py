"""Template of ``contact_isaaclab.py``: an identified contact as an Isaac Lab (PhysX) compliant material.

``contact/export.py`` copies this file below its own docstring, the data block replaced by
the identification's numbers; everything else is the generated module's code as it is here.
As shipped the data block is a contact of 1e4 N/m and 10 N s/m.
"""

from __future__ import annotations

from isaaclab_physx.sim.spawners.materials import PhysxRigidBodyMaterialCfg

# --- data: the export replaces this block with its numbers ---
POLICY: dict = {}
#: every number: (lower, value, upper)
CONTACT: dict = {"contact_stiffness": (1.0e4, 1.0e4, 1.0e4), "contact_damping": (10.0, 10.0, 10.0)}
#: the value each number takes under POLICY
OVERRIDE: dict = {"contact_stiffness": 1.0e4, "contact_damping": 10.0}
#: randomization ranges (lower, upper)
RANGES: dict = {}
#: (RANGES are for the task's own randomization: no Isaac Lab event term randomizes compliant contact)
#: MuJoCo geom/pair parameters at OVERRIDE (direct solref), and at the ranges' ends
MUJOCO: dict = {}
MUJOCO_RANGE: dict = {}
#: PhysxRigidBodyMaterialCfg's compliant-contact fields at OVERRIDE (per contact point)
PHYSX_MATERIAL: dict = {"compliant_contact_stiffness": 1.0e4, "compliant_contact_damping": 10.0,
                        "compliant_contact_acceleration_spring": False}
# --- end of data ---


def surface_material_cfg(static_friction: float = 0.5, dynamic_friction: float = 0.5) -> PhysxRigidBodyMaterialCfg:
    """The compliant contact material at the policy's values (bind it to the table or the tool, not both)."""
    return PhysxRigidBodyMaterialCfg(
        static_friction=static_friction,
        dynamic_friction=dynamic_friction,
        compliant_contact_stiffness=PHYSX_MATERIAL["compliant_contact_stiffness"],
        compliant_contact_damping=PHYSX_MATERIAL["compliant_contact_damping"],
        compliant_contact_acceleration_spring=PHYSX_MATERIAL["compliant_contact_acceleration_spring"],
    )
