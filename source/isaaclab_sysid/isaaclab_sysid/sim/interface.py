"""The contract between the fit and every physics backend (see docs/replay.md).

A backend is built for one robot and a fixed list of runs, and then rolls out a
batch of P candidate parameter sets on every run in one call, returning the
simulated states at each run's sample instants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from isaaclab_sysid.data.run import Run

#: Every parameter group a backend may support (see DESIGN: "Parameters fitted by replay").
PARAM_GROUPS = ("armature", "friction", "viscous", "delay", "mu_static", "dynamic_ratio")


class UnsupportedParameterError(ValueError):
    """The backend cannot represent a requested parameter group (never silently ignored)."""


@dataclass(frozen=True)
class ReplayOptions:
    """Replay semantics knobs shared by all backends.

    Attributes:
        warmup_ticks: ticks the first setpoint is held before the logged time base starts.
        gravity: simulate gravity; None = on only for runs whose arm does not
            compensate it (``meta.gravity_compensated`` False).
        torque_clamp: clamp the commanded torque to the robot's ``tau_max``.
        slew_limit: limit the commanded torque's rate to the robot's ``torque_rate_limit``.
        max_joint_velocity: a candidate whose |qd| exceeds this [rad/s] (or turns
            non-finite) is flagged as diverged.
    """

    warmup_ticks: int = 50
    gravity: bool | None = None
    torque_clamp: bool = False
    slew_limit: bool = False
    max_joint_velocity: float = 50.0


@dataclass
class CandidateBatch:
    """P candidate parameter sets; a group left None keeps the model's nominal value.

    Attributes:
        armature: (P, N) [kg m^2].
        friction: (P, N) Coulomb (static) friction torque [N m].
        viscous: (P, N) [N m s/rad].
        delay: (P,) integer actuator delay [ticks].
        mu_static: (P, N) static friction [N m] (PhysX-style; MuJoCo refuses it).
        dynamic_ratio: (P, N) dynamic/static friction ratio (PhysX-style).
    """

    armature: np.ndarray | None = None
    friction: np.ndarray | None = None
    viscous: np.ndarray | None = None
    delay: np.ndarray | None = None
    mu_static: np.ndarray | None = None
    dynamic_ratio: np.ndarray | None = None

    @property
    def size(self) -> int:
        """Number of candidates P."""
        for name in PARAM_GROUPS:
            val = getattr(self, name)
            if val is not None:
                return int(np.shape(val)[0])
        raise ValueError("empty CandidateBatch: set at least one group")

    def groups(self) -> tuple[str, ...]:
        """Names of the groups that are set."""
        return tuple(g for g in PARAM_GROUPS if getattr(self, g) is not None)

    def take(self, idx: np.ndarray | slice) -> "CandidateBatch":
        """The sub-batch of candidates ``idx``."""
        return CandidateBatch(**{g: (None if getattr(self, g) is None else np.asarray(getattr(self, g))[idx]) for g in PARAM_GROUPS})


@dataclass
class RunRollout:
    """Simulated states of P candidates on one run, at the run's T sample instants.

    Attributes:
        q, dq: (P, T, N) [rad], [rad/s].
        ee_pos: (P, T, 3) [m]; ee_quat: (P, T, 4) xyzw.
        tau: (P, T, N) torque the actuator applied [N m].
        diverged: (P,) True where the simulation blew up (NaN, runaway velocity);
            the states of such a candidate are meaningless.
    """

    q: np.ndarray
    dq: np.ndarray
    ee_pos: np.ndarray
    ee_quat: np.ndarray
    tau: np.ndarray
    diverged: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)


class ReplayBackend(Protocol):
    """What the fit needs from a physics backend."""

    name: str
    #: parameter groups this backend can represent
    supported_groups: frozenset[str]

    def rollout(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """Replay every run for every candidate; one :class:`RunRollout` per run, in order.

        Raises:
            UnsupportedParameterError: ``batch`` sets a group not in ``supported_groups``.
        """
        ...


def check_supported(batch: CandidateBatch, supported: frozenset[str], backend: str) -> None:
    """Refuse a batch that sets a group the backend cannot represent."""
    bad = [g for g in batch.groups() if g not in supported]
    if bad:
        raise UnsupportedParameterError(
            f"backend '{backend}' cannot represent parameter group(s) {', '.join(bad)} "
            f"(supported: {', '.join(sorted(supported))})"
        )
