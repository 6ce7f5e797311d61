"""A kit-less Isaac Lab scene of E replicated arms for replay (Newton; PhysX via physx.py).

:func:`arm_articulation_cfg` is the arm (the robot USD with one actuator group
``"arm"`` over every joint: Isaac Lab's ``DelayedPDActuator`` with per-env gains
and per-env delay, ``delay_steps`` at most ``max_delay``, executed natively by
Newton) and :class:`ArmIO` what the replay writes to and reads from it; both are
shared by :class:`ReplayScene` (the backend's own simulation) and the replay task
(``isaaclab_sysid.tasks``, a ``DirectRLEnv``). One :class:`ReplayScene` owns the
process-wide ``SimulationContext`` (Isaac Lab allows one at a time): a 1 ms stage
with E clones of the robot USD (``/World/Env_<i>/Robot``), contacts off, gravity
on or off. The replay uses the arm in two ways per env:

* ``joint_pd`` envs: position targets, Kp/Kd = the run's gains, delay = the
  candidate's (Isaac Lab delays the position target, as the semantics say);
* torque envs (``task_impedance``, or ``joint_pd`` under a slew limit): Kp = Kd = 0,
  delay 0, and the torque computed (and delayed) in torch is the feed-forward
  effort target.

Both PD and feed-forward efforts are explicit: computed from the state at the
start of the tick and applied during its step, like MuJoCo's ``qfrc_applied``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from isaaclab_sysid.timebase import TICK_S

#: effort limit used when the replay does not clamp [N m] (effectively none)
NO_LIMIT = 1.0e6


@dataclass(frozen=True)
class SceneSpec:
    """What a scene is built for (a different spec needs a rebuild)."""

    usd_path: str
    joint_names: tuple[str, ...]
    num_envs: int
    gravity: bool
    device: str
    physics: str
    max_delay: int
    effort_limit: tuple[float, ...] | None  # None = no clamp
    q_default: tuple[float, ...]  # authored default posture (inside the joint limits)
    solver_iterations: int = 100
    ls_iterations: int = 50


def physics_cfg(physics: str = "newton", solver_iterations: int = 100, ls_iterations: int = 50):
    """Isaac Lab's physics config of every replay scene: Newton with the MJWarp solver (implicitfast,
    contacts off, MuJoCo's default iterations, no CUDA graph), or PhysX (``physx.py``)."""
    if physics == "newton":
        from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg

        return NewtonCfg(
            use_cuda_graph=False,
            solver_cfg=MJWarpSolverCfg(
                integrator="implicitfast",
                disable_contacts=True,
                iterations=solver_iterations,
                ls_iterations=ls_iterations,
            ),
        )
    if physics == "physx":
        from isaaclab_sysid.sim.isaaclab_backend.physx import physx_cfg

        return physx_cfg()
    raise ValueError(f"unknown physics '{physics}' (newton or physx)")


def arm_articulation_cfg(usd_path: str | Path, joint_names: Sequence[str], q_default: Sequence[float], max_delay: int,
                         effort_limit: Sequence[float] | None, prim_path: str = "/World/Env_[^/]*/Robot"):
    """The replay's ``ArticulationCfg`` (shared by :class:`ReplayScene` and the replay task's scene).

    One actuator group ``"arm"`` over every joint: ``DelayedPDActuatorCfg`` with zero gains, zero joint
    properties (written per env later), a delay buffer of ``max_delay`` ticks and the effort limit
    ``effort_limit`` (N,) [N m], or :data:`NO_LIMIT` when None.
    """
    import isaaclab.sim as sim_utils
    from isaaclab.actuators import DelayedPDActuatorCfg
    from isaaclab.assets import ArticulationCfg

    names = list(joint_names)
    eff = ({f"^{n}$": NO_LIMIT for n in names} if effort_limit is None
           else {f"^{n}$": float(v) for n, v in zip(names, effort_limit)})
    return ArticulationCfg(
        prim_path=prim_path,
        spawn=sim_utils.UsdFileCfg(usd_path=str(usd_path)),
        init_state=ArticulationCfg.InitialStateCfg(joint_pos={n: float(v) for n, v in zip(names, q_default)}, joint_vel={".*": 0.0}),
        actuators={
            "arm": DelayedPDActuatorCfg(
                joint_names_expr=[f"^{n}$" for n in names],
                stiffness=0.0,
                damping=0.0,
                min_delay=0,
                max_delay=int(max_delay),
                actuator_effort_limit=eff,
                joint_effort_limit=NO_LIMIT,
                armature=0.0,
                friction=0.0,
                viscous_friction=0.0,
            )
        },
    )


class ArmIO:
    """What the replay reads from and writes to E arms of an Isaac Lab articulation built from
    :func:`arm_articulation_cfg`; all tensors are (E, N) on the articulation's device.

    Used by :class:`ReplayScene` (the backend's own simulation) and by the replay task (a
    ``DirectRLEnv``'s scene), so both run the same writes.
    """

    def __init__(self, robot, joint_names: Sequence[str], max_delay: int) -> None:
        ids, found = robot.find_joints([f"^{n}$" for n in joint_names], preserve_order=True)
        if tuple(found) != tuple(joint_names) or robot.num_joints != len(joint_names):
            raise RuntimeError(
                f"the USD articulation has joints {robot.joint_names}, expected exactly {list(joint_names)} "
                "(locked joints must be fixed in the URDF)"
            )
        self.robot = robot
        self.joint_ids = ids
        self.device = torch.device(robot.device)
        self.n = len(joint_names)
        self.E = robot.num_instances
        self.max_delay = int(max_delay)
        self._target = robot.actuators.target_command

    # ---------------------------------------------------------------- params
    def write_joint_properties(self, armature: np.ndarray, friction: np.ndarray, viscous: np.ndarray) -> None:
        """Per-env armature [kg m^2], Coulomb friction torque [N m], viscous [N m s/rad]; each (E, N)."""
        r, ids = self.robot, self.joint_ids
        f32 = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32, device=self.device)  # noqa: E731
        r.write_joint_armature_to_sim_index(armature=f32(armature), joint_ids=ids)
        r.write_joint_friction_coefficient_to_sim_index(joint_friction_coeff=f32(friction), joint_ids=ids)
        r.write_joint_viscous_friction_coefficient_to_sim_index(joint_viscous_friction_coeff=f32(viscous), joint_ids=ids)

    def write_friction(self, friction: torch.Tensor) -> None:
        """Every env's Coulomb friction torque [N m] (E, N) for the next step (a friction law's budget per tick)."""
        self.robot.write_joint_friction_coefficient_to_sim_index(
            joint_friction_coeff=friction.to(dtype=torch.float32, device=self.device), joint_ids=self.joint_ids)

    def write_actuator(self, kp: np.ndarray, kd: np.ndarray, delay: np.ndarray) -> None:
        """Per-env PD gains (E, N) and delay (E,) [ticks] of the ``arm`` actuator group."""
        from isaaclab.actuators.newton import write_group_parameter

        if np.any(delay > self.max_delay):
            raise ValueError(f"delay {int(np.max(delay))} exceeds the scene's max_delay {self.max_delay}")
        acts = self.robot.actuators
        t = lambda a, dt: torch.as_tensor(np.asarray(a), dtype=dt, device=self.device)  # noqa: E731
        write_group_parameter(acts, "arm", "controller", "kp", t(kp, torch.float32))
        write_group_parameter(acts, "arm", "controller", "kd", t(kd, torch.float32))
        d = np.repeat(np.asarray(delay, dtype=np.int32)[:, None], self.n, axis=1)
        write_group_parameter(acts, "arm", "delay", "delay_steps", t(d, torch.int32))

    def read_actuator(self) -> dict[str, torch.Tensor]:
        from isaaclab.actuators.newton import read_group_parameter

        acts = self.robot.actuators
        return {k: read_group_parameter(acts, "arm", c, k) for c, k in (("controller", "kp"), ("controller", "kd"), ("delay", "delay_steps"))}

    # ----------------------------------------------------------------- state
    def write_state(self, q0: torch.Tensor, env_ids: torch.Tensor | None = None) -> None:
        """Envs ``env_ids`` (default all) to ``q0`` (len, N) at rest."""
        r = self.robot
        kw = {} if env_ids is None else {"env_ids": env_ids}
        r.write_joint_position_to_sim_index(position=q0.to(torch.float32), **kw)
        r.write_joint_velocity_to_sim_index(velocity=torch.zeros_like(q0, dtype=torch.float32), **kw)

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Joint positions and velocities (E, N), float32 views."""
        d = self.robot.data
        return d.joint_pos.torch, d.joint_vel.torch

    def set_targets(self, position: torch.Tensor, effort: torch.Tensor) -> None:
        """The actuator's position targets and feed-forward efforts (E, N) for the next physics step."""
        self._target.set_position_index(value=position.to(torch.float32))
        self._target.set_effort_index(value=effort.to(torch.float32))


class ReplayScene:
    """E arms in one Isaac Lab simulation of its own; all tensors are (E, N) on ``spec.device``."""

    def __init__(self, spec: SceneSpec) -> None:
        import isaaclab.sim as sim_utils
        from isaaclab.assets import Articulation
        from isaaclab.cloner import CloneCfg, clone_plan_from_env_0, replicate
        from isaaclab.sim import SimulationCfg, SimulationContext

        self.spec = spec
        if SimulationContext.instance() is not None:
            SimulationContext.clear_instance()
        sim_utils.create_new_stage()
        self.sim = SimulationContext(
            SimulationCfg(
                dt=TICK_S,
                device=spec.device,
                gravity=(0.0, 0.0, -9.81) if spec.gravity else (0.0, 0.0, 0.0),
                physics=physics_cfg(spec.physics, spec.solver_iterations, spec.ls_iterations),
            )
        )
        cfg = arm_articulation_cfg(spec.usd_path, spec.joint_names, spec.q_default, spec.max_delay, spec.effort_limit)
        sim_utils.create_prim("/World/Env_0", "Xform", translation=(0.0, 0.0, 0.0))
        clone_plan_from_env_0(CloneCfg(clone_template="/World/Env_{}"), [cfg], spec.num_envs, 2.0)
        self.robot = Articulation(cfg)
        replicate(self.sim.get_clone_plan())
        self.sim.reset()
        self.arm = ArmIO(self.robot, spec.joint_names, spec.max_delay)
        self.device = self.arm.device
        self.n = self.arm.n
        self.E = spec.num_envs
        self.dt = self.sim.get_physics_dt()

    def reset(self, q0: torch.Tensor) -> None:
        """Every env to ``q0`` (E, N) at rest; actuator delay buffers emptied."""
        self.arm.write_state(q0)
        self.robot.reset()
        self.sim.forward() if hasattr(self.sim, "forward") else None
        self.robot.update(0.0)

    def step(self, position: torch.Tensor, effort: torch.Tensor) -> None:
        """One 1 ms tick with these position targets and feed-forward efforts (E, N)."""
        self.arm.set_targets(position, effort)
        self.robot.write_data_to_sim()
        self.sim.step(render=False)
        self.robot.update(self.dt)

    def close(self) -> None:
        from isaaclab.sim import SimulationContext

        if SimulationContext.instance() is self.sim:
            SimulationContext.clear_instance()


def make_spec(
    usd_path: Path | str,
    joint_names: Sequence[str],
    num_envs: int,
    gravity: bool,
    device: str,
    physics: str,
    max_delay: int,
    effort_limit: np.ndarray | None,
    q_default: np.ndarray,
    **solver,
) -> SceneSpec:
    return SceneSpec(
        usd_path=str(usd_path),
        joint_names=tuple(joint_names),
        num_envs=int(num_envs),
        gravity=bool(gravity),
        device=str(device),
        physics=physics,
        max_delay=int(max_delay),
        effort_limit=None if effort_limit is None else tuple(float(v) for v in effort_limit),
        q_default=tuple(float(v) for v in q_default),
        **solver,
    )
