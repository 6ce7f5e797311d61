"""Batched controllers in torch for the Isaac Lab backend (one row per env).

The task-space impedance law of docs/replay.md, computed every tick from the
simulated joint state, for all envs at once (CPU or GPU). Kinematics and the
Coriolis term come from the robot's own kinematic tree (the Pinocchio model
that ``Robot`` builds from the reduced URDF), evaluated in float64 torch:

* :class:`TorchArm` -- forward kinematics of every joint frame and the ``ee``
  frame, the world-frame 6 x N Jacobian of the ``ee`` point (linear; angular,
  as MuJoCo's ``mj_jacSite``), and ``C(q, qd) qd`` by a Newton-Euler pass with
  zero joint acceleration and no gravity (Pinocchio's ``rnea(q, qd, 0)``).
* :func:`impedance_torque` -- ``tau = J^T (Kp e - Kd J qd) [+ C qd] [+ tau_ns]``
  with the orientation-error convention, error clipping and null-space term of
  the run's :class:`~isaaclab_sysid.data.run.ImpedanceLaw`.
* :class:`TorqueDelay` -- a per-env delay of the commanded torque by ``d``
  ticks; before enough history exists, the oldest command is held (Isaac Lab's
  delay buffers do the same).

Joint PD is not computed here: the backend sends delayed position targets to
Isaac Lab's ``DelayedPDActuator`` (see ``scene.py``), except under a slew limit,
where :func:`joint_pd_torque` computes the same law in torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin
import torch

from isaaclab_sysid.robots.robot import EE_NAME, Robot


def _axis_of(joint: pin.JointModel) -> np.ndarray:
    name = joint.shortname()
    if name in ("JointModelRX", "JointModelRY", "JointModelRZ"):
        return np.eye(3)["XYZ".index(name[-1])]
    if name == "JointModelRevoluteUnaligned":
        return np.asarray(joint.axis, dtype=float) / np.linalg.norm(joint.axis)
    raise ValueError(f"the Isaac Lab backend supports revolute joints only (got {name})")


class TorchArm:
    """Kinematics and the Coriolis term of a fixed-base revolute arm, batched in torch.

    Args:
        robot: the arm (its current link inertials).
        device: torch device of every tensor.
    """

    def __init__(self, robot: Robot, device: str | torch.device = "cpu") -> None:
        model = robot.build_pinocchio(gravity=False)
        n = model.nv
        if model.nq != n or model.njoints != n + 1:
            raise ValueError("TorchArm needs one revolute joint per configuration variable")
        f64 = dict(dtype=torch.float64, device=device)
        self.n = n
        self.device = torch.device(device)
        self.parent = [int(model.parents[j]) - 1 for j in range(1, n + 1)]  # -1 = world
        self.axis = torch.tensor(np.stack([_axis_of(model.joints[j]) for j in range(1, n + 1)]), **f64)
        self.place_R = torch.tensor(np.stack([model.jointPlacements[j].rotation for j in range(1, n + 1)]), **f64)
        self.place_p = torch.tensor(np.stack([model.jointPlacements[j].translation for j in range(1, n + 1)]), **f64)
        inert = [model.inertias[j] for j in range(1, n + 1)]
        self.mass = torch.tensor([float(i.mass) for i in inert], **f64)
        self.lever = torch.tensor(np.stack([i.lever for i in inert]), **f64)
        self.inertia = torch.tensor(np.stack([i.inertia for i in inert]), **f64)
        fr = model.frames[model.getFrameId(EE_NAME)]
        self.ee_joint = int(fr.parentJoint) - 1
        self.ee_R = torch.tensor(fr.placement.rotation, **f64)
        self.ee_p = torch.tensor(fr.placement.translation, **f64)
        # joints that move the ee frame
        support = np.zeros(n, dtype=bool)
        j = self.ee_joint
        while j >= 0:
            support[j] = True
            j = self.parent[j]
        self.ee_support = torch.tensor(support, device=device)
        self.children = [[c for c in range(n) if self.parent[c] == i] for i in range(n)]

    # --------------------------------------------------------------- kinematics
    def _rot(self, q: torch.Tensor) -> torch.Tensor:
        """(E, N, 3, 3) joint rotations about each joint's axis by q (Rodrigues)."""
        a = self.axis  # (N, 3)
        c, s = torch.cos(q)[..., None, None], torch.sin(q)[..., None, None]
        K = torch.zeros(self.n, 3, 3, dtype=q.dtype, device=q.device)
        K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -a[:, 2], a[:, 1], -a[:, 0]
        K = K - K.transpose(1, 2)
        eye = torch.eye(3, dtype=q.dtype, device=q.device)
        return eye + s * K + (1.0 - c) * (K @ K)

    def frames(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World rotation (E, N, 3, 3) and origin (E, N, 3) of every joint frame at q (E, N)."""
        rot = self._rot(q)
        Rs, ps = [], []
        for i in range(self.n):
            p = self.parent[i]
            if p < 0:
                R0 = self.place_R.expand(q.shape[0], -1, -1, -1)[:, i]
                p0 = self.place_p[i].expand(q.shape[0], -1)
            else:
                R0 = Rs[p] @ self.place_R[i]
                p0 = ps[p] + (Rs[p] @ self.place_p[i][:, None])[..., 0]
            Rs.append(R0 @ rot[:, i])
            ps.append(p0)
        return torch.stack(Rs, 1), torch.stack(ps, 1)

    def ee_pose(self, R: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World rotation (E, 3, 3) and position (E, 3) of the ``ee`` frame from :meth:`frames`."""
        Rj, pj = R[:, self.ee_joint], p[:, self.ee_joint]
        return Rj @ self.ee_R, pj + (Rj @ self.ee_p[:, None])[..., 0]

    def jacobian(self, R: torch.Tensor, p: torch.Tensor, ee_pos: torch.Tensor) -> torch.Tensor:
        """(E, 6, N) world-frame Jacobian of the ``ee`` point: linear rows, then angular."""
        z = (R @ self.axis[None, :, :, None])[..., 0]  # (E, N, 3)
        lin = torch.cross(z, ee_pos[:, None, :] - p, dim=-1)
        mask = self.ee_support[None, :, None].to(z.dtype)
        return torch.cat([lin * mask, z * mask], dim=-1).transpose(1, 2)

    def coriolis(self, R: torch.Tensor, p: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """(E, N) ``C(q, qd) qd`` (Newton-Euler with zero joint acceleration, no gravity)."""
        E = qd.shape[0]
        z = (R @ self.axis[None, :, :, None])[..., 0]
        r = (R @ self.lever[None, :, :, None])[..., 0]  # com - origin, world
        I_w = R @ self.inertia[None] @ R.transpose(-1, -2)
        zero = torch.zeros(E, 3, dtype=qd.dtype, device=qd.device)
        w, wd, ao = [None] * self.n, [None] * self.n, [None] * self.n
        f, nc = [None] * self.n, [None] * self.n
        for i in range(self.n):
            par = self.parent[i]
            wp_, wdp, aop = (zero, zero, zero) if par < 0 else (w[par], wd[par], ao[par])
            zq = z[:, i] * qd[:, i : i + 1]
            w[i] = wp_ + zq
            wd[i] = wdp + torch.cross(wp_, zq, dim=-1)
            if par < 0:
                ao[i] = zero
            else:
                d = p[:, i] - p[:, par]
                ao[i] = aop + torch.cross(wdp, d, dim=-1) + torch.cross(wp_, torch.cross(wp_, d, dim=-1), dim=-1)
            ac = ao[i] + torch.cross(wd[i], r[:, i], dim=-1) + torch.cross(w[i], torch.cross(w[i], r[:, i], dim=-1), dim=-1)
            f[i] = self.mass[i] * ac
            Iw = (I_w[:, i] @ w[i][..., None])[..., 0]
            Iwd = (I_w[:, i] @ wd[i][..., None])[..., 0]
            nc[i] = Iwd + torch.cross(w[i], Iw, dim=-1)
        F, N = [None] * self.n, [None] * self.n
        tau = torch.empty_like(qd)
        for i in reversed(range(self.n)):
            Fi = f[i]
            Ni = nc[i] + torch.cross(r[:, i], f[i], dim=-1)
            for c in self.children[i]:
                Fi = Fi + F[c]
                Ni = Ni + N[c] + torch.cross(p[:, c] - p[:, i], F[c], dim=-1)
            F[i], N[i] = Fi, Ni
            tau[:, i] = (z[:, i] * Ni).sum(-1)
        return tau


class PinocchioArm:
    """The same kinematic quantities as :class:`TorchArm`, from Pinocchio, one env at a time.

    On the CPU device a per-env loop of Pinocchio calls (a few microseconds each)
    is much cheaper than dozens of tiny batched torch ops per tick; on a GPU the
    torch version avoids device round trips. Both are checked against each other.
    """

    def __init__(self, robot: Robot) -> None:
        self.model = robot.build_pinocchio(gravity=False)
        self.data = self.model.createData()
        self.fid = self.model.getFrameId(EE_NAME)
        self.n = self.model.nv

    def kinematics(self, q: torch.Tensor, qd: torch.Tensor, coriolis: bool):
        """``(R_ee (E,3,3), p_ee (E,3), J (E,6,N), C qd (E,N) or None)`` at q, qd (CPU float64)."""
        m, d, fid = self.model, self.data, self.fid
        qn, qdn = q.numpy(), qd.numpy()
        E = qn.shape[0]
        R = np.empty((E, 3, 3))
        p = np.empty((E, 3))
        J = np.empty((E, 6, self.n))
        C = np.empty((E, self.n)) if coriolis else None
        zero = np.zeros(self.n)
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        for e in range(E):
            pin.computeJointJacobians(m, d, qn[e])
            pin.updateFramePlacement(m, d, fid)
            J[e] = pin.getFrameJacobian(m, d, fid, lwa)
            R[e] = d.oMf[fid].rotation
            p[e] = d.oMf[fid].translation
            if coriolis:
                C[e] = pin.rnea(m, d, qn[e], qdn[e], zero)
        t = torch.from_numpy
        return t(R), t(p), t(J), (t(C) if coriolis else None)


def mat_to_quat_wxyz(R: torch.Tensor) -> torch.Tensor:
    """(E, 4) unit quaternions wxyz of rotation matrices (E, 3, 3) (Shepperd's method, w >= 0)."""
    m00, m11, m22 = R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]
    tr = m00 + m11 + m22
    cands = torch.stack(
        [
            torch.stack([1 + tr, R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], -1),
            torch.stack([R[:, 2, 1] - R[:, 1, 2], 1 + m00 - m11 - m22, R[:, 0, 1] + R[:, 1, 0], R[:, 0, 2] + R[:, 2, 0]], -1),
            torch.stack([R[:, 0, 2] - R[:, 2, 0], R[:, 0, 1] + R[:, 1, 0], 1 - m00 + m11 - m22, R[:, 1, 2] + R[:, 2, 1]], -1),
            torch.stack([R[:, 1, 0] - R[:, 0, 1], R[:, 0, 2] + R[:, 2, 0], R[:, 1, 2] + R[:, 2, 1], 1 - m00 - m11 + m22], -1),
        ],
        1,
    )  # (E, 4 cases, 4)
    pick = torch.stack([tr, m00, m11, m22], -1).argmax(-1)
    q = cands[torch.arange(R.shape[0], device=R.device), pick]
    q = q / q.norm(dim=-1, keepdim=True)
    return torch.where(q[:, :1] < 0, -q, q)


def _qmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    w1, x1, y1, z1 = a.unbind(-1)
    w2, x2, y2, z2 = b.unbind(-1)
    return torch.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        -1,
    )


def orientation_error(quat_des_xyzw: torch.Tensor, R: torch.Tensor, rotvec: torch.Tensor) -> torch.Tensor:
    """(E, 3) world-frame error toward the target: ``2 vec(q* q^-1)`` (short way, ``quat_2vec``), or where
    ``rotvec`` (E,) is True the rotation vector of ``R* R^T``. (``quat_vec``, libfranka's example, reaches
    here as ``quat_2vec`` at half the rotational stiffness: ``sim.schedule.backend_law``.)"""
    qd = torch.cat([quat_des_xyzw[:, 3:4], quat_des_xyzw[:, :3]], -1)
    qd = qd / qd.norm(dim=-1, keepdim=True)
    q = mat_to_quat_wxyz(R)
    qe = _qmul(qd, q * torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=q.dtype, device=q.device))
    qe = torch.where(qe[:, :1] < 0, -qe, qe)
    v = qe[:, 1:]
    s = v.norm(dim=-1, keepdim=True)
    rv = torch.where(s < 1e-15, 2.0 * v, v / s.clamp_min(1e-300) * 2.0 * torch.atan2(s, qe[:, :1]))
    return torch.where(rotvec[:, None], rv, 2.0 * v)


def clip_norm(v: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """Scale rows of ``v`` (E, 3) whose norm exceeds ``limit`` (E,) down to it (limit <= 0: no clip)."""
    n = v.norm(dim=-1)
    scale = torch.where((limit > 0) & (n > limit), limit / n.clamp_min(1e-300), torch.ones_like(n))
    return v * scale[:, None]


def impedance_torque(
    arm: TorchArm | PinocchioArm,
    q: torch.Tensor,
    qd: torch.Tensor,
    target: torch.Tensor,
    kp: torch.Tensor,
    kd: torch.Tensor,
    law: dict[str, torch.Tensor],
) -> torch.Tensor:
    """(E, N) task-space impedance torque (docs/replay.md), float64.

    Args:
        arm: :class:`TorchArm` (any device) or :class:`PinocchioArm` (CPU).
        q, qd: (E, N) joint state.
        target: (E, 7) x* ++ quat* (xyzw, unit).
        kp, kd: (E, 6) diagonal gains (xyz, then rotation).
        law: per-env tensors ``coriolis`` (bool), ``rotvec`` (bool), ``max_pos`` and
            ``max_ori`` (<= 0: no clip), ``k_ns`` (null-space stiffness) and ``q_rest`` (E, N).
    """
    use_cor = bool(law["coriolis"].any())
    if isinstance(arm, PinocchioArm):
        Re, pe, J, cqd = arm.kinematics(q, qd, use_cor)
    else:
        R, p = arm.frames(q)
        Re, pe = arm.ee_pose(R, p)
        J = arm.jacobian(R, p, pe)
        cqd = arm.coriolis(R, p, qd) if use_cor else None
    e = torch.cat(
        [
            clip_norm(target[:, :3] - pe, law["max_pos"]),
            clip_norm(orientation_error(target[:, 3:7], Re, law["rotvec"]), law["max_ori"]),
        ],
        -1,
    )
    xdot = (J @ qd[..., None])[..., 0]
    tau = (J.transpose(1, 2) @ (kp * e - kd * xdot)[..., None])[..., 0]
    if use_cor:
        tau = tau + torch.where(law["coriolis"][:, None], cqd, torch.zeros_like(tau))
    k_ns = law["k_ns"]
    if bool((k_ns > 0).any()):
        y = k_ns[:, None] * (law["q_rest"] - q) - 2.0 * torch.sqrt(k_ns)[:, None] * qd
        Jt = J.transpose(1, 2)
        proj = torch.eye(arm.n, dtype=q.dtype, device=q.device) - Jt @ torch.linalg.pinv(Jt)
        tau = tau + torch.where((k_ns > 0)[:, None], (proj @ y[..., None])[..., 0], torch.zeros_like(tau))
    return tau


def impedance_law(laws: Sequence, q_rest: np.ndarray, f64: dict) -> dict[str, torch.Tensor]:
    """The ``law`` argument of :func:`impedance_torque` for E envs.

    Args:
        laws: E impedance laws in the backends' form (``RunSchedule.law``: ``orientation_error`` ``"quat"`` or
            ``"rotvec"``).
        q_rest: (E, N) each env's null-space rest posture [rad].
        f64: ``dtype``/``device`` keyword arguments of the float64 tensors.
    """
    dev = f64["device"]
    return {
        "coriolis": torch.tensor([bool(lw.coriolis_compensation) for lw in laws], device=dev),
        "rotvec": torch.tensor([lw.orientation_error == "rotvec" for lw in laws], device=dev),
        "max_pos": torch.tensor([float(lw.max_position_error or 0.0) for lw in laws], **f64),
        "max_ori": torch.tensor([float(lw.max_orientation_error or 0.0) for lw in laws], **f64),
        "k_ns": torch.tensor([float(lw.nullspace_stiffness or 0.0) for lw in laws], **f64),
        "q_rest": torch.tensor(np.asarray(q_rest, dtype=float), **f64),
    }


def joint_pd_torque(q: torch.Tensor, qd: torch.Tensor, target: torch.Tensor, kp: torch.Tensor, kd: torch.Tensor) -> torch.Tensor:
    """(E, N) ``Kp (q* - q) - Kd qd`` (the delayed target is passed in)."""
    return kp * (target - q) - kd * qd


class TorqueDelay:
    """Per-env delay of a commanded torque by ``d`` ticks (0 = none).

    The torque applied at tick k is the one pushed at tick ``k - d``; until ``d``
    pushes have happened the oldest one is returned (the first command is held).
    """

    def __init__(self, delay: torch.Tensor, n: int, dtype=torch.float64) -> None:
        self.delay = delay.to(torch.long)
        self.depth = int(self.delay.max().item()) + 1 if self.delay.numel() else 1
        E = self.delay.shape[0]
        self.buf = torch.zeros(self.depth, E, n, dtype=dtype, device=delay.device)
        self.count = 0
        self._rows = torch.arange(E, device=delay.device)

    def push(self, cmd: torch.Tensor) -> torch.Tensor:
        """Push this tick's command; returns the delayed command to apply now."""
        self.buf[self.count % self.depth] = cmd
        self.count += 1
        lag = torch.clamp(self.delay, max=self.count - 1)
        idx = (self.count - 1 - lag) % self.depth
        return self.buf[idx, self._rows]
