"""The parameter space of the replay fit: named groups with bounds, normalized to [0, 1].

The optimizer only ever sees a vector ``x`` in the unit cube. Each group owns a
contiguous slice of it: per-joint groups (armature, friction, viscous,
mu_static, dynamic_ratio) take N entries, the actuator delay takes one entry.
Continuous groups decode linearly, ``v = lo + x (hi - lo)``. The delay decodes to
an integer: [0, 1] is cut into ``hi - lo + 1`` equal bins, one per tick count, so
every delay has the same share of the search space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.sim.interface import PARAM_GROUPS, CandidateBatch

#: Default bounds per group (units: armature kg m^2, friction/mu_static N m,
#: viscous N m s/rad, delay ticks of 1 ms, dynamic_ratio dimensionless).
DEFAULT_BOUNDS: dict[str, tuple[float, float]] = {
    "armature": (0.0, 0.5),
    "friction": (0.0, 5.0),
    "viscous": (0.0, 5.0),
    "delay": (0.0, 4.0),
    "mu_static": (0.0, 5.0),
    "dynamic_ratio": (0.0, 1.0),
}
#: Units of each group, for reports and --help.
UNITS: dict[str, str] = {
    "armature": "kg m^2",
    "friction": "N m",
    "viscous": "N m s/rad",
    "delay": "ticks (1 ms)",
    "mu_static": "N m",
    "dynamic_ratio": "-",
}
#: Name of each group in ``sysid_best_params.json`` (``best_params_decoded``).
RESULT_KEYS: dict[str, str] = {
    "armature": "armature",
    "friction": "friction",
    "viscous": "viscous",
    "delay": "motor_delay_steps",
    "mu_static": "mu_static",
    "dynamic_ratio": "dynamic_ratio",
}


@dataclass(frozen=True)
class GroupSpec:
    """One fitted group: its name, bounds and width in the normalized vector."""

    name: str
    lower: float
    upper: float

    def __post_init__(self) -> None:
        if self.name not in PARAM_GROUPS:
            raise ValueError(f"unknown parameter group '{self.name}' (known: {', '.join(PARAM_GROUPS)})")
        if not (np.isfinite(self.lower) and np.isfinite(self.upper)) or self.upper <= self.lower:
            raise ValueError(f"group '{self.name}': bounds must be finite with lower < upper, got [{self.lower}, {self.upper}]")
        if self.name == "delay":
            if self.lower < 0 or self.lower != int(self.lower) or self.upper != int(self.upper):
                raise ValueError(f"delay bounds must be non-negative integers (ticks), got [{self.lower}, {self.upper}]")

    @property
    def per_joint(self) -> bool:
        return self.name != "delay"

    @property
    def n_levels(self) -> int:
        """Number of integer delays (delay group only)."""
        return int(self.upper) - int(self.lower) + 1


class ParamSpace:
    """Named groups with bounds; maps between the unit cube and decoded values.

    Args:
        groups: the fitted groups, in order (their order fixes the vector layout).
        n_dof: number of joints N.
        joint_names: names used for labels (default ``j1..jN``).
        fixed: values for groups *not* fitted that should still be sent to the
            backend (e.g. a known delay); decoded units, per-joint arrays or a scalar delay.
    """

    def __init__(
        self,
        groups: Sequence[GroupSpec],
        n_dof: int,
        joint_names: Sequence[str] | None = None,
        fixed: Mapping[str, np.ndarray | float | int] | None = None,
    ) -> None:
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter group in {names}")
        if not groups:
            raise ValueError("no parameter group to fit")
        self.groups = tuple(groups)
        self.n_dof = int(n_dof)
        self.joint_names = tuple(joint_names) if joint_names is not None else tuple(f"j{i + 1}" for i in range(n_dof))
        self.fixed = {k: np.asarray(v) for k, v in (fixed or {}).items()}
        for k in self.fixed:
            if k in names:
                raise ValueError(f"group '{k}' is both fitted and fixed")
        self._slices: dict[str, slice] = {}
        i = 0
        for g in self.groups:
            w = self.n_dof if g.per_joint else 1
            self._slices[g.name] = slice(i, i + w)
            i += w
        self.dim = i

    @classmethod
    def from_bounds(cls, bounds: Mapping[str, tuple[float, float]], n_dof: int, **kw) -> "ParamSpace":
        """Build from ``{group: (lower, upper)}`` (order follows :data:`PARAM_GROUPS`)."""
        groups = [GroupSpec(g, float(bounds[g][0]), float(bounds[g][1])) for g in PARAM_GROUPS if g in bounds]
        return cls(groups, n_dof, **kw)

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

    def labels(self) -> list[str]:
        """One label per entry of the normalized vector, e.g. ``armature[j3]``, ``delay``."""
        out: list[str] = []
        for g in self.groups:
            if g.per_joint:
                out += [f"{g.name}[{j}]" for j in self.joint_names]
            else:
                out.append(g.name)
        return out

    def describe(self) -> dict:
        """JSON-able description (group order, bounds, units)."""
        return {
            "dim": self.dim,
            "n_dof": self.n_dof,
            "groups": [
                {"name": g.name, "lower": g.lower, "upper": g.upper, "unit": UNITS[g.name], "per_joint": g.per_joint}
                for g in self.groups
            ],
            "labels": self.labels(),
            "fixed": {k: v.tolist() for k, v in self.fixed.items()},
        }

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
                out[g.name] = g.lower + u * (g.upper - g.lower)
            else:
                lv = np.minimum(np.floor(u[:, 0] * g.n_levels), g.n_levels - 1).astype(np.int64)
                out[g.name] = int(g.lower) + lv
        if single:
            out = {k: v[0] for k, v in out.items()}
        return out

    def normalize(self, values: Mapping[str, np.ndarray | float | int]) -> np.ndarray:
        """The (D,) normalized vector of one decoded parameter set (clipped to the bounds).

        A delay maps to the centre of its bin, so ``decode(normalize(v)) == v``.
        """
        x = np.empty(self.dim)
        for g in self.groups:
            v = np.asarray(values[g.name], dtype=float)
            if g.per_joint:
                v = np.broadcast_to(v, (self.n_dof,))
                x[self._slices[g.name]] = np.clip((v - g.lower) / (g.upper - g.lower), 0.0, 1.0)
            else:
                d = int(np.clip(round(float(v)), g.lower, g.upper))
                x[self._slices[g.name]] = (d - g.lower + 0.5) / g.n_levels
        return x

    def nominal_values(self) -> dict[str, np.ndarray]:
        """The model's nominal joint properties: no armature, friction, viscous damping or delay.

        (The robot configs carry none; values are clipped into the bounds.)
        A ``dynamic_ratio`` nominal is 1 (dynamic friction = static friction).
        """
        out: dict[str, np.ndarray] = {}
        for g in self.groups:
            if g.per_joint:
                nom = 1.0 if g.name == "dynamic_ratio" else 0.0
                out[g.name] = np.full(self.n_dof, np.clip(nom, g.lower, g.upper))
            else:
                out[g.name] = np.int64(int(g.lower))
        return out

    def to_batch(self, X: np.ndarray) -> CandidateBatch:
        """The :class:`CandidateBatch` of P normalized vectors (P, D), plus the fixed groups."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        dec = self.decode(X)
        return self.batch_from_decoded(dec, X.shape[0])

    def batch_from_decoded(self, dec: Mapping[str, np.ndarray], P: int | None = None) -> CandidateBatch:
        """A batch from decoded values ((P, N) per joint, (P,) delay); fixed groups are broadcast."""
        if P is None:
            first = next(iter(dec.values()))
            P = int(np.shape(first)[0])
        kw: dict[str, np.ndarray] = {}
        for name, val in dec.items():
            kw[name] = np.asarray(val)
        for name, val in self.fixed.items():
            if name == "delay":
                kw[name] = np.full(P, int(val), dtype=np.int64)
            else:
                kw[name] = np.broadcast_to(np.asarray(val, dtype=float), (P, self.n_dof)).copy()
        if "delay" in kw:
            kw["delay"] = np.asarray(kw["delay"], dtype=np.int64).reshape(P)
        return CandidateBatch(**kw)

    def decoded_to_json(self, dec: Mapping[str, np.ndarray]) -> dict:
        """One decoded set as the ``best_params_decoded`` dict (per-joint lists, integer delay)."""
        out: dict = {}
        for g in self.groups:
            v = dec[g.name]
            out[RESULT_KEYS[g.name]] = int(v) if not g.per_joint else [float(a) for a in np.asarray(v).ravel()]
        for name, v in self.fixed.items():
            out[RESULT_KEYS[name]] = int(v) if name == "delay" else [float(a) for a in np.broadcast_to(v, (self.n_dof,))]
        return out

    def decoded_from_json(self, d: Mapping) -> dict[str, np.ndarray]:
        """Inverse of :meth:`decoded_to_json` for the fitted groups (missing groups -> nominal)."""
        nom = self.nominal_values()
        out: dict[str, np.ndarray] = {}
        for g in self.groups:
            key = RESULT_KEYS[g.name]
            if key not in d:
                out[g.name] = nom[g.name]
            elif g.per_joint:
                out[g.name] = np.asarray(d[key], dtype=float).reshape(self.n_dof)
            else:
                out[g.name] = np.int64(int(d[key]))
        return out
