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


#: The margin every replay engine's inertia check passes with room to spare: each principal second moment
#: s_i = (A + B + C)/2 - I_i (so A + B - C = 2 s_C) at least ``ENGINE_REL_MARGIN`` x the largest principal moment
#: and at least ``ENGINE_ABS_MARGIN`` [kg m^2]. MuJoCo refuses A + B < C exactly (tolerance 0) and moments below
#: mjMINVAL (1e-15); Newton (Isaac Lab) "corrects" (changes) moments below 1e-6 x the largest or 1e-10 and a
#: triangle violation beyond float32 precision (1.2e-7 x C). 1e-6 x the largest on every s_i keeps
#: A + B - C >= 2e-6 x C and every moment >= 2e-6 x the largest.
ENGINE_REL_MARGIN = 1e-6
ENGINE_ABS_MARGIN = 1e-10


class InertialError(ValueError):
    """A link inertial a replay engine would refuse or alter (the message names the link and its moments)."""


def principal_moments(inertia: np.ndarray) -> np.ndarray:
    """(3,) principal moments [kg m^2], ascending, of a (3, 3) inertia about the centre of mass."""
    i = np.asarray(inertia, dtype=float)
    return np.linalg.eigvalsh(0.5 * (i + i.T))


def engine_violation(li: LinkInertial) -> str | None:
    """Why a replay engine (MuJoCo, Newton) would refuse or change ``li``; None when it passes with the
    :data:`ENGINE_REL_MARGIN` margin."""
    m = float(li.mass)
    if not (np.isfinite(m) and m > 0):
        return f"mass {m:.6g} kg is not positive"
    ev = principal_moments(li.inertia)
    if not np.all(np.isfinite(ev)):
        return "inertia is not finite"
    floor = max(ENGINE_REL_MARGIN * ev[2], ENGINE_ABS_MARGIN)
    s = 0.5 * ev.sum() - ev  # principal second moments: s[0] >= s[1] >= s[2]; A + B - C = 2 s[2]
    if s[2] >= floor:
        return None
    moments = f"principal moments {ev[0]:.6g} {ev[1]:.6g} {ev[2]:.6g} kg m^2"
    if s[2] < 0:
        return f"{moments} violate A + B >= C by {-2 * s[2]:.3g} (MuJoCo refuses this body, Newton changes it)"
    return (f"{moments} satisfy A + B >= C by only {2 * s[2]:.3g}, under the engines' margin {2 * floor:.3g} "
            "(rounding can break it; Newton changes it)")


def engine_ready(li: LinkInertial) -> LinkInertial:
    """``li`` with its principal second moments raised to the engines' margin (mass, centre of mass and
    principal axes kept): the smallest change that makes MuJoCo and Newton take it unchanged.

    Raises:
        InertialError: the mass is not positive (no inertia change can fix that).
    """
    if not (np.isfinite(li.mass) and li.mass > 0):
        raise InertialError(f"mass {float(li.mass):.6g} kg is not positive")
    i = np.asarray(li.inertia, dtype=float)
    ev, vec = np.linalg.eigh(0.5 * (i + i.T))
    floor = max(ENGINE_REL_MARGIN * max(ev[2], 0.0), ENGINE_ABS_MARGIN)
    s = np.maximum(0.5 * ev.sum() - ev, 2.0 * floor)  # twice the margin: clear of it after rounding
    ev_new = s.sum() - s
    return LinkInertial(mass=float(li.mass), com=np.asarray(li.com, dtype=float).copy(), inertia=(vec * ev_new) @ vec.T)
