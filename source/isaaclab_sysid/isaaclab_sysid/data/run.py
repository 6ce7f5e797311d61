"""The typed run object: arrays in SI units plus the sidecar's metadata."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.schema import JOINT_SPACE_CONTROLLERS
from isaaclab_sysid.timebase import TICK_HZ


#: Facts that change the replay but that a log may not record (the Franka tooling's schema 2
#: records none of them). The fit takes each from the flag of the same name
#: (``--orientation_error``, ...); docs/data_format.md.
REPLAY_FACTS = ("orientation_error", "coriolis_compensation", "ee_offset", "torque_limit", "torque_rate_limit")
#: The facts of :data:`REPLAY_FACTS` that make up the impedance law (the rest belong to the robot).
LAW_FACTS = ("orientation_error", "coriolis_compensation")


@dataclass(frozen=True)
class ImpedanceLaw:
    """How the real arm's task-space impedance controller computes its torque.

    Attributes:
        coriolis_compensation: the controller adds C(q, qd) qd (libfranka examples do).
        orientation_error: the rotational error, world frame, short way (docs/data_format.md):
            ``"rotvec"`` = rotation vector of R_des R^T; ``"quat_vec"`` = vec(q_des q^-1), about
            half the angle (libfranka's and franka_ros's cartesian_impedance_example);
            ``"quat_2vec"`` = 2 vec(q_des q^-1) (what schema-1 ``"quat"`` means).
        max_position_error: clip of the translational error norm [m], or None.
        max_orientation_error: clip of the rotational error norm (in the convention's units), or None.
        nullspace_stiffness: joint stiffness toward ``q_rest`` projected into the
            Jacobian's null space [N m/rad] (0 = off); damping is 2 sqrt of it.
        q_rest: (N,) rest posture [rad] for the null-space term, or None (= q_init).
    """

    coriolis_compensation: bool = True
    orientation_error: str = "quat_2vec"
    max_position_error: float | None = None
    max_orientation_error: float | None = None
    nullspace_stiffness: float = 0.0
    q_rest: np.ndarray | None = None


@dataclass
class RunMeta:
    """The sidecar JSON of a run.

    Attributes:
        schema_version: run format version (1).
        robot: robot config name (``configs/robots/<robot>.toml``).
        controller: ``"joint_pd"``, ``"task_impedance"`` or ``"servo"`` (a smart servo's firmware position loop).
        control_rate_hz: rate at which setpoints were sent [Hz] (e.g. 50).
        log_rate_hz: rate of the CSV rows [Hz]: ``control_rate_hz`` or 1000.
        num_samples: number of CSV rows.
        q_init: (N,) joint positions at the start [rad].
        anchor_pos: (3,) EE anchor position of the excitation [m].
        anchor_quat: (4,) anchor orientation, xyzw.
        kp: joint_pd (N,) [N m/rad]; task_impedance (6,) [N/m x3, N m/rad x3]; servo (N,) the firmware's
            register gain (units of the servo family, ``robots/servos.py``).
        kd: joint_pd (N,) [N m s/rad]; task_impedance (6,) [N s/m x3, N m s/rad x3]; servo (N,) register
            units, 0 allowed (a P-only position loop).
        impedance: the task_impedance law (ignored for joint_pd); None when the log does
            not record it (schema 2) until it is stated (:meth:`Run.with_law`).
        gravity_compensated: the real controller cancelled gravity (replay gravity-free).
        excitation: free-form description of the excitation design.
        summary: free-form summary written by the recorder (importers add an ``import`` record).
        unrecorded: the :data:`REPLAY_FACTS` this log does not record (schema 2: all of them);
            whoever replays the run must state them.
        source_format: ``"isaaclab_sysid/1"`` (the project's schema) or ``"franka_tooling/2"``.
        state_age_ms: the rows' state age 0..N ms, uniform, as a schema-1 sidecar states it (``"state_age"``);
            None: not stated.
        robot_stated: the sidecar names the robot (False: read as
            :data:`~isaaclab_sysid.data.sidecar.DEFAULT_ROBOT`, the stated default).
        qd_init: (N,) joint velocities at the start [rad/s], or None (a recorded run: it starts at rest, the replay's
            warm-up holding its first setpoint). A window cut from a run (``data/run_windows.py``) sets the measured
            velocity there: its replay starts moving, without a warm-up.
    """

    robot: str
    controller: str
    control_rate_hz: float
    log_rate_hz: float
    num_samples: int
    q_init: np.ndarray
    anchor_pos: np.ndarray
    anchor_quat: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    impedance: ImpedanceLaw | None = field(default_factory=ImpedanceLaw)
    gravity_compensated: bool = True
    excitation: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    schema_version: int = 1
    unrecorded: tuple[str, ...] = ()
    source_format: str = "isaaclab_sysid/1"
    state_age_ms: int | None = None  # rows' state age 0..N ms, uniform, as the sidecar states it (None: not stated)
    robot_stated: bool = True
    qd_init: np.ndarray | None = None  # start velocity [rad/s] (a window of a run); None: at rest, with the warm-up


@dataclass
class Run:
    """One recorded run; every array has T rows (one per logged sample).

    Attributes:
        name: run name (the CSV stem).
        meta: the sidecar metadata.
        t: (T,) time stamps [s].
        q, dq: (T, N) joint positions [rad] and velocities [rad/s].
        ee_pos: (T, 3) EE position [m]; ee_quat: (T, 4) EE orientation xyzw.
        tau: (T, N) commanded torque [N m]; tau_J: (T, N) measured torque [N m].
        q_des: (T, N) joint targets [rad] (joint_pd), else None.
        x_des: (T, 3) [m] and quat_des: (T, 4) xyzw EE targets (task_impedance), else None.
        tick: (T,) controller tick of each row (1 kHz logs), else None.
        setpoint_tick: (T,) tick at which the row's setpoint took effect (1 kHz logs), else None.
        source: file the run was read from, if any.
        torque_enable: (T, N) bool: the joint's motor applied torque in that row (a servo's torque-off phase:
            False, the joint falls freely), or None (always on).
        supply_v: (T, N) the servo's measured input voltage [V], or None (not recorded).
        pwm: (T, N) the servo's present PWM duty, a fraction in [-1, 1] (diagnostic), or None (not recorded).
    """

    name: str
    meta: RunMeta
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ee_pos: np.ndarray
    ee_quat: np.ndarray
    tau: np.ndarray
    tau_J: np.ndarray
    q_des: np.ndarray | None = None
    x_des: np.ndarray | None = None
    quat_des: np.ndarray | None = None
    tick: np.ndarray | None = None
    setpoint_tick: np.ndarray | None = None
    source: Path | None = None
    torque_enable: np.ndarray | None = None
    supply_v: np.ndarray | None = None
    pwm: np.ndarray | None = None

    @property
    def n_dof(self) -> int:
        return int(self.q.shape[1])

    @property
    def n_samples(self) -> int:
        return int(self.t.shape[0])

    @property
    def is_1khz(self) -> bool:
        """True for logs that record every controller tick (stamped setpoints)."""
        return self.tick is not None

    @property
    def ticks_per_setpoint(self) -> int:
        """Physics ticks a setpoint is held for (20 at 50 Hz)."""
        return int(round(TICK_HZ / self.meta.control_rate_hz))

    @property
    def duration(self) -> float:
        """Length of the logged time base [s]."""
        return float(self.sample_ticks()[-1]) / TICK_HZ

    def with_law(self, law: ImpedanceLaw) -> "Run":
        """This run with its impedance law stated (the law facts leave ``meta.unrecorded``); arrays are shared."""
        meta = replace(self.meta, impedance=law, unrecorded=tuple(f for f in self.meta.unrecorded if f not in LAW_FACTS))
        return replace(self, meta=meta)

    def targets(self) -> np.ndarray:
        """(T, D) setpoint of each row: q_des (D = N: joint_pd, servo) or x_des ++ quat_des (D = 7)."""
        if self.meta.controller in JOINT_SPACE_CONTROLLERS:
            assert self.q_des is not None
            return self.q_des
        assert self.x_des is not None and self.quat_des is not None
        return np.concatenate([self.x_des, self.quat_des], axis=1)

    def sample_ticks(self) -> np.ndarray:
        """(T,) physics tick of each row, counted from the first row (tick 0).

        A 50 Hz log's row k sits at tick k * 20 (30 Hz: the tick nearest k * 33.3); a 1 kHz log's rows are its ticks.
        """
        if self.tick is not None:
            return (self.tick - self.tick[0]).astype(np.int64)
        # row k at the tick nearest k / rate (a 30 Hz row every 33 or 34 ticks; exact for rates dividing 1000)
        return np.round(np.arange(self.n_samples) * (TICK_HZ / self.meta.control_rate_hz)).astype(np.int64)

    def setpoints(self) -> tuple[np.ndarray, np.ndarray]:
        """Setpoint schedule: ticks (K,) at which each setpoint takes effect, and values (K, D).

        Ticks count from the first row. A 50 Hz log has one setpoint per row; a
        1 kHz log has one per distinct ``setpoint_tick``. The first setpoint always
        starts at tick 0 (an earlier stamp is clamped to the start of the log).
        """
        values = self.targets()
        if self.setpoint_tick is None:
            return self.sample_ticks(), values
        rows = self.setpoint_rows()
        rel = (self.setpoint_tick[rows] - self.tick[0]).astype(np.int64)  # type: ignore[index]
        return np.maximum(rel, 0), values[rows]

    def setpoint_rows(self) -> np.ndarray:
        """(K,) the row each setpoint of :meth:`setpoints` comes from: every row, or the first row of each distinct
        ``setpoint_tick``."""
        if self.setpoint_tick is None:
            return np.arange(self.n_samples)
        st = np.asarray(self.setpoint_tick)
        first = np.ones(len(st), dtype=bool)
        first[1:] = st[1:] != st[:-1]
        return np.flatnonzero(first)
