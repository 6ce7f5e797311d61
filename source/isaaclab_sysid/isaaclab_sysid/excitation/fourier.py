"""Joint-space Fourier excitation (Swevers et al. 1997), optimized for the regressor's conditioning.

Each joint follows a finite Fourier series with fundamental w = 2 pi f_base:

    q_j(t) = q0_j + sum_{l=1..L} a_jl/(w l) sin(w l t) - b_jl/(w l) cos(w l t)

so qd_j = sum a_jl cos(w l t) + b_jl sin(w l t). Starting (and, the series being
periodic, ending every period) at rest at q_init is built in: a_j1 and b_j1 are
eliminated by sum_l a_jl = 0 (qd(0) = 0) and sum_l l b_jl = 0 (qdd(0) = 0), and
q0_j = q_init_j + sum_l b_jl/(w l) (q(0) = q_init). The remaining 2(L-1) per
joint are optimized to minimize log cond(W_b) of the stacked base regressor
(see conditioning.py), subject to the joint position limits minus a margin, a
fraction of the velocity limits and the acceleration limits, checked on a
dense time grid. Since q - q_init, qd and qdd are linear in the coefficients,
the largest feasible multiple of any coefficient vector is explicit: the
optimizer (L-BFGS-B) searches over directions, each scaled onto the limits
(``fill`` of the tightest one), so every iterate is feasible by construction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.optimize

from isaaclab_sysid.excitation.conditioning import base_regressor, cond_of, condition_number
from isaaclab_sysid.excitation.limits import PANDA_DDQ_MAX, DesignLimitError
from isaaclab_sysid.robots import Robot


@dataclass(frozen=True)
class FourierSpec:
    """Parameters of the Fourier design (units in the names).

    Attributes:
        n_harmonics: L harmonics per joint (>= 2; two are spent on the rest constraints).
        f_base_hz: fundamental frequency [Hz]; one period lasts 1/f_base.
        n_periods: periods in the design (the trajectory repeats).
        joint_margin_rad: positions stay this far inside the joint limits [rad].
        speed_frac: |qd| <= speed_frac * URDF velocity limit.
        acc_max_rad_s2: (N,) |qdd| limits [rad/s^2]; None = Panda datasheet (x acc_frac).
        acc_frac: fraction of the acceleration limits used.
        n_cond_samples: samples per period the condition number is computed on.
        n_limit_samples: samples per period the limits are checked on.
        max_iter: optimizer (L-BFGS-B) iterations per start.
        fill: the design is scaled to use this fraction of its tightest limit.
        restarts: random starts (the best feasible result is kept).
        seed: RNG seed of the starts.
        friction_columns: include Coulomb + viscous friction columns in the objective.
    """

    n_harmonics: int = 5
    f_base_hz: float = 0.1
    n_periods: int = 1
    joint_margin_rad: float = 0.1
    speed_frac: float = 0.8
    acc_max_rad_s2: tuple[float, ...] | None = None
    acc_frac: float = 0.8
    n_cond_samples: int = 100
    n_limit_samples: int = 400
    max_iter: int = 100
    restarts: int = 2
    fill: float = 0.98
    seed: int = 0
    friction_columns: bool = False


@dataclass
class FourierTrajectory:
    """A Fourier trajectory: coefficients a, b (N, L) [rad/s], q0 (N,) [rad], f_base [Hz]."""

    a: np.ndarray
    b: np.ndarray
    q0: np.ndarray
    f_base_hz: float
    info: dict[str, Any] = field(default_factory=dict)

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd (T, N) at times t (T,) [s]."""
        w = 2 * np.pi * self.f_base_hz
        l = np.arange(1, self.a.shape[1] + 1)
        wl = w * l  # (L,)
        arg = np.asarray(t, dtype=float)[:, None] * wl[None, :]  # (T, L)
        s, c = np.sin(arg), np.cos(arg)
        q = self.q0[None, :] + s @ (self.a / wl).T - c @ (self.b / wl).T
        dq = c @ self.a.T + s @ self.b.T
        ddq = -s @ (self.a * wl).T + c @ (self.b * wl).T
        return q, dq, ddq


def _decode(x: np.ndarray, n: int, L: int, q_init: np.ndarray, f: float) -> FourierTrajectory:
    a = np.zeros((n, L))
    b = np.zeros((n, L))
    xa, xb = x.reshape(2, n, L - 1)
    l = np.arange(2, L + 1)
    a[:, 1:] = xa
    b[:, 1:] = xb
    a[:, 0] = -xa.sum(axis=1)
    b[:, 0] = -(xb * l).sum(axis=1)
    w = 2 * np.pi * f
    q0 = q_init + (b / (w * np.arange(1, L + 1))).sum(axis=1)
    return FourierTrajectory(a, b, q0, f)


def _limit_margins(traj: FourierTrajectory, t: np.ndarray, lo, hi, vmax, amax) -> np.ndarray:
    q, dq, ddq = traj.evaluate(t)
    # each >= 0 when feasible, normalized by its limit
    return np.concatenate([
        (hi - q.max(0)) / (hi - lo),
        (q.min(0) - lo) / (hi - lo),
        1.0 - np.abs(dq).max(0) / vmax,
        1.0 - np.abs(ddq).max(0) / amax,
    ])


def limits_of(robot: Robot, spec: FourierSpec, q_init: np.ndarray):
    """(lo, hi, vmax, amax) the design must respect, refusing a start posture outside them."""
    lo = robot.q_lower + spec.joint_margin_rad
    hi = robot.q_upper - spec.joint_margin_rad
    vmax = spec.speed_frac * robot.v_max
    if spec.acc_max_rad_s2 is not None:
        amax = spec.acc_frac * np.asarray(spec.acc_max_rad_s2, dtype=float)
    elif robot.n_dof == len(PANDA_DDQ_MAX):
        amax = spec.acc_frac * PANDA_DDQ_MAX
    else:
        raise DesignLimitError("give acc_max_rad_s2 (joint acceleration limits) for a robot that is not a Panda")
    bad = np.flatnonzero((q_init < lo) | (q_init > hi))
    if bad.size:
        j = int(bad[0])
        raise DesignLimitError(
            f"start posture joint {j + 1} = {q_init[j]:.3f} rad is within {spec.joint_margin_rad} rad of its limits"
        )
    if np.any(vmax <= 0) or np.any(amax <= 0):
        raise DesignLimitError("velocity and acceleration limits must be positive")
    return lo, hi, vmax, amax


def optimize_fourier(robot: Robot, q_init: np.ndarray, spec: FourierSpec = FourierSpec()) -> FourierTrajectory:
    """Fourier coefficients that minimize cond(W_b) within the limits.

    Raises:
        DesignLimitError: no start reached a design within the limits.
    """
    n, L = robot.n_dof, spec.n_harmonics
    if L < 2:
        raise ValueError("n_harmonics must be >= 2 (two coefficients per joint hold the rest constraints)")
    q_init = np.asarray(q_init, dtype=float)
    lo, hi, vmax, amax = limits_of(robot, spec, q_init)
    period = 1.0 / spec.f_base_hz
    t_cond = np.arange(spec.n_cond_samples) * period / spec.n_cond_samples
    t_lim = np.arange(spec.n_limit_samples) * period / spec.n_limit_samples
    model = robot.build_pinocchio()
    f = spec.f_base_hz

    def cons(x: np.ndarray) -> np.ndarray:
        return _limit_margins(_decode(x, n, L, q_init, f), t_lim, lo, hi, vmax, amax)

    def max_scale(x: np.ndarray) -> float:
        # q - q_init, qd and qdd are linear in x: the largest feasible multiple of x is explicit
        q, dq, ddq = _decode(x, n, L, q_init, f).evaluate(t_lim)
        dev = q - q_init
        with np.errstate(divide="ignore"):
            cand = np.concatenate([
                np.where(dev > 0, (hi - q_init) / dev, np.inf).ravel(),
                np.where(dev < 0, (lo - q_init) / dev, np.inf).ravel(),
                (vmax / np.abs(dq)).ravel(),
                (amax / np.abs(ddq)).ravel(),
            ])
        return float(np.min(cand))

    def feasible_of(x: np.ndarray) -> np.ndarray:
        return x * (spec.fill * max_scale(x))

    def objective(x: np.ndarray) -> float:
        traj = _decode(feasible_of(x), n, L, q_init, f)
        q, dq, ddq = traj.evaluate(t_cond)
        w = base_regressor(robot, q, dq, ddq, friction=spec.friction_columns, model=model)
        return float(np.log(min(cond_of(w), 1e12)))

    rng = np.random.default_rng(spec.seed)
    best: tuple[float, np.ndarray] | None = None
    history = []
    for r in range(max(1, spec.restarts)):
        x0 = rng.standard_normal(2 * n * (L - 1))
        x0 = x0 / np.linalg.norm(x0)
        # unconstrained in the direction of x: every x is scaled onto the limits (star-shaped set)
        res = scipy.optimize.minimize(
            lambda x: objective(x) + 1e-3 * (np.linalg.norm(x) - 1.0) ** 2, x0, method="L-BFGS-B",
            options={"maxiter": spec.max_iter, "eps": 1e-6},
        )
        x = feasible_of(res.x)
        val = objective(res.x)
        history.append({"start": r, "cond": float(np.exp(val)), "iterations": int(res.nit),
                        "evaluations": int(res.nfev), "message": str(res.message)})
        if best is None or val < best[0]:
            best = (val, x)
    assert best is not None
    if not np.all(cons(best[1]) >= -1e-9):  # cannot happen by construction; refuse rather than pass
        raise DesignLimitError("the optimized Fourier design breaks its limits")
    traj = _decode(best[1], n, L, q_init, f)
    traj.info = {
        "generator": "fourier",
        "spec": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(spec).items()},
        "cond": float(np.exp(best[0])),
        "starts": history,
        "a_rad_s": traj.a.tolist(),
        "b_rad_s": traj.b.tolist(),
        "q0_rad": traj.q0.tolist(),
        "f_base_hz": f,
    }
    return traj


def single_sinusoid(robot: Robot, q_init: np.ndarray, spec: FourierSpec = FourierSpec()) -> FourierTrajectory:
    """Baseline: q_j = q_init_j + A_j (1 - cos(w t)), one slow tone per joint, at rest at t = 0.

    Each A_j is as large as the same limits allow (position, speed, acceleration).
    """
    n = robot.n_dof
    q_init = np.asarray(q_init, dtype=float)
    lo, hi, vmax, amax = limits_of(robot, spec, q_init)
    w = 2 * np.pi * spec.f_base_hz
    room = np.minimum(hi - q_init, q_init - lo)  # 2|A| <= room in the direction chosen below
    sign = np.where(hi - q_init >= q_init - lo, 1.0, -1.0)
    amp = np.minimum.reduce([np.maximum(hi - q_init, q_init - lo) / 2.0, vmax / w, amax / w**2]) * sign
    del room
    # q = q_init + A - A cos(wt): coefficients of harmonic 1 only, b_1 = A w
    a = np.zeros((n, 1))
    b = (amp * w)[:, None]
    q0 = q_init + amp
    return FourierTrajectory(a, b, q0, spec.f_base_hz, info={"generator": "single_sinusoid", "amplitude_rad": amp.tolist()})


def trajectory_condition(robot: Robot, traj: FourierTrajectory, n_samples: int = 200, periods: int = 1,
                         friction: bool = False) -> float:
    """cond(W_b) of ``traj`` on ``n_samples`` points per period."""
    period = 1.0 / traj.f_base_hz
    t = np.arange(n_samples * periods) * period / n_samples
    q, dq, ddq = traj.evaluate(t)
    return condition_number(robot, q, dq, ddq, friction=friction)
