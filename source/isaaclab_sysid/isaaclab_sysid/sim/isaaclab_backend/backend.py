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
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np
import torch

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.robots.robot import PHYSICS_DT, Robot
from isaaclab_sysid.sim.interface import (
    CandidateBatch,
    ReplayOptions,
    RunRollout,
    candidate_arrays,
    check_supported,
    replay_gravity,
)
from isaaclab_sysid.sim.isaaclab_backend.asset import robot_usd
from isaaclab_sysid.sim.isaaclab_backend.controllers import (
    PinocchioArm,
    TorchArm,
    TorqueDelay,
    impedance_torque,
    joint_pd_torque,
    mat_to_quat_wxyz,
)
from isaaclab_sysid.sim.isaaclab_backend.scene import ReplayScene, make_spec
from isaaclab_sysid.sim.schedule import RunSchedule, schedule_of

PHYSICS = ("newton", "physx")


class IsaacLabBackend:
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
    supported_groups = frozenset({"armature", "friction", "viscous", "delay"})

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
        self._slew = None if rate is None else np.asarray(rate, dtype=np.float64) * PHYSICS_DT
        self._usd = robot_usd(robot, cache_dir)
        self._scene: ReplayScene | None = None
        self._arm: TorchArm | None = None
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
            self._tau_max if self.options.torque_clamp else None,
            0.5 * (self.robot.q_lower + self.robot.q_upper),
            **self._solver,
        )
        self._scene = ReplayScene(spec)
        if self._arm is None:
            self._arm = TorchArm(self.robot, self._scene.device)
            # per-tick kinematics of the controller: Pinocchio per env on the CPU, batched torch on a GPU
            self._ctl_arm = PinocchioArm(self.robot) if self._scene.device.type == "cpu" else self._arm
        return self._scene

    def close(self) -> None:
        if self._scene is not None:
            self._scene.close()
            self._scene = None

    def _params(self, batch: CandidateBatch) -> dict[str, np.ndarray]:
        out = candidate_arrays(batch, self._nominal, self.n_dof)
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
            UnsupportedParameterError: ``mu_static`` / ``dynamic_ratio`` (Newton has
                Coulomb friction only and ignores a dynamic friction coefficient).
        """
        check_supported(batch, self.supported_groups, self.name)
        params = self._params(batch)
        p_count = batch.size
        scheds = [schedule_of(r, self.n_dof) for r in runs]
        for s in scheds:
            if s.law.orientation_error not in ("quat", "rotvec"):
                raise ValueError(f"run '{s.name}': unknown orientation_error '{s.law.orientation_error}'")
            if int(s.sample_ticks[0]) < -self.options.warmup_ticks:
                raise ValueError(f"run '{s.name}' samples before the warm-up start")
        n = self.n_dof
        outs = [
            RunRollout(
                q=np.full((p_count, s.n_samples, n), np.nan),
                dq=np.full((p_count, s.n_samples, n), np.nan),
                ee_pos=np.full((p_count, s.n_samples, 3), np.nan),
                ee_quat=np.full((p_count, s.n_samples, 4), np.nan),
                tau=np.full((p_count, s.n_samples, n), np.nan),
                diverged=np.zeros(p_count, dtype=bool),
            )
            for s in scheds
        ]
        total = {"wall_s": 0.0, "env_steps": 0.0}
        for grav in (False, True):
            idx = [i for i, s in enumerate(scheds) if self.gravity_for(s) == grav]
            if idx:
                gen = self.replay_steps([scheds[i] for i in idx], params, p_count, grav, [outs[i] for i in idx])
                t = drive(gen)
                total["wall_s"] += t["wall_s"]
                total["env_steps"] += t["env_steps"]
        self.last_timing = total
        return outs

    def replay_steps(self, scheds: list[RunSchedule], params: dict, P: int, gravity: bool, outs: list[RunRollout]):
        """The replay of runs of one gravity setting, as a generator (used by :meth:`rollout` and the gym task).

        It yields ``(k, q, qd)`` (tick, float64 (E, N) state tensors) at every tick at
        which some run samples, and accepts via ``send`` an optional extra torque
        (E, N) added to every env's applied torque until the next sample (None:
        none); it returns the timing dict and fills ``outs``.
        """
        R = len(scheds)
        n = self.n_dof
        sc = self._scene_for(P * R, gravity)
        arm = self._arm
        dev = sc.device
        E = sc.E
        W = self.options.warmup_ticks
        slew_on = bool(self.options.slew_limit)
        f64 = dict(dtype=torch.float64, device=dev)

        # ------------------------------------------------ per-env layout
        act = np.zeros(E, dtype=bool)
        act[: P * R] = True
        run_of = np.zeros(E, dtype=np.int64)
        run_of[: P * R] = np.repeat(np.arange(R), P)
        cand_of = np.zeros(E, dtype=np.int64)
        cand_of[: P * R] = np.tile(np.arange(P), R)
        is_pd = np.array([s.controller == "joint_pd" for s in scheds])
        native_pd = act & is_pd[run_of] & (not slew_on)
        torque_env = act & ~native_pd

        props = {g: np.where(act[:, None], params[g][cand_of], 0.0) for g in ("armature", "friction", "viscous")}
        sc.write_joint_properties(props["armature"], props["friction"], props["viscous"])
        kp = np.zeros((E, n))
        kd = np.zeros((E, n))
        for r, s in enumerate(scheds):
            if s.controller == "joint_pd":
                kp[run_of == r] = s.kp
                kd[run_of == r] = s.kd
        delay = np.where(act, params["delay"][cand_of], 0)
        sc.write_actuator(np.where(native_pd[:, None], kp, 0.0), np.where(native_pd[:, None], kd, 0.0), np.where(native_pd, delay, 0))

        q_init = torch.tensor(np.stack([scheds[run_of[e]].q_init for e in range(E)]), **f64)
        last = max(s.last_tick for s in scheds)
        n_ticks = W + last + 1
        # setpoint tables (ticks, R, D), zero-order hold, the first one before tick 0
        qtab = torch.zeros(n_ticks, R, n, **f64)
        xtab = torch.zeros(n_ticks, R, 7, **f64)
        xtab[..., 6] = 1.0
        ks = np.arange(-W, last + 1)
        for r, s in enumerate(scheds):
            i = np.searchsorted(s.sp_ticks, np.maximum(ks, 0), side="right") - 1
            vals = torch.tensor(s.sp_values[np.maximum(i, 0)], **f64)
            if s.controller == "joint_pd":
                qtab[:, r] = vals
            else:
                xtab[:, r] = vals
        run_t = torch.tensor(run_of, device=dev)

        # torque envs: controller inputs restricted to them
        tidx = torch.tensor(np.flatnonzero(torque_env), device=dev, dtype=torch.long)
        tq_run = run_t[tidx]
        t_task = torch.tensor([scheds[run_of[e]].controller == "task_impedance" for e in np.flatnonzero(torque_env)], device=dev)
        has_torque = tidx.numel() > 0
        if has_torque:
            te = np.flatnonzero(torque_env)
            gains = lambda name, w: torch.tensor(  # noqa: E731
                np.stack([getattr(scheds[run_of[e]], name) if len(getattr(scheds[run_of[e]], name)) == w else np.zeros(w) for e in te]), **f64
            )
            t_kp6, t_kd6 = gains("kp", 6), gains("kd", 6)
            t_kpn, t_kdn = gains("kp", n), gains("kd", n)
            if n == 6:  # gains of either controller have 6 entries: pick by controller
                t_kpn = torch.where(t_task[:, None], 0.0, t_kpn)
                t_kdn = torch.where(t_task[:, None], 0.0, t_kdn)
                t_kp6 = torch.where(t_task[:, None], t_kp6, 0.0)
                t_kd6 = torch.where(t_task[:, None], t_kd6, 0.0)
            laws = [scheds[run_of[e]].law for e in te]
            law = {
                "coriolis": torch.tensor([bool(lw.coriolis_compensation) for lw in laws], device=dev),
                "rotvec": torch.tensor([lw.orientation_error == "rotvec" for lw in laws], device=dev),
                "max_pos": torch.tensor([float(lw.max_position_error or 0.0) for lw in laws], **f64),
                "max_ori": torch.tensor([float(lw.max_orientation_error or 0.0) for lw in laws], **f64),
                "k_ns": torch.tensor([float(lw.nullspace_stiffness or 0.0) for lw in laws], **f64),
                "q_rest": torch.tensor(np.stack([scheds[run_of[e]].q_rest for e in te]), **f64),
            }
            # task_impedance: the commanded effort is delayed; joint_pd: its position target is
            t_pd_delay = torch.tensor(np.where(t_task.cpu().numpy(), 0, delay[te]), device=dev, dtype=torch.long)
            tdelay = TorqueDelay(torch.tensor(np.where(t_task.cpu().numpy(), delay[te], 0), device=dev), n)
            tau_max = torch.tensor(self._tau_max, **f64)
            slew = torch.tensor(self._slew if self._slew is not None else np.full(n, np.inf), **f64)
            prev = torch.zeros(len(te), n, **f64)
            any_task = bool(t_task.any())
            any_pd_t = bool((~t_task).any())

        # sampling: tick -> [(run, row)]
        samples: dict[int, list[tuple[int, int]]] = {}
        for r, s in enumerate(scheds):
            for i, k in enumerate(s.sample_ticks):
                samples.setdefault(int(k), []).append((r, i))
        rec = {
            key: [torch.full((s.n_samples, P, w), float("nan"), **f64) for s in scheds]
            for key, w in (("q", n), ("dq", n), ("tau", n))
        }

        act_t = torch.tensor(act, device=dev)
        native_t = torch.tensor(native_pd, device=dev)
        pd_kp = torch.tensor(np.where(native_pd[:, None], kp, 0.0), **f64)
        pd_kd = torch.tensor(np.where(native_pd[:, None], kd, 0.0), **f64)
        delay_t = torch.tensor(delay, device=dev, dtype=torch.long)
        tau_max_t = torch.tensor(self._tau_max, **f64)
        blk_native = [bool(native_pd[r * P]) for r in range(R)]
        diverged = torch.zeros(E, dtype=torch.bool, device=dev)
        div_tick = torch.full((E,), 2**62, dtype=torch.long, device=dev)
        parked = torch.zeros(E, dtype=torch.bool, device=dev)
        vmax = float(self.options.max_joint_velocity)
        effort = torch.zeros(E, n, **f64)
        tau_applied = torch.zeros(E, n, **f64)
        extra = None

        sc.reset(q_init)
        t0 = time.perf_counter()
        for j in range(n_ticks):
            k = j - W
            q32, qd32 = sc.state()
            q, qd = q32.to(torch.float64), qd32.to(torch.float64)
            if j > 0:  # divergence of the step just taken
                bad = (~(torch.isfinite(q).all(1) & torch.isfinite(qd).all(1)) | (qd.abs().amax(1) > vmax)) & act_t
                div_tick = torch.where(bad & ~diverged, torch.full_like(div_tick, k), div_tick)
                diverged |= bad
            # controller of the torque envs
            if has_torque:
                qt, qdt = q[tidx], qd[tidx]
                cmd = torch.zeros_like(qt)
                if any_task:
                    cmd_task = impedance_torque(self._ctl_arm, qt, qdt, xtab[j][tq_run], t_kp6, t_kd6, law)
                    cmd = torch.where(t_task[:, None], cmd_task, cmd)
                if any_pd_t:
                    cmd_pd = joint_pd_torque(qt, qdt, qtab[torch.clamp(j - t_pd_delay, min=0), tq_run], t_kpn, t_kdn)
                    cmd = torch.where(t_task[:, None], cmd, cmd_pd)
                cmd = torch.nan_to_num(cmd, nan=0.0, posinf=0.0, neginf=0.0)
                app = tdelay.push(cmd)
                if slew_on:
                    app = prev + torch.clamp(app - prev, -slew, slew)
                if self.options.torque_clamp:
                    app = torch.clamp(app, -tau_max, tau_max)
                prev = app
                effort[tidx] = app
                tau_applied[tidx] = app
            # samples at this tick: the state before the step, the torque applied during it
            for r, i in samples.get(k, ()):
                blk = slice(r * P, (r + 1) * P)
                rec["q"][r][i] = q[blk]
                rec["dq"][r][i] = qd[blk]
                if blk_native[r]:  # what the native delayed PD applies this tick
                    tgt = qtab[torch.clamp(j - delay_t[blk], min=0), r]
                    t = pd_kp[blk] * (tgt - q[blk]) - pd_kd[blk] * qd[blk]
                    rec["tau"][r][i] = torch.clamp(t, -tau_max_t, tau_max_t) if self.options.torque_clamp else t
                else:
                    rec["tau"][r][i] = tau_applied[blk]
            if k in samples:
                extra = yield k, q, qd
                if extra is not None:
                    extra = torch.as_tensor(extra, **f64).expand(E, n)
            if k == last:
                break
            pos_target = torch.where(native_t[:, None], qtab[j][run_t], q_init)
            eff = effort if extra is None else effort + extra
            sc.step(pos_target, torch.where(diverged[:, None], 0.0, eff))
            if j % 50 == 49:
                new = diverged & ~parked
                if bool(new.any()):  # park diverged envs at rest so the solver stays finite
                    ids = torch.nonzero(new)[:, 0]
                    sc.reset_envs(ids.to(torch.int32), q_init[ids])
                    parked |= new
        wall = time.perf_counter() - t0

        # ------------------------------------------------ outputs
        div = diverged.cpu().numpy()
        for r, (s, out) in enumerate(zip(scheds, outs)):
            qs = rec["q"][r].transpose(0, 1)  # (P, T, N)
            R_, p_ = arm.frames(qs.reshape(-1, n))
            Re, pe = arm.ee_pose(R_, p_)
            out.q[:] = qs.cpu().numpy()
            out.dq[:] = rec["dq"][r].transpose(0, 1).cpu().numpy()
            out.tau[:] = rec["tau"][r].transpose(0, 1).cpu().numpy()
            out.ee_pos[:] = pe.reshape(P, -1, 3).cpu().numpy()
            quat = mat_to_quat_wxyz(Re)  # w >= 0
            out.ee_quat[:] = torch.cat([quat[:, 1:], quat[:, :1]], -1).reshape(P, -1, 4).cpu().numpy()
            out.diverged[:] = div[r * P : (r + 1) * P]
        dt_np = div_tick.cpu().numpy()
        for r, (s_, out) in enumerate(zip(scheds, outs)):
            for p in np.flatnonzero(out.diverged):
                after = s_.sample_ticks >= dt_np[r * P + p]
                for a_ in (out.q, out.dq, out.ee_pos, out.ee_quat, out.tau):
                    a_[p, after] = np.nan
        return {"wall_s": wall, "env_steps": float(n_ticks * P * R)}


def drive(gen) -> dict[str, float]:
    """Run a :meth:`IsaacLabBackend.replay_steps` generator to the end with no extra torque."""
    try:
        next(gen)
        while True:
            gen.send(None)
    except StopIteration as stop:
        return stop.value


def default_device() -> str:
    """``$ISAACLAB_SYSID_DEVICE`` or ``"cpu"``."""
    return os.environ.get("ISAACLAB_SYSID_DEVICE", "cpu")
