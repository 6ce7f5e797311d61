"""The :class:`Robot`: builds MuJoCo and Pinocchio models from one robot config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin

from isaaclab_sysid.robots.config import RobotConfig, RobotConfigError, load_robot_config
from isaaclab_sysid.robots.overrides import JointOverrides, LinkInertial
from isaaclab_sysid.robots.urdf import reduced_urdf
from isaaclab_sysid.timebase import TICK_S

#: Name of the end-effector site (MuJoCo) and frame (Pinocchio).
EE_NAME = "ee"
#: Physics step of every replay [s]: :data:`isaaclab_sysid.timebase.TICK_S` under its historical name
#: (kept importable from here for existing importers).
PHYSICS_DT = TICK_S


@dataclass
class Robot:
    """One arm. Joint order, limits and the EE frame come from its config.

    Attributes:
        config: the robot config.
        link_inertials: inertial overrides per link name applied by every builder.
    """

    config: RobotConfig
    link_inertials: dict[str, LinkInertial] = field(default_factory=dict)

    def __post_init__(self) -> None:
        model = self.build_pinocchio()
        names = tuple(model.names[1:])
        if names != self.config.joints:
            raise RobotConfigError(
                f"{self.config.source}: URDF joint order {names} differs from config joints {self.config.joints}"
            )
        self._q_lower = np.array(model.lowerPositionLimit, dtype=float)
        self._q_upper = np.array(model.upperPositionLimit, dtype=float)
        self._v_max = np.array(model.velocityLimit, dtype=float)
        self._effort = np.array(model.effortLimit, dtype=float)

    # ----------------------------------------------------------------- facts
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def n_dof(self) -> int:
        """Number of actuated joints N."""
        return len(self.config.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.config.joints

    @property
    def q_lower(self) -> np.ndarray:
        """(N,) lower joint limits [rad]."""
        return self._q_lower.copy()

    @property
    def q_upper(self) -> np.ndarray:
        """(N,) upper joint limits [rad]."""
        return self._q_upper.copy()

    @property
    def v_max(self) -> np.ndarray:
        """(N,) joint velocity limits [rad/s] from the URDF."""
        return self._v_max.copy()

    @property
    def tau_max(self) -> np.ndarray:
        """(N,) torque limits [N m]: the config's, else the URDF's effort limits."""
        if self.config.torque_limit is not None:
            return np.array(self.config.torque_limit, dtype=float)
        return self._effort.copy()

    @property
    def link_names(self) -> tuple[str, ...]:
        """Names of the moving links, one per actuated joint, in joint order (Pinocchio bodies)."""
        model = self.build_pinocchio()
        out = []
        for j in range(1, model.njoints):
            # the body frame attached to joint j (the child link of that joint)
            frames = [f for f in model.frames if f.parentJoint == j and f.type == pin.FrameType.BODY]
            out.append(frames[0].name)
        return tuple(out)

    @property
    def ee_frame(self) -> str:
        """The EE point every builder uses, in words: ``"<ee_link> + [x, y, z] m"`` (the config's ``ee_offset``)."""
        return f"{self.config.ee_link} + [{', '.join(f'{v:g}' for v in self.config.ee_offset)}] m"

    @property
    def carries(self) -> str:
        """What the arm carries at its flange, in words (the config's ``end_effector`` and ``[tool]``): every stage
        that builds the arm prints it (:meth:`arm_line`)."""
        return self.config.carries

    def arm_line(self) -> str:
        """``robot <name> (<config file>): carries <what>``: the line each stage that builds the arm prints."""
        src = f" ({self.config.source})" if self.config.source is not None else ""
        return f"robot {self.name}{src}: carries {self.carries}"

    def with_tool(self, tool: LinkInertial | None, link: str | None = None) -> "Robot":
        """A copy that carries ``tool`` (inertials in the ``link`` frame, default the EE link), or no stated tool."""
        from isaaclab_sysid.robots.config import Tool

        if tool is None:
            return Robot(replace(self.config, tool=None), dict(self.link_inertials))
        t = Tool(float(tool.mass), tuple(float(v) for v in tool.com),  # type: ignore[arg-type]
                 tuple(tuple(float(v) for v in row) for row in np.asarray(tool.inertia)),
                 link or self.config.ee_link)
        return Robot(replace(self.config, tool=t), dict(self.link_inertials))

    def with_real_controller(
        self,
        ee_offset: Sequence[float] | None = None,
        torque_limit: Sequence[float] | None = None,
        torque_rate_limit: Sequence[float] | None = None,
    ) -> "Robot":
        """A copy with the real controller's EE point and limits in place of the config's (None keeps one).

        Args:
            ee_offset: (3,) EE point in the ``ee_link`` frame [m] (the Franka's Desk EE setting:
                [0, 0, 0.1034] for the hand's TCP).
            torque_limit: (N,) or (1,) per-joint torque limit [N m] (one value: every joint; inf: none).
            torque_rate_limit: (N,) or (1,) torque slew limit [N m/s].
        Raises:
            RobotConfigError: wrong lengths, non-positive or NaN values.
        """
        n = self.n_dof

        def per_joint(v: Sequence[float] | None, what: str) -> tuple[float, ...] | None:
            if v is None:
                return None
            a = np.asarray(v, dtype=float).ravel()
            if a.size == 1:
                a = np.full(n, a[0])
            if a.size != n or np.any(np.isnan(a)) or np.any(a <= 0):
                raise RobotConfigError(f"{what}: expected 1 or {n} positive values, got {list(v)}")
            return tuple(float(x) for x in a)

        changes: dict = {}
        if ee_offset is not None:
            off = np.asarray(ee_offset, dtype=float).ravel()
            if off.size != 3 or not np.all(np.isfinite(off)):
                raise RobotConfigError(f"ee_offset: expected 3 finite values [m], got {list(ee_offset)}")
            changes["ee_offset"] = tuple(float(x) for x in off)
        if torque_limit is not None:
            changes["torque_limit"] = per_joint(torque_limit, "torque_limit")
        if torque_rate_limit is not None:
            changes["torque_rate_limit"] = per_joint(torque_rate_limit, "torque_rate_limit")
        return Robot(replace(self.config, **changes), dict(self.link_inertials)) if changes else self

    def with_inertials(self, link_inertials: Mapping[str, LinkInertial]) -> "Robot":
        """A copy of this robot with (more) link inertial overrides."""
        merged = dict(self.link_inertials)
        merged.update(link_inertials)
        return Robot(self.config, merged)

    def urdf_text(self, mujoco_compiler: bool = False) -> str:
        """The reduced URDF every builder starts from."""
        return reduced_urdf(self.config, self.link_inertials, mujoco_compiler=mujoco_compiler)

    # ------------------------------------------------------------- Pinocchio
    def build_pinocchio(self, gravity: bool = True) -> pin.Model:
        """Pinocchio model of the arm with an operational frame ``"ee"``.

        Locked joints are fixed, so ``model.nq == model.nv == N``.
        """
        model = pin.buildModelFromXML(self.urdf_text())
        # BODY: a link may share its name with a joint (SO-100: link and joint 'gripper')
        parent = model.getFrameId(self.config.ee_link, pin.FrameType.BODY)
        if parent >= len(model.frames):
            raise RobotConfigError(f"ee_link '{self.config.ee_link}' not found in the Pinocchio model")
        pf = model.frames[parent]
        placement = pf.placement * pin.SE3(np.eye(3), np.asarray(self.config.ee_offset, dtype=float))
        model.addFrame(pin.Frame(EE_NAME, pf.parentJoint, parent, placement, pin.FrameType.OP_FRAME))
        if not gravity:
            model.gravity.linear[:] = 0.0
        return model

    # ---------------------------------------------------------------- MuJoCo
    def build_mjspec(self, joints: JointOverrides | None = None, gravity: bool = False) -> mujoco.MjSpec:
        """MjSpec of the arm: 1 ms step, implicitfast, no contacts, site ``"ee"``.

        Args:
            joints: per-joint armature/friction/damping written into the spec
                before compilation (so they always take effect).
            gravity: include gravity (off by default: the real arm compensates it).
        """
        urdf = self.urdf_text(mujoco_compiler=True)
        spec = mujoco.MjSpec.from_string(urdf)
        spec.option.timestep = TICK_S
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        spec.option.gravity = [0.0, 0.0, -9.81] if gravity else [0.0, 0.0, 0.0]
        _exact_principal_inertia(spec, urdf)
        body = spec.body(self.config.ee_link)
        if body is None:
            raise RobotConfigError(f"ee_link '{self.config.ee_link}' has no MuJoCo body")
        body.add_site(name=EE_NAME, pos=list(self.config.ee_offset))
        jt = joints or JointOverrides()
        for i, name in enumerate(self.config.joints):
            j = spec.joint(name)
            j.armature = float(jt.armature[i]) if jt.armature is not None else 0.0
            j.frictionloss = float(jt.friction[i]) if jt.friction is not None else 0.0
            # mujoco 3.12: damping is [linear, quadratic, cubic] (dof_dampingpoly)
            j.damping = [float(jt.damping[i]) if jt.damping is not None else 0.0, 0.0, 0.0]
        return spec

    def build_mujoco(self, joints: JointOverrides | None = None, gravity: bool = False) -> mujoco.MjModel:
        """Compiled MuJoCo model (see :meth:`build_mjspec`); joint i is dof i."""
        model = self.build_mjspec(joints, gravity).compile()
        names = tuple(model.joint(i).name for i in range(model.njnt))
        if names != self.config.joints:
            raise RobotConfigError(f"MuJoCo joint order {names} differs from config {self.config.joints}")
        return model

    # --------------------------------------------------------- conveniences
    def ee_pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """EE position (3,) [m] and orientation quaternion (4,) xyzw at joint angles q (N,) [rad]."""
        model = self.build_pinocchio()
        data = model.createData()
        fid = model.getFrameId(EE_NAME)
        pin.framesForwardKinematics(model, data, np.asarray(q, dtype=float))
        oMf = data.oMf[fid]
        quat = pin.Quaternion(oMf.rotation)
        return oMf.translation.copy(), np.array([quat.x, quat.y, quat.z, quat.w])


def _exact_principal_inertia(spec: mujoco.MjSpec, urdf_text: str) -> None:
    """Set every body's inertial from the URDF, diagonalized in double precision.

    MuJoCo's URDF importer diagonalizes the inertia tensor iteratively, which
    leaves errors of ~3e-8 in M(q); doing it here with numpy ``eigh`` keeps
    MuJoCo and Pinocchio equal to ~1e-12.
    """
    import xml.etree.ElementTree as ET

    from scipy.spatial.transform import Rotation

    for link in ET.fromstring(urdf_text).findall("link"):
        inertial = link.find("inertial")
        body = spec.body(link.get("name"))
        if inertial is None or body is None:
            continue
        mass = float(inertial.find("mass").get("value"))
        if mass <= 0:
            continue
        origin = inertial.find("origin")
        xyz = [float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()]
        rpy = [float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()]
        el = inertial.find("inertia")
        g = {k: float(el.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        inertia = np.array(
            [[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]], [g["ixz"], g["iyz"], g["izz"]]]
        )
        evals, evecs = np.linalg.eigh(inertia)
        if np.linalg.det(evecs) < 0:
            evecs[:, 0] *= -1.0
        rot = Rotation.from_euler("xyz", rpy).as_matrix() @ evecs
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, rot.ravel())
        body.mass = mass
        body.ipos = xyz
        body.inertia = evals
        body.iquat = quat
        body.fullinertia = [np.nan] * 6
        body.explicitinertial = True


def load_robot(name_or_path: str | Path = "franka_panda") -> Robot:
    """Load a :class:`Robot` from a config name (``configs/robots/<name>.toml``) or path."""
    return Robot(load_robot_config(name_or_path))
