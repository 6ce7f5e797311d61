"""The parameter space of the replay fit: named groups with bounds, normalized to [0, 1].

The optimizer only ever sees a vector ``x`` in the unit cube. Each group owns a
contiguous slice of it: per-joint groups (armature, friction, viscous,
mu_static, dynamic_ratio, stribeck_velocity) take N entries, the actuator delay takes one entry.
Continuous groups decode linearly, ``v = lo + x (hi - lo)``. The delay decodes to
an integer: [0, 1] is cut into ``hi - lo + 1`` equal bins, one per tick count, so
every delay has the same share of the search space.

This module is the one place that knows the groups (:data:`GROUPS`: unit,
default bounds, per joint or per arm, key in ``sysid_best_params.json``, nominal
value and the sliding-regime start), the delay's encoding
(:meth:`ParamSpace.delay_coord`), the labels (``armature[panda_joint3]``) and
which entries are continuous. Every other module asks a :class:`ParamSpace`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.sim.interface import PARAM_GROUPS, CandidateBatch


@dataclass(frozen=True)
class GroupInfo:
    """What the product knows about one parameter group.

    Attributes:
        name: group name (a :class:`~isaaclab_sysid.sim.interface.CandidateBatch` field).
        unit: physical unit of the decoded value.
        default_bounds: the fit's default search bounds (decoded units).
        per_joint: one value per joint (else one per arm).
        result_key: key in ``best_params_decoded`` (the Franka tooling's layout).
        nominal: the model's nominal value (robot configs carry no joint terms).
        low_start: the ``--x0 low`` start as a fraction of the bounds (sliding regime).
        what: one-line description for reports and ``--help``.
    """

    name: str
    unit: str
    default_bounds: tuple[float, float]
    per_joint: bool
    result_key: str
    nominal: float
    low_start: float
    what: str


#: Every group the replay fit knows, in the vector's canonical order (:data:`PARAM_GROUPS`).
GROUPS: dict[str, GroupInfo] = {
    g.name: g
    for g in (
        GroupInfo("armature", "kg m^2", (0.0, 0.5), True, "armature", 0.0, 0.2, "reflected rotor inertia"),
        GroupInfo("friction", "N m", (0.0, 5.0), True, "friction", 0.0, 0.05, "Coulomb friction torque"),
        GroupInfo("viscous", "N m s/rad", (0.0, 5.0), True, "viscous", 0.0, 0.05, "viscous friction"),
        GroupInfo("delay", "ticks (1 ms)", (0.0, 4.0), False, "motor_delay_steps", 0.0, 0.5, "actuator delay"),
        GroupInfo("mu_static", "N m", (0.0, 5.0), True, "mu_static", 0.0, 0.05, "static friction (PhysX-style)"),
        GroupInfo("dynamic_ratio", "-", (0.0, 1.0), True, "dynamic_ratio", 1.0, 0.8, "dynamic/static friction ratio"),
        GroupInfo("stribeck_velocity", "rad/s", (0.01, 0.2), True, "stribeck_velocity", 0.05, 0.2,
                  "Stribeck velocity of the static-friction model"),
        GroupInfo("torque_offset", "N m", (-2.0, 2.0), True, "torque_offset", 0.0, 0.5,
                  "offset (bias) of a torque run's logged torque"),
        GroupInfo("kp", "N m/rad", (0.1, 200.0), True, "kp", 0.0, 0.2, "joint-PD stiffness of a servo"),
        GroupInfo("kd", "N m s/rad", (0.0, 20.0), True, "kd", 0.0, 0.2, "joint-PD damping of a servo"),
        GroupInfo("encoder_offset", "rad", (-0.1, 0.1), True, "encoder_offset", 0.0, 0.5,
                  "encoder calibration error (logged = true + offset)"),
        GroupInfo("stribeck_shape", "-", (0.5, 4.0), True, "stribeck_shape", 2.0, 0.43,
                  "shape exponent delta of the Stribeck law exp(-|v/vs|^delta)"),
        GroupInfo("sigmoid_amplitude", "N m", (0.0, 5.0), True, "sigmoid_amplitude", 0.0, 0.05,
                  "amplitude phi1 of the sigmoid (Gaz) friction law"),
        GroupInfo("sigmoid_slope", "s/rad", (1.0, 100.0), True, "sigmoid_slope", 1.0, 0.1,
                  "slope phi2 of the sigmoid (Gaz) friction law"),
        GroupInfo("sigmoid_offset", "rad/s", (-0.1, 0.1), True, "sigmoid_offset", 0.0, 0.5,
                  "velocity offset phi3 of the sigmoid (Gaz) friction law"),
        GroupInfo("load_friction_motor", "-", (0.0, 0.5), True, "load_friction_motor", 0.0, 0.05,
                  "load-dependent friction per N m of motor torque (BAM)"),
        GroupInfo("load_friction_external", "-", (0.0, 0.5), True, "load_friction_external", 0.0, 0.05,
                  "load-dependent friction per N m of external torque (BAM)"),
        GroupInfo("presliding_stiffness", "N m/rad", (1.0, 2000.0), True, "presliding_stiffness", 1.0, 0.05,
                  "bristle stiffness sigma0 of the Dahl pre-sliding law"),
        GroupInfo("motor_kt", "N m/A", (0.05, 3.0), True, "motor_kt", 1.0, 0.5,
                  "a servo motor's torque constant at the output shaft (servo runs)"),
        GroupInfo("motor_r", "Ohm", (0.5, 10.0), True, "motor_r", 3.0, 0.5,
                  "a servo motor's winding resistance (servo runs)"),
    )
}
assert tuple(GROUPS) == PARAM_GROUPS, "GROUPS must list the backend contract's groups in order"

#: Default bounds per group (a view of :data:`GROUPS`).
DEFAULT_BOUNDS: dict[str, tuple[float, float]] = {k: g.default_bounds for k, g in GROUPS.items()}


@dataclass(frozen=True)
class GroupSpec:
    """One fitted group: its name and bounds (decoded units).

    ``joint_upper`` (per-joint groups only): each joint's own upper bound, each in (lower, upper]
    (the robot config's physical armature bound, :attr:`~isaaclab_sysid.robots.config.RobotConfig.armature_max`);
    ``joint_upper_source`` says where it comes from (shown with a fit that ends at it).
    """

    name: str
    lower: float
    upper: float
    joint_upper: tuple[float, ...] | None = None
    joint_upper_source: str | None = None

    def __post_init__(self) -> None:
        if self.name not in GROUPS:
            raise ValueError(f"unknown parameter group '{self.name}' (known: {', '.join(GROUPS)})")
        if not (np.isfinite(self.lower) and np.isfinite(self.upper)) or self.upper <= self.lower:
            raise ValueError(f"group '{self.name}': bounds must be finite with lower < upper, got [{self.lower}, {self.upper}]")
        if self.name == "delay":
            if self.lower < 0 or self.lower != int(self.lower) or self.upper != int(self.upper):
                raise ValueError(f"delay bounds must be non-negative integers (ticks), got [{self.lower}, {self.upper}]")
        if self.joint_upper is not None:
            ju = np.asarray(self.joint_upper, dtype=float)
            if not self.info.per_joint or not np.all(np.isfinite(ju)) or np.any(ju <= self.lower) or np.any(ju > self.upper):
                raise ValueError(f"group '{self.name}': per-joint upper bounds {list(self.joint_upper)} must lie in "
                                 f"({self.lower}, {self.upper}] (per-joint groups only)")

    def uppers(self, n_dof: int) -> np.ndarray:
        """(N,) upper bound of each joint: ``joint_upper`` when set, else ``upper`` for every joint."""
        if self.joint_upper is None:
            return np.full(n_dof, float(self.upper))
        if len(self.joint_upper) != n_dof:
            raise ValueError(f"group '{self.name}': {len(self.joint_upper)} per-joint upper bounds for {n_dof} joints")
        return np.asarray(self.joint_upper, dtype=float)

    @property
    def info(self) -> GroupInfo:
        return GROUPS[self.name]

    @property
    def per_joint(self) -> bool:
        return self.info.per_joint

    @property
    def unit(self) -> str:
        return self.info.unit

    @property
    def n_levels(self) -> int:
        """Number of integer delays (delay group only)."""
        return int(self.upper) - int(self.lower) + 1


@dataclass(frozen=True)
class EntryLabel:
    """One entry of the normalized vector: its label, group and joint (None for per-arm groups)."""

    label: str
    group: str
    joint: str | None


@dataclass(frozen=True)
class BoundHit:
    """A fitted value within ``tol`` of the width from one of its search bounds.

    Attributes:
        label, group, joint: the entry (see :class:`EntryLabel`).
        side: ``lower`` or ``upper``.
        value: the fitted value; bound: the bound it sits at (decoded units).
    """

    label: str
    group: str
    joint: str | None
    side: str
    value: float
    bound: float
    source: str | None = None

    def describe(self) -> str:
        """One line; a physical bound (the robot config's) says so: the fit wants more than the motor can reflect."""
        note = (f" (the physical bound: {self.source}; the data ask for more than the motor can reflect: suspect the "
                "inertials, the torque signal or the friction model)") if self.source else ""
        return f"{self.label} = {self.value:.4g} at its {self.side} bound {self.bound:g}{note}"


class ParamSpace:
    """Named groups with bounds; maps between the unit cube and decoded values.

    Args:
        groups: the fitted groups, in order (their order fixes the vector layout).
        n_dof: number of joints N.
        joint_names: the robot's joint names, used in labels (default ``j1..jN`` for
            stand-alone use; the fit always passes ``robot.joint_names``).
    """

    def __init__(self, groups: Sequence[GroupSpec], n_dof: int, joint_names: Sequence[str] | None = None) -> None:
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter group in {names}")
        if not groups:
            raise ValueError("no parameter group to fit")
        self.groups = tuple(groups)
        self.n_dof = int(n_dof)
        self.joint_names = tuple(joint_names) if joint_names is not None else tuple(f"j{i + 1}" for i in range(n_dof))
        if len(self.joint_names) != self.n_dof:
            raise ValueError(f"{len(self.joint_names)} joint names for {self.n_dof} joints")
        self._slices: dict[str, slice] = {}
        i = 0
        for g in self.groups:
            w = self.n_dof if g.per_joint else 1
            self._slices[g.name] = slice(i, i + w)
            i += w
        self.dim = i

    @classmethod
    def from_bounds(cls, bounds: Mapping[str, tuple[float, float]], n_dof: int,
                    joint_names: Sequence[str] | None = None) -> "ParamSpace":
        """Build from ``{group: (lower, upper)}`` (order follows :data:`GROUPS`)."""
        groups = [GroupSpec(g, float(bounds[g][0]), float(bounds[g][1])) for g in GROUPS if g in bounds]
        return cls(groups, n_dof, joint_names)

    # ------------------------------------------------------------ facts
    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.groups)

    def group(self, name: str) -> GroupSpec:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def slice(self, name: str) -> slice:
        return self._slices[name]

    def entries(self) -> list[EntryLabel]:
        """One :class:`EntryLabel` per entry of the normalized vector, in vector order."""
        out: list[EntryLabel] = []
        for g in self.groups:
            if g.per_joint:
                out += [EntryLabel(f"{g.name}[{j}]", g.name, j) for j in self.joint_names]
            else:
                out.append(EntryLabel(g.name, g.name, None))
        return out

    def labels(self) -> list[str]:
        """One label per entry of the normalized vector, e.g. ``armature[panda_joint3]``, ``delay``."""
        return [e.label for e in self.entries()]

    @property
    def delay_index(self) -> int | None:
        """Index of the delay entry in the vector (None when the delay is not fitted)."""
        return self._slices["delay"].start if "delay" in self._slices else None

    def continuous_index(self) -> np.ndarray:
        """Indices of the continuous entries (every entry except the integer delay), ascending."""
        return np.array([i for i in range(self.dim) if i != self.delay_index], dtype=int)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(D,) lower and (D,) upper bound of every entry (decoded units)."""
        lo, hi = np.empty(self.dim), np.empty(self.dim)
        for g in self.groups:
            lo[self._slices[g.name]] = g.lower
            hi[self._slices[g.name]] = g.uppers(self.n_dof) if g.per_joint else g.upper
        return lo, hi

    def widths(self) -> np.ndarray:
        """(D,) decoded width of each entry's bounds (hi - lo)."""
        w = np.empty(self.dim)
        for g in self.groups:
            w[self._slices[g.name]] = (g.uppers(self.n_dof) if g.per_joint else g.upper) - g.lower
        return w

    def at_bounds(self, x: np.ndarray, tol: float = 0.01) -> list[BoundHit]:
        """The entries of one normalized vector (D,) within ``tol`` (fraction of the width) of a search bound.

        The delay's lower bound counts only when it is above 0 ticks (no delay can be shorter than none).
        """
        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        value = self.decoded_vector(x)
        lo, hi = self.bounds()
        out = []
        for i, e in enumerate(self.entries()):
            if e.group == "delay":
                lower, upper = value[i] <= lo[i] and lo[i] > 0, value[i] >= hi[i]
            else:
                lower, upper = x[i] <= tol, x[i] >= 1.0 - tol
            if lower or upper:
                side, b = ("lower", lo[i]) if lower else ("upper", hi[i])
                src = self.group(e.group).joint_upper_source if side == "upper" else None
                out.append(BoundHit(e.label, e.group, e.joint, side, float(value[i]), float(b), src))
        return out

    def describe(self) -> dict:
        """JSON-able description (group order, bounds, units, joint names); :meth:`from_description` reads it."""
        return {
            "dim": self.dim,
            "n_dof": self.n_dof,
            "joint_names": list(self.joint_names),
            "groups": [
                {"name": g.name, "lower": g.lower, "upper": g.upper, "unit": g.unit, "per_joint": g.per_joint,
                 **({} if g.joint_upper is None else {"joint_upper": list(g.joint_upper),
                                                      "joint_upper_source": g.joint_upper_source})}
                for g in self.groups
            ],
            "labels": self.labels(),
        }

    @classmethod
    def from_description(cls, d: Mapping, joint_names: Sequence[str] | None = None) -> "ParamSpace":
        """The space a :meth:`describe` dict records.

        Files written before joint names were recorded need ``joint_names`` (from the
        robot config); without either, a ``ValueError`` says so (no name is invented).
        """
        names = d.get("joint_names") or joint_names
        if names is None:
            raise ValueError("the parameter space records no joint names; give the robot config's joint names")
        return cls([GroupSpec(g["name"], float(g["lower"]), float(g["upper"]),
                              None if g.get("joint_upper") is None else tuple(float(v) for v in g["joint_upper"]),
                              g.get("joint_upper_source")) for g in d["groups"]], int(d["n_dof"]), names)

    # ------------------------------------------------------- transforms
    def decode(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Decoded values of one (D,) or many (P, D) normalized vectors (clipped to [0, 1]).

        Per-joint groups come back as (N,) / (P, N) floats, the delay as an int / (P,) ints.
        """
        x = np.asarray(x, dtype=float)
        single = x.ndim == 1
        X = np.clip(np.atleast_2d(x), 0.0, 1.0)
        if X.shape[1] != self.dim:
            raise ValueError(f"expected vectors of length {self.dim}, got {X.shape[1]}")
        out: dict[str, np.ndarray] = {}
        for g in self.groups:
            u = X[:, self._slices[g.name]]
            if g.per_joint:
                out[g.name] = g.lower + u * (g.uppers(self.n_dof) - g.lower)
            else:
                lv = np.minimum(np.floor(u[:, 0] * g.n_levels), g.n_levels - 1).astype(np.int64)
                out[g.name] = int(g.lower) + lv
        if single:
            out = {k: v[0] for k, v in out.items()}
        return out

    def decoded_vector(self, x: np.ndarray) -> np.ndarray:
        """(D,) decoded values of one normalized vector, in label order."""
        dec = self.decode(np.asarray(x, dtype=float))
        v = np.empty(self.dim)
        for g in self.groups:
            v[self._slices[g.name]] = np.asarray(dec[g.name], dtype=float).ravel()
        return v

    def delay_coord(self, delay: int) -> float:
        """The normalized coordinate of an integer delay [ticks]: the centre of its bin."""
        g = self.group("delay")
        return (delay - g.lower + 0.5) / g.n_levels

    def with_delay(self, x: np.ndarray, delay: int | None) -> np.ndarray:
        """A copy of ``x`` clipped to [0, 1] with its delay entry set to ``delay`` (None: unchanged)."""
        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0).copy()
        if delay is not None:
            x[self.delay_index] = self.delay_coord(delay)
        return x

    def delay_of(self, x: np.ndarray) -> int | None:
        """The integer delay [ticks] of one normalized vector (None when the delay is not fitted)."""
        return int(self.decode(x)["delay"]) if self.delay_index is not None else None

    def normalize(self, values: Mapping[str, np.ndarray | float | int]) -> np.ndarray:
        """The (D,) normalized vector of one decoded parameter set (clipped to the bounds).

        A delay maps to the centre of its bin, so ``decode(normalize(v)) == v``.
        """
        x = np.empty(self.dim)
        for g in self.groups:
            v = np.asarray(values[g.name], dtype=float)
            if g.per_joint:
                v = np.broadcast_to(v, (self.n_dof,))
                x[self._slices[g.name]] = np.clip((v - g.lower) / (g.uppers(self.n_dof) - g.lower), 0.0, 1.0)
            else:
                d = int(np.clip(round(float(v)), g.lower, g.upper))
                x[self._slices[g.name]] = self.delay_coord(d)
        return x

    def low_start(self) -> np.ndarray:
        """The ``--x0 low`` start (D,): each group at its :attr:`GroupInfo.low_start` fraction (sliding regime)."""
        x = np.empty(self.dim)
        for g in self.groups:
            x[self._slices[g.name]] = g.info.low_start
        return x

    def nominal_values(self) -> dict[str, np.ndarray]:
        """The model's nominal joint properties (:attr:`GroupInfo.nominal`), clipped into the bounds.

        No armature, friction, viscous damping or delay; a ``dynamic_ratio`` nominal is 1
        (dynamic friction = static friction).
        """
        out: dict[str, np.ndarray] = {}
        for g in self.groups:
            if g.per_joint:
                out[g.name] = np.clip(np.full(self.n_dof, g.info.nominal), g.lower, g.uppers(self.n_dof))
            else:
                out[g.name] = np.int64(int(g.lower))
        return out

    def to_batch(self, X: np.ndarray) -> CandidateBatch:
        """The :class:`CandidateBatch` of P normalized vectors (P, D)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return self.batch_from_decoded(self.decode(X), X.shape[0])

    def batch_from_decoded(self, dec: Mapping[str, np.ndarray], P: int | None = None) -> CandidateBatch:
        """A batch from decoded values ((P, N) per joint, (P,) delay)."""
        if P is None:
            P = int(np.shape(next(iter(dec.values())))[0])
        kw: dict[str, np.ndarray] = {name: np.asarray(val) for name, val in dec.items()}
        if "delay" in kw:
            kw["delay"] = np.asarray(kw["delay"], dtype=np.int64).reshape(P)
        return CandidateBatch(**kw)

    def decoded_to_json(self, dec: Mapping[str, np.ndarray]) -> dict:
        """One decoded set as the ``best_params_decoded`` dict (per-joint lists, integer delay)."""
        out: dict = {}
        for g in self.groups:
            v = dec[g.name]
            out[g.info.result_key] = int(v) if not g.per_joint else [float(a) for a in np.asarray(v).ravel()]
        return out

    def decoded_from_json(self, d: Mapping) -> dict[str, np.ndarray]:
        """Inverse of :meth:`decoded_to_json` for the fitted groups (missing groups -> nominal)."""
        nom = self.nominal_values()
        out: dict[str, np.ndarray] = {}
        for g in self.groups:
            key = g.info.result_key
            if key not in d:
                out[g.name] = nom[g.name]
            elif g.per_joint:
                out[g.name] = np.asarray(d[key], dtype=float).reshape(self.n_dof)
            else:
                out[g.name] = np.int64(int(d[key]))
        return out

    def restricted_to(self, decoded_json: Mapping) -> "ParamSpace":
        """The space whose groups are exactly those present in a ``best_params_decoded`` dict.

        Bounds come from this space where it has the group, else from :data:`GROUPS`.
        """
        groups = []
        for name, info in GROUPS.items():
            if info.result_key in decoded_json:
                try:
                    groups.append(self.group(name))
                except KeyError:
                    groups.append(GroupSpec(name, *info.default_bounds))
        return ParamSpace(groups, self.n_dof, self.joint_names)
