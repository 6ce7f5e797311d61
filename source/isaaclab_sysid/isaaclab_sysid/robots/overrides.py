"""Overrides the model builders accept: joint properties and link inertials."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.utils.errors import UserError


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


#: The one physical-validity rule of a link inertial, owned here and used by every writer and reader of link
#: inertials (``robots/identified.py``, ``arm_model.py``, ``rigid_body/writers.py``). What each engine does with a
#: body's principal moments A <= B <= C about its centre of mass:
#:
#: - MuJoCo: refuses A + B < C exactly (tolerance 0) and a moment below mjMINVAL (1e-15);
#: - Newton (Isaac Lab): "corrects" (changes) moments below 1e-6 x C or 1e-10 kg m^2, and a triangle
#:   violation beyond float32 precision (1.2e-7 x C);
#: - PhysX (Isaac Lab): stores the diagonal in float32 and reads a zero moment as infinite (a locked axis),
#:   so every moment must be positive with float32 room (1.2e-7 x C).
#:
#: The rule that passes all three with room to spare: each principal second moment s_i = (A + B + C)/2 - I_i
#: (so A + B - C = 2 s_C) at least ``ENGINE_REL_MARGIN`` x the largest principal moment and at least
#: ``ENGINE_ABS_MARGIN`` [kg m^2]; that keeps A + B - C >= 2e-6 x C and every moment >= 2e-6 x C.
ENGINE_REL_MARGIN = 1e-6
ENGINE_ABS_MARGIN = 1e-10
#: What the rule guards against, per engine (said in docs and errors).
ENGINE_RULES = {
    "MuJoCo": "refuses A + B < C (tolerance 0) and moments below 1e-15",
    "Newton": "changes moments below 1e-6 x C or 1e-10 and A + B < C beyond 1.2e-7 x C",
    "PhysX": "float32 diagonal, a zero moment read as a locked axis",
}
#: The rule without the engines' margin (a merged body no engine builds: physically consistent up to rounding).
PHYSICAL_REL_TOL = 1e-12


class InertialError(UserError, ValueError):
    """A link inertial a replay engine would refuse or alter (the message names the link and its moments)."""


def principal_moments(inertia: np.ndarray) -> np.ndarray:
    """(3,) principal moments [kg m^2], ascending, of a (3, 3) inertia about the centre of mass."""
    i = np.asarray(inertia, dtype=float)
    return np.linalg.eigvalsh(0.5 * (i + i.T))


def engine_floor(largest_moment: float) -> float:
    """The smallest principal second moment the engines take with margin [kg m^2], given the largest principal
    moment C: ``max(ENGINE_REL_MARGIN x C, ENGINE_ABS_MARGIN)``."""
    return max(ENGINE_REL_MARGIN * max(float(largest_moment), 0.0), ENGINE_ABS_MARGIN)


def inertial_violation(li: LinkInertial, engine_margin: bool = True) -> str | None:
    """THE rule: why ``li`` breaks it, or None.

    Args:
        li: one link inertial (link frame).
        engine_margin: True (a link an engine builds: MuJoCo, Newton, PhysX; :data:`ENGINE_RULES`): every principal
            second moment at least :func:`engine_floor`. False (a body no engine builds as such, e.g. a link with
            its fixed children merged in): physically consistent (positive definite, A + B >= C) up to rounding.
    """
    m = float(li.mass)
    if not (np.isfinite(m) and m > 0):
        return f"mass {m:.6g} kg is not positive"
    inertia = np.asarray(li.inertia, dtype=float)
    com = np.asarray(li.com, dtype=float)
    if inertia.shape != (3, 3) or com.shape != (3,) or not (np.all(np.isfinite(inertia)) and np.all(np.isfinite(com))):
        return "centre of mass or inertia is not finite (3 and 3x3 numbers)"
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-9 * max(1.0, float(np.abs(inertia).max()))):
        return "inertia is not symmetric"
    ev = principal_moments(inertia)
    moments = f"principal moments {ev[0]:.6g} {ev[1]:.6g} {ev[2]:.6g} kg m^2"
    s = 0.5 * ev.sum() - ev  # principal second moments: s[0] >= s[1] >= s[2]; A + B - C = 2 s[2]
    if not engine_margin:
        tol = PHYSICAL_REL_TOL * max(ev[2], 0.0)
        if ev[0] <= 0:
            return f"{moments}: not positive definite"
        if s[2] < -0.5 * tol:
            return f"{moments} violate A + B >= C by {-2 * s[2]:.3g}"
        return None
    floor = engine_floor(ev[2])
    if s[2] >= floor:
        return None
    if s[2] < 0:
        return f"{moments} violate A + B >= C by {-2 * s[2]:.3g} (MuJoCo refuses this body, Newton changes it)"
    return (f"{moments} satisfy A + B >= C by only {2 * s[2]:.3g}, under the engines' margin {2 * floor:.3g} "
            "(rounding can break it; Newton changes it)")


def engine_violation(li: LinkInertial) -> str | None:
    """Why a replay engine (MuJoCo, Newton, PhysX) would refuse or change ``li``; None when it passes the rule
    with the engines' margin (:func:`inertial_violation`)."""
    return inertial_violation(li, engine_margin=True)


def engine_ready(li: LinkInertial) -> LinkInertial:
    """``li`` with its principal second moments raised to twice the engines' margin (mass, centre of mass and
    principal axes kept): the smallest change that makes MuJoCo, Newton and PhysX take it unchanged. The margin
    is that of the *result* (raising a moment can raise the largest one, and with it the margin), so the result
    always passes :func:`engine_violation`.

    Raises:
        InertialError: the mass is not positive or a value is not finite (no inertia change can fix that).
    """
    if not (np.isfinite(li.mass) and li.mass > 0):
        raise InertialError(f"mass {float(li.mass):.6g} kg is not positive")
    i = np.asarray(li.inertia, dtype=float)
    com = np.asarray(li.com, dtype=float)
    if not (np.all(np.isfinite(i)) and np.all(np.isfinite(com))):
        raise InertialError("centre of mass or inertia is not finite")
    ev, vec = np.linalg.eigh(0.5 * (i + i.T))
    s = 0.5 * ev.sum() - ev
    floor = engine_floor(ev[2])
    for _ in range(20):  # the margin of the result: a fixed point, reached in 2-3 steps (the factor is 1e-6)
        s_new = np.maximum(s, 2.0 * floor)  # twice the margin: clear of it after rounding
        ev_new = s_new.sum() - s_new
        nxt = engine_floor(ev_new.max())
        if nxt <= floor:
            break
        floor = nxt
    out = LinkInertial(mass=float(li.mass), com=com.copy(), inertia=(vec * ev_new) @ vec.T)
    why = engine_violation(out)
    if why is not None:  # cannot happen for finite input; said rather than written
        raise InertialError(f"could not raise the inertia to the engines' margin: {why}")
    return out
