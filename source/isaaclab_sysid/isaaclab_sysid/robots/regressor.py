"""Joint-torque regressor: Pinocchio's 10 inertial parameters per link plus joint terms.

The model, per sample and joint j (N joints, T samples)::

    tau_j = (Y_rb(q, qd, qdd) pi_links)_j + Ia_j qdd_j + Fv_j qd_j + Fc_j sign(qd_j) + F0_j

The output may be motor current instead of torque: ``i_j = tau_j / k_j`` with drive
gains ``k`` [N m / A]; the regressor rows of joint j are then divided by ``k_j``.

Standard parameter vector (length P = 10 N + N per enabled joint term), in order:
link blocks (m [kg], m c [kg m], I_origin xx, xy, yy, xz, yz, zz [kg m^2]) in
Pinocchio's order, then armature [kg m^2], viscous [N m s/rad], Coulomb [N m],
offset [N m] per joint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from isaaclab_sysid.robots import LinkInertial, Robot

#: Names of Pinocchio's 10 dynamic parameters of one link.
LINK_PARAM_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
JOINT_TERMS = ("armature", "viscous", "coulomb", "offset")


@dataclass(frozen=True)
class RegressorOptions:
    """Which per-joint columns to add to the rigid-body regressor.

    Attributes:
        armature, viscous, coulomb, offset: include that term for every joint.
        coulomb_smoothing: velocity scale [rad/s] of ``tanh(qd / s)`` replacing
            ``sign(qd)``; 0 keeps the plain sign.
        coulomb_deadband: |qd| [rad/s] below which the Coulomb column is 0 (a joint at rest).
        gravity: include gravity in the rigid-body part (off for gravity-compensated logs).
    """

    armature: bool = True
    viscous: bool = True
    coulomb: bool = True
    offset: bool = True
    coulomb_smoothing: float = 0.0
    coulomb_deadband: float = 0.0
    gravity: bool = True


class Regressor:
    """Builds regressor matrices for one :class:`Robot`.

    Args:
        robot: the arm (its current link inertials are the prior).
        options: joint terms and gravity.
    """

    def __init__(self, robot: Robot, options: RegressorOptions | None = None) -> None:
        self.robot = robot
        self.options = options or RegressorOptions()
        self.model = robot.build_pinocchio(gravity=self.options.gravity)
        self.data = self.model.createData()
        self.n_dof = robot.n_dof
        self.link_names = robot.link_names
        self.joint_terms = tuple(t for t in JOINT_TERMS if getattr(self.options, t))
        names = [f"{link}.{p}" for link in self.link_names for p in LINK_PARAM_NAMES]
        for term in self.joint_terms:
            names += [f"{j}.{term}" for j in robot.joint_names]
        self.param_names: tuple[str, ...] = tuple(names)

    @property
    def n_params(self) -> int:
        """Number P of standard parameters."""
        return len(self.param_names)

    @property
    def n_link_params(self) -> int:
        """10 N."""
        return 10 * self.n_dof

    def term_slice(self, term: str) -> slice:
        """Columns of one joint term (``"armature"``, ...) in the standard vector."""
        k = self.joint_terms.index(term)
        start = self.n_link_params + k * self.n_dof
        return slice(start, start + self.n_dof)

    # ------------------------------------------------------------ parameters
    def prior(self) -> np.ndarray:
        """(P,) the robot's URDF (or overridden) link parameters, joint terms zero."""
        pi = np.zeros(self.n_params)
        for j in range(1, self.model.njoints):
            pi[10 * (j - 1) : 10 * j] = self.model.inertias[j].toDynamicParameters()
        return pi

    def link_inertials(self, pi: np.ndarray) -> dict[str, LinkInertial]:
        """Link name -> :class:`LinkInertial` from the first 10 N entries of ``pi``."""
        return {name: LinkInertial.from_pi(pi[10 * i : 10 * i + 10]) for i, name in enumerate(self.link_names)}

    # -------------------------------------------------------------- matrices
    def rows(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """(T, N, P) regressor of torque [N m] at T samples of (T, N) q [rad], qd [rad/s], qdd [rad/s^2]."""
        q, qd, qdd = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, qd, qdd))
        n = self.n_dof
        if not (q.shape == qd.shape == qdd.shape and q.shape[1] == n):
            raise ValueError(f"q, qd, qdd must all be (T, {n}); got {q.shape}, {qd.shape}, {qdd.shape}")
        T = q.shape[0]
        out = np.zeros((T, n, self.n_params))
        for t in range(T):
            out[t, :, : 10 * n] = pin.computeJointTorqueRegressor(self.model, self.data, q[t], qd[t], qdd[t])
        eye = np.eye(n)
        for term in self.joint_terms:
            if term == "armature":
                sig = qdd
            elif term == "viscous":
                sig = qd
            elif term == "coulomb":
                s = self.options.coulomb_smoothing
                sig = np.tanh(qd / s) if s > 0 else np.sign(qd)
                if self.options.coulomb_deadband > 0:
                    sig = np.where(np.abs(qd) < self.options.coulomb_deadband, 0.0, sig)
            else:
                sig = np.ones_like(qd)
            out[:, :, self.term_slice(term)] = sig[:, :, None] * eye[None]
        return out

    def matrix(
        self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, gains: np.ndarray | None = None
    ) -> np.ndarray:
        """(T N, P) stacked regressor, rows sample-major (row t N + j is joint j at sample t).

        With ``gains`` (N,) [N m / A] the output is motor current [A]: rows of joint j / gains[j].
        """
        Y = self.rows(q, qd, qdd)
        if gains is not None:
            g = np.asarray(gains, dtype=float)
            if g.shape != (self.n_dof,) or np.any(g <= 0):
                raise ValueError(f"gains must be ({self.n_dof},) and positive; got {g}")
            Y = Y / g[None, :, None]
        return Y.reshape(-1, self.n_params)

    def predict(
        self, pi: np.ndarray, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, gains: np.ndarray | None = None
    ) -> np.ndarray:
        """(T, N) predicted torque [N m] (or current [A] with ``gains``) for standard parameters ``pi`` (P,)."""
        return (self.matrix(q, qd, qdd, gains) @ np.asarray(pi, dtype=float)).reshape(-1, self.n_dof)

    def mass_matrix(self, pi: np.ndarray, q: np.ndarray) -> np.ndarray:
        """(N, N) joint-space inertia M(q) [kg m^2] implied by ``pi`` (P,), armature included.

        Computed from the regressor (v = 0, a = e_k, no gravity), so any ``pi`` works,
        including non-physical ones and base parameters expanded with zero dependents.
        """
        n = self.n_dof
        z = np.zeros(n)
        saved = self.model.gravity.linear.copy()
        self.model.gravity.linear[:] = 0.0
        try:
            M = np.empty((n, n))
            for k in range(n):
                a = np.zeros(n)
                a[k] = 1.0
                M[:, k] = pin.computeJointTorqueRegressor(self.model, self.data, q, z, a) @ pi[: 10 * n]
        finally:
            self.model.gravity.linear[:] = saved
        if "armature" in self.joint_terms:
            M[np.diag_indices(n)] += pi[self.term_slice("armature")]
        return 0.5 * (M + M.T)
