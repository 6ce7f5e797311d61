"""An analytic stand-in for a physics backend, for unit tests of the fit loop only.

Its rollout is a closed-form function of the candidate's parameters: the
recorded states plus an error that vanishes at ``TRUE`` (the recovery proof
uses the real MuJoCo backend; this only exercises the optimizer machinery).
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, ReplayOptions, RunRollout, check_supported

TRUE = {
    "armature": np.array([0.30, 0.25, 0.20, 0.15, 0.05, 0.08, 0.02]),
    "friction": np.array([1.0, 2.0, 0.5, 1.5, 0.3, 0.4, 0.2]),
    "viscous": np.array([0.5, 1.0, 0.8, 0.6, 0.2, 0.3, 0.1]),
    "delay": 2,
}


class FakeBackend(ReplayBackend):
    """rollout = recorded states + parameter error x fixed basis signals (no physics)."""

    name = "fake"
    supported_groups = frozenset({"armature", "friction", "viscous", "delay"})
    options = ReplayOptions()

    def __init__(self, diverge_friction_above: float | None = None) -> None:
        self.calls = 0
        self.diverge_friction_above = diverge_friction_above

    def rollout(self, batch: CandidateBatch, runs):
        check_supported(batch, self.supported_groups, self.name)
        self.calls += 1
        P = batch.size
        out = []
        for r, run in enumerate(runs):
            T, N = run.q.shape
            t = np.arange(T) / T
            err = np.zeros((P, T, N))
            for k, g in enumerate(("armature", "friction", "viscous")):
                v = getattr(batch, g)
                if v is None:
                    continue
                basis = np.sin(2 * np.pi * (k + 1 + r) * t[:, None] + np.arange(N)[None, :])  # (T, N)
                err += (v - TRUE[g])[:, None, :] * basis[None] * 0.05
            if batch.delay is not None:
                err += (batch.delay - TRUE["delay"])[:, None, None] * 0.01 * np.cos(3 * np.pi * t)[None, :, None]
            q = run.q[None] + err
            dq = run.dq[None] + 2.0 * err
            ee = np.broadcast_to(run.ee_pos[None], (P, T, 3)) + err[:, :, :3]
            diverged = np.zeros(P, dtype=bool)
            if self.diverge_friction_above is not None and batch.friction is not None:
                diverged = batch.friction[:, 0] > self.diverge_friction_above
                q = np.where(diverged[:, None, None], np.nan, q)
            out.append(
                RunRollout(
                    q=q, dq=dq, ee_pos=ee, ee_quat=np.broadcast_to(run.ee_quat[None], (P, T, 4)),
                    tau=np.zeros((P, T, N)), diverged=diverged,
                )
            )
        return out
