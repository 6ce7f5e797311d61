"""A gymnasium environment that replays one recorded run in Isaac Lab with fitted parameters.

One episode = one run. ``reset()`` starts the replay (warm-up included) and
returns the state at the run's first sample; each ``step(action)`` advances to
the next sample instant (20 ticks of 1 ms for a 50 Hz log) under the run's own
controller, gains and setpoints with the fitted armature, friction, viscous
damping and actuator delay, exactly as the fit's ``isaaclab`` backend replays it.
The action is an extra joint torque [N m] (num_envs, N) added to the actuator's
torque until the next sample (zeros: pure replay). The observation holds the
simulated and recorded joint states; the reward is minus the squared joint
position error [rad^2] of that sample, averaged over joints.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np

from isaaclab_sysid.data import read_run
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, RunRollout
from isaaclab_sysid.sim.schedule import schedule_of
from isaaclab_sysid.tasks.replay_env_cfg import SysidReplayEnvCfg


def load_params(path: str | Path | None, n: int) -> dict:
    """Decoded fitted parameters from ``sysid_best_params.json`` / a checkpoint (missing groups: nominal)."""
    if path is None:
        return {}
    doc = json.loads(Path(path).read_text())
    dec = doc.get("best_params_decoded", doc)
    out = {}
    for g in ("armature", "friction", "viscous"):
        if dec.get(g) is not None:
            v = np.asarray(dec[g], dtype=float).reshape(-1)
            out[g] = np.full(n, v[0]) if v.size == 1 else v
    if dec.get("delay") is not None:
        out["delay"] = int(round(float(np.asarray(dec["delay"]).reshape(-1)[0])))
    return out


class SysidReplayEnv(gym.Env):
    """Replay of one run (see module doc); registered as ``Isaac-Sysid-Franka-Replay-v0``."""

    metadata = {"render_modes": []}

    def __init__(self, cfg: SysidReplayEnvCfg | None = None, env_cfg_entry_point: str | None = None, render_mode=None, **overrides):
        cfg = cfg or SysidReplayEnvCfg()
        if overrides:
            cfg = replace(cfg, **overrides)
        if not cfg.run_csv:
            raise ValueError("SysidReplayEnv needs run_csv (a recorded run)")
        from isaaclab_sysid.sim.isaaclab_backend import IsaacLabBackend

        self.cfg = cfg
        self.run = read_run(cfg.run_csv, cfg.run_sidecar)
        self.robot = load_robot(cfg.robot or self.run.meta.robot)
        n = self.robot.n_dof
        self.params = load_params(cfg.params_json, n)
        P = int(cfg.num_envs)
        delay = self.params.get("delay", 0)
        self.batch = CandidateBatch(
            armature=np.tile(self.params.get("armature", np.zeros(n)), (P, 1)),
            friction=np.tile(self.params.get("friction", np.zeros(n)), (P, 1)),
            viscous=np.tile(self.params.get("viscous", np.zeros(n)), (P, 1)),
            delay=np.full(P, delay, dtype=int),
        )
        opts = ReplayOptions(warmup_ticks=cfg.warmup_ticks, gravity=cfg.gravity, torque_clamp=cfg.torque_clamp,
                             slew_limit=cfg.slew_limit)
        self.backend = IsaacLabBackend(self.robot, opts, device=cfg.device, max_delay=max(4, delay), min_envs=P)
        self.sched = schedule_of(self.run, n)
        self.num_envs = P
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (P, n), np.float64)
        box = gym.spaces.Box(-np.inf, np.inf, (P, n), np.float64)
        self.observation_space = gym.spaces.Dict({"q": box, "dq": box, "q_real": box, "dq_real": box})
        self._gen = None
        self._row = 0
        self.rollout: RunRollout | None = None

    def _obs(self, q, qd):
        P = self.num_envs
        i = self._row
        return {
            "q": q[:P].cpu().numpy(),
            "dq": qd[:P].cpu().numpy(),
            "q_real": np.tile(self.run.q[i], (P, 1)),
            "dq_real": np.tile(self.run.dq[i], (P, 1)),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        n, P = self.robot.n_dof, self.num_envs
        T = self.sched.n_samples
        self.rollout = RunRollout(q=np.full((P, T, n), np.nan), dq=np.full((P, T, n), np.nan),
                                  ee_pos=np.full((P, T, 3), np.nan), ee_quat=np.full((P, T, 4), np.nan),
                                  tau=np.full((P, T, n), np.nan), diverged=np.zeros(P, dtype=bool))
        be = self.backend
        params = be._params(self.batch)
        self._gen = be.replay_steps([self.sched], params, P, be.gravity_for(self.sched), [self.rollout])
        self._row = 0
        _, q, qd = next(self._gen)
        return self._obs(q, qd), {"row": 0, "tick": int(self.sched.sample_ticks[0])}

    def step(self, action=None):
        if self._gen is None:
            raise RuntimeError("call reset() first")
        extra = None
        if action is not None:
            a = np.asarray(action, dtype=np.float64)
            if np.any(a != 0):
                pad = np.zeros((self.backend._scene.E, self.robot.n_dof))
                pad[: self.num_envs] = a
                extra = pad
        try:
            _, q, qd = self._gen.send(extra)
        except StopIteration:
            self._gen = None
            return None, 0.0, True, False, {"rollout": self.rollout}
        self._row += 1
        obs = self._obs(q, qd)
        reward = -float(np.mean((obs["q"] - obs["q_real"]) ** 2))
        last = self._row >= self.sched.n_samples - 1
        info = {"row": self._row, "tick": int(self.sched.sample_ticks[self._row])}
        if last:
            try:
                self._gen.send(None)
            except StopIteration:
                pass
            self._gen = None
            info["rollout"] = self.rollout
        return obs, reward, last, False, info

    def close(self):
        self.backend.close()
