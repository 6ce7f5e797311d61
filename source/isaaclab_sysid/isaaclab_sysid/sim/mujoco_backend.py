"""The MuJoCo (CPU) replay backend: one native replay loop per (candidate, run), all cores.

See docs/replay.md for the semantics. Each worker thread owns a private copy of
the compiled model and an ``mjData``; a job writes its candidate's armature,
friction and viscous damping into that copy, recomputes the model constants
(``mj_setConst``, exactly what compilation does) and replays one run in C
(``native/replay.c``) with the GIL released. Results therefore do not depend on
which thread, batch or chunk a candidate runs in.
"""

from __future__ import annotations

import copy
import ctypes
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import mujoco
import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.robots.robot import EE_NAME, Robot
from isaaclab_sysid.sim import native_lib
from isaaclab_sysid.sim.friction import LAW_COLUMNS, LAWS, batch_law
from isaaclab_sysid.sim.interface import (
    LAW_GROUPS,
    CandidateBatch,
    ReplayBackend,
    ReplayOptions,
    RunRollout,
    candidate_arrays,
    check_supported,
    replay_gravity,
)
from isaaclab_sysid.sim.schedule import CONTROLLER_IDS, RunSchedule, schedule_of
from isaaclab_sysid.sim.servo import families_of, motor_table, servo_arrays, servo_job_arrays
from isaaclab_sysid.sim.shooting import run_windows
from isaaclab_sysid.sim.torque_input import torque_offset_arrays, window_input
from isaaclab_sysid.timebase import TICK_S

GRAVITY = 9.81


#: orientation-error convention -> the native loop's mode (replay.c: 1 = rotation vector, 0 = 2 vec(q_des q^-1))
ORIENTATION_MODES = {"rotvec": 1, "quat_2vec": 0, "quat": 0}


@dataclass(frozen=True)
class StribeckFriction:
    """A friction model the fit does not have (used by the twin): per joint, the
    friction torque is ``Fc + (Fs - Fc) exp(-(v / vs)^2)`` (a MuJoCo frictionloss
    updated every physics step from the joint velocity), so the arm sticks below
    the static level ``Fs`` and slides at the Coulomb level ``Fc`` (the candidate's
    ``friction``).

    Attributes:
        static: (N,) static friction Fs [N m] (>= Coulomb).
        velocity: (N,) Stribeck velocity vs [rad/s] (> 0).
    """

    static: np.ndarray
    velocity: np.ndarray


def _ptr(a: np.ndarray | None):
    if a is None:
        return None
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def _iptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


class MujocoBackend(ReplayBackend):
    """Replay backend on MuJoCo (CPU), implementing :class:`~isaaclab_sysid.sim.interface.ReplayBackend`.

    Args:
        robot: the arm (its current link inertials are used).
        options: replay semantics knobs.
        nominal: joint properties used for a group a batch leaves None (default: zeros).
        chunk_size: candidates replayed per chunk (bounds in-flight work).
        n_threads: worker threads (default: all cores).
        stribeck: optional Stribeck/static friction on top of the Coulomb ``friction``
            (the twin's friction model; the fit's parameter space does not have it).
        substeps: physics steps per 1 ms control tick (finer integrator; the twin's).
        device: must be ``"cpu"`` (accepted so callers can pass one device to any
            backend); anything else raises ValueError naming the Isaac Lab backend.
    """

    name = "mujoco"
    supported_groups = frozenset({"armature", "friction", "viscous", "delay", "torque_offset", "kp", "kd",
                                  "encoder_offset", "motor_kt", "motor_r", *LAW_GROUPS})

    def __init__(
        self,
        robot: Robot,
        options: ReplayOptions | None = None,
        *,
        nominal: JointOverrides | None = None,
        chunk_size: int = 64,
        n_threads: int | None = None,
        stribeck: StribeckFriction | None = None,
        substeps: int = 1,
        device: str = "cpu",
    ) -> None:
        if str(device) != "cpu":
            raise ValueError(f"the mujoco backend runs on the CPU only; --device {device} needs --backend isaaclab")
        self.device = "cpu"
        self.robot = robot
        self.options = options or ReplayOptions()
        self.chunk_size = int(chunk_size)
        self.n_threads = int(n_threads or os.cpu_count() or 1)
        self.substeps = int(substeps)
        if self.chunk_size < 1 or self.substeps < 1:
            raise ValueError("chunk_size and substeps must be >= 1")
        if self.options.warmup_ticks < 0:
            raise ValueError("warmup_ticks must be >= 0")
        if self.options.window_ticks is not None and self.options.window_ticks < 1:
            raise ValueError("window_ticks must be >= 1 (or None: one window)")
        self._lib = native_lib.load()
        self._model = robot.build_mujoco(nominal, gravity=False)
        m = self._model
        if m.nq != m.nv or np.any(m.jnt_type != mujoco.mjtJoint.mjJNT_HINGE):
            raise ValueError("the MuJoCo backend supports arms of hinge joints only")
        if abs(m.opt.timestep - TICK_S) > 1e-15:
            raise ValueError(f"robot model timestep {m.opt.timestep} != {TICK_S}")
        self.n_dof = m.nv
        self._site = m.site(EE_NAME).id
        self._nominal = {
            "armature": np.array(m.dof_armature, dtype=np.float64),
            "friction": np.array(m.dof_frictionloss, dtype=np.float64),
            "viscous": np.array(m.dof_damping, dtype=np.float64),
        }
        self._tau_max = np.ascontiguousarray(robot.tau_max, dtype=np.float64)
        self._servo = robot.config.servo
        rate = robot.config.torque_rate_limit
        self._slew = np.ascontiguousarray(
            np.full(self.n_dof, np.inf) if rate is None else np.asarray(rate, dtype=np.float64) * TICK_S
        )
        if self.options.slew_limit and rate is None:
            raise ValueError(f"slew_limit requested but robot '{robot.name}' has no torque_rate_limit")
        vs = float(self.options.stribeck_velocity)
        if not (np.isfinite(vs) and vs > 0):
            raise ValueError(f"stribeck_velocity must be > 0 [rad/s], got {vs}")
        self._fit_vs = np.full(self.n_dof, vs)
        self._stribeck = None
        if stribeck is not None:
            fs = np.ascontiguousarray(stribeck.static, dtype=np.float64)
            vs = np.ascontiguousarray(stribeck.velocity, dtype=np.float64)
            if fs.shape != (self.n_dof,) or vs.shape != (self.n_dof,) or np.any(vs <= 0) or np.any(fs < 0):
                raise ValueError("stribeck: static (N,) >= 0 and velocity (N,) > 0 required")
            self._stribeck = (fs, vs)
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------ plumbing
    def _worker(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        loc = self._local
        if not hasattr(loc, "model"):
            loc.model = copy.copy(self._model)
            loc.data = mujoco.MjData(loc.model)
        return loc.model, loc.data

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.n_threads, thread_name_prefix="sysid-replay")
        return self._pool

    def close(self) -> None:
        """Stop the worker threads."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __del__(self) -> None:  # pragma: no cover - finalizer
        # a backend whose __init__ raised has no pool; an error in close() is reported by Python, not hidden
        if getattr(self, "_pool", None) is not None:
            self.close()

    def gravity_for(self, sched: RunSchedule) -> bool:
        """Whether a run is replayed with gravity (options, else the run's meta)."""
        return replay_gravity(self.options, sched.gravity_compensated)

    def _params(self, batch: CandidateBatch) -> dict[str, np.ndarray]:
        law, table = batch_law(batch, self.n_dof, self._fit_vs)
        if law.name != "coulomb" and self._stribeck is not None:
            raise ValueError(f"a backend built with a fixed Stribeck friction cannot also take the {law.name} law's groups")
        out = candidate_arrays(batch, self._nominal, self.n_dof)
        out.update(servo_arrays(batch, self.n_dof))
        if self._stribeck is not None:  # the twin's fixed Stribeck friction on every candidate's Coulomb level
            law = LAWS["stribeck"]
            table = np.zeros((batch.size, self.n_dof, LAW_COLUMNS))
            table[:, :, 0], table[:, :, 1], table[:, :, 2] = self._stribeck[0], self._stribeck[1], 2.0
        out["law_id"] = np.full(batch.size, law.law_id, dtype=np.int64)
        out["law_p"] = np.ascontiguousarray(table)
        return out

    # -------------------------------------------------------------- rollout
    def rollout(
        self,
        batch: CandidateBatch,
        runs: Sequence[Run],
        *,
        disturbance: Sequence[np.ndarray | None] | None = None,
        with_command: bool = False,
        states_only: bool = False,
    ) -> list[RunRollout]:
        """Replay every run for every candidate (see :class:`ReplayBackend`).

        Args:
            batch: P candidates; groups left None take the nominal values.
            runs: the runs; one :class:`RunRollout` per run, in order.
            disturbance: per run, an optional (W + last_tick, N) torque added to the
                applied torque every tick (the twin's actuator noise).
            with_command: also return the controller's torque before delay, slew
                and clamp as ``extra["tau_cmd"]``.
            states_only: record only what the loss reads (q, dq, ee_pos); ``ee_quat`` and
                ``tau`` are (P, T, 0) (:meth:`ReplayBackend.rollout_states`).

        Raises:
            UnsupportedParameterError: a group the MuJoCo backend cannot represent.
        """
        check_supported(batch, self.supported_groups, self.name)
        params = self._params(batch)
        params.update(torque_offset_arrays(batch, self.n_dof))  # torque runs: the torque that acted is logged - offset
        p_count = batch.size
        scheds = [schedule_of(r, self.n_dof) for r in runs]
        n = self.n_dof
        outs: list[RunRollout] = []
        for s in scheds:
            t = s.n_samples
            extra = {"tau_cmd": np.empty((p_count, t, n))} if with_command else {}
            outs.append(
                RunRollout(
                    q=np.empty((p_count, t, n)),
                    dq=np.empty((p_count, t, n)),
                    ee_pos=np.empty((p_count, t, 3)),
                    ee_quat=np.empty((p_count, t, 0 if states_only else 4)),
                    tau=np.empty((p_count, t, 0 if states_only else n)),
                    diverged=np.zeros(p_count, dtype=bool),
                    extra=extra,
                )
            )
        dists: list[np.ndarray | None] = []
        for i, s in enumerate(scheds):
            w = None if disturbance is None else disturbance[i]
            if w is not None and s.controller == "torque":
                raise ValueError(f"run '{s.name}' is a torque run: a disturbance applies to controller runs only")
            if w is not None:
                w = np.ascontiguousarray(w, dtype=np.float64)
                need = s.warmup(self.options.warmup_ticks) + s.last_tick
                if w.ndim != 2 or w.shape[1] != n or w.shape[0] < need:
                    raise ValueError(f"disturbance for run '{s.name}' must be ({need}, {n})")
            dists.append(w)

        # a torque run is cut into shooting windows (sim/shooting.py); every window of every candidate is one job
        windows = run_windows(runs, self.options.window_ticks)
        jobs = [(p, r, int(a), int(b)) for p in range(p_count) for r in range(len(scheds)) for a, b in windows[r]]
        pool = self._executor()
        for start in range(0, p_count, self.chunk_size):
            chunk = [j for j in jobs if start <= j[0] < start + self.chunk_size]
            futures = [pool.submit(self._run_job, scheds[r], dists[r], params, p, outs[r], (a, b)) for (p, r, a, b) in chunk]
            for f in futures:
                f.result()
        return outs

    def rollout_states(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """:meth:`rollout` recording only what the loss reads (q, dq, ee_pos): 17 of the 28 numbers per sample of a
        7-joint arm, the same bits (see :meth:`ReplayBackend.rollout_states`)."""
        return self.rollout(batch, runs, states_only=True)

    def _run_job(self, s: RunSchedule, dist: np.ndarray | None, params: dict, p: int, out: RunRollout,
                 window: tuple[int, int]) -> None:
        model, data = self._worker()
        law = s.law
        gravity = self.gravity_for(s)
        keep = []  # keep every array referenced by the job alive until the call returns
        a, b = window  # the samples this job replays (a torque run's shooting window; else every sample)
        job = native_lib.ReplayJob()
        job.warmup = s.warmup(self.options.warmup_ticks)  # 0 for a window that starts moving
        job.n_setpoints = s.sp_ticks.shape[0]
        job.sp_dim = s.sp_values.shape[1]
        job.n_samples = b - a
        job.sp_tick = _iptr(s.sp_ticks)
        job.sp_val = _ptr(s.sp_values)
        job.sample_tick = _iptr(s.sample_ticks[a:b])
        job.controller = CONTROLLER_IDS[s.controller]
        if s.controller == "torque":
            q0, qd0 = s.q_meas[a], s.dq_meas[a]
            offset = params["torque_offset"][p] if "torque_offset" in params else None
            # the torque this window reads (less the candidate's offset), its sample ticks shifted to that slice
            tau_in, ticks_in = window_input(s.torque, s.sample_ticks[a:b], int(params["delay"][p]), offset)
            keep += [q0, qd0, tau_in, ticks_in]
            job.q_init, job.qd_init = _ptr(q0), _ptr(qd0)
            job.torque_ff = _ptr(tau_in)
            job.n_torque = tau_in.shape[0]
            job.sample_tick = _iptr(ticks_in)
        else:
            if "torque_offset" in params:
                raise ValueError(f"run '{s.name}': torque_offset applies to torque runs (--replay torque) only")
            job.q_init = _ptr(s.q_init)
            if s.qd_init is not None:  # a window of a run: it starts at the measured velocity
                job.qd_init = _ptr(s.qd_init)
        job.site_id = self._site
        job.coriolis = int(bool(law.coriolis_compensation))
        if law.orientation_error not in ORIENTATION_MODES:
            raise ValueError(f"run '{s.name}': orientation_error '{law.orientation_error}' is not one the native loop "
                             f"computes ({', '.join(ORIENTATION_MODES)})")
        job.orient_rotvec = ORIENTATION_MODES[law.orientation_error]
        job.servo_p = None
        if s.controller in ("joint_pd", "servo"):  # servo groups: gains the run leaves unstated, encoder offset
            kp, kd, sp_values, q_init, enc_offset = servo_job_arrays(s, params, p)
            keep += [kp, kd, sp_values, q_init]
            job.kp, job.kd, job.sp_val, job.q_init = _ptr(kp), _ptr(kd), _ptr(sp_values), _ptr(q_init)
            if s.controller == "servo":  # the servo motor model (sim/servo.py)
                table = motor_table(s, params, p, families_of(self._servo, self.n_dof, self.robot.name))
                keep.append(table)
                job.servo_p = _ptr(table)
        else:
            if "encoder_offset" in params:
                raise ValueError(f"run '{s.name}': encoder_offset applies to joint_pd (servo) runs only")
            enc_offset = None
            job.kp = _ptr(s.kp)
            job.kd = _ptr(s.kd)
        job.max_pos_err = float(law.max_position_error) if law.max_position_error else 0.0
        job.max_ori_err = float(law.max_orientation_error) if law.max_orientation_error else 0.0
        job.ns_stiffness = float(law.nullspace_stiffness or 0.0)
        job.q_rest = _ptr(s.q_rest)
        job.delay = int(params["delay"][p])
        job.clamp = int(bool(self.options.torque_clamp))
        job.slew = int(bool(self.options.slew_limit))
        job.substeps = self.substeps
        job.tick_s = TICK_S
        job.tau_max = _ptr(self._tau_max)
        job.slew_per_tick = _ptr(self._slew)
        job.disturbance = _ptr(dist)
        for g in ("armature", "friction", "viscous"):
            row = params[g][p]
            keep.append(row)
            setattr(job, g, _ptr(row))
        # the friction law (sim/friction.py): its id and packed (N, 4) parameters; the load law's gearbox also
        # carries the gravity a gravity-free replay of a compensated arm does not simulate
        job.fric_law = int(params["law_id"][p])
        law_p = np.ascontiguousarray(params["law_p"][p])
        keep.append(law_p)
        job.law_p = _ptr(law_p)
        job.load_gravity = 0.0 if gravity else GRAVITY
        job.gravity = GRAVITY if gravity else 0.0
        job.max_qvel = float(self.options.max_joint_velocity)
        job.out_q = _ptr(out.q[p, a:b])
        job.out_dq = _ptr(out.dq[p, a:b])
        job.out_pos = _ptr(out.ee_pos[p, a:b])
        job.out_quat = _ptr(out.ee_quat[p, a:b]) if out.ee_quat.shape[-1] else None  # None: a states-only rollout
        job.out_tau = _ptr(out.tau[p, a:b]) if out.tau.shape[-1] else None
        job.out_tau_cmd = _ptr(out.extra["tau_cmd"][p, a:b]) if "tau_cmd" in out.extra else None
        rc = self._lib.sysid_replay(ctypes.c_void_p(model._address), ctypes.c_void_p(data._address), ctypes.byref(job))
        if rc < 0:
            raise RuntimeError(f"native replay refused run '{s.name}' (code {rc})")
        if rc == 1:
            out.diverged[p] = True
        if enc_offset is not None:  # the logged position is true + encoder offset
            out.q[p, a:b] += enc_offset
