"""The replay backend whose candidates carry their own link inertials.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from isaaclab_sysid.arm_model import ArmModel
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.rigid_body.log_cholesky import pseudo_inertia
from isaaclab_sysid.robots import LinkInertial, Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, RunRollout
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend


@dataclass(frozen=True)
class BodyFields:
    """MuJoCo inertial fields of the moving bodies for P candidates.

    Attributes:
        mass: (P, N) [kg]; ipos: (P, N, 3) [m]; iquat: (P, N, 4) wxyz; inertia: (P, N, 3) principal [kg m^2].
        valid: (P,) False where a body's own share (the target minus its fixed children) is not physical.
    """

    mass: np.ndarray
    ipos: np.ndarray
    iquat: np.ndarray
    inertia: np.ndarray
    valid: np.ndarray


class InertialBackend(MujocoBackend):
    """The MuJoCo replay backend with per-candidate inertials of the moving bodies.

    A candidate's moving body j (Pinocchio's body of joint j: the joint's child link with the
    links fixed to it merged in, e.g. the Franka's hand and fingers in link 7) gets the 10
    parameters ``links[p, j]``, expressed in the joint's frame. The MuJoCo model keeps fixed links
    as separate welded bodies, so the whole merged inertial is written into the joint's body and
    the welded children get zero mass (the same rigid body; the sites, e.g. ``ee``, stay where
    they are). The fields are written into the worker's model copy before the native replay
    recomputes the model constants (``mj_setConst``), so a candidate's dynamics are those of a
    model compiled with its inertials (tests/test_clie.py checks it against
    :func:`~isaaclab_sysid.arm_model.with_body_inertials`). Plain :meth:`rollout` replays the
    robot's own inertials.

    Args:
        robot: the arm (its link inertials are the nominal ones).
        options: replay semantics knobs.
        n_threads, chunk_size: as :class:`MujocoBackend`.
    """

    def __init__(self, robot: Robot, options: ReplayOptions | None = None, *, n_threads: int | None = None,
                 chunk_size: int = 64) -> None:
        super().__init__(robot, options, n_threads=n_threads, chunk_size=chunk_size)
        m = self._model
        self._bodies = np.array([int(m.jnt_bodyid[j]) for j in range(self.n_dof)])
        moving = set(self._bodies.tolist())
        welded = []
        for b in range(1, m.nbody):
            a = b
            while a > 0 and m.body_jntnum[a] == 0:
                a = int(m.body_parentid[a])
            if a in moving and a != b:
                welded.append(b)
        #: MuJoCo ids of the bodies welded to a moving body (their inertial is merged into it)
        self.welded = np.array(welded, dtype=int)
        #: (N, 10) each moving body's nominal parameters (Pinocchio's merged bodies)
        self.nominal_links = np.array([li.to_pi() for li in ArmModel(robot).body_inertials().values()])
        self._nominal_fields = self.fields(self.nominal_links[None])
        self._pending: BodyFields | None = None
        self._call = threading.Lock()

    def fields(self, links: np.ndarray) -> BodyFields:
        """MuJoCo fields of (P, N, 10) moving-body parameters; a body whose pseudo-inertia is not
        positive definite makes its candidate invalid."""
        links = np.asarray(links, dtype=float)
        P, n = links.shape[0], self.n_dof
        if links.shape != (P, n, 10):
            raise ValueError(f"links must be (P, {n}, 10); got {links.shape}")
        mass, ipos = np.zeros((P, n)), np.zeros((P, n, 3))
        iquat, inertia = np.tile([1.0, 0, 0, 0], (P, n, 1)), np.zeros((P, n, 3))
        valid = np.all(np.isfinite(links), axis=(1, 2))
        for p in range(P):
            for j in range(n):
                if not valid[p] or np.linalg.eigvalsh(pseudo_inertia(links[p, j]))[0] <= 0:
                    valid[p] = False
                    continue
                li = LinkInertial.from_pi(links[p, j])
                ev, vec = np.linalg.eigh(0.5 * (li.inertia + li.inertia.T))
                if np.linalg.det(vec) < 0:
                    vec[:, 0] *= -1.0
                q = np.zeros(4)
                mujoco.mju_mat2Quat(q, vec.ravel())
                mass[p, j], ipos[p, j], iquat[p, j], inertia[p, j] = li.mass, li.com, q, ev
        return BodyFields(mass, ipos, iquat, inertia, valid)

    def rollout_links(self, batch: CandidateBatch, links: np.ndarray, runs: Sequence[Run], *,
                      with_command: bool = False) -> list[RunRollout]:
        """Replay P candidates: joint groups from ``batch``, moving-body parameters ``links`` (P, N, 10).

        A candidate with a non-physical body is returned diverged (NaN states) without a replay.
        """
        if np.shape(links)[0] != batch.size:
            raise ValueError(f"{np.shape(links)[0]} inertial sets for {batch.size} candidates")
        pending = self.fields(links)
        with self._call:
            self._pending = pending
            try:
                return super().rollout(batch, runs, with_command=with_command)
            finally:
                self._pending = None

    def rollout(self, batch: CandidateBatch, runs: Sequence[Run], **kwargs) -> list[RunRollout]:
        """:meth:`MujocoBackend.rollout` with the robot's own inertials."""
        with self._call:
            return super().rollout(batch, runs, **kwargs)

    def _run_job(self, s, dist, params, p, out, *rest) -> None:  # noqa: ANN001 - MujocoBackend's own job
        # one (candidate, run[, window]) job of MujocoBackend.rollout: write candidate p's bodies, then replay
        f = self._pending
        k = p
        if f is None:
            f, k = self._nominal_fields, 0
        if not f.valid[k]:
            out.diverged[p] = True
            for arr in (out.q, out.dq, out.ee_pos, out.ee_quat, out.tau, *out.extra.values()):
                arr[p] = np.nan
            return
        model, _ = self._worker()
        b = self._bodies
        model.body_mass[b] = f.mass[k]
        model.body_ipos[b] = f.ipos[k]
        model.body_iquat[b] = f.iquat[k]
        model.body_inertia[b] = f.inertia[k]
        if self.welded.size:
            model.body_mass[self.welded] = 0.0
            model.body_inertia[self.welded] = 0.0
        super()._run_job(s, dist, params, p, out, *rest)
