"""Condition number of the base regressor stacked over a trajectory.

The joint-torque regressor Y(q, qd, qdd) (Pinocchio's
``computeJointTorqueRegressor``: tau = Y theta, 10 inertial parameters per
link, gravity included) is stacked over the trajectory's samples. Its base
columns — a maximal set of linearly independent columns — are found once per
robot by column-pivoted QR (``scipy.linalg.qr(pivoting=True)``) on random,
generic samples, so a poor design cannot hide its rank loss by dropping
columns: it is scored on the same base columns as every other design.

The score is cond(W_b) = sigma_max / sigma_min of the stacked base regressor
(the 2-norm condition number; the normal matrix W_b^T W_b has its square).
Optional columns append the per-joint friction (Coulomb sign(qd), viscous qd)
and armature (qdd) regressors.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pinocchio as pin
import scipy.linalg

from isaaclab_sysid.robots import Robot, load_robot


def stacked_regressor(model: pin.Model, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
    """(T*N, 10*N) joint-torque regressor of every sample, stacked."""
    data = model.createData()
    n = model.nv
    out = np.empty((len(q) * n, 10 * n))
    for k in range(len(q)):
        out[k * n:(k + 1) * n] = pin.computeJointTorqueRegressor(model, data, q[k], dq[k], ddq[k])
    return out


def _extra_columns(dq: np.ndarray, ddq: np.ndarray, friction: bool, armature: bool) -> np.ndarray:
    t, n = dq.shape
    blocks = []
    if friction:
        blocks += [np.sign(dq), dq]
    if armature:
        blocks += [ddq]
    if not blocks:
        return np.zeros((t * n, 0))
    cols = []
    for b in blocks:
        m = np.zeros((t, n, n))
        m[:, np.arange(n), np.arange(n)] = b
        cols.append(m.reshape(t * n, n))
    return np.concatenate(cols, axis=1)


@lru_cache(maxsize=8)
def _base_columns(robot_name: str, n_samples: int, seed: int, rel_tol: float) -> tuple[int, ...]:
    robot = load_robot(robot_name)
    model = robot.build_pinocchio()
    rng = np.random.default_rng(seed)
    lo, hi = robot.q_lower, robot.q_upper
    q = lo + (hi - lo) * rng.uniform(size=(n_samples, robot.n_dof))
    dq = rng.uniform(-2, 2, size=q.shape)
    ddq = rng.uniform(-5, 5, size=q.shape)
    w = stacked_regressor(model, q, dq, ddq)
    _, r, piv = scipy.linalg.qr(w, mode="economic", pivoting=True)
    d = np.abs(np.diag(r))
    rank = int(np.sum(d > rel_tol * d[0]))
    return tuple(sorted(int(i) for i in piv[:rank]))


def base_columns(robot: Robot, n_samples: int = 400, seed: int = 0, rel_tol: float = 1e-8) -> np.ndarray:
    """Indices of the base (independent) columns of the robot's regressor, from generic random samples."""
    return np.array(_base_columns(robot.name, n_samples, seed, rel_tol))


def base_regressor(
    robot: Robot, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, friction: bool = False, armature: bool = False,
    model: pin.Model | None = None,
) -> np.ndarray:
    """(T*N, b [+ 2N friction] [+ N armature]) stacked base regressor of a trajectory."""
    model = model or robot.build_pinocchio()
    w = stacked_regressor(model, q, dq, ddq)[:, base_columns(robot)]
    return np.concatenate([w, _extra_columns(dq, ddq, friction, armature)], axis=1)


def cond_of(w: np.ndarray) -> float:
    """sigma_max / sigma_min of a tall matrix, via the eigenvalues of its Gram matrix.

    The Gram matrix is formed with einsum (no multithreaded BLAS: a threaded SVD
    of a tall matrix is ~100x slower on a loaded 2-core machine); exact to
    about 1e-7 relative for condition numbers below 1e6. Rank-deficient -> inf.
    """
    g = np.einsum("ij,ik->jk", w, w)
    ev = np.linalg.eigvalsh(g)
    if ev[0] <= ev[-1] * 1e-15:
        return float("inf")
    return float(np.sqrt(ev[-1] / ev[0]))


def condition_number(
    robot: Robot, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, stride: int = 1,
    friction: bool = False, armature: bool = False,
) -> float:
    """cond(W_b) of the trajectory sampled every ``stride`` rows (inf when rank-deficient)."""
    sl = slice(None, None, stride)
    return cond_of(base_regressor(robot, q[sl], dq[sl], ddq[sl], friction, armature))
