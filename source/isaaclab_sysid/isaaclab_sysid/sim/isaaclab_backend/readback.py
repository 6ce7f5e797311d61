"""Read an Isaac Lab scene's joint physics back from the simulation (Newton), not from any config.

Two places hold a joint's armature, Coulomb friction and viscous damping once
Isaac Lab has written them: Newton's ``Model`` (``joint_armature``,
``joint_friction``, ``joint_damping``, per DOF over all envs) and, for the MJWarp
solver, MuJoCo Warp's model (``dof_armature``, ``dof_frictionloss``,
``dof_damping``, per world and MuJoCo DOF), which Newton refreshes from the
first at the next step. :func:`joint_physics` reads both and maps them to
(env, joint) with the model's joint labels; :func:`actuator_delay_steps` reads the
per-env delay Newton's native actuators apply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_ENV_RE = re.compile(r"/[Ee]nv_(\d+)/")


@dataclass(frozen=True)
class JointPhysics:
    """Per-env joint physics read from the simulation; every array is (E, N) float64.

    Attributes:
        armature: [kg m^2].
        friction: Coulomb friction torque [N m] (Newton ``joint_friction`` = MJWarp ``dof_frictionloss``).
        viscous: viscous damping [N m s/rad] (Newton ``joint_damping`` = MJWarp ``dof_damping``).
        source: ``"mjwarp"`` (the solver's arrays, what integrates) or ``"newton"`` (Newton's model).
    """

    armature: np.ndarray
    friction: np.ndarray
    viscous: np.ndarray
    source: str

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"armature": self.armature, "friction": self.friction, "viscous": self.viscous}


def _dof_map(model, joint_names: Sequence[str], num_envs: int) -> np.ndarray:
    """(E, N) Newton DOF index of each env's named joint (single-DOF joints)."""
    labels = list(model.joint_label)
    qd_start = model.joint_qd_start.numpy()
    out = np.full((num_envs, len(joint_names)), -1, dtype=np.int64)
    col = {n: i for i, n in enumerate(joint_names)}
    for k, lab in enumerate(labels):
        name = lab.rsplit("/", 1)[-1]
        m = _ENV_RE.search(lab + "/")
        if name in col and m is not None and int(m.group(1)) < num_envs:
            out[int(m.group(1)), col[name]] = qd_start[k]
    if np.any(out < 0):
        e, j = np.argwhere(out < 0)[0]
        raise RuntimeError(f"joint '{joint_names[j]}' of env {e} not found among the Newton model's joint labels")
    return out


def joint_physics(joint_names: Sequence[str], num_envs: int, source: str = "mjwarp") -> JointPhysics:
    """The joints' armature, friction and viscous damping of every env, from the running Newton simulation.

    Args:
        joint_names: the arm's joints (the last path component of their prims).
        num_envs: E.
        source: ``mjwarp`` (the MJWarp solver's model: call after at least one physics step since
            the last write) or ``newton`` (Newton's model arrays, updated at once by Isaac Lab's writes).

    Raises:
        RuntimeError: no Newton simulation, or (``mjwarp``) the solver is not MJWarp.
    """
    from isaaclab_newton.physics import NewtonManager

    model = NewtonManager.get_model()
    if model is None:
        raise RuntimeError("no Newton model: build the Isaac Lab scene on Newton first")
    dof = _dof_map(model, joint_names, num_envs)
    if source == "newton":
        get = lambda a: a.numpy()[dof].astype(np.float64)  # noqa: E731
        return JointPhysics(get(model.joint_armature), get(model.joint_friction), get(model.joint_damping), "newton")
    if source != "mjwarp":
        raise ValueError(f"source must be 'mjwarp' or 'newton', got {source!r}")
    solver = NewtonManager._solver  # Isaac Lab exposes no getter; the solver is the one that integrates
    mjw = getattr(solver, "mjw_model", None)
    if mjw is None:
        raise RuntimeError(f"the Newton solver is {type(solver).__name__}, not MJWarp (SolverMuJoCo)")
    to_newton = solver.mjc_dof_to_newton_dof.numpy()  # (worlds, nv)
    out = {k: np.full(dof.shape, np.nan) for k in ("armature", "friction", "viscous")}
    arrays = {"armature": mjw.dof_armature.numpy(), "friction": mjw.dof_frictionloss.numpy(), "viscous": mjw.dof_damping.numpy()}
    where = {int(d): (e, j) for (e, j), d in np.ndenumerate(dof)}
    for w in range(to_newton.shape[0]):
        for c, nd in enumerate(to_newton[w]):
            ej = where.get(int(nd))
            if ej is not None:
                for k, a in arrays.items():
                    out[k][ej] = a[w if a.shape[0] > 1 else 0, c]
    if any(np.isnan(v).any() for v in out.values()):
        raise RuntimeError("some joints have no MJWarp DOF")
    return JointPhysics(out["armature"], out["friction"], out["viscous"], "mjwarp")


def actuator_delay_steps(articulation, group: str) -> np.ndarray:
    """(E,) delay [physics steps] of Newton's native actuator group ``group`` (one value per env; joints must agree).

    Raises:
        ValueError: the group is not executed by Newton's native actuators (Isaac Lab's error), or its
            joints of one env have different delays.
    """
    from isaaclab.actuators.newton import read_group_parameter

    d = read_group_parameter(articulation.actuators, group, "delay", "delay_steps").cpu().numpy()
    if np.any(d != d[:, :1]):
        raise ValueError(f"actuator group '{group}': joints of one env have different delays")
    return d[:, 0].astype(np.int64)
