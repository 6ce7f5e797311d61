"""Payload after a grasp: mass, centre of mass and inertia of the held part from joint torques.

``holds`` (static holds in runs, paired with a reference) -> ``model`` (the payload's columns of the
rigid-body regressor) -> ``identify`` (least squares, error bars, Monte Carlo check, wrong-part flag)
-> ``export`` (both ends, a policy per use, Isaac Lab override and randomization); ``design``
suggests poses, ``twin`` writes runs with a hidden payload. See docs/payload.md.
"""

from isaaclab_sysid.payload.design import DesignOptions, PoseDesign, design_poses, poses_condition
from isaaclab_sysid.payload.holds import Hold, HoldOptions, PayloadInputError, find_holds
from isaaclab_sysid.payload.identify import PayloadEstimate, PayloadOptions, identify_payload

__all__ = [
    "DesignOptions",
    "Hold",
    "HoldOptions",
    "PayloadEstimate",
    "PayloadInputError",
    "PayloadOptions",
    "PoseDesign",
    "design_poses",
    "find_holds",
    "identify_payload",
    "poses_condition",
]
