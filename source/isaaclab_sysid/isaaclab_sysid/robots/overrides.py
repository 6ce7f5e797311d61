"""Overrides the model builders accept: joint properties and link inertials."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JointOverrides:
    """Per-joint dynamic properties, each an (N,) array over the actuated joints or None.

    Attributes:
        armature: reflected rotor inertia [kg m^2].
        friction: Coulomb friction torque [N m].
        damping: viscous friction [N m s/rad].
    """

    armature: np.ndarray | None = None
    friction: np.ndarray | None = None
    damping: np.ndarray | None = None


@dataclass(frozen=True)
class LinkInertial:
    """Standard inertial parameters of one link, in the link's own frame.

    Attributes:
        mass: [kg].
        com: (3,) centre of mass [m].
        inertia: (3, 3) rotational inertia about the centre of mass [kg m^2].
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def to_pi(self) -> np.ndarray:
        """The 10-vector (m, m c, I_origin[xx, xy, yy, xz, yz, zz]) in Pinocchio's order."""
        m = float(self.mass)
        c = np.asarray(self.com, dtype=float)
        skew = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        i_o = np.asarray(self.inertia, dtype=float) - m * skew @ skew
        return np.array([m, *(m * c), i_o[0, 0], i_o[0, 1], i_o[1, 1], i_o[0, 2], i_o[1, 2], i_o[2, 2]])

    @staticmethod
    def from_pi(pi: np.ndarray) -> "LinkInertial":
        """Inverse of :meth:`to_pi` (mass must be positive)."""
        pi = np.asarray(pi, dtype=float)
        m = float(pi[0])
        c = pi[1:4] / m
        i_o = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
        skew = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        return LinkInertial(mass=m, com=c, inertia=i_o + m * skew @ skew)
