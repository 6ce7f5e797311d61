"""The payload's regressor columns, from the rigid-body regressor.

A rigid payload fixed to a link adds its 10 inertial parameters (m, m c, I about the
link-frame origin, Pinocchio's order) to that link's, so the joint torque it causes
is that link's 10 columns of the joint-torque regressor times its parameters::

    tau_payload(q, qd, qdd) = Y_link(q, qd, qdd) pi_payload          (N,)

At rest only the first 4 columns (m, m c) are non-zero: gravity. The arm's own torque
(for runs without a measured reference) comes from :class:`~isaaclab_sysid.arm_model.ArmModel`.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.arm_model import ArmModel
from isaaclab_sysid.payload.holds import PayloadInputError
from isaaclab_sysid.robots.regressor import LINK_PARAM_NAMES
from isaaclab_sysid.robots import LinkInertial, Robot

#: Pinocchio's 10 parameters of the payload (mass first).
PAYLOAD_PARAMS = LINK_PARAM_NAMES
#: The static subset: mass and first moment.
STATIC_PARAMS = LINK_PARAM_NAMES[:4]


class PayloadModel(ArmModel):
    """Payload columns and the arm's torque for one robot.

    Args:
        robot: the arm with its link inertials (URDF or the LS result via ``with_body_inertials``).
        link: the link the payload is fixed to (default: the last link of the chain).
    """

    def __init__(self, robot: Robot, link: str | None = None) -> None:
        super().__init__(robot)
        names = robot.link_names
        self.link = link or names[-1]
        if self.link not in names:
            raise PayloadInputError(f"--link {self.link!r} is not a link of {robot.name} ({', '.join(names)})")
        self.index = names.index(self.link)

    @property
    def cols(self) -> slice:
        return slice(10 * self.index, 10 * self.index + 10)

    def columns(self, q: np.ndarray, qd: np.ndarray | None = None, qdd: np.ndarray | None = None) -> np.ndarray:
        """(T, N, 10) payload columns [N m per unit parameter] at (T, N) q [rad], qd [rad/s], qdd [rad/s^2]
        (qd, qdd default to 0: a static pose)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        qd = np.zeros_like(q) if qd is None else qd
        qdd = np.zeros_like(q) if qdd is None else qdd
        return self.regressor(True).rows(q, qd, qdd)[:, :, self.cols]

    def link_inertial(self) -> LinkInertial:
        """The attach link's own inertials in the model (the arm without the payload)."""
        return self.body_inertials()[self.link]
