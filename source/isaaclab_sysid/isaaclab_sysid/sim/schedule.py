"""The replay time base of one run: setpoint schedule (zero-order hold) and sample ticks.

Tick 0 is the run's first row; the warm-up occupies ticks ``-warmup .. -1`` and
holds the first setpoint. A 50 Hz log's setpoint k takes effect at tick 20 k and
is held for 20 ticks; a 1 kHz log's setpoints take effect at their stamped tick.
The state of row i is sampled at ``sample_ticks[i]`` (before that tick's step).

A torque run (``controller = "torque"``, :mod:`isaaclab_sysid.importers.torque_runs`) has no
setpoints: its schedule carries the measured torque on every tick and the measured
states that start its shooting windows (:mod:`isaaclab_sysid.sim.shooting`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from isaaclab_sysid.data.run import ImpedanceLaw, Run
from isaaclab_sysid.sim.shooting import torque_per_tick

CONTROLLER_IDS = {"joint_pd": 0, "task_impedance": 1, "torque": 2, "servo": 3}
#: The orientation-error forms the backends compute: ``"quat"`` = 2 vec(q_des q^-1), ``"rotvec"``.
BACKEND_ORIENTATION = {"quat_2vec": "quat", "rotvec": "rotvec"}


def backend_law(law: ImpedanceLaw, kp: np.ndarray) -> tuple[ImpedanceLaw, np.ndarray]:
    """The law and (6,) gains in the backends' form (:data:`BACKEND_ORIENTATION`), exactly equivalent.

    ``quat_vec`` (e = vec(q_des q^-1)) is ``quat_2vec`` (e' = 2 e) at half the rotational stiffness and
    twice the rotational clip: ``(kp / 2) e' = kp e`` and ``clip(e', 2 c) = 2 clip(e, c)`` bit for bit
    (scaling by 2 is exact in floating point). The plain-Python reference computes ``quat_vec``
    directly, so the conformance tests check this mapping.
    """
    conv = law.orientation_error
    if conv == "quat_vec":
        kp = np.asarray(kp, dtype=np.float64).copy()
        kp[3:6] *= 0.5
        clip = None if law.max_orientation_error is None else 2.0 * law.max_orientation_error
        return replace(law, orientation_error="quat", max_orientation_error=clip), kp
    if conv not in BACKEND_ORIENTATION:
        raise ValueError(f"unknown orientation_error {conv!r} (expected rotvec, quat_vec or quat_2vec)")
    return replace(law, orientation_error=BACKEND_ORIENTATION[conv]), np.asarray(kp, dtype=np.float64)


@dataclass(frozen=True)
class RunSchedule:
    """Everything the native loop needs from a run, as contiguous arrays.

    Attributes:
        name: run name.
        controller: ``"joint_pd"``, ``"task_impedance"``, ``"servo"`` or ``"torque"``.
        sp_ticks: (K,) int64 tick each setpoint takes effect (first is 0).
        sp_values: (K, D) setpoints: q* (D = N), x* ++ quat* xyzw (D = 7), or for a servo run q* ++ torque enable
            ++ supply voltage (D = 3N).
        sample_ticks: (T,) int64 strictly increasing sample ticks.
        kp, kd: gains, (N,) for joint_pd, (6,) for task_impedance (``kp`` in the law's backend form), (N,) register
            gains for a servo run.
        law: the impedance law (task_impedance only) in the backends' form (:func:`backend_law`:
            ``orientation_error`` ``"quat"`` = 2 vec(q_des q^-1) or ``"rotvec"``).
        q_init: (N,) start posture.
        q_rest: (N,) null-space rest posture.
        gravity_compensated: the real arm compensated gravity (a torque run: its torque excludes gravity).
        torque: torque runs: (last_tick + 1, N) measured torque on every tick [N m]; else None.
        q_meas, dq_meas: torque runs: (T, N) measured states (the windows' start states); else None.
        qd_init: (N,) start velocity [rad/s] of a controller run that starts moving (a window cut from a run,
            ``RunMeta.qd_init``): replayed from (q_init, qd_init) at tick 0 without a warm-up (the first command
            fills the delay buffer); None: at rest, after the options' warm-up.
    """

    name: str
    controller: str
    sp_ticks: np.ndarray
    sp_values: np.ndarray
    sample_ticks: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    law: ImpedanceLaw
    q_init: np.ndarray
    q_rest: np.ndarray
    gravity_compensated: bool
    torque: np.ndarray | None = None
    q_meas: np.ndarray | None = None
    dq_meas: np.ndarray | None = None
    qd_init: np.ndarray | None = None

    def warmup(self, default: int) -> int:
        """The warm-up ticks of this run's replay: ``default`` (the options'), or 0 for a run that starts moving."""
        return 0 if self.qd_init is not None else int(default)

    @property
    def last_tick(self) -> int:
        return int(self.sample_ticks[-1])

    @property
    def n_samples(self) -> int:
        return int(self.sample_ticks.shape[0])

    def held_setpoints(self, ticks: np.ndarray) -> np.ndarray:
        """(len(ticks), D) the setpoint in effect at each tick (zero-order hold; a warm-up tick below 0 holds the
        first)."""
        i = np.searchsorted(self.sp_ticks, np.maximum(ticks, 0), side="right") - 1
        return self.sp_values[np.maximum(i, 0)]


def _c(a: np.ndarray, dtype=np.float64) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=dtype))


def schedule_of(run: Run, n_dof: int) -> RunSchedule:
    """Build and check the replay schedule of ``run`` (see module doc)."""
    meta = run.meta
    if meta.controller not in CONTROLLER_IDS:
        raise ValueError(f"run '{run.name}': unknown controller '{meta.controller}'")
    if run.n_dof != n_dof:
        raise ValueError(f"run '{run.name}' has {run.n_dof} joints, the robot {n_dof}")
    if meta.controller == "torque":
        return _torque_schedule(run)
    sp_ticks, sp_values = run.setpoints()
    sp_ticks = _c(sp_ticks, np.int64).copy()
    if sp_ticks.size == 0:
        raise ValueError(f"run '{run.name}' has no setpoints")
    sp_ticks[0] = 0  # the first setpoint also covers the warm-up and the first rows
    if np.any(np.diff(sp_ticks) <= 0):
        raise ValueError(f"run '{run.name}': setpoint ticks are not strictly increasing")
    sample_ticks = _c(run.sample_ticks(), np.int64)
    if np.any(np.diff(sample_ticks) <= 0):
        raise ValueError(f"run '{run.name}': sample ticks are not strictly increasing")
    gains = 6 if meta.controller == "task_impedance" else n_dof
    kp, kd = _c(meta.kp), _c(meta.kd)
    if kp.shape != (gains,) or kd.shape != (gains,):
        raise ValueError(f"run '{run.name}': {meta.controller} needs {gains} kp and kd gains, got {kp.shape}, {kd.shape}")
    values = _c(sp_values)
    if meta.controller == "servo":
        values = _servo_rows(run, values, sp_ticks.shape[0], kd)
    if meta.controller == "task_impedance":
        quat = values[:, 3:7]
        values = _c(np.concatenate([values[:, :3], quat / np.linalg.norm(quat, axis=1, keepdims=True)], axis=1))
    law = meta.impedance if meta.impedance is not None else ImpedanceLaw()
    if meta.controller == "task_impedance":
        if meta.impedance is None:
            raise ValueError(f"run '{run.name}' does not record its impedance law ({', '.join(meta.unrecorded)}): "
                             "state it before replaying (Run.with_law; the fit's --orientation_error and "
                             "--coriolis_compensation / --no_coriolis_compensation)")
    law, kp_backend = backend_law(law, kp)  # the backends check the law's form for every run
    if meta.controller == "task_impedance":
        kp = _c(kp_backend)
    q_init = _c(meta.q_init)
    q_rest = _c(law.q_rest) if law.q_rest is not None else q_init
    return RunSchedule(
        name=run.name,
        controller=meta.controller,
        sp_ticks=sp_ticks,
        sp_values=values,
        sample_ticks=sample_ticks,
        kp=kp,
        kd=kd,
        law=law,
        q_init=q_init,
        q_rest=q_rest,
        gravity_compensated=bool(meta.gravity_compensated),
        qd_init=None if meta.qd_init is None else _c(meta.qd_init),
    )


def _servo_rows(run: Run, goals: np.ndarray, k: int, kd: np.ndarray) -> np.ndarray:
    """A servo run's setpoint rows (K, 3N): goal [rad], torque enable (1/0), supply voltage [V] (NaN: not recorded,
    the family's nominal); the rows of the setpoints' own samples (docs/servo_arms.md)."""
    if np.any(kd != 0):
        raise ValueError(f"run '{run.name}': a servo run with a D gain (kd {kd.tolist()}): the firmware's D-term "
                         "mapping to a duty is not stated for any servo family (robots/servos.py); record with kd 0")
    n = goals.shape[1]
    rows = run.setpoint_rows()
    en = np.ones((k, n)) if run.torque_enable is None else np.asarray(run.torque_enable, dtype=np.float64)[rows]
    vin = np.full((k, n), np.nan) if run.supply_v is None else np.asarray(run.supply_v, dtype=np.float64)[rows]
    return _c(np.concatenate([goals, en.reshape(k, n), vin.reshape(k, n)], axis=1))


def _torque_schedule(run: Run) -> RunSchedule:
    """The schedule of a torque run: the measured torque per tick and the measured states."""
    sample_ticks = _c(run.sample_ticks(), np.int64)
    if sample_ticks[0] != 0 or np.any(np.diff(sample_ticks) <= 0):
        raise ValueError(f"run '{run.name}': sample ticks must start at 0 and increase strictly")
    tau = _c(run.tau)
    if not np.all(np.isfinite(tau)):
        raise ValueError(f"run '{run.name}': a torque run needs a finite torque in every row")
    n = run.n_dof
    empty = np.zeros(0)
    return RunSchedule(
        name=run.name,
        controller="torque",
        sp_ticks=np.zeros(0, dtype=np.int64),
        sp_values=np.zeros((0, n)),
        sample_ticks=sample_ticks,
        kp=empty,
        kd=empty,
        law=ImpedanceLaw(),
        q_init=_c(run.q[0]),
        q_rest=_c(run.q[0]),
        gravity_compensated=bool(run.meta.gravity_compensated),
        torque=torque_per_tick(sample_ticks, tau),
        q_meas=_c(run.q),
        dq_meas=_c(run.dq),
    )
