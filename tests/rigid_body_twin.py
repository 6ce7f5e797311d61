"""Shared helpers of the rigid-body tests: a UR10e digital twin with known parameters."""

from __future__ import annotations

import functools

import numpy as np
from isaaclab_sysid.rigid_body.base_params import compute_base_parameters
from isaaclab_sysid.robots.regressor import Regressor
from isaaclab_sysid.robots import load_robot


@functools.lru_cache(maxsize=1)
def twin():
    """(regressor, base, pi_true (P,), pi_prior (P,))."""
    reg = Regressor(load_robot("ur10e"))
    base = compute_base_parameters(reg, n_samples=200, seed=0)
    prior = reg.prior()
    rng = np.random.default_rng(123)
    true = prior.copy()
    inert = reg.link_inertials(prior)
    from isaaclab_sysid.robots import LinkInertial

    for i, (name, li) in enumerate(inert.items()):
        # a physically consistent perturbation: mass x U(0.9, 1.2), com shifted 1 cm
        li2 = LinkInertial(li.mass * rng.uniform(0.9, 1.2), li.com + rng.normal(0, 0.01, 3), li.inertia * 1.1)
        true[10 * i : 10 * i + 10] = li2.to_pi()
    n = reg.n_dof
    true[reg.term_slice("armature")] = [0.5, 0.5, 0.3, 0.05, 0.05, 0.05]
    true[reg.term_slice("viscous")] = [8.0, 8.0, 4.0, 1.0, 1.0, 1.0]
    true[reg.term_slice("coulomb")] = [6.0, 6.0, 3.0, 1.0, 1.0, 1.0]
    true[reg.term_slice("offset")] = rng.normal(0, 0.2, n)
    return reg, base, true, prior


def fourier_trajectory(n_dof: int, T: int, dt: float, seed: int = 0, harmonics: int = 4, f0: float = 0.1):
    """Exact (q, qd, qdd) (T, N) of a random finite Fourier series per joint."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) * dt
    w = 2 * np.pi * f0 * np.arange(1, harmonics + 1)
    a = rng.normal(0, 0.5, (n_dof, harmonics)) / np.arange(1, harmonics + 1)
    b = rng.normal(0, 0.5, (n_dof, harmonics)) / np.arange(1, harmonics + 1)
    q0 = rng.uniform(-1.0, 1.0, n_dof)
    s, c = np.sin(np.outer(t, w)), np.cos(np.outer(t, w))
    q = q0 + (s @ (a / w).T) - (c @ (b / w).T)
    qd = c @ a.T + s @ b.T
    qdd = -(s @ (a * w).T) + c @ (b * w).T
    return t, q, qd, qdd


def closed_loop_run(reg, true, ctrl, seed: int, T: int = 4000, dt: float = 0.005, d_std: float = 0.3,
                    kp: float = 400.0, kd: float = 40.0):
    """The twin tracking a Fourier reference under computed-torque control built on the model
    ``ctrl`` (P,), with a white actuator disturbance d ~ N(0, d_std^2) [N m] per control period.

    Returns (reference (q, qd, qdd), measured (q, qd, qdd), commanded torque), each (T, N):
    the logged torque is the command, so ``tau = Y(q, qd, qdd) pi_true - d`` and the
    regressor, through the closed loop, is correlated with d (why closed-loop data need instrumental variables).
    """
    n = reg.n_dof
    _, qr, qdr, qddr = fourier_trajectory(n, T, dt, seed=seed, f0=0.1)
    rng = np.random.default_rng(1000 + seed)
    q, qd = qr[0].copy(), qdr[0].copy()
    Q, QD, QDD, TAU = (np.zeros((T, n)) for _ in range(4))
    zero = np.zeros((1, n))
    for k in range(T):
        e, ed = qr[k] - q, qdr[k] - qd
        tau = reg.mass_matrix(ctrl, q) @ (qddr[k] + kp * e + kd * ed) + reg.predict(ctrl, q[None], qd[None], zero)[0]
        d = rng.normal(0.0, d_std, n)
        b = reg.predict(true, q[None], qd[None], zero)[0]
        qdd = np.linalg.solve(reg.mass_matrix(true, q), tau + d - b)
        Q[k], QD[k], QDD[k], TAU[k] = q, qd, qdd, tau
        qd = qd + dt * qdd  # semi-implicit Euler
        q = q + dt * qd
    return (qr, qdr, qddr), (Q, QD, QDD), TAU
