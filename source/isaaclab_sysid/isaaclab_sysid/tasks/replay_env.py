"""``Isaac-Sysid-Replay-v0``: recorded runs replayed in an Isaac Lab ``DirectRLEnv``, a candidate per env.

Env blocks per run, a candidate per env: for R runs and P candidates (the
``params_json`` files, each repeated ``copies`` times) the scene has P x R arms and
env ``r * P + p`` replays run r with candidate p, exactly as the fit's ``isaaclab``
backend lays out a population. The replay semantics are those of docs/replay.md
and the per-tick work is the backend's own :class:`~isaaclab_sysid.sim.isaaclab_backend.backend.ReplayProgram`
on the backend's own arm (:func:`~isaaclab_sysid.sim.isaaclab_backend.scene.arm_articulation_cfg`,
:class:`~isaaclab_sysid.sim.isaaclab_backend.scene.ArmIO`): the env only steps the
physics. Every env step advances ``decimation`` ticks of 1 ms (default: the runs'
sample period, 20 for 50 Hz logs); ``_apply_action`` runs one replay tick before
each physics step (so Newton's folded decimation is switched off).

* action (E, N): an extra joint torque [N m] added to each env's applied torque for
  the step (zeros: pure replay; not part of the recorded torque);
* observation ``policy`` (E, 2N): simulated q, qd at the end of the step;
* reward (E,): minus the mean squared joint position error [rad^2] of the latest
  sample its run recorded during the step against the log's row (0 if none);
* one episode = the whole replay; it ends (time-out, every env together) after the
  longest run's last sample, and ``extras["rollouts"]`` then holds one
  :class:`~isaaclab_sysid.sim.interface.RunRollout` per run, (P, T, N) like
  ``IsaacLabBackend.rollout``'s. Resets restart every env (the blocks replay in lock step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np
import torch
from isaaclab.envs import DirectRLEnv

from isaaclab_sysid.data import read_run
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, RunRollout
from isaaclab_sysid.sim.isaaclab_backend import IsaacLabBackend
from isaaclab_sysid.sim.isaaclab_backend.backend import PARK_EVERY, ReplayProgram, empty_rollouts
from isaaclab_sysid.sim.isaaclab_backend.scene import ArmIO, physics_cfg
from isaaclab_sysid.sim.schedule import RunSchedule, schedule_of
from isaaclab_sysid.tasks.replay_env_cfg import SysidReplayEnvCfg
from isaaclab_sysid.timebase import TICK_S

#: keyword arguments of ``gym.make`` that set fields of :class:`SysidReplayEnvCfg`
_FIELDS = ("run_csv", "run_sidecar", "params_json", "copies", "robot", "warmup_ticks", "gravity", "torque_clamp",
           "slew_limit", "max_delay", "ticks_per_step")


def load_candidates(paths: Sequence[str], joint_names: Sequence[str], copies: int = 1) -> CandidateBatch:
    """One candidate per fit result file (``sysid_best_params.json`` or a checkpoint), each ``copies`` times.

    Files that record no parameter space are read with the default bounds; all files must fit the same groups.
    An empty list gives one candidate with every group left to the backend's nominal (zeros).
    """
    n = len(joint_names)
    if copies < 1:
        raise ValueError("copies must be >= 1")
    if not paths:
        return CandidateBatch(armature=np.zeros((copies, n)), friction=np.zeros((copies, n)),
                              viscous=np.zeros((copies, n)), delay=np.zeros(copies, dtype=np.int64))
    default = ParamSpace.from_bounds(dict(DEFAULT_BOUNDS), n, list(joint_names))
    batches = []
    for p in paths:
        res = FitResult.read(p, space=default, joint_names=list(joint_names))
        batches.append(res.space.to_batch(res.best_x))
    kw = {}
    for f in fields(CandidateBatch):
        vals = [getattr(b, f.name) for b in batches]
        if all(v is None for v in vals):
            continue
        if any(v is None for v in vals):
            raise ValueError(f"params_json files fit different groups ({f.name} is in some only): {list(paths)}")
        kw[f.name] = np.repeat(np.concatenate([np.asarray(v) for v in vals]), copies, axis=0)
    return CandidateBatch(**kw)


class SysidReplayEnv(DirectRLEnv):
    """Replay of recorded runs, a candidate per env (see module doc); registered as ``Isaac-Sysid-Replay-v0``.

    Args:
        cfg: the settings (default :class:`SysidReplayEnvCfg`); keyword arguments named like its replay
            fields (``run_csv=...``, ``params_json=...``) override them, ``device=`` sets ``sim.device``.
    """

    cfg: SysidReplayEnvCfg

    def __init__(self, cfg: SysidReplayEnvCfg | None = None, render_mode: str | None = None, **kwargs):
        cfg = cfg if cfg is not None else SysidReplayEnvCfg()
        for k in [k for k in kwargs if k in _FIELDS]:
            v = kwargs.pop(k)
            setattr(cfg, k, [v] if k in ("run_csv", "run_sidecar", "params_json") and isinstance(v, str) else v)
        if "device" in kwargs:
            cfg.sim.device = str(kwargs.pop("device"))
        kwargs.pop("env_cfg_entry_point", None)
        if not cfg.run_csv:
            raise ValueError("SysidReplayEnv needs run_csv (one or more recorded runs)")
        if cfg.run_sidecar and len(cfg.run_sidecar) != len(cfg.run_csv):
            raise ValueError(f"run_sidecar names {len(cfg.run_sidecar)} files for {len(cfg.run_csv)} runs")
        self.runs: list[Run] = [read_run(c, cfg.run_sidecar[i] if cfg.run_sidecar else None) for i, c in enumerate(cfg.run_csv)]
        self.robot_model = load_robot(cfg.robot or self.runs[0].meta.robot)
        n = self.robot_model.n_dof
        names = list(self.robot_model.joint_names)
        self.candidates = load_candidates(cfg.params_json, names, cfg.copies)
        opts = ReplayOptions(warmup_ticks=cfg.warmup_ticks, gravity=cfg.gravity, torque_clamp=cfg.torque_clamp,
                             slew_limit=cfg.slew_limit)
        self.backend = IsaacLabBackend(self.robot_model, opts, device=cfg.sim.device, max_delay=cfg.max_delay)
        self.scheds: list[RunSchedule] = [schedule_of(r, n) for r in self.runs]
        grav = {self.backend.gravity_for(s) for s in self.scheds}
        if len(grav) > 1:
            raise ValueError("the runs need different gravity settings (gravity_compensated differs): one env replays "
                             "runs of one setting; give gravity=True/False or split the runs")
        self.params = self.backend._params(self.candidates)
        self.P, self.R = self.candidates.size, len(self.runs)
        ticks = _sample_period(self.scheds) if cfg.ticks_per_step <= 0 else int(cfg.ticks_per_step)
        n_ticks = cfg.warmup_ticks + max(s.last_tick for s in self.scheds) + 1
        cfg.scene.num_envs = self.P * self.R
        cfg.scene.robot = self.backend.articulation_cfg("{ENV_REGEX_NS}/Robot")
        cfg.sim.dt = TICK_S
        cfg.sim.gravity = (0.0, 0.0, -9.81) if grav.pop() else (0.0, 0.0, 0.0)
        cfg.sim.physics = physics_cfg("newton")
        cfg.sim.render_interval = ticks
        cfg.decimation = ticks
        cfg.episode_length_s = n_ticks * TICK_S
        cfg.action_space = n
        cfg.observation_space = 2 * n
        super().__init__(cfg, render_mode, **kwargs)
        # the replay computes the controller every 1 ms tick: one physics step per _apply_action
        self.sim.physics_manager.set_decimation(1)
        self._physics_handles_decimation = False
        self.arm = ArmIO(self.scene["robot"], names, cfg.max_delay)
        self._q_real = [torch.tensor(r.q, dtype=torch.float64, device=self.device) for r in self.runs]
        self.program: ReplayProgram | None = None
        self.rollouts: list[RunRollout] | None = None
        self._j = 0

    # ------------------------------------------------------------------ episode
    def _reset_idx(self, env_ids: Sequence[int]):
        """Restart the replay in every env (the blocks run in lock step)."""
        super()._reset_idx(torch.arange(self.num_envs, device=self.device, dtype=torch.int32))
        self.program = self.backend.program(self.scheds, self.params, self.P, self.num_envs, self.arm.device)
        self.program.write_to(self.arm)
        self.arm.write_state(self.program.q_init)
        self.arm.robot.reset()  # after the writes, as ReplayScene.reset: empties the delay buffers
        self.sim.forward()
        self.arm.robot.update(0.0)
        self._j = 0
        self._latest = {}  # run -> its latest sampled row in this env step

    def _pre_physics_step(self, actions: torch.Tensor):
        self.extras.pop("rollouts", None)
        self._latest = {}
        a = torch.as_tensor(actions, device=self.arm.device).to(torch.float64)
        self.program.extra = a if bool(torch.any(a != 0)) else None

    def _apply_action(self):
        """One replay tick: the targets of tick j from the state at its start (docs/replay.md, "One tick")."""
        prog = self.program
        q32, qd32 = self.arm.state()
        if prog.done:  # after the last sample: hold still until the env step ends
            self.arm.set_targets(q32, torch.zeros_like(q32))
            return
        j = self._j
        if j > 0 and j % PARK_EVERY == 0:
            prog.park(self.arm)
            q32, qd32 = self.arm.state()
        out = prog.tick(j, q32.to(torch.float64), qd32.to(torch.float64))
        for r, i in prog.sampled(j - prog.W):
            self._latest[r] = i
        self._j += 1
        if out is None:
            self.arm.set_targets(q32, torch.zeros_like(q32))
            self.rollouts = empty_rollouts(self.scheds, self.P, self.arm.n)
            prog.finish(self.rollouts, self.backend._kinematics(self.arm.device)[0])
        else:
            self.arm.set_targets(*out)

    # ---------------------------------------------------------------- MDP terms
    def _get_observations(self) -> dict:
        q, qd = self.arm.state()
        return {"policy": torch.cat([q, qd], dim=1)}

    def _get_rewards(self) -> torch.Tensor:
        rew = torch.zeros(self.num_envs, device=self.device)
        P = self.P
        rec = self.program.samples.rec["q"]
        for r, i in self._latest.items():
            err = rec[r][i] - self._q_real[r][i]  # (P, N): the block's sampled q against the log's row
            rew[r * P:(r + 1) * P] = -torch.mean(err**2, dim=1).to(rew.dtype)
        return rew

    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        done = torch.full((self.num_envs,), bool(self.program.done), device=self.device, dtype=torch.bool)
        if self.program.done:
            self.extras["rollouts"] = self.rollouts
        return torch.zeros_like(done), done


def _sample_period(scheds: list[RunSchedule]) -> int:
    """The ticks between logged samples common to every run (their gcd; 1 for irregular 1 kHz stamps)."""
    diffs = np.concatenate([np.diff(s.sample_ticks) for s in scheds if s.n_samples > 1] or [np.array([1])])
    return max(int(np.gcd.reduce(diffs.astype(np.int64))), 1)
