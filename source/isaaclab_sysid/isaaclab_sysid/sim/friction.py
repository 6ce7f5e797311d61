"""Friction laws: one small typed object per law, the one place that knows them (docs/friction.md).

Every law acts per joint, on top of the joint's viscous damping (the ``viscous`` group, MuJoCo ``dof_damping``),
and is one of two kinds:

* a **constraint budget** (``acts_as == "constraint"``): the law gives the largest torque friction may exert this
  tick, written into MuJoCo's ``frictionloss`` (a friction-loss constraint row), so the joint *sticks* whenever the
  other torques stay under the budget. Dry friction whose level depends on the state is this kind: Coulomb,
  exponential Stribeck, and BAM's load-dependent law (the budget grows with the torque through the gearbox).
* an **applied torque** (``acts_as == "force"``): the law gives the friction torque itself, added to the joint's
  applied torque every tick. A law that is a smooth function of the state and has no stick phase is this kind:
  the Gaz sigmoid (a smooth, offset sign function of the velocity), and the Dahl law, whose bristle state *is* the
  pre-sliding behaviour (the joint creeps elastically before break-away instead of sticking rigidly).

Each law lists the parameter groups it reads (:attr:`FrictionLaw.groups`, all per joint; their units and bounds are
in :data:`isaaclab_sysid.objective.param_space.GROUPS`), its equation and why it acts as it does. :func:`law_of_groups`
finds a batch's law from the groups it sets (one law per batch), :func:`law_table` packs the law's parameters for the
backends ((P, N, 4) float64, the native loop's ``law_p``), and :func:`budget` / :func:`applied_force` /
:func:`dahl_step` are the numpy reference that ``sim/reference.py`` runs and ``native/replay.c`` mirrors in C.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from isaaclab_sysid.sim.interface import CandidateBatch

#: the native loop's law ids (native/replay.c: FRIC_*); change both together
LAW_IDS = {"coulomb": 0, "stribeck": 1, "sigmoid": 2, "load": 3, "dahl": 4}
#: columns of the packed law table (P, N, LAW_COLUMNS)
LAW_COLUMNS = 4
#: a load-dependent budget never drops below this [N m]: MuJoCo then always builds the joint's friction row (the
#: native loop writes the tick's budget into that row after the controller; the reference builds it from the budget)
LOAD_BUDGET_FLOOR = 1e-9


@dataclass(frozen=True)
class FrictionLaw:
    """One friction law.

    Attributes:
        name: the law's name (``--fit_groups`` accepts it as an alias of :attr:`fit_groups`).
        acts_as: ``"constraint"`` (a per-tick ``frictionloss`` budget: the joint can stick) or ``"force"`` (an
            applied torque: smooth, or with its own pre-sliding state).
        groups: the parameter groups that select this law (any one of them set means this law).
        fit_groups: the groups ``--fit_groups NAME`` expands to (the Coulomb level included where the law has one).
        columns: what each column of the packed table holds, in order (``law_table``).
        equation: the friction torque, in words a docstring can hold.
        why: why it acts as it does.
    """

    name: str
    acts_as: Literal["constraint", "force"]
    groups: tuple[str, ...]
    fit_groups: tuple[str, ...]
    columns: tuple[str, ...]
    equation: str
    why: str

    @property
    def law_id(self) -> int:
        """The native loop's id of this law."""
        return LAW_IDS[self.name]


LAWS: dict[str, FrictionLaw] = {
    law.name: law
    for law in (
        FrictionLaw("coulomb", "constraint", (), ("friction",), (),
                    "budget Fc (friction)",
                    "a constant dry-friction level: the joint sticks below Fc (MuJoCo's native frictionloss)"),
        FrictionLaw("stribeck", "constraint", ("mu_static", "dynamic_ratio", "stribeck_velocity", "stribeck_shape"),
                    ("mu_static", "dynamic_ratio", "stribeck_velocity", "stribeck_shape"),
                    ("mu_static", "stribeck_velocity", "stribeck_shape"),
                    "budget Fc + (Fs - Fc) exp(-|v / vs|^delta), Fc = dynamic_ratio x Fs",
                    "dry friction whose level falls from the break-away Fs to the sliding Fc with speed: the joint "
                    "sticks below the budget, so it stays a frictionloss constraint updated every tick"),
        FrictionLaw("sigmoid", "force", ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset"),
                    ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset"),
                    ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset"),
                    "torque -[phi1 / (1 + exp(-phi2 (v + phi3))) - phi1 / (1 + exp(-phi2 phi3))] "
                    "(Gaz et al., RA-L 2019, the Franka Panda's identified law)",
                    "a smooth, offset function of the velocity with no stick phase (it is 0 at v = 0): an applied "
                    "torque reproduces it exactly, a budget could not hold its offset"),
        FrictionLaw("load", "constraint", ("load_friction_motor", "load_friction_external"),
                    ("friction", "load_friction_motor", "load_friction_external"),
                    ("load_friction_motor", "load_friction_external"),
                    "budget Fc + |k_ext tau_ext - k_motor tau_motor| (BAM's directional load-dependent law, "
                    "Duclusaud et al. ICRA 2025): tau_motor the actuator's torque, tau_ext the gravity and "
                    "Coriolis torque on the joint",
                    "gearbox friction that grows with the torque it carries, and differs when the motor drives "
                    "(tau_motor) and when the load back-drives (tau_ext); it is still dry friction, so a budget"),
        FrictionLaw("dahl", "force", ("presliding_stiffness",), ("friction", "presliding_stiffness"),
                    ("presliding_stiffness",),
                    "torque -F, dF/dt = sigma0 v (1 - F sign(v) / Fc) (Dahl 1968; exact per tick for the tick's "
                    "velocity)",
                    "pre-sliding: a bristle state F that deflects like a spring of stiffness sigma0 before it "
                    "saturates at Fc, so the joint creeps before break-away; a state, so an applied torque"),
    )
}


def law_of_id(law_id: int) -> FrictionLaw:
    """The law of a native-loop id (:data:`LAW_IDS`); a ValueError for an id this version does not know."""
    for law in LAWS.values():
        if law.law_id == int(law_id):
            return law
    raise ValueError(f"friction law id {law_id} is no law this version knows ({LAW_IDS})")


def law_named(name: str) -> FrictionLaw:
    """The law called ``name``; a ValueError lists the known ones."""
    try:
        return LAWS[name]
    except KeyError:
        raise ValueError(f"unknown friction law '{name}' (known: {', '.join(LAWS)})") from None


def law_of_groups(groups: Iterable[str]) -> FrictionLaw:
    """The one law a set of parameter groups selects (Coulomb when none of a richer law's groups is set).

    Raises:
        ValueError: groups of two richer laws, or a richer law without ``friction`` where it replaces it (the
            Stribeck and sigmoid laws are the whole dry friction: ``friction`` with them is refused).
    """
    gs = set(groups)
    found = [law for law in LAWS.values() if law.groups and gs & set(law.groups)]
    if len(found) > 1:
        raise ValueError("one friction law per fit: groups of " + " and ".join(
            f"{law.name} ({', '.join(sorted(gs & set(law.groups)))})" for law in found) + " were both given")
    law = found[0] if found else LAWS["coulomb"]
    if law.name in ("stribeck", "sigmoid") and "friction" in gs:
        raise ValueError(f"friction (Coulomb) and the {law.name} law's groups describe the same dry friction; "
                         f"give one of them")
    return law


def expand_law_aliases(groups: Iterable[str]) -> list[str]:
    """``--fit_groups`` with each law name (``stribeck``, ``sigmoid``, ``load``, ``dahl``) replaced by its groups,
    order kept, duplicates dropped (``armature,load,viscous`` -> ``armature,friction,load_friction_motor,...``)."""
    out: list[str] = []
    for g in groups:
        for x in (LAWS[g].fit_groups if g in LAWS and g != "coulomb" else (g,)):
            if x not in out:
                out.append(x)
    return out


def law_table(law: FrictionLaw, values: Mapping[str, np.ndarray | None], p_count: int, n_dof: int,
              defaults: Mapping[str, np.ndarray]) -> np.ndarray:
    """The (P, N, 4) packed parameters of ``law`` (zeros for Coulomb), validated.

    Args:
        law: the batch's law.
        values: the batch's (P, N) arrays by group (None: take ``defaults``).
        defaults: (N,) per group for groups the batch leaves None (``stribeck_velocity``: the options' velocity,
            ``stribeck_shape``: 2, a sigmoid's offset 0, a load coefficient 0).

    Raises:
        ValueError: wrong shapes or values outside the law's domain (a Stribeck velocity or sigmoid slope <= 0,
            a shape exponent <= 0, a negative coefficient, non-finite values).
    """
    table = np.zeros((p_count, n_dof, LAW_COLUMNS), dtype=np.float64)
    for c, g in enumerate(law.columns):
        v = values.get(g)
        arr = np.tile(np.asarray(defaults[g], dtype=np.float64), (p_count, 1)) if v is None \
            else np.asarray(v, dtype=np.float64)
        if arr.shape != (p_count, n_dof):
            raise ValueError(f"CandidateBatch.{g} must have shape ({p_count}, {n_dof}), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"CandidateBatch.{g} must be finite")
        positive = g in ("stribeck_velocity", "stribeck_shape", "sigmoid_slope")
        if (positive and np.any(arr <= 0)) or (g != "sigmoid_offset" and np.any(arr < 0)):
            raise ValueError(f"CandidateBatch.{g} must be {'> 0' if positive else '>= 0'}")
        table[:, :, c] = arr
    return np.ascontiguousarray(table)


# --------------------------------------------------------------------------- the reference (numpy), per joint
def budget(law: FrictionLaw, fc: np.ndarray, p: np.ndarray, qd: np.ndarray, tau_motor: np.ndarray | None = None,
           tau_ext: np.ndarray | None = None) -> np.ndarray:
    """(N,) the ``frictionloss`` budget [N m] of a constraint law at velocity ``qd`` [rad/s].

    Args:
        fc: (N,) the Coulomb (sliding) level [N m]; p: (N, 4) the law's packed parameters.
        tau_motor, tau_ext: (N,) the actuator's torque and the gravity + Coriolis torque on the joint [N m]
            (the load law only).
    """
    if law.name == "coulomb":
        return np.asarray(fc, dtype=float).copy()
    if law.name == "stribeck":
        fs, vs, shape = p[:, 0], p[:, 1], p[:, 2]
        x = np.abs(qd / vs)
        decay = np.exp(-np.where(shape == 2.0, x * x, x ** shape))
        return fc + (fs - fc) * decay
    if law.name == "load":
        km, ke = p[:, 0], p[:, 1]
        return np.maximum(fc + np.abs(ke * tau_ext - km * tau_motor), LOAD_BUDGET_FLOOR)
    raise ValueError(f"the {law.name} law is an applied torque, not a budget")


def applied_force(law: FrictionLaw, p: np.ndarray, qd: np.ndarray, state: np.ndarray) -> np.ndarray:
    """(N,) the friction torque [N m] a force law adds to the joint at velocity ``qd`` (Dahl: from its ``state``)."""
    if law.name == "sigmoid":
        a, s, o = p[:, 0], p[:, 1], p[:, 2]
        return -(a / (1.0 + np.exp(-s * (qd + o))) - a / (1.0 + np.exp(-s * o)))
    if law.name == "dahl":
        return -np.asarray(state, dtype=float)
    raise ValueError(f"the {law.name} law is a budget, not an applied torque")


def dahl_step(fc: np.ndarray, p: np.ndarray, qd: np.ndarray, state: np.ndarray, dt: float) -> np.ndarray:
    """(N,) the Dahl bristle force after ``dt`` [s] at the constant velocity ``qd``: the exact solution of
    dF/dt = sigma0 v (1 - F sign(v) / Fc), F -> Fc sign(v) + (F - Fc sign(v)) exp(-sigma0 |v| dt / Fc); F = 0
    where Fc is 0."""
    sigma0 = p[:, 0]
    target = fc * np.sign(qd)
    with np.errstate(divide="ignore", invalid="ignore"):
        decay = np.exp(-sigma0 * np.abs(qd) * dt / fc)
    out = target + (state - target) * decay
    return np.where(fc > 0, out, 0.0)


def batch_law(batch: "CandidateBatch", n_dof: int, stribeck_velocity: float | np.ndarray = 0.05) -> tuple[FrictionLaw, np.ndarray]:
    """The law a :class:`~isaaclab_sysid.sim.interface.CandidateBatch` selects and its (P, N, 4) packed table.

    Args:
        stribeck_velocity: the Stribeck velocity [rad/s] of a Stribeck batch that leaves ``stribeck_velocity`` None
            (the backend's ``ReplayOptions.stribeck_velocity``), scalar or (N,).

    Raises:
        ValueError: groups of two laws, a law without its defining number (``mu_static``; a sigmoid's amplitude and
            slope; the Dahl stiffness), or values outside the law's domain.
    """
    law = law_of_groups(batch.groups())
    p_count = batch.size
    need = {"stribeck": ("mu_static",), "sigmoid": ("sigmoid_amplitude", "sigmoid_slope"),
            "dahl": ("presliding_stiffness",), "load": (), "coulomb": ()}[law.name]
    missing = [g for g in need if getattr(batch, g) is None]
    if missing:
        raise ValueError(f"CandidateBatch: the {law.name} friction law needs {', '.join(missing)}")
    zeros = np.zeros(n_dof)
    defaults = {"stribeck_velocity": np.broadcast_to(np.asarray(stribeck_velocity, dtype=float), (n_dof,)),
                "stribeck_shape": np.full(n_dof, 2.0), "sigmoid_offset": zeros, "load_friction_motor": zeros,
                "load_friction_external": zeros}
    return law, law_table(law, {g: getattr(batch, g) for g in law.columns}, p_count, n_dof, defaults)
