"""The Isaac Lab replay backend (Newton on CPU or GPU; PhysX where Isaac Sim is installed).

Same contract and semantics as :class:`~isaaclab_sysid.sim.mujoco_backend.MujocoBackend`
(docs/replay.md; differences measured in docs/backends.md). The population maps
onto env blocks: for P candidates and R runs the scene has (at least) P x R envs,
env ``r * P + p`` replaying run r with candidate p. All envs step together for
the warm-up plus the longest run's ticks; each block is sampled at its own run's
sample ticks.

Per tick (Python loop over ticks, tensors batched over envs):

1. read q, qd of every env; flag divergence (non-finite, |qd| > max_joint_velocity);
2. record the sample rows of the blocks whose run samples this tick;
3. ``joint_pd`` envs: the setpoint active at tick k is the position target of
   Isaac Lab's ``DelayedPDActuator`` (per-env Kp/Kd = the run's gains, per-env
   ``delay_steps`` = the candidate's delay, so the target applied is the one of
   tick k - d, the oldest one while the buffer fills);
   torque envs (``task_impedance``, and ``joint_pd`` under a slew limit): the
   law computed in float64 torch from the current state, delayed by d ticks in
   torch, slew-limited, clamped, and sent as the feed-forward effort;
4. one physics step of 1 ms.

:class:`ReplayProgram` is that per-tick work, driven by whoever steps the physics:
:meth:`IsaacLabBackend.rollout` with its own :class:`~.scene.ReplayScene`, and the
replay task ``Isaac-Sysid-Replay-v0`` (``isaaclab_sysid.tasks``, a
``DirectRLEnv``) from its ``_apply_action``. Its parts are the env layout
(:class:`_EnvBlocks`), the setpoint tables, the torque envs' controller/actuator
step (:class:`_TorqueEnvs`), divergence (:class:`_Divergence`) and sampling
(:class:`_Samples`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.friction import LAWS, LOAD_BUDGET_FLOOR, batch_law, law_of_id
from isaaclab_sysid.sim.interface import (
    CandidateBatch,
    ReplayBackend,
    ReplayOptions,
    RunRollout,
    UnsupportedParameterError,
    candidate_arrays,
    check_supported,
    replay_gravity,
)
from isaaclab_sysid.sim.isaaclab_backend.bias import BiasTorques, newton_state
from isaaclab_sysid.sim.isaaclab_backend.asset import robot_usd
from isaaclab_sysid.sim.isaaclab_backend.controllers import (
    PinocchioArm,
    TorchArm,
    TorqueDelay,
    impedance_law,
    impedance_torque,
    joint_pd_torque,
    mat_to_quat_wxyz,
)
from isaaclab_sysid.sim.isaaclab_backend.scene import ArmIO, ReplayScene, arm_articulation_cfg, make_spec
from isaaclab_sysid.sim.mujoco_backend import GRAVITY
from isaaclab_sysid.sim.schedule import RunSchedule, schedule_of
from isaaclab_sysid.timebase import TICK_S

PHYSICS = ("newton", "physx")


class IsaacLabBackend(ReplayBackend):
    """Replay backend on Isaac Lab, implementing :class:`~isaaclab_sysid.sim.interface.ReplayBackend`.

    Args:
        robot: the arm (its current link inertials go into the generated USD).
        options: replay semantics knobs (as for the MuJoCo backend).
        device: ``"cpu"`` or a CUDA device such as ``"cuda:0"``.
        physics: ``"newton"`` (MJWarp solver, kit-less) or ``"physx"`` (needs Isaac Sim; see physx.py).
        nominal: joint properties used for a group a batch leaves None (default: zeros).
        max_delay: the actuator delay buffer depth [ticks]; larger candidate delays are refused.
        min_envs: build the scene with at least this many envs (avoids rebuilds when
            later calls need more).
        cache_dir: where the generated USD is cached (default ``$ISAACLAB_SYSID_CACHE``
            or ``~/.cache/isaaclab_sysid``).
        solver_iterations, ls_iterations: MJWarp constraint solver iterations (MuJoCo's defaults).
    """

    name = "isaaclab"
    #: the friction laws (sim/friction.py) it runs: Stribeck and the load law as a friction coefficient written every
    #: tick (Newton's joint friction is MuJoCo's frictionloss; the load budget from every env's gravity and Coriolis
    #: torque, Newton's inverse dynamics: bias.py), the sigmoid and Dahl laws as a torque added every tick
    supported_groups = frozenset({"armature", "friction", "viscous", "delay", "mu_static", "dynamic_ratio",
                                  "stribeck_velocity", "stribeck_shape", "sigmoid_amplitude", "sigmoid_slope",
                                  "sigmoid_offset", "presliding_stiffness", "load_friction_motor",
                                  "load_friction_external"})

    def __init__(
        self,
        robot: Robot,
        options: ReplayOptions | None = None,
        *,
        device: str = "cpu",
        physics: str = "newton",
        nominal: JointOverrides | None = None,
        max_delay: int = 8,
        min_envs: int = 1,
        cache_dir: str | None = None,
        solver_iterations: int = 100,
        ls_iterations: int = 50,
    ) -> None:
        if physics not in PHYSICS:
            raise ValueError(f"physics must be one of {PHYSICS}, got '{physics}'")
        if physics == "physx":
            from isaaclab_sysid.sim.isaaclab_backend.physx import require_isaacsim

            require_isaacsim()
        self.robot = robot
        self.options = options or ReplayOptions()
        if self.options.warmup_ticks < 0:
            raise ValueError("warmup_ticks must be >= 0")
        self.device = str(device)
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(f"device '{device}' requested but torch sees no CUDA device")
        self.physics = physics
        self.max_delay = int(max_delay)
        self.min_envs = int(min_envs)
        self.n_dof = robot.n_dof
        self._solver = dict(solver_iterations=int(solver_iterations), ls_iterations=int(ls_iterations))
        n = self.n_dof
        nom = nominal or JointOverrides()
        self._nominal = {
            "armature": np.zeros(n) if nom.armature is None else np.asarray(nom.armature, float),
            "friction": np.zeros(n) if nom.friction is None else np.asarray(nom.friction, float),
            "viscous": np.zeros(n) if nom.damping is None else np.asarray(nom.damping, float),
        }
        self._tau_max = np.asarray(robot.tau_max, dtype=np.float64)
        rate = robot.config.torque_rate_limit
        if self.options.slew_limit and rate is None:
            raise ValueError(f"slew_limit requested but robot '{robot.name}' has no torque_rate_limit")
        self._slew = None if rate is None else np.asarray(rate, dtype=np.float64) * TICK_S
        self._usd = robot_usd(robot, cache_dir)
        self._scene: ReplayScene | None = None
        self._arm: TorchArm | None = None
        self._arm_device: torch.device | None = None
        #: seconds spent in the last rollout's tick loop and its env-steps (ticks x active envs)
        self.last_timing: dict[str, float] = {}

    # ---------------------------------------------------------------- plumbing
    def gravity_for(self, sched: RunSchedule) -> bool:
        return replay_gravity(self.options, sched.gravity_compensated)

    def _scene_for(self, num_envs: int, gravity: bool) -> ReplayScene:
        from isaaclab.sim import SimulationContext

        sc = self._scene
        if sc is not None and SimulationContext.instance() is not sc.sim:
            self._scene = sc = None  # another scene replaced ours (one SimulationContext per process)
        if sc is not None and sc.spec.num_envs >= num_envs and sc.spec.gravity == gravity:
            return sc
        if sc is not None:
            sc.close()
            self._scene = None
        spec = make_spec(
            self._usd,
            self.robot.joint_names,
            max(num_envs, self.min_envs),
            gravity,
            self.device,
            self.physics,
            self.max_delay,
            self.effort_limit(),
            0.5 * (self.robot.q_lower + self.robot.q_upper),
            **self._solver,
        )
        self._scene = ReplayScene(spec)
        return self._scene

    def _kinematics(self, device: torch.device) -> tuple[TorchArm, object]:
        """(batched torch kinematics for the EE samples, the controller's per-tick kinematics:
        Pinocchio per env on the CPU, the batched torch one on a GPU), built once."""
        if self._arm is None or self._arm_device != device:
            self._arm = TorchArm(self.robot, device)
            self._ctl_arm = PinocchioArm(self.robot) if device.type == "cpu" else self._arm
            self._arm_device = device
        return self._arm, self._ctl_arm

    def effort_limit(self) -> np.ndarray | None:
        """(N,) actuator effort limit [N m] of the replay (the robot's ``tau_max`` under ``torque_clamp``), or None."""
        return self._tau_max if self.options.torque_clamp else None

    def articulation_cfg(self, prim_path: str):
        """The replay arm's ``ArticulationCfg`` at ``prim_path`` (for a scene built elsewhere, e.g. the replay task)."""
        return arm_articulation_cfg(self._usd, self.robot.joint_names, 0.5 * (self.robot.q_lower + self.robot.q_upper),
                                    self.max_delay, self.effort_limit(), prim_path)

    def _check_runs(self, scheds: list[RunSchedule]) -> None:
        for s in scheds:  # the schedule holds the law in the backends' form (sim/schedule.py)
            if s.controller == "task_impedance" and s.law.orientation_error not in ("quat", "rotvec"):
                raise ValueError(f"run '{s.name}': unknown orientation_error '{s.law.orientation_error}'")
            if int(s.sample_ticks[0]) < -self.options.warmup_ticks:
                raise ValueError(f"run '{s.name}' samples before the warm-up start")

    def program(self, scheds: list[RunSchedule], params: dict, P: int, E: int, device: torch.device) -> ReplayProgram:
        """The per-tick replay of ``scheds`` with the P candidates ``params`` (from :meth:`_params`) on E envs."""
        self._check_runs(scheds)
        _, ctl = self._kinematics(device)
        return ReplayProgram(scheds, params, P, E, self.n_dof, self.options, ctl, self._tau_max, self._slew, device)

    def close(self) -> None:
        """Close the scene (the simulation app stays up)."""
        if self._scene is not None:
            self._scene.close()
            self._scene = None

    def _params(self, batch: CandidateBatch) -> dict[str, np.ndarray]:
        out = candidate_arrays(batch, self._nominal, self.n_dof)
        law, table = batch_law(batch, self.n_dof, self.options.stribeck_velocity)
        if law.acts_as == "force" and self.options.torque_clamp:
            raise UnsupportedParameterError(
                f"backend '{self.name}': the {law.name} friction law's torque goes through the Isaac Lab actuator, "
                "which would clip it with the drive's under --torque_clamp; use --backend mujoco")
        out["law_id"] = np.full(batch.size, law.law_id, dtype=np.int64)
        out["law_p"] = table
        dl = out["delay"]
        if np.any(dl > self.max_delay):
            raise ValueError(
                f"CandidateBatch.delay up to {int(dl.max())} ticks exceeds this backend's max_delay "
                f"{self.max_delay} (the actuator buffer depth); build it with max_delay={int(dl.max())}"
            )
        return out

    # ----------------------------------------------------------------- rollout
    def rollout(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """Replay every run for every candidate (see :class:`ReplayBackend`).

        Raises:
            UnsupportedParameterError: a force law (sigmoid, Dahl) under ``torque_clamp``, a torque or servo run.
        """
        check_supported(batch, self.supported_groups, self.name)
        torque = [r.name for r in runs if r.meta.controller == "torque"]
        if torque:
            raise UnsupportedParameterError(f"backend '{self.name}' replays controller runs only; the torque run(s) "
                                            f"{', '.join(torque)} (--replay torque) need --backend mujoco")
        servo = [r.name for r in runs if r.meta.controller == "servo"]
        if servo:
            raise UnsupportedParameterError(f"backend '{self.name}' has no servo motor model (firmware duty, back-EMF, "
                                            f"torque-off phases); the servo run(s) {', '.join(servo)} need --backend mujoco")
        params = self._params(batch)
        p_count = batch.size
        scheds = [schedule_of(r, self.n_dof) for r in runs]
        moving = [s.name for s in scheds if s.qd_init is not None]
        if moving:  # a window of a run (data/run_windows.py): its start velocity is the mujoco backend's alone
            raise ValueError(f"run(s) {', '.join(moving)} start moving (a window of a run): the isaaclab backend "
                             "replays every run from rest; use --backend mujoco")
        outs = empty_rollouts(scheds, p_count, self.n_dof)
        total = {"wall_s": 0.0, "env_steps": 0.0}
        for grav in (False, True):
            idx = [i for i, s in enumerate(scheds) if self.gravity_for(s) == grav]
            if idx:
                t = self._replay([scheds[i] for i in idx], params, p_count, grav, [outs[i] for i in idx])
                total["wall_s"] += t["wall_s"]
                total["env_steps"] += t["env_steps"]
        self.last_timing = total
        return outs

    def _replay(self, scheds: list[RunSchedule], params: dict, P: int, gravity: bool, outs: list[RunRollout]) -> dict[str, float]:
        """Replay runs of one gravity setting in the backend's own scene; fills ``outs``, returns the timing."""
        self._check_runs(scheds)  # before building a scene
        sc = self._scene_for(P * len(scheds), gravity)
        prog = self.program(scheds, params, P, sc.E, sc.device)
        prog.write_to(sc.arm)
        sc.reset(prog.q_init)
        t0 = time.perf_counter()
        for j in range(prog.n_ticks):
            q32, qd32 = sc.arm.state()
            targets = prog.tick(j, q32.to(torch.float64), qd32.to(torch.float64))
            if targets is None:
                break
            sc.step(*targets)
            if j % PARK_EVERY == PARK_EVERY - 1:
                prog.park(sc.arm)
        wall = time.perf_counter() - t0
        prog.finish(outs, self._kinematics(sc.device)[0])
        return {"wall_s": wall, "env_steps": float(prog.n_ticks * P * len(scheds))}


#: diverged envs are parked at their start posture after every this many ticks
PARK_EVERY = 50


def empty_rollouts(scheds: list[RunSchedule], P: int, n: int) -> list[RunRollout]:
    """One NaN-filled :class:`RunRollout` per run for P candidates (filled by :meth:`ReplayProgram.finish`)."""
    return [
        RunRollout(
            q=np.full((P, s.n_samples, n), np.nan),
            dq=np.full((P, s.n_samples, n), np.nan),
            ee_pos=np.full((P, s.n_samples, 3), np.nan),
            ee_quat=np.full((P, s.n_samples, 4), np.nan),
            tau=np.full((P, s.n_samples, n), np.nan),
            diverged=np.zeros(P, dtype=bool),
        )
        for s in scheds
    ]


class ReplayProgram:
    """One replay of R runs with P candidates on E >= P x R envs (docs/replay.md), tick by tick.

    Whoever steps the physics drives it: for every 1 ms tick j = 0 .. ``n_ticks - 1``
    (run tick k = j - W), read the arms' state, call :meth:`tick`, put the returned
    position targets and efforts on the arm (:meth:`~.scene.ArmIO.set_targets`) and
    take one physics step; after the steps j with ``j % PARK_EVERY == PARK_EVERY - 1``
    call :meth:`park`. :meth:`tick` records the samples of tick k and returns None
    at the last sample tick (no step follows); :meth:`finish` fills the rollouts.

    Attributes:
        blocks: the env layout (env ``r * P + p`` replays run r with candidate p).
        q_init: (E, N) start posture of every env.
        n_ticks: ticks of the replay (warm-up + up to the longest run's last sample).
        extra: optional (E, N) torque [N m] added to every env's applied torque (not recorded).
    """

    def __init__(self, scheds: list[RunSchedule], params: dict, P: int, E: int, n: int, options: ReplayOptions,
                 ctl_arm, tau_max: np.ndarray, slew: np.ndarray | None, device: torch.device) -> None:
        f64 = dict(dtype=torch.float64, device=device)
        self.scheds, self.params, self.P, self.E = scheds, params, P, E
        self.W = options.warmup_ticks
        law = law_of_id(params["law_id"][0]) if "law_id" in params else LAWS["coulomb"]
        # a force law's torque must not pass through the delayed PD actuator (it would be delayed), and the load law
        # needs the motor's torque of the tick: their joint_pd envs are computed in torch, like the slew limit's
        self.blocks = blocks = _EnvBlocks.layout(scheds, params, P, E, n, slew_on=bool(options.slew_limit)
                                                 or law.acts_as == "force" or law.name == "load")
        self.q_init = torch.tensor(np.stack([scheds[r].q_init for r in blocks.run_of]), **f64)
        self.last = max(s.last_tick for s in scheds)
        self.n_ticks = self.W + self.last + 1
        self.qtab, xtab = _setpoint_tables(scheds, self.W, self.last, n, f64)
        self.torque = None
        if blocks.torque_env.any():
            self.torque = _TorqueEnvs(scheds, blocks, ctl_arm, self.qtab, xtab, tau_max, slew, options, f64)
        self.samples = _Samples(scheds, blocks, self.qtab, tau_max if options.torque_clamp else None, f64)
        self.div = _Divergence(blocks.active, options.max_joint_velocity, device)
        self._run_t = torch.tensor(blocks.run_of, device=device)
        self._native_t = torch.tensor(blocks.native_pd, device=device)
        # the feed-forward effort of every env: the torque envs' applied torque, 0 for the others
        self.effort = torch.zeros(E, n, **f64)
        self.extra: torch.Tensor | None = None
        gravity = {replay_gravity(options, s.gravity_compensated) for s in scheds}
        if len(gravity) > 1:
            raise ValueError("one ReplayProgram replays runs of one gravity setting (the scene has gravity or not)")
        #: the load law: the gravity [m/s^2] the gearbox carries that the replay does not simulate (docs/friction.md)
        self.carried_gravity = 0.0 if gravity.pop() else GRAVITY
        self.friction = _Friction(law, params, blocks, f64) if law.name != "coulomb" else None
        self.done = False

    def write_to(self, arm: ArmIO) -> None:
        """Every env's joint properties (its candidate's) and actuator (gains and delay); the arm the friction law
        writes its per-tick friction to."""
        params = self.params
        if self.friction is not None and self.friction.law.acts_as == "force":  # no frictionloss under a force law
            params = {**params, "friction": np.zeros_like(params["friction"])}
        self.blocks.write_to(arm, params)
        self._arm = arm

    def tick(self, j: int, q: torch.Tensor, qd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Tick j from the state (E, N) float64 at its start: (position targets, efforts) for its step, or None
        after recording the last sample tick."""
        k = j - self.W
        if j > 0:  # divergence of the step just taken
            self.div.check(k, q, qd)
        if self.torque is not None:
            self.effort[self.torque.idx] = self.torque.step(j, q, qd)
        self.samples.record(k, j, q, qd, self.effort)
        if k >= self.last:
            self.done = True
            return None
        pos_target = torch.where(self._native_t[:, None], self.qtab[j][self._run_t], self.q_init)
        eff = self.effort if self.extra is None else self.effort + self.extra
        if self.friction is not None:  # the friction law of this tick: a friction written, or a torque added
            eff = eff + self.friction.step(self._arm, qd, self.effort, self.carried_gravity)
        return pos_target, torch.where(self.div.diverged[:, None], 0.0, eff)

    def sampled(self, k: int) -> list[tuple[int, int]]:
        """The (run, row) pairs sampled at tick k."""
        return self.samples.at.get(k, [])

    def park(self, arm: ArmIO) -> None:
        """Put newly diverged envs back at their start posture at rest."""
        self.div.park(arm, self.q_init)

    def finish(self, outs: list[RunRollout], arm: TorchArm) -> None:
        """Fill ``outs`` (one per run, :func:`empty_rollouts`) from the recorded samples."""
        self.samples.write(outs, arm, self.div)


@dataclass(frozen=True)
class _EnvBlocks:
    """The env layout of one replay: env ``r * P + p`` replays run r with candidate p.

    Envs past P x R are idle (inactive, zero joint properties and gains, run 0's
    start posture). Arrays are numpy, (E,) or (E, N).

    Attributes:
        P, R: candidates and runs.
        active: the env replays a (run, candidate).
        run_of, cand_of: the env's run and candidate (0 for idle envs).
        native_pd: ``joint_pd`` replayed by Newton's ``DelayedPDActuator`` (no slew limit).
        torque_env: the torque is computed in torch (``task_impedance``; ``joint_pd`` under a slew limit).
        kp, kd: the native ``joint_pd`` envs' gains (their run's), 0 elsewhere.
        delay: the env's candidate delay [ticks] (0 for idle envs).
    """

    P: int
    R: int
    active: np.ndarray
    run_of: np.ndarray
    cand_of: np.ndarray
    native_pd: np.ndarray
    torque_env: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    delay: np.ndarray

    @classmethod
    def layout(cls, scheds: list[RunSchedule], params: dict, P: int, E: int, n: int, slew_on: bool) -> _EnvBlocks:
        R = len(scheds)
        act = np.zeros(E, dtype=bool)
        act[: P * R] = True
        run_of = np.zeros(E, dtype=np.int64)
        run_of[: P * R] = np.repeat(np.arange(R), P)
        cand_of = np.zeros(E, dtype=np.int64)
        cand_of[: P * R] = np.tile(np.arange(P), R)
        is_pd = np.array([s.controller == "joint_pd" for s in scheds])
        native_pd = act & is_pd[run_of] & (not slew_on)
        kp = np.zeros((E, n))
        kd = np.zeros((E, n))
        for r, s in enumerate(scheds):
            if s.controller == "joint_pd":
                kp[run_of == r] = s.kp
                kd[run_of == r] = s.kd
        return cls(
            P=P,
            R=R,
            active=act,
            run_of=run_of,
            cand_of=cand_of,
            native_pd=native_pd,
            torque_env=act & ~native_pd,
            kp=np.where(native_pd[:, None], kp, 0.0),
            kd=np.where(native_pd[:, None], kd, 0.0),
            delay=np.where(act, params["delay"][cand_of], 0),
        )

    def write_to(self, arm: ArmIO, params: dict) -> None:
        """Per-env joint properties (the candidate's) and the actuator (gains and delay of the native envs)."""
        props = {g: np.where(self.active[:, None], params[g][self.cand_of], 0.0) for g in ("armature", "friction", "viscous")}
        arm.write_joint_properties(props["armature"], props["friction"], props["viscous"])
        arm.write_actuator(self.kp, self.kd, np.where(self.native_pd, self.delay, 0))


class _Friction:
    """The friction law of the batch, every tick (sim/friction.py; the native loop's order): the Stribeck budget
    from the velocity at the tick's start written as every env's joint friction coefficient; the load budget
    ``Fc + |k_ext tau_ext - k_motor tau_motor|`` (floored at ``LOAD_BUDGET_FLOOR``) from the state at the tick's start
    and the tick's applied torque, written likewise; the sigmoid's torque from that velocity; the Dahl torque from its
    state, which then advances over the tick. Idle envs: none (the load budget is the floor).

    The load law's torques are the native loop's (replay.c ``load_budget``, reference.py): ``tau_ext = -(C(q, qd) qd +
    g(q))`` and ``tau_motor = applied + g_c(q)``, g the gravity torque (``dU/dq``) under the simulated gravity and, in
    a gravity-free replay of a gravity-compensated arm, under the gravity the gearbox carries (``g_c``, 9.81 m/s^2
    along -z, not simulated: the motor holds it); both from Newton's inverse dynamics of every env (bias.py)."""

    def __init__(self, law, params: dict, blocks: "_EnvBlocks", f64: dict) -> None:
        act = torch.tensor(blocks.active, device=f64["device"])[:, None]
        self.law = law
        self.p = torch.tensor(params["law_p"][blocks.cand_of], **f64) * act[..., None]
        self.fc = torch.tensor(params["friction"][blocks.cand_of], **f64) * act
        self.state = torch.zeros_like(self.fc)
        self._bias: BiasTorques | None = None
        if law.name not in ("stribeck", "sigmoid", "dahl", "load"):
            raise UnsupportedParameterError(f"backend 'isaaclab' cannot run the {law.name} friction law")

    def step(self, arm: "ArmIO", qd: torch.Tensor, applied: torch.Tensor | None = None,
             carried_gravity: float = 0.0) -> torch.Tensor:
        """(E, N) the torque the law adds this tick (0 for a budget law, which is written to ``arm`` instead).

        Args:
            qd: (E, N) joint velocities at the tick's start [rad/s].
            applied: (E, N) the actuator's torque of the tick [N m] (the load law).
            carried_gravity: gravity [m/s^2] the gearbox carries that the scene does not simulate (the load law).
        """
        p = self.p
        if self.law.name == "load":
            if self._bias is None or self._bias.view is not arm.robot.root_view:
                self._bias = BiasTorques(arm.robot, carried_gravity)
            g, cqd, g_carried = self._bias(newton_state())
            tau_ext = -(cqd + g + g_carried)
            tau_motor = applied + g_carried
            b = self.fc + (p[..., 1] * tau_ext - p[..., 0] * tau_motor).abs()
            arm.write_friction(torch.clamp(b, min=LOAD_BUDGET_FLOOR))
            return torch.zeros_like(qd)
        if self.law.name == "stribeck":
            x = (qd / torch.where(p[..., 1] > 0, p[..., 1], 1.0)).abs()
            e = torch.where(p[..., 2] == 2.0, x * x, x ** p[..., 2])
            arm.write_friction(self.fc + (p[..., 0] - self.fc) * torch.exp(-e))
            return torch.zeros_like(qd)
        if self.law.name == "sigmoid":
            a, sl, o = p[..., 0], p[..., 1], p[..., 2]
            return -(a / (1.0 + torch.exp(-sl * (qd + o))) - a / (1.0 + torch.exp(-sl * o)))
        f = -self.state
        target = self.fc * torch.sign(qd)
        decay = torch.exp(-p[..., 0] * qd.abs() * TICK_S / torch.where(self.fc > 0, self.fc, 1.0))
        self.state = torch.where(self.fc > 0, target + (self.state - target) * decay, 0.0)
        return f


def _setpoint_tables(scheds: list[RunSchedule], W: int, last: int, n: int, f64: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Setpoint of every run at every tick: joint targets (ticks, R, N) and poses (ticks, R, 7: xyz, quat xyzw).

    Row j is tick ``j - W``; zero-order hold, the first setpoint before tick 0. A
    run fills the table of its controller; the other one stays zero (identity quaternion).
    """
    n_ticks = W + last + 1
    qtab = torch.zeros(n_ticks, len(scheds), n, **f64)
    xtab = torch.zeros(n_ticks, len(scheds), 7, **f64)
    xtab[..., 6] = 1.0
    ks = np.arange(-W, last + 1)
    for r, s in enumerate(scheds):
        vals = torch.tensor(s.held_setpoints(ks), **f64)
        if s.controller == "joint_pd":
            qtab[:, r] = vals
        else:
            xtab[:, r] = vals
    return qtab, xtab


def _gains(scheds: list[RunSchedule], runs: np.ndarray, name: str, width: int, f64: dict) -> torch.Tensor:
    """(len(runs), width) gains ``name`` of each env's run; zeros where its gains have another width."""
    rows = [getattr(scheds[r], name) for r in runs]
    return torch.tensor(np.stack([g if len(g) == width else np.zeros(width) for g in rows]), **f64)


class _TorqueEnvs:
    """The per-tick controller/actuator step of the torque envs (docs/replay.md, "One tick").

    The torque envs are the ``task_impedance`` ones and, under a slew limit, the
    ``joint_pd`` ones. Each tick: the law from the simulated state in float64
    (``task_impedance``: impedance on the pose setpoint; ``joint_pd``: PD on the
    position target of tick ``k - d``), the commanded effort delayed by d ticks
    (``task_impedance`` only), then the slew limit and the clamp.
    """

    def __init__(self, scheds: list[RunSchedule], blocks: _EnvBlocks, arm, qtab: torch.Tensor, xtab: torch.Tensor,
                 tau_max: np.ndarray, slew: np.ndarray | None, options: ReplayOptions, f64: dict) -> None:
        dev = f64["device"]
        n = qtab.shape[-1]
        te = np.flatnonzero(blocks.torque_env)
        runs = blocks.run_of[te]
        task = np.array([scheds[r].controller == "task_impedance" for r in runs])
        self.idx = torch.tensor(te, device=dev, dtype=torch.long)
        self.run = torch.tensor(blocks.run_of, device=dev)[self.idx]
        self.task = torch.tensor(task, device=dev)
        self.arm, self.qtab, self.xtab = arm, qtab, xtab
        self.kp6, self.kd6 = _gains(scheds, runs, "kp", 6, f64), _gains(scheds, runs, "kd", 6, f64)
        self.kpn, self.kdn = _gains(scheds, runs, "kp", n, f64), _gains(scheds, runs, "kd", n, f64)
        if n == 6:  # gains of either controller have 6 entries: pick by controller
            self.kpn = torch.where(self.task[:, None], 0.0, self.kpn)
            self.kdn = torch.where(self.task[:, None], 0.0, self.kdn)
            self.kp6 = torch.where(self.task[:, None], self.kp6, 0.0)
            self.kd6 = torch.where(self.task[:, None], self.kd6, 0.0)
        self.law = impedance_law([scheds[r].law for r in runs], np.stack([scheds[r].q_rest for r in runs]), f64)
        # task_impedance: the commanded effort is delayed; joint_pd: its position target is
        self.pd_delay = torch.tensor(np.where(task, 0, blocks.delay[te]), device=dev, dtype=torch.long)
        self.cmd_delay = TorqueDelay(torch.tensor(np.where(task, blocks.delay[te], 0), device=dev), n)
        self.tau_max = torch.tensor(tau_max, **f64)
        self.slew = torch.tensor(slew if slew is not None else np.full(n, np.inf), **f64)
        self.slew_on = bool(options.slew_limit)
        self.clamp = bool(options.torque_clamp)
        self.prev = torch.zeros(len(te), n, **f64)
        self.any_task = bool(task.any())
        self.any_pd = bool((~task).any())

    def step(self, j: int, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """The torque the torque envs apply at row j (tick ``j - W``), from the state of every env (E, N)."""
        qt, qdt = q[self.idx], qd[self.idx]
        cmd = torch.zeros_like(qt)
        if self.any_task:
            cmd_task = impedance_torque(self.arm, qt, qdt, self.xtab[j][self.run], self.kp6, self.kd6, self.law)
            cmd = torch.where(self.task[:, None], cmd_task, cmd)
        if self.any_pd:
            target = self.qtab[torch.clamp(j - self.pd_delay, min=0), self.run]
            cmd_pd = joint_pd_torque(qt, qdt, target, self.kpn, self.kdn)
            cmd = torch.where(self.task[:, None], cmd, cmd_pd)
        cmd = torch.nan_to_num(cmd, nan=0.0, posinf=0.0, neginf=0.0)
        app = self.cmd_delay.push(cmd)
        if self.slew_on:
            app = self.prev + torch.clamp(app - self.prev, -self.slew, self.slew)
        if self.clamp:
            app = torch.clamp(app, -self.tau_max, self.tau_max)
        self.prev = app
        return app


class _Divergence:
    """Per-env divergence: non-finite state or ``|qd| > max_joint_velocity`` (docs/backends.md).

    A diverged env keeps its first divergence tick, gets zero effort (the caller
    masks it with :attr:`diverged`) and is parked at rest by :meth:`park`.
    """

    def __init__(self, active: np.ndarray, max_joint_velocity: float, device: torch.device) -> None:
        E = active.shape[0]
        self.active = torch.tensor(active, device=device)
        self.vmax = float(max_joint_velocity)
        self.diverged = torch.zeros(E, dtype=torch.bool, device=device)
        self.tick = torch.full((E,), 2**62, dtype=torch.long, device=device)
        self.parked = torch.zeros(E, dtype=torch.bool, device=device)

    def check(self, k: int, q: torch.Tensor, qd: torch.Tensor) -> None:
        """Flag the active envs whose state (E, N) at tick k is bad."""
        bad = (~(torch.isfinite(q).all(1) & torch.isfinite(qd).all(1)) | (qd.abs().amax(1) > self.vmax)) & self.active
        self.tick = torch.where(bad & ~self.diverged, torch.full_like(self.tick, k), self.tick)
        self.diverged |= bad

    def park(self, arm: ArmIO, q_init: torch.Tensor) -> None:
        """Put the newly diverged envs back at ``q_init`` at rest so the solver stays finite."""
        new = self.diverged & ~self.parked
        if bool(new.any()):
            ids = torch.nonzero(new)[:, 0]
            arm.write_state(q_init[ids], env_ids=ids.to(torch.int32))
            self.parked |= new


class _Samples:
    """The sample rows of one replay: per run, the state at the start of each sample tick
    and the torque applied during it, recorded as (T, P, N) float64 tensors."""

    def __init__(self, scheds: list[RunSchedule], blocks: _EnvBlocks, qtab: torch.Tensor,
                 tau_clamp: np.ndarray | None, f64: dict) -> None:
        n = qtab.shape[-1]
        self.P = P = blocks.P
        self.n = n
        self.scheds = scheds
        #: tick -> [(run, row)] sampled at that tick
        self.at: dict[int, list[tuple[int, int]]] = {}
        for r, s in enumerate(scheds):
            for i, k in enumerate(s.sample_ticks):
                self.at.setdefault(int(k), []).append((r, i))
        self.rec = {key: [torch.full((s.n_samples, P, n), float("nan"), **f64) for s in scheds] for key in ("q", "dq", "tau")}
        # the native joint_pd envs' torque is not read back from Newton: it is recomputed as its PD law
        self.native = [bool(blocks.native_pd[r * P]) for r in range(blocks.R)]
        self.qtab = qtab
        self.pd_kp = torch.tensor(blocks.kp, **f64)
        self.pd_kd = torch.tensor(blocks.kd, **f64)
        self.delay = torch.tensor(blocks.delay, device=f64["device"], dtype=torch.long)
        self.tau_max = None if tau_clamp is None else torch.tensor(tau_clamp, **f64)

    def record(self, k: int, j: int, q: torch.Tensor, qd: torch.Tensor, effort: torch.Tensor) -> None:
        """Record the rows sampled at tick k (row j of the tables): q, qd (E, N) and the applied torque."""
        P = self.P
        for r, i in self.at.get(k, ()):
            blk = slice(r * P, (r + 1) * P)
            self.rec["q"][r][i] = q[blk]
            self.rec["dq"][r][i] = qd[blk]
            self.rec["tau"][r][i] = self._native_pd_torque(j, r, blk, q, qd) if self.native[r] else effort[blk]

    def _native_pd_torque(self, j: int, r: int, blk: slice, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """What Newton's delayed PD applies to block r at row j: the target of row ``j - d``, then the clamp."""
        tgt = self.qtab[torch.clamp(j - self.delay[blk], min=0), r]
        t = self.pd_kp[blk] * (tgt - q[blk]) - self.pd_kd[blk] * qd[blk]
        return t if self.tau_max is None else torch.clamp(t, -self.tau_max, self.tau_max)

    def write(self, outs: list[RunRollout], arm: TorchArm, div: _Divergence) -> None:
        """Fill ``outs`` (EE pose from the sampled q); rows from a candidate's divergence tick on are NaN."""
        P, n = self.P, self.n
        diverged = div.diverged.cpu().numpy()
        for r, (_, out) in enumerate(zip(self.scheds, outs)):
            qs = self.rec["q"][r].transpose(0, 1)  # (P, T, N)
            R_, p_ = arm.frames(qs.reshape(-1, n))
            Re, pe = arm.ee_pose(R_, p_)
            out.q[:] = qs.cpu().numpy()
            out.dq[:] = self.rec["dq"][r].transpose(0, 1).cpu().numpy()
            out.tau[:] = self.rec["tau"][r].transpose(0, 1).cpu().numpy()
            out.ee_pos[:] = pe.reshape(P, -1, 3).cpu().numpy()
            quat = mat_to_quat_wxyz(Re)  # w >= 0
            out.ee_quat[:] = torch.cat([quat[:, 1:], quat[:, :1]], -1).reshape(P, -1, 4).cpu().numpy()
            out.diverged[:] = diverged[r * P : (r + 1) * P]
        tick = div.tick.cpu().numpy()
        for r, (s, out) in enumerate(zip(self.scheds, outs)):
            for p in np.flatnonzero(out.diverged):
                after = s.sample_ticks >= tick[r * P + p]
                for a in (out.q, out.dq, out.ee_pos, out.ee_quat, out.tau):
                    a[p, after] = np.nan

