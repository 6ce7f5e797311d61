"""Every env's gravity and Coriolis/centrifugal joint torque, from Newton's own inverse dynamics (the load law's need).

Isaac Lab 3.0's articulation data gives the gravity torque only (``ArticulationData.gravity_compensation_forces``);
Newton 1.6's ``ArticulationView.eval_inverse_dynamics_passive`` gives both terms of the manipulator equation
``tau = M(q) qdd + C(q, qd) qd + g(q)`` for every articulation of the model, by a recursive Newton-Euler pass over the
simulated model itself (its inertials, the state's ``joint_q``/``joint_qd``): ``gravity_force`` = g(q) = dU/dq (the
torque that holds the arm still, MuJoCo's ``qfrc_bias`` at zero velocity) and ``coriolis_force`` = C(q, qd) qd (MuJoCo's
``qfrc_bias`` of a gravity-free model). Their sum is MuJoCo's ``qfrc_bias``; the torque they exert *on* the joint, the
load law's ``tau_ext``, is its negative. :class:`BiasTorques` runs that pass for one Isaac Lab articulation and gathers
its DoFs in the articulation's joint order (``ArticulationView.get_dof_forces`` reads a flat model-wide DoF buffer
through the view's own layout). Newton evaluates in float32, the precision of its state.

``carried_gravity``: a gravity-compensated arm replayed without gravity (the firmware's compensation and gravity
cancel) still carries its weight through the gearbox; g(q) under that gravity is evaluated by the same pass with the
model's gravity set to it for the call and restored after (the scene simulates none).

The generated Isaac Lab module (``export/templates/sysid_dr_isaaclab.py``: ``_bias_torques``) holds the same code, for
it imports nothing of this package.
"""

from __future__ import annotations

import torch


class _DofBuffer:
    """A flat model-wide DoF buffer as the ``joint_f`` a Newton ``ArticulationView`` reads through its layout."""

    def __init__(self, joint_f) -> None:
        self.joint_f = joint_f


class BiasTorques:
    """g(q) and C(q, qd) qd of every env of one Isaac Lab articulation on Newton, per joint (its joint order).

    Args:
        articulation: an ``isaaclab.assets.Articulation`` on the Newton physics backend.
        carried_gravity: gravity [m/s^2] along -z the gearbox carries that the simulation leaves out; its g(q) is
            :meth:`__call__`'s third output (0: none, zeros).

    Raises:
        RuntimeError: not a Newton articulation (no ``root_view.eval_inverse_dynamics_passive``).
    """

    def __init__(self, articulation, carried_gravity: float = 0.0) -> None:
        import warp as wp

        view = getattr(articulation, "root_view", None)
        if view is None or not hasattr(view, "eval_inverse_dynamics_passive"):
            raise RuntimeError("the load law's bias torque needs Newton's ArticulationView.eval_inverse_dynamics_passive "
                               f"(Isaac Lab's Newton physics); got {type(view).__name__}")
        self.view = view
        self.model = view.model
        self.device = torch.device(articulation.device)
        n = self.model.joint_dof_count
        self._g = wp.zeros(n, dtype=wp.float32, device=self.model.device)
        self._c = wp.zeros(n, dtype=wp.float32, device=self.model.device)
        self._gc = wp.zeros(n, dtype=wp.float32, device=self.model.device) if carried_gravity else None
        self.carried_gravity = float(carried_gravity)
        if self._gc is not None:
            self._saved = wp.clone(self.model.gravity)
            self._carried = wp.clone(self.model.gravity)
            self._carried.assign(wp.array([(0.0, 0.0, -self.carried_gravity)] * self.model.gravity.shape[0],
                                          dtype=self.model.gravity.dtype, device=self.model.device))
        backend, user = list(articulation.backend_joint_names), list(articulation.joint_names)
        self._cols = None if backend == user else torch.tensor([backend.index(j) for j in user], device=self.device)

    def _rows(self, flat) -> torch.Tensor:
        """(E, N) float64 of a flat model-wide DoF buffer: this articulation's DoFs, in its joint order."""
        import warp as wp

        v = wp.to_torch(self.view.get_dof_forces(_DofBuffer(flat))).to(self.device, torch.float64)
        v = v.reshape(v.shape[0] * v.shape[1], -1)
        return v if self._cols is None else v[:, self._cols]

    def __call__(self, state) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(g(q) under the simulation's gravity, C(q, qd) qd, g(q) under ``carried_gravity``), each (E, N) float64
        [N m], at ``state`` (Newton's current state: its ``joint_q``, ``joint_qd``; ``body_q`` brought up to date
        here by forward kinematics)."""
        self.view.eval_fk(state)
        self.view.eval_inverse_dynamics_passive(state, gravity_force=self._g, coriolis_force=self._c)
        g, cqd = self._rows(self._g), self._rows(self._c)
        if self._gc is None:
            return g, cqd, torch.zeros_like(g)
        gravity = self.model.gravity
        self._saved.assign(gravity)
        gravity.assign(self._carried)
        try:
            self.view.eval_inverse_dynamics_passive(state, gravity_force=self._gc)
        finally:
            gravity.assign(self._saved)
        return g, cqd, self._rows(self._gc)


def newton_state():
    """Newton's current simulation state (the one the next step starts from)."""
    from isaaclab_newton.physics import NewtonManager

    return NewtonManager.get_state_0()
