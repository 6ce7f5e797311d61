"""Log-Cholesky coordinates of one body's inertial parameters (Rucker & Wensing, 2022).

A rigid body's 10 standard parameters (Pinocchio order: m, m c, I_origin xx, xy, yy, xz,
yz, zz) are physically consistent exactly when its 4x4 pseudo-inertia

    J = [[Sigma, h], [h^T, m]],   Sigma = tr(I)/2 1 - I,   h = m c

is positive definite. Every such J is ``U U^T`` for one upper-triangular U with a
positive diagonal, written with 10 unconstrained reals theta = (alpha, d1, d2, d3, s12,
s23, s13, t1, t2, t3):

    U = exp(alpha) [[e^d1, s12, s13, t1],
                    [0,    e^d2, s23, t2],
                    [0,    0,    e^d3, t3],
                    [0,    0,    0,    1 ]]

so any theta in R^10 is a physical body and every physical body has one theta: a
search in these coordinates never leaves the feasible set (Rucker and Wensing, "Smooth parameterization of rigid-body inertia",
IEEE RA-L 2022).
"""

from __future__ import annotations

import numpy as np

#: Names of the 10 log-Cholesky coordinates, in order.
COORD_NAMES = ("alpha", "d1", "d2", "d3", "s12", "s23", "s13", "t1", "t2", "t3")


def pseudo_inertia(pi_link: np.ndarray) -> np.ndarray:
    """(4, 4) pseudo-inertia of one body's 10 Pinocchio parameters (see module docstring)."""
    p = np.asarray(pi_link, dtype=float)
    m, h = p[0], p[1:4]
    inertia = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = h
    J[3, :3] = h
    J[3, 3] = m
    return J


def from_pseudo_inertia(J: np.ndarray) -> np.ndarray:
    """(10,) Pinocchio parameters of a (4, 4) pseudo-inertia (inverse of :func:`pseudo_inertia`)."""
    sigma = J[:3, :3]
    inertia = np.trace(sigma) * np.eye(3) - sigma
    return np.array([J[3, 3], J[0, 3], J[1, 3], J[2, 3],
                     inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2], inertia[1, 2], inertia[2, 2]])


def to_log_cholesky(pi_link: np.ndarray) -> np.ndarray:
    """(10,) log-Cholesky coordinates of one physically consistent body (10 Pinocchio parameters).

    Raises:
        ValueError: the body's pseudo-inertia is not positive definite (no coordinates exist).
    """
    J = pseudo_inertia(pi_link)
    rev = J[::-1, ::-1]  # J = U U^T with U upper <=> rev(J) = L L^T with L = rev(U) lower
    try:
        L = np.linalg.cholesky(rev)
    except np.linalg.LinAlgError:
        ev = np.linalg.eigvalsh(J)[0]
        raise ValueError(f"pseudo-inertia not positive definite (smallest eigenvalue {ev:.3g}): "
                         "no log-Cholesky coordinates") from None
    U = L[::-1, ::-1]
    e_alpha = U[3, 3]
    V = U / e_alpha
    return np.array([np.log(e_alpha), np.log(V[0, 0]), np.log(V[1, 1]), np.log(V[2, 2]),
                     V[0, 1], V[1, 2], V[0, 2], V[0, 3], V[1, 3], V[2, 3]])


def from_log_cholesky(theta: np.ndarray) -> np.ndarray:
    """(10,) Pinocchio parameters of one body from its (10,) log-Cholesky coordinates (always physical)."""
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = np.asarray(theta, dtype=float)
    U = np.exp(a) * np.array([[np.exp(d1), s12, s13, t1],
                              [0.0, np.exp(d2), s23, t2],
                              [0.0, 0.0, np.exp(d3), t3],
                              [0.0, 0.0, 0.0, 1.0]])
    return from_pseudo_inertia(U @ U.T)


def bodies_from_log_cholesky(theta: np.ndarray) -> np.ndarray:
    """(B, 10) Pinocchio parameters of (B, 10) coordinates."""
    return np.array([from_log_cholesky(t) for t in np.atleast_2d(theta)])


def parameter_jacobian(theta: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """(10, 10) d pi / d theta of one body by central differences (pi is a smooth polynomial-exponential map)."""
    theta = np.asarray(theta, dtype=float)
    out = np.empty((10, 10))
    for k in range(10):
        e = np.zeros(10)
        e[k] = step
        out[:, k] = (from_log_cholesky(theta + e) - from_log_cholesky(theta - e)) / (2 * step)
    return out
