"""The arm's own rigid-body torque from its link inertials, for stages that subtract it.

Built on the rigid-body regressor (``rigid_body.regressor``, Pinocchio) with the link
columns only: ``tau_arm(q, qd, qdd) = Y(q, qd, qdd) pi_arm``, pi_arm the robot's link
inertials (the URDF's, or the least-squares result applied with :func:`with_body_inertials`).
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.data import Run
from isaaclab_sysid.rigid_body.regressor import Regressor, RegressorOptions
from isaaclab_sysid.robots import LinkInertial, Robot


def gravity_in_signal(run: Run, signal: str) -> bool:
    """Whether a run's torque ``signal`` holds the arm's gravity torque: the measured ``tau_J`` does
    (a link-side sensor reads it; libfranka's does), the commanded ``tau`` only when the controller
    does not compensate gravity (``meta.gravity_compensated``)."""
    return signal == "tau_J" or not run.meta.gravity_compensated


class ArmModel:
    """Link-only regressors of one robot (with and without gravity), built on demand."""

    def __init__(self, robot: Robot) -> None:
        self.robot = robot
        self.n_dof = robot.n_dof
        self._reg: dict[bool, Regressor] = {}

    def regressor(self, gravity: bool = True) -> Regressor:
        if gravity not in self._reg:
            opts = RegressorOptions(armature=False, viscous=False, coulomb=False, offset=False, gravity=gravity)
            self._reg[gravity] = Regressor(self.robot, opts)
        return self._reg[gravity]

    def arm_torque(self, q: np.ndarray, qd: np.ndarray | None = None, qdd: np.ndarray | None = None,
                   gravity: bool = True) -> np.ndarray:
        """(T, N) the arm's rigid-body torque [N m] (no payload, no joint friction) at (T, N) q, qd, qdd
        (qd, qdd default to 0)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        qd = np.zeros_like(q) if qd is None else qd
        qdd = np.zeros_like(q) if qdd is None else qdd
        reg = self.regressor(gravity)
        return reg.predict(reg.prior(), q, qd, qdd)

    def body_inertials(self) -> dict[str, LinkInertial]:
        """Each moving body's inertials (Pinocchio's, fixed children merged in)."""
        reg = self.regressor(True)
        return reg.link_inertials(reg.prior())


def with_body_inertials(robot: Robot, bodies: dict[str, LinkInertial]) -> Robot:
    """``robot`` whose moving bodies (Pinocchio's, one per joint, fixed children merged in) have
    the given inertials.

    ``Robot.with_inertials`` overrides one URDF link; Pinocchio then merges the links fixed
    to it (the Franka's hand and fingers into link 7), so overriding a link with a merged
    body's inertials counts those children twice. Here each override is the target minus
    the children's share ``C = merged(X0) - X0`` (in the additive 10-parameter form).
    """
    current = ArmModel(robot).body_inertials()
    probe = ArmModel(robot.with_inertials({n: current[n] for n in bodies})).body_inertials()
    out = {}
    for n, target in bodies.items():
        children = probe[n].to_pi() - current[n].to_pi()
        out[n] = LinkInertial.from_pi(target.to_pi() - children)
    return robot.with_inertials(out)
