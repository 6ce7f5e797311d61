"""A warm-up session twin: runs whose joint friction falls over time (a gearbox warming up).

The session is ``n_runs`` runs of ``run_s`` seconds, back to back. Each run is the product's
simulated twin (``twin.recorder.record_twin``: MuJoCo, joint PD at 1 kHz, noise) on a joint
Fourier motion, with the friction of the session time at the run's middle: the Coulomb and
viscous friction stay at their cold values for the first quarter of the session, fall
linearly to their warm values by the third quarter and stay there (a warm-up profile, 20
minutes in full size). The measured torque gets the true arm's gravity g(q) added (Pinocchio),
as a real log's ``tau_J`` would hold it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from isaaclab_sysid.data import Run
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.twin.params import TwinNoise, TwinParams
from isaaclab_sysid.twin.recorder import record_twin
from isaaclab_sysid.twin.targets import Q_READY, skeleton_run

KP = np.array([600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0])
KD = np.array([50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0])


@dataclass(frozen=True)
class DriftTwin:
    """The session's hidden truth.

    Attributes:
        cold_friction, warm_friction: (N,) Coulomb friction at the start and the end [N m].
        cold_viscous, warm_viscous: (N,) viscous friction [N m s/rad].
        armature: (N,) rotor inertia [kg m^2] (constant).
        session_s: session length [s]; the fall runs from 1/4 to 3/4 of it.
        noise: the twin's measurement and process noise.
    """

    cold_friction: np.ndarray
    warm_friction: np.ndarray
    cold_viscous: np.ndarray
    warm_viscous: np.ndarray
    armature: np.ndarray
    session_s: float
    noise: TwinNoise = TwinNoise(q_std=5e-5, dq_std=2e-3, tau_J_std=0.05, actuator_tau_std=0.02)

    def fraction_cold(self, t: np.ndarray | float) -> np.ndarray:
        """1 while cold (first quarter), 0 when warm (last quarter), linear between."""
        s = np.asarray(t, dtype=float) / self.session_s
        return np.clip(1.5 - 2.0 * s, 0.0, 1.0)

    def truth(self, t: np.ndarray | float) -> np.ndarray:
        """(..., N, 3) Coulomb, viscous and offset (0) of the drift profile at session time t [s]."""
        a = self.fraction_cold(t)[..., None]
        c = self.warm_friction + a * (self.cold_friction - self.warm_friction)
        v = self.warm_viscous + a * (self.cold_viscous - self.warm_viscous)
        return np.stack([c, v, np.zeros_like(c)], axis=-1)


    def run_truth(self, t: np.ndarray | float, n_runs: int) -> np.ndarray:
        """(..., N, 3) what the twin simulates at session time t [s]: each run holds the profile's value at
        its middle (a session of ``n_runs`` back-to-back runs)."""
        run_s = self.session_s / n_runs
        k = np.clip(np.floor(np.asarray(t, dtype=float) / run_s), 0, n_runs - 1)
        return self.truth((k + 0.5) * run_s)


def franka_drift(session_s: float = 1200.0, fall: float = 0.35) -> DriftTwin:
    """The Franka gearbox example: friction falls by ``fall`` (35 %) as it warms up over the session."""
    cold_c = np.array([0.65, 0.55, 0.48, 0.42, 0.21, 0.19, 0.11])
    cold_v = np.array([0.42, 0.38, 0.29, 0.24, 0.11, 0.09, 0.05])
    return DriftTwin(cold_c, (1 - fall) * cold_c, cold_v, (1 - fall) * cold_v,
                     np.array([0.32, 0.28, 0.21, 0.17, 0.075, 0.06, 0.035]), session_s)


def joint_motion(robot: Robot, duration: float, seed: int, amp: float = 0.45, f0: float = 0.12,
                 fade_s: float = 0.3) -> Run:
    """A 1 kHz joint_pd target: 4 harmonics per joint around the ready posture (both directions, many
    speeds), faded in and out over ``fade_s`` seconds."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration * TICK_HZ))) / TICK_HZ
    q = np.tile(Q_READY, (t.size, 1))
    env = np.clip(np.minimum(t, duration - t) / fade_s, 0.0, 1.0)
    env = 0.5 - 0.5 * np.cos(np.pi * env)
    for j in range(robot.n_dof):
        for h in range(1, 5):
            q[:, j] += env * amp * rng.normal() / h * np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 2 * np.pi))
    q = np.clip(q, robot.q_lower + 0.1, robot.q_upper - 0.1)
    run = skeleton_run(robot, "joint_pd", t, q, KP, KD, q_init=q[0], control_rate_hz=float(TICK_HZ),
                       name=f"motion_{seed}")
    ticks = np.arange(t.size, dtype=np.int64)
    return dataclasses.replace(run, tick=ticks, setpoint_tick=ticks)


def record_session(robot: Robot, twin: DriftTwin, n_runs: int, seed: int = 0, log_rate_hz: float = 100.0,
                   name: str = "warmup") -> tuple[list[Run], np.ndarray]:
    """The session's runs and each run's start time [s] (runs back to back, ``session_s / n_runs`` long).

    ``log_rate_hz`` must divide 1000 (one row per setpoint of a target held that long) or be 1000.
    """
    run_s = twin.session_s / n_runs
    model = robot.build_pinocchio(gravity=True)
    data = model.createData()
    runs, starts = [], []
    for k in range(n_runs):
        t0 = k * run_s
        truth = twin.truth(t0 + 0.5 * run_s)
        params = TwinParams(robot=robot.name, armature=twin.armature, friction=truth[:, 0], viscous=truth[:, 1],
                            delay=0, noise=twin.noise)
        target = joint_motion(robot, run_s, seed * 1000 + k)
        if log_rate_hz != TICK_HZ:
            step = int(round(TICK_HZ / log_rate_hz))
            rows = slice(None, None, step)
            target = dataclasses.replace(target, t=target.t[rows], q=target.q[rows], dq=target.dq[rows],
                                         ee_pos=target.ee_pos[rows], ee_quat=target.ee_quat[rows],
                                         tau=target.tau[rows], tau_J=target.tau_J[rows], q_des=target.q_des[rows],
                                         tick=None, setpoint_tick=None,
                                         meta=dataclasses.replace(target.meta, control_rate_hz=log_rate_hz,
                                                                  log_rate_hz=log_rate_hz,
                                                                  num_samples=target.t[rows].size))
        run = record_twin(robot, target, params, seed=seed * 1000 + k,
                          log_rate_hz=TICK_HZ if log_rate_hz == TICK_HZ else None, name=f"{name}_{k:02d}")
        g = np.array([pin.computeGeneralizedGravity(model, data, q) for q in run.q])
        run = dataclasses.replace(run, tau_J=run.tau_J + g)
        run.meta.summary = {**run.meta.summary, "session_start_s": t0}
        runs.append(run)
        starts.append(t0)
    return runs, np.asarray(starts)
