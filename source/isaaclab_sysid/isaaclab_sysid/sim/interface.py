"""The contract between the fit and every physics backend (see docs/replay.md).

A backend is built for one robot and a fixed list of runs, and then rolls out a
batch of P candidate parameter sets on every run in one call, returning the
simulated states at each run's sample instants.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.shooting import run_windows
from isaaclab_sysid.utils.errors import UserError

#: Every parameter group a backend may support (see DESIGN: "Parameters fitted by replay").
PARAM_GROUPS = ("armature", "friction", "viscous", "delay", "mu_static", "dynamic_ratio", "stribeck_velocity",
                "torque_offset", "kp", "kd", "encoder_offset", "stribeck_shape", "sigmoid_amplitude", "sigmoid_slope",
                "sigmoid_offset", "load_friction_motor", "load_friction_external", "presliding_stiffness", "motor_kt",
                "motor_r")
#: the groups of the friction laws beyond Coulomb (sim/friction.py), per joint
LAW_GROUPS = ("mu_static", "dynamic_ratio", "stribeck_velocity", "stribeck_shape", "sigmoid_amplitude", "sigmoid_slope",
              "sigmoid_offset", "load_friction_motor", "load_friction_external", "presliding_stiffness")


class UnsupportedParameterError(UserError, ValueError):
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
        stribeck_velocity: Stribeck velocity vs [rad/s] of the static-friction group
            (``mu_static``/``dynamic_ratio``: friction Fc + (Fs - Fc) exp(-(v/vs)^2)).
        window_ticks: multiple-shooting window of torque runs (``controller = "torque"``) [ticks of
            1 ms]; each window restarts from the measured state (sim/shooting.py). None: one window.
    """

    warmup_ticks: int = 50
    gravity: bool | None = None
    torque_clamp: bool = False
    slew_limit: bool = False
    max_joint_velocity: float = 50.0
    stribeck_velocity: float = 0.05
    window_ticks: int | None = None


@dataclass
class CandidateBatch:
    """P candidate parameter sets; a group left None keeps the model's nominal value.

    Attributes:
        armature: (P, N) [kg m^2].
        friction: (P, N) Coulomb (static) friction torque [N m].
        viscous: (P, N) [N m s/rad].
        delay: (P,) integer actuator delay [ticks].
        mu_static: (P, N) static (breakaway) friction Fs [N m]; with it the Coulomb
            (sliding) friction is ``dynamic_ratio x mu_static`` and ``friction`` must be None.
        dynamic_ratio: (P, N) dynamic/static friction ratio Fc / Fs in [0, 1].
        stribeck_velocity: (P, N) Stribeck velocity vs [rad/s] of the static model (None: the
            backend's ``ReplayOptions.stribeck_velocity``).
        torque_offset: (P, N) offset of a torque run's logged torque [N m]: the torque that acted is
            ``logged - torque_offset`` (a torque sensor's bias; torque runs only).
        kp: (P, N) joint-PD stiffness [N m/rad] replacing the runs' stated gains (servos whose gains are unknown).
        kd: (P, N) joint-PD damping [N m s/rad] replacing the runs' stated gains.
        encoder_offset: (P, N) encoder calibration error [rad]: the logged (and controlled) position is
            ``true + encoder_offset``.
        stribeck_shape: (P, N) shape exponent delta of the Stribeck law, exp(-|v / vs|^delta) [-] (None: 2).
        sigmoid_amplitude, sigmoid_slope, sigmoid_offset: (P, N) the Gaz sigmoid law's phi1 [N m], phi2 [s/rad],
            phi3 [rad/s] (sim/friction.py).
        load_friction_motor, load_friction_external: (P, N) the load-dependent law's coefficients of the motor's
            torque and of the external (gravity + Coriolis) torque [-] (BAM's directional law; ``friction`` is its
            base level).
        presliding_stiffness: (P, N) the Dahl law's bristle stiffness sigma0 [N m/rad] (``friction`` is its
            saturation level).
        motor_kt: (P, N) a servo motor's torque constant at the output shaft [N m/A] (servo runs, sim/servo.py).
        motor_r: (P, N) a servo motor's winding resistance [Ohm] (servo runs).
    """

    armature: np.ndarray | None = None
    friction: np.ndarray | None = None
    viscous: np.ndarray | None = None
    delay: np.ndarray | None = None
    mu_static: np.ndarray | None = None
    dynamic_ratio: np.ndarray | None = None
    stribeck_velocity: np.ndarray | None = None
    torque_offset: np.ndarray | None = None
    kp: np.ndarray | None = None
    kd: np.ndarray | None = None
    encoder_offset: np.ndarray | None = None
    stribeck_shape: np.ndarray | None = None
    sigmoid_amplitude: np.ndarray | None = None
    sigmoid_slope: np.ndarray | None = None
    sigmoid_offset: np.ndarray | None = None
    load_friction_motor: np.ndarray | None = None
    load_friction_external: np.ndarray | None = None
    presliding_stiffness: np.ndarray | None = None
    motor_kt: np.ndarray | None = None
    motor_r: np.ndarray | None = None

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


class LossScore(Protocol):
    """A loss as a picklable function of (rollouts, runs), for a backend that scores where it simulates (the Ray
    backend's workers; ``objective.loss.WeightedLoss`` is the fit's): called on each slice of candidates, the slices'
    results joined in candidate order by :meth:`join`."""

    def __call__(self, rollouts: list[RunRollout], runs: Sequence[Run]) -> Any: ...

    def join(self, parts: Sequence[Any]) -> Any: ...


class ReplayBackend(abc.ABC):
    """What the fit, the evaluation and the intervals need from a physics backend: the whole contract.

    Every backend (``MujocoBackend``, ``IsaacLabBackend``, the rigid-body stage's ``InertialBackend``, the Ray
    backend, the ``StateAgeBackend`` wrapper, the tests' fakes) subclasses this class. Callers use these members
    as plain attributes: nothing is probed with ``getattr`` and nothing defaults silently.

    Attributes:
        name: the physics backend's name (``"mujoco"``, ``"isaaclab"``; a wrapper or the Ray backend gives the
            name of the backend that simulates: a result names the physics, not the transport).
        supported_groups: the parameter groups (of :data:`PARAM_GROUPS`) this backend can represent; a batch
            setting another one is refused (:func:`check_supported`).
        options: the replay semantics this backend replays with (``options.warmup_ticks``, the shooting
            windows' ``options.window_ticks``, ...).
        inner: the backend a wrapper delegates to (``StateAgeBackend``); None for a backend that simulates.
        scores_loss: True when :meth:`loss` scores candidates where they are simulated (the Ray backend: the
            workers send back losses, not states); False (the default) when the caller scores the rollouts.
    """

    name: str
    supported_groups: frozenset[str]
    options: ReplayOptions
    inner: "ReplayBackend | None" = None
    scores_loss: bool = False

    @abc.abstractmethod
    def rollout(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """Replay every run for every candidate; one :class:`RunRollout` per run, in order.

        Raises:
            UnsupportedParameterError: ``batch`` sets a group not in ``supported_groups``.
        """

    def rollout_states(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """:meth:`rollout` for a caller that reads only q, dq and ee_pos (the loss, its residuals and their normal
        equations): a backend may leave ``ee_quat`` and ``tau`` empty, (P, T, 0), to hold less (issue 45: on a long
        run a stencil's rollouts set the fit's peak memory). The default is :meth:`rollout` itself."""
        return self.rollout(batch, runs)

    def windows_of(self, runs: Sequence[Run]) -> list[np.ndarray]:
        """Per run, the (W, 2) shooting windows this backend replays it in (sim/shooting.py: a torque run cut at
        ``options.window_ticks``, a controller run one window)."""
        return run_windows(runs, self.options.window_ticks)

    def loss(self, batch: CandidateBatch, runs: Sequence[Run], score: LossScore) -> Any:
        """``score`` of the rollouts of ``batch`` on ``runs``, computed where they are simulated; only for a backend
        with ``scores_loss`` True (the others' rollouts are scored by the caller).

        Raises:
            NotImplementedError: ``scores_loss`` is False.
        """
        raise NotImplementedError(f"backend '{self.name}' does not score losses itself (scores_loss is False)")

    def close(self) -> None:
        """Release what the backend holds (threads, a simulation app, workers); a no-op by default."""


def check_supported(batch: CandidateBatch, supported: frozenset[str], backend: str) -> None:
    """Refuse a batch that sets a group the backend cannot represent."""
    bad = [g for g in batch.groups() if g not in supported]
    if bad:
        raise UnsupportedParameterError(
            f"backend '{backend}' cannot represent parameter group(s) {', '.join(bad)} "
            f"(supported: {', '.join(sorted(supported))})"
        )


def candidate_arrays(batch: CandidateBatch, nominal: dict[str, np.ndarray], n_dof: int) -> dict[str, np.ndarray]:
    """Validated per-candidate arrays of the groups every backend takes.

    Returns ``armature``, ``friction``, ``viscous`` as (P, N) float64 (a group
    left None takes ``nominal[group]``, an (N,) array) and ``delay`` as (P,)
    int64 (None -> 0). With the static-friction group, ``mu_static`` (P, N) is
    returned too and ``friction`` is its sliding part ``dynamic_ratio x mu_static``.

    Raises:
        ValueError: wrong shapes, negative or non-finite values, non-integer delays.
    """
    p_count = batch.size
    out: dict[str, np.ndarray] = {}
    for g in ("armature", "friction", "viscous"):
        val = getattr(batch, g)
        if val is None:
            arr = np.tile(np.asarray(nominal[g], dtype=np.float64), (p_count, 1))
        else:
            arr = np.asarray(val, dtype=np.float64)
            if arr.shape != (p_count, n_dof):
                raise ValueError(f"CandidateBatch.{g} must have shape ({p_count}, {n_dof}), got {arr.shape}")
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(f"CandidateBatch.{g} must be finite and >= 0")
        out[g] = np.ascontiguousarray(arr)
    if batch.mu_static is not None:
        if batch.friction is not None:
            raise ValueError("CandidateBatch: give friction (Coulomb) or mu_static + dynamic_ratio (static model), not both")
        fs = np.asarray(batch.mu_static, dtype=np.float64)
        ratio = np.ones_like(fs) if batch.dynamic_ratio is None else np.asarray(batch.dynamic_ratio, dtype=np.float64)
        if fs.shape != (p_count, n_dof) or ratio.shape != (p_count, n_dof):
            raise ValueError(f"CandidateBatch.mu_static/dynamic_ratio must have shape ({p_count}, {n_dof})")
        if not (np.all(np.isfinite(fs)) and np.all(fs >= 0) and np.all(np.isfinite(ratio))
                and np.all((ratio >= 0) & (ratio <= 1))):
            raise ValueError("CandidateBatch.mu_static must be finite and >= 0, dynamic_ratio in [0, 1]")
        out["mu_static"] = np.ascontiguousarray(fs)
        out["friction"] = np.ascontiguousarray(ratio * fs)
        if batch.stribeck_velocity is not None:
            vs = np.asarray(batch.stribeck_velocity, dtype=np.float64)
            if vs.shape != (p_count, n_dof) or not (np.all(np.isfinite(vs)) and np.all(vs > 0)):
                raise ValueError(f"CandidateBatch.stribeck_velocity must be ({p_count}, {n_dof}), finite and > 0")
            out["stribeck_velocity"] = np.ascontiguousarray(vs)
    elif batch.dynamic_ratio is not None or batch.stribeck_velocity is not None:
        raise ValueError("CandidateBatch.dynamic_ratio and stribeck_velocity need mu_static (the static-friction model)")
    if batch.delay is None:
        out["delay"] = np.zeros(p_count, dtype=np.int64)
    else:
        dl = np.asarray(batch.delay)
        if dl.shape != (p_count,):
            raise ValueError(f"CandidateBatch.delay must have shape ({p_count},), got {dl.shape}")
        if not np.all(np.isfinite(dl)) or np.any(dl < 0) or np.any(np.round(dl) != dl):
            raise ValueError("CandidateBatch.delay must hold non-negative integers (ticks)")
        out["delay"] = dl.astype(np.int64)
    return out


def replay_gravity(options: ReplayOptions, gravity_compensated: bool) -> bool:
    """Whether a run is replayed with gravity: the option when set, else off for arms that compensate it."""
    if options.gravity is not None:
        return bool(options.gravity)
    return not gravity_compensated
