"""Template of ``payload_isaaclab.py``: an identified payload as Isaac Lab mass / centre-of-mass events.

``payload/export.py`` copies this file below its own docstring, the data block replaced by
the identification's numbers; everything else is the generated module's code as it is here.
As shipped the data block holds a 1 kg payload at the attach body's own centre (no shift).
"""

from __future__ import annotations

import isaaclab.envs.mdp as mdp
import isaaclab.sim as sim_utils
from isaaclab.managers import EventTermCfg, SceneEntityCfg
from isaaclab.utils import configclass

# --- data: the export replaces this block with its numbers ---
ASSET_NAME = "robot"
ATTACH_BODY: dict = {"name": "tool", "mass": 1.0, "com": [0.0, 0.0, 0.0]}
PAYLOAD_LINK = "tool"
POLICY: dict = {}
#: every number: (lower, value, upper)
PAYLOAD: dict = {"payload_mass": (1.0, 1.0, 1.0)}
#: the value each number takes under POLICY
OVERRIDE: dict = {"payload_mass": 1.0}
#: randomization ranges (lower, upper)
RANGES: dict = {"payload_mass": (1.0, 1.0)}
#: shift of the attach body's centre of mass when the payload is added: axis -> (lower, override, upper) [m]
COM_SHIFT: dict = {"x": (0.0, 0.0, 0.0), "y": (0.0, 0.0, 0.0), "z": (0.0, 0.0, 0.0)}
FLAG = None
# --- end of data ---


def object_mass_cfg() -> sim_utils.MassCfg:
    """Mass of a grasped-object asset (its spawner's mass slot) at the policy's end."""
    return sim_utils.MassCfg(mass=OVERRIDE["payload_mass"])


def _mass_term(lower: float, upper: float) -> EventTermCfg:
    """The payload's mass [kg], drawn from (lower, upper), added to the attach body (its inertia kept)."""
    return EventTermCfg(
        func=mdp.randomize_rigid_body_mass,
        mode="startup",
        params={
            "asset_cfg": SceneEntityCfg(ASSET_NAME, body_names=[ATTACH_BODY["name"]]),
            "mass_distribution_params": (lower, upper),
            "operation": "add",
            "distribution": "uniform",
            "recompute_inertia": False,
        },
    )


def _com_term(com_range: dict) -> EventTermCfg:
    """The attach body's centre-of-mass shift [m]: axis -> (lower, upper)."""
    return EventTermCfg(
        func=mdp.randomize_rigid_body_com,
        mode="startup",
        params={
            "asset_cfg": SceneEntityCfg(ASSET_NAME, body_names=[ATTACH_BODY["name"]]),
            "com_range": com_range,
        },
    )


@configclass
class PayloadOverrideEventsCfg:
    """Startup events adding the payload (policy values) to the attach body of the arm."""

    payload_mass = _mass_term(OVERRIDE["payload_mass"], OVERRIDE["payload_mass"])
    payload_com = _com_term({axis: (s[1], s[1]) for axis, s in COM_SHIFT.items()})


@configclass
class PayloadRandomizationEventsCfg:
    """Startup events randomizing the payload over its ranges (mass and centre sampled independently)."""

    payload_mass = _mass_term(max(RANGES["payload_mass"][0], 0.0), RANGES["payload_mass"][1])
    payload_com = _com_term({axis: (s[0], s[2]) for axis, s in COM_SHIFT.items()})
