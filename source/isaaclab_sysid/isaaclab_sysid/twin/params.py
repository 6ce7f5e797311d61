"""The twin's true parameters and realism knobs, read from a JSON file (configs/twin/*.json)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.sim.friction import LAWS, batch_law
from isaaclab_sysid.sim.interface import CandidateBatch


@dataclass(frozen=True)
class TwinNoise:
    """Measurement and process noise (standard deviations; 0 = off).

    Attributes:
        q_std: encoder noise [rad].
        dq_std: velocity noise [rad/s].
        tau_J_std: measured-torque noise [N m].
        actuator_tau_std: torque noise added to the applied torque every tick [N m]
            (process noise: it moves the arm).
        q_quantum: encoder quantization step [rad] (0 = none).
        tau_quantum: measured-torque quantization step [N m] (0 = none).
        stale_max_ms: the state of a row in a 50 Hz log is the newest frame of a
            100 Hz state stream, uniformly 0..stale_max_ms old (a 1 kHz log is fresh).
    """

    q_std: float = 0.0
    dq_std: float = 0.0
    tau_J_std: float = 0.0
    actuator_tau_std: float = 0.0
    q_quantum: float = 0.0
    tau_quantum: float = 0.0
    stale_max_ms: int = 0


@dataclass(frozen=True)
class TwinParams:
    """True joint dynamics of the twin plus its realism knobs.

    Attributes:
        robot: robot config name.
        armature, friction, viscous: (N,) true values [kg m^2], [N m] (Coulomb), [N m s/rad].
        delay: true actuator delay [ticks].
        friction_model: ``"coulomb"`` (MuJoCo's, the fit's model), ``"stribeck"`` (static_friction,
            stribeck_velocity below), or another law of sim/friction.py (``"sigmoid"``, ``"load"``, ``"dahl"``, or
            ``"stribeck"`` given by ``law_params``) whose numbers are ``law_params``.
        static_friction: (N,) static friction above Coulomb [N m] (stribeck only).
        stribeck_velocity: (N,) Stribeck velocity [rad/s] (stribeck only).
        substeps: physics steps per 1 ms control tick (finer integrator).
        torque_clamp, slew_limit: the real arm's torque and torque-rate limits.
        noise: measurement / process noise.
        law_params: the friction law's groups (sim/friction.py), (N,) each, e.g. ``{"sigmoid_amplitude": ...,
            "sigmoid_slope": ..., "sigmoid_offset": ...}``; ``friction`` stays the Coulomb level the law reads
            (it must be 0 for the sigmoid law, which has none).
    """

    robot: str
    armature: np.ndarray
    friction: np.ndarray
    viscous: np.ndarray
    delay: int = 0
    friction_model: str = "coulomb"
    static_friction: np.ndarray | None = None
    stribeck_velocity: np.ndarray | None = None
    substeps: int = 1
    torque_clamp: bool = True
    slew_limit: bool = True
    noise: TwinNoise = field(default_factory=TwinNoise)
    source: Path | None = None
    law_params: dict[str, np.ndarray] | None = None

    def __post_init__(self) -> None:
        n = len(self.armature)
        where = f"{self.source}: " if self.source else ""
        for name in ("armature", "friction", "viscous"):
            a = np.asarray(getattr(self, name), dtype=float)
            if a.shape != (n,) or np.any(a < 0) or not np.all(np.isfinite(a)):
                raise ValueError(f"{where}'{name}' must be {n} finite non-negative numbers")
        if int(self.delay) != self.delay or self.delay < 0:
            raise ValueError(f"{where}'delay' must be a non-negative integer (ticks)")
        if self.friction_model not in LAWS:
            raise ValueError(f"{where}'friction_model' must be one of {', '.join(LAWS)}")
        if self.law_params is not None or self.friction_model in ("sigmoid", "load", "dahl"):
            try:
                law, _ = batch_law(self.law_batch(), n)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{where}law_params: {exc}") from None
            if law.name != self.friction_model:
                raise ValueError(f"{where}law_params are the {law.name} law's, friction_model says {self.friction_model}")
        elif self.friction_model == "stribeck":
            fs = np.asarray(self.static_friction, dtype=float)
            vs = np.asarray(self.stribeck_velocity, dtype=float)
            if fs.shape != (n,) or vs.shape != (n,) or np.any(vs <= 0) or np.any(fs < np.asarray(self.friction)):
                raise ValueError(f"{where}stribeck needs static_friction >= friction and stribeck_velocity > 0, {n} each")
        if self.substeps < 1:
            raise ValueError(f"{where}'substeps' must be >= 1")

    def law_batch(self) -> CandidateBatch:
        """The true friction law's numbers as a one-candidate batch (``friction`` the Coulomb level, except for the
        sigmoid law, which has none; no law_params: Coulomb)."""
        kw = {g: np.asarray(v, dtype=float)[None] for g, v in (self.law_params or {}).items()}
        if self.friction_model == "sigmoid":
            if np.any(np.asarray(self.friction) != 0):
                raise ValueError("the sigmoid law has no Coulomb level: give friction 0")
        elif "mu_static" not in kw:
            kw["friction"] = np.asarray(self.friction, dtype=float)[None]
        return CandidateBatch(**kw)

    def with_noise(self, noise: TwinNoise) -> "TwinParams":
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["noise"] = noise
        return TwinParams(**d)

    def to_json(self) -> dict:
        out = {}
        for k in self.__dataclass_fields__:
            if k == "source":
                continue
            v = getattr(self, k)
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif isinstance(v, dict):
                v = {g: np.asarray(a, dtype=float).tolist() for g, a in v.items()}
            elif isinstance(v, TwinNoise):
                v = asdict(v)
            out[k] = v
        return out


def load_twin_params(path: str | Path) -> TwinParams:
    """Read a true-parameter JSON (see configs/twin/ and docs/twin.md)."""
    path = Path(path)
    raw = json.loads(path.read_text())
    known = set(TwinParams.__dataclass_fields__) - {"source"}
    unknown = set(raw) - known - {"comment"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    noise_raw = raw.pop("noise", {}) or {}
    bad = set(noise_raw) - set(TwinNoise.__dataclass_fields__)
    if bad:
        raise ValueError(f"{path}: unknown noise keys {sorted(bad)}")
    raw.pop("comment", None)
    for k in ("armature", "friction", "viscous", "static_friction", "stribeck_velocity"):
        if raw.get(k) is not None:
            raw[k] = np.asarray(raw[k], dtype=float)
    if raw.get("law_params") is not None:
        raw["law_params"] = {g: np.asarray(v, dtype=float) for g, v in raw["law_params"].items()}
    return TwinParams(**raw, noise=TwinNoise(**noise_raw), source=path)
