"""The replay time base of one run: setpoint schedule (zero-order hold) and sample ticks.

Tick 0 is the run's first row; the warm-up occupies ticks ``-warmup .. -1`` and
holds the first setpoint. A 50 Hz log's setpoint k takes effect at tick 20 k and
is held for 20 ticks; a 1 kHz log's setpoints take effect at their stamped tick.
The state of row i is sampled at ``sample_ticks[i]`` (before that tick's step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import ImpedanceLaw, Run

CONTROLLER_IDS = {"joint_pd": 0, "task_impedance": 1}


@dataclass(frozen=True)
class RunSchedule:
    """Everything the native loop needs from a run, as contiguous arrays.

    Attributes:
        name: run name.
        controller: ``"joint_pd"`` or ``"task_impedance"``.
        sp_ticks: (K,) int64 tick each setpoint takes effect (first is 0).
        sp_values: (K, D) setpoints: q* (D = N) or x* ++ quat* xyzw (D = 7).
        sample_ticks: (T,) int64 strictly increasing sample ticks.
        kp, kd: gains, (N,) for joint_pd, (6,) for task_impedance.
        law: the impedance law (task_impedance only).
        q_init: (N,) start posture.
        q_rest: (N,) null-space rest posture.
        gravity_compensated: the real arm compensated gravity.
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

    @property
    def last_tick(self) -> int:
        return int(self.sample_ticks[-1])

    @property
    def n_samples(self) -> int:
        return int(self.sample_ticks.shape[0])


def _c(a: np.ndarray, dtype=np.float64) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=dtype))


def schedule_of(run: Run, n_dof: int) -> RunSchedule:
    """Build and check the replay schedule of ``run`` (see module doc)."""
    meta = run.meta
    if meta.controller not in CONTROLLER_IDS:
        raise ValueError(f"run '{run.name}': unknown controller '{meta.controller}'")
    if run.n_dof != n_dof:
        raise ValueError(f"run '{run.name}' has {run.n_dof} joints, the robot {n_dof}")
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
    gains = n_dof if meta.controller == "joint_pd" else 6
    kp, kd = _c(meta.kp), _c(meta.kd)
    if kp.shape != (gains,) or kd.shape != (gains,):
        raise ValueError(f"run '{run.name}': {meta.controller} needs {gains} kp and kd gains, got {kp.shape}, {kd.shape}")
    values = _c(sp_values)
    if meta.controller == "task_impedance":
        quat = values[:, 3:7]
        values = _c(np.concatenate([values[:, :3], quat / np.linalg.norm(quat, axis=1, keepdims=True)], axis=1))
    law = meta.impedance
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
    )
