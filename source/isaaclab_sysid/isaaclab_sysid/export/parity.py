"""The exported Isaac Lab module run as fitted: a recorded joint-PD run replayed through the module's own actuator.

The proof that a fit lands in Isaac Lab is not a read-back of its numbers but a replay: :func:`replay_exported` builds
a kit-less Isaac Lab ``ManagerBasedEnv`` on Newton (one arm, the project's USD of the fit's robot,
``sim/isaaclab_backend/asset.py``) whose arm carries the generated module's actuator (``apply_to``: the fitted joint
properties, delay and friction law, with the run's PD gains), steps it one physics step per 1 ms tick with the run's
position setpoint as the action, and samples the joint positions at the run's sample ticks, with the replay semantics of
docs/replay.md (the first setpoint held over the warm-up, the state at the start of each sample tick). No event term
draws anything: every number is the fitted one. :func:`parity` compares it with the fit's own replay of the fitted
values (the native MuJoCo loop, ``export/mjcf.py: fit_rollouts``).

Joint-PD runs only: a task-impedance run's controller lives in the task, not in the exported actuator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.export.build import ExportError
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.interface import ReplayOptions, replay_gravity
from isaaclab_sysid.sim.mujoco_backend import GRAVITY
from isaaclab_sysid.sim.schedule import RunSchedule, schedule_of
from isaaclab_sysid.timebase import TICK_S


class ParityError(ExportError):
    """A run or export the parity replay cannot serve (one line)."""


@dataclass
class ParityRow:
    """One run replayed through the exported actuator and by the fit.

    Attributes:
        run: the run's name.
        law: the export's friction law.
        q_rms: (N,) RMS over the samples of the exported replay's q minus the fit's [rad], per joint.
        q_max: the largest |difference| [rad].
        q_exported, q_fit: (T, N) the two replays' joint positions [rad].
    """

    run: str
    law: str
    q_rms: np.ndarray
    q_max: float
    q_exported: np.ndarray
    q_fit: np.ndarray

    @property
    def rms(self) -> float:
        """RMS over every joint and sample [rad]."""
        return float(np.sqrt(np.mean((self.q_exported - self.q_fit) ** 2)))


def _env_cfg(mod: ModuleType, robot: Robot, kp: np.ndarray, kd: np.ndarray, gravity: bool, device: str,
             effort: bool = False):
    """One arm carrying the module's actuator: position targets with PD gains ``kp``, ``kd`` (N,), or (``effort``) the
    task's efforts with zero gains."""
    from isaaclab.envs import ManagerBasedEnvCfg
    from isaaclab.envs.mdp import JointEffortActionCfg, JointPositionActionCfg, joint_pos
    from isaaclab.managers import ObservationGroupCfg, ObservationTermCfg
    from isaaclab.scene import InteractiveSceneCfg
    from isaaclab.sim import SimulationCfg
    from isaaclab.utils import configclass

    from isaaclab_sysid.export.check import arm_articulation_cfg, module_needs_lab_actuators
    from isaaclab_sysid.sim.isaaclab_backend.scene import physics_cfg

    names = list(mod.JOINT_NAMES)
    base = arm_articulation_cfg(mod, robot)

    @configclass
    class ActionsCfg:
        target = (JointEffortActionCfg(asset_name=mod.ASSET_NAME, joint_names=names, preserve_order=True, scale=1.0)
                  if effort else
                  JointPositionActionCfg(asset_name=mod.ASSET_NAME, joint_names=names, preserve_order=True, scale=1.0,
                                         use_default_offset=False))

    scene = InteractiveSceneCfg(num_envs=1, env_spacing=2.0)
    per = lambda v: {n: float(x) for n, x in zip(names, v)}  # noqa: E731
    # the load law: a gravity-free replay (a gravity-compensated run) leaves out the gravity the gearbox carries
    load = {"carried_gravity": GRAVITY} if mod.FRICTION_LAW["name"] == "load" and not gravity else {}
    setattr(scene, mod.ASSET_NAME, mod.apply_to(base, stiffness=per(kp), damping=per(kd), randomize_delay=False,
                                                **load))
    obs = ObservationGroupCfg()
    obs.q = ObservationTermCfg(func=joint_pos)
    native = not module_needs_lab_actuators(mod)  # Newton's native delayed PD; a law or slew limit: Isaac Lab's path
    return ManagerBasedEnvCfg(
        sim=SimulationCfg(dt=float(mod.PHYSICS_DT), device=device, gravity=(0.0, 0.0, -9.81) if gravity else (0.0, 0.0, 0.0),
                          physics=physics_cfg("newton"), use_newton_actuators=native),
        scene=scene, decimation=1, observations={"policy": obs}, actions=ActionsCfg(), seed=0,
    )


class _Task:
    """The user's task of a task-impedance run: the run's impedance law on the articulation's state, every physics
    step, in float64 (its setpoint at tick k, the pose of ``sp_values``)."""

    def __init__(self, robot: Robot, s: RunSchedule, ks: np.ndarray) -> None:
        import torch

        from isaaclab_sysid.sim.isaaclab_backend.controllers import PinocchioArm, impedance_law

        f64 = dict(dtype=torch.float64, device="cpu")
        self.arm = PinocchioArm(robot)
        self.targets = torch.tensor(s.held_setpoints(ks), **f64)
        self.kp = torch.tensor(s.kp, **f64)[None]
        self.kd = torch.tensor(s.kd, **f64)[None]
        self.law = impedance_law([s.law], s.q_rest[None], f64)

    def effort(self, j: int, q, qd):
        """(1, N) the task's effort [N m] at row j (tick ``ks[j]``) from the state (1, N) at the step's start."""
        from isaaclab_sysid.sim.isaaclab_backend.controllers import impedance_torque

        cpu = dict(dtype=self.kp.dtype, device="cpu")
        return impedance_torque(self.arm, q.to(**cpu), qd.to(**cpu), self.targets[j][None], self.kp, self.kd, self.law)


def replay_exported(mod: ModuleType, robot: Robot, runs: Sequence[Run], options: ReplayOptions,
                    device: str = "cpu") -> list[np.ndarray]:
    """(T, N) joint positions [rad] of each joint-PD or task-impedance run replayed through the exported module's
    actuator.

    Args:
        mod: the generated module (``export/check.py: load_export_module``), written for Newton at a 1 ms physics step.
        robot: the fit's arm (joints ``mod.JOINT_NAMES``; its kinematics compute a task-impedance run's law).
        options: the fit's replay options (warm-up ticks, gravity).

    Raises:
        ParityError: a run that is neither joint PD nor task impedance, an export for another engine or physics step,
            other joints.
    """
    import torch
    from isaaclab.envs import ManagerBasedEnv
    from isaaclab.sim import SimulationContext

    if list(mod.JOINT_NAMES) != list(robot.joint_names):
        raise ParityError(f"the export's joints {list(mod.JOINT_NAMES)} are not robot '{robot.name}''s")
    if mod.PHYSICS != "newton" or abs(float(mod.PHYSICS_DT) - TICK_S) > 1e-12:
        raise ParityError(f"the parity replay runs the export on Newton at the fit's 1 ms tick; this one is for "
                          f"{mod.PHYSICS} at {float(mod.PHYSICS_DT) * 1e3:g} ms")
    n = robot.n_dof
    out = []
    for run in runs:
        s = schedule_of(run, n)
        if s.controller not in ("joint_pd", "task_impedance"):
            raise ParityError(f"run '{run.name}' is {s.controller}: the parity replay plays joint-PD and "
                              "task-impedance runs")
        task = s.controller == "task_impedance"
        W = int(s.warmup(options.warmup_ticks))
        ks = np.arange(-W, s.last_tick + 1)
        if SimulationContext.instance() is not None:
            SimulationContext.clear_instance()
        zero = np.zeros(n)
        env = ManagerBasedEnv(_env_cfg(mod, robot, zero if task else s.kp, zero if task else s.kd,
                                       replay_gravity(options, s.gravity_compensated), device, effort=task))
        try:
            art = env.scene[mod.ASSET_NAME]
            if mod.FRICTION_LAW["name"] != "coulomb":
                mod.bind_friction_law(art)
            q0 = torch.tensor(s.q_init, dtype=torch.float32, device=env.device)[None]
            qd0 = torch.zeros_like(q0) if s.qd_init is None else torch.tensor(s.qd_init, dtype=torch.float32,
                                                                               device=env.device)[None]
            art.write_joint_position_to_sim_index(position=q0)
            art.write_joint_velocity_to_sim_index(velocity=qd0)
            art.reset()  # after the writes: empties the delay buffers (and the Dahl bristle state)
            env.sim.forward()
            art.update(0.0)
            if task:
                ctl = _Task(robot, s, ks)
            else:
                targets = torch.tensor(s.held_setpoints(ks), dtype=torch.float32, device=env.device)
            at = {int(k): i for i, k in enumerate(s.sample_ticks)}
            q = np.full((s.n_samples, n), np.nan)
            for j, k in enumerate(ks):
                qj = art.data.joint_pos.torch[:1]
                if int(k) in at:
                    q[at[int(k)]] = qj[0].detach().cpu().numpy()
                if k >= s.last_tick:
                    break
                if task:
                    action = ctl.effort(j, qj.detach(), art.data.joint_vel.torch[:1].detach())
                    env.step(action.to(dtype=torch.float32, device=env.device))
                else:
                    env.step(targets[j][None])
        finally:
            env.close()
            if SimulationContext.instance() is not None:
                SimulationContext.clear_instance()
        out.append(q)
    return out


def parity(mod: ModuleType, robot: Robot, runs: Sequence[Run], options: ReplayOptions,
           fit_q: Sequence[np.ndarray], device: str = "cpu") -> list[ParityRow]:
    """Each run replayed through the export (:func:`replay_exported`) against the fit's replay ``fit_q`` ((T, N) each:
    ``export/mjcf.py: fit_rollouts`` of the fitted values)."""
    rows = []
    for run, qe, qf in zip(runs, replay_exported(mod, robot, runs, options, device), fit_q):
        d = qe - np.asarray(qf)
        rows.append(ParityRow(run.name, mod.FRICTION_LAW["name"], np.sqrt(np.mean(d**2, axis=0)),
                              float(np.abs(d).max()), qe, np.asarray(qf)))
    return rows
