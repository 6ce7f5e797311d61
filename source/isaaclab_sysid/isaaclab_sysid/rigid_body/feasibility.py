"""Physical feasibility: the all-pose audit of M(q) and the SDP reconstruction.

(a) :func:`audit_mass_matrix` asks whether the joint-space inertia M(q) implied
    by a parameter set is positive definite over a stated pose domain, sampled
    by a structured grid + uniform draws + draws from a dense region (seed 003,
    App. D-G), and reports counts, the minimum eigenvalue and the seeds.
(b) :func:`reconstruct_standard` finds standard link parameters (10 per link)
    whose every 4x4 pseudo-inertia is positive definite, consistent with the
    identified base parameters and nearest to the URDF prior: a semidefinite
    program solved with cvxpy (CLARABEL, else SCS). A feasible standard set
    makes M(q) positive definite at every pose, which the audit then confirms.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

import cvxpy as cp
import numpy as np

from isaaclab_sysid.rigid_body.base_params import BaseParameters
from isaaclab_sysid.rigid_body.regressor import Regressor


# ------------------------------------------------------------------ audit
@dataclass(frozen=True)
class PoseDomain:
    """A box of joint angles [rad] and a dense sub-box sampled more heavily.

    Attributes:
        lower, upper: (N,) the audited box.
        dense_lower, dense_upper: (N,) the dense region (inside the box).
        hold_first: M(q) does not depend on the first joint's angle (its axis
            is fixed in the world); hold it at 0 on the grid.
    """

    lower: tuple[float, ...]
    upper: tuple[float, ...]
    dense_lower: tuple[float, ...]
    dense_upper: tuple[float, ...]
    hold_first: bool = True


def default_domain(regressor: Regressor) -> PoseDomain:
    """Joint limits clipped to +-pi; dense region: the elbow (joint 3) folded, outer 25% of |range|."""
    lo = np.maximum(regressor.robot.q_lower, -np.pi)
    hi = np.minimum(regressor.robot.q_upper, np.pi)
    dlo, dhi = lo.copy(), hi.copy()
    if lo.size >= 3:
        dlo[2] = hi[2] - 0.25 * (hi[2] - lo[2])
    return PoseDomain(tuple(lo), tuple(hi), tuple(dlo), tuple(dhi))


@dataclass
class AuditResult:
    """Outcome of the all-pose audit.

    Attributes:
        passed: no pose has lambda_min(M) <= threshold.
        threshold: eigenvalue threshold [kg m^2].
        n_poses: poses checked (grid + uniform + dense, over all seeds).
        counts: poses per source ("grid", "uniform", "dense").
        n_violations: poses with lambda_min <= threshold.
        violations_by_source: the same per source.
        min_eig: smallest eigenvalue found [kg m^2].
        argmin_q: (N,) the pose where it was found [rad].
        seeds: the seeds of the random draws.
        domain: the audited domain.
    """

    passed: bool
    threshold: float
    n_poses: int
    counts: dict[str, int]
    n_violations: int
    violations_by_source: dict[str, int]
    min_eig: float
    argmin_q: list[float]
    seeds: list[int]
    domain: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return asdict(self)


def audit_poses(
    domain: PoseDomain, grid_points: int = 3, n_uniform: int = 2000, n_dense: int = 1000, seeds: tuple[int, ...] = (0,)
) -> dict[str, np.ndarray]:
    """The audit's pose set: source name -> (K, N) angles [rad]."""
    lo, hi = np.array(domain.lower), np.array(domain.upper)
    dlo, dhi = np.array(domain.dense_lower), np.array(domain.dense_upper)
    axes = [np.linspace(a, b, grid_points) for a, b in zip(lo, hi)]
    if domain.hold_first:
        axes[0] = np.array([0.0])
    grid = np.array(list(itertools.product(*axes)))
    uni, dense = [], []
    for s in seeds:
        rng = np.random.default_rng(s)
        uni.append(rng.uniform(lo, hi, size=(n_uniform, lo.size)))
        dense.append(rng.uniform(dlo, dhi, size=(n_dense, lo.size)))
    return {"grid": grid, "uniform": np.vstack(uni), "dense": np.vstack(dense)}


def min_eigenvalues(regressor: Regressor, pi: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """(K,) lambda_min(M(q)) [kg m^2] at each pose of ``poses`` (K, N) for standard ``pi`` (P,)."""
    return np.array([np.linalg.eigvalsh(regressor.mass_matrix(pi, q))[0] for q in poses])


def audit_mass_matrix(
    regressor: Regressor,
    pi: np.ndarray,
    domain: PoseDomain | None = None,
    grid_points: int = 3,
    n_uniform: int = 2000,
    n_dense: int = 1000,
    seeds: tuple[int, ...] = (0,),
    threshold: float = 0.0,
) -> AuditResult:
    """All-pose PD audit of M(q) for the standard vector ``pi`` (P,).

    Base parameters are audited by passing ``base.to_standard(pi_b)``: every
    standard vector with the same base parameters has the same M(q).
    """
    domain = domain or default_domain(regressor)
    sets = audit_poses(domain, grid_points, n_uniform, n_dense, seeds)
    counts, viol = {}, {}
    best, best_q = np.inf, None
    for name, poses in sets.items():
        lam = min_eigenvalues(regressor, np.asarray(pi, dtype=float), poses)
        counts[name] = int(poses.shape[0])
        viol[name] = int(np.sum(lam <= threshold))
        k = int(np.argmin(lam))
        if lam[k] < best:
            best, best_q = float(lam[k]), poses[k]
    n_v = sum(viol.values())
    return AuditResult(
        passed=n_v == 0,
        threshold=threshold,
        n_poses=sum(counts.values()),
        counts=counts,
        n_violations=n_v,
        violations_by_source=viol,
        min_eig=best,
        argmin_q=[float(x) for x in best_q],
        seeds=list(seeds),
        domain={**asdict(domain), "grid_points": grid_points},
    )


# -------------------------------------------------------------------- SDP
def pseudo_inertia(pi_link: np.ndarray) -> np.ndarray:
    """(4, 4) pseudo-inertia [[tr(I)/2 1 - I, h], [h^T, m]] of one link's 10 Pinocchio parameters."""
    m, h = pi_link[0], pi_link[1:4]
    I = np.array(
        [[pi_link[4], pi_link[5], pi_link[7]], [pi_link[5], pi_link[6], pi_link[8]], [pi_link[7], pi_link[8], pi_link[9]]]
    )
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
    J[:3, 3] = h
    J[3, :3] = h
    J[3, 3] = m
    return J


def link_min_eigs(pi: np.ndarray, n_links: int) -> np.ndarray:
    """(n_links,) smallest eigenvalue of each link's pseudo-inertia."""
    return np.array([np.linalg.eigvalsh(pseudo_inertia(pi[10 * i : 10 * i + 10]))[0] for i in range(n_links)])


@dataclass
class Reconstruction:
    """A physically consistent standard parameter set.

    Attributes:
        pi: (P,) standard parameters.
        mode: "exact" (base parameters reproduced exactly) or "penalized"
            (Mahalanobis distance to the identified base parameters minimized).
        status: solver status.
        solver: solver name.
        base_mahalanobis: (K pi - pi_b)^T Cov^-1 (K pi - pi_b).
        base_max_abs_error: max |K pi - pi_b|.
        link_min_eig: (n_links,) smallest pseudo-inertia eigenvalue per link.
        prior_distance: scaled distance to the prior.
    """

    pi: np.ndarray
    mode: str
    status: str
    solver: str
    base_mahalanobis: float
    base_max_abs_error: float
    link_min_eig: np.ndarray
    prior_distance: float


def _param_scale(regressor: Regressor, prior: np.ndarray) -> np.ndarray:
    floors = {"m": 0.1, "mcx": 0.01, "mcy": 0.01, "mcz": 0.01}
    scale = np.empty(regressor.n_params)
    for k, name in enumerate(regressor.param_names):
        short = name.rsplit(".", 1)[1]
        floor = floors.get(short, 1e-3 if short.startswith("I") else 0.05)
        scale[k] = max(abs(prior[k]), floor)
    return scale


def reconstruct_standard(
    regressor: Regressor,
    base: BaseParameters,
    pi_b: np.ndarray,
    cov_b: np.ndarray,
    prior: np.ndarray | None = None,
    eps: float = 1e-6,
    mode: str = "auto",
    penalty_weight: float = 1e-3,
    mass_upper_factor: float | None = None,
) -> Reconstruction:
    """Standard parameters with every pseudo-inertia >= eps I, consistent with ``pi_b``, nearest the prior.

    Args:
        regressor: defines the standard vector (P,).
        base: the base-parameter map K (b, P).
        pi_b: (b,) identified base parameters; cov_b: (b, b) their covariance.
        prior: (P,) the URDF prior (default: the regressor's robot).
        eps: margin on each pseudo-inertia's eigenvalues (and on M(q)) [kg m^2 scale].
        mode: "exact" (K pi = pi_b), "penalized" (min Mahalanobis + penalty_weight x prior
            distance), or "auto" (exact, falling back to penalized when infeasible).
        penalty_weight: weight of the prior distance in "penalized" mode.
        mass_upper_factor: optional bound m_i <= factor x prior m_i (the UR10e
            authors used 1.1); None leaves masses bounded only by feasibility.
    """
    prior = regressor.prior() if prior is None else np.asarray(prior, dtype=float)
    n_links = regressor.n_dof
    scale = _param_scale(regressor, prior)
    K = base.K
    pi = cp.Variable(regressor.n_params)
    cons = []
    for i in range(n_links):
        p = pi[10 * i : 10 * i + 10]
        Ixx, Ixy, Iyy, Ixz, Iyz, Izz = p[4], p[5], p[6], p[7], p[8], p[9]
        tr2 = 0.5 * (Ixx + Iyy + Izz)
        J = cp.bmat(
            [
                [tr2 - Ixx, -Ixy, -Ixz, p[1]],
                [-Ixy, tr2 - Iyy, -Iyz, p[2]],
                [-Ixz, -Iyz, tr2 - Izz, p[3]],
                [p[1], p[2], p[3], p[0]],
            ]
        )
        cons.append(J - eps * np.eye(4) >> 0)
    if mass_upper_factor is not None:
        for i in range(n_links):
            cons.append(pi[10 * i] <= mass_upper_factor * prior[10 * i])
    for term in ("armature", "viscous", "coulomb"):
        if term in regressor.joint_terms:
            cons.append(pi[regressor.term_slice(term)] >= 0)
    prior_term = cp.sum_squares(cp.multiply(1.0 / scale, pi - prior))
    # whitening of the base-parameter error: cov = L L^T -> ||L^-1 e||^2
    w, V = np.linalg.eigh(0.5 * (cov_b + cov_b.T))
    floor = max(1e-12 * float(w.max()), 1e-300) if w.max() > 0 else 1.0
    Linv = (V / np.sqrt(np.maximum(w, floor))).T

    def _solve(prob: cp.Problem) -> str:
        for solver in ("CLARABEL", "SCS"):
            try:
                prob.solve(solver=solver)
                if prob.status in ("optimal", "optimal_inaccurate"):
                    return solver
            except cp.error.SolverError:
                continue
        return "none"

    modes = ["exact", "penalized"] if mode == "auto" else [mode]
    for md in modes:
        if md == "exact":
            prob = cp.Problem(cp.Minimize(prior_term), cons + [K @ pi == pi_b])
        elif md == "penalized":
            maha = cp.sum_squares(Linv @ (K @ pi - pi_b))
            prob = cp.Problem(cp.Minimize(maha + penalty_weight * prior_term), cons)
        else:
            raise ValueError(f"unknown mode {md!r}; choose exact, penalized or auto")
        solver = _solve(prob)
        if solver != "none" and pi.value is not None:
            x = np.asarray(pi.value, dtype=float)
            e = K @ x - pi_b
            return Reconstruction(
                pi=x,
                mode=md,
                status=str(prob.status),
                solver=solver,
                base_mahalanobis=float(np.sum((Linv @ e) ** 2)),
                base_max_abs_error=float(np.max(np.abs(e))),
                link_min_eig=link_min_eigs(x, n_links),
                prior_distance=float(np.sqrt(np.sum(((x - prior) / scale) ** 2))),
            )
    raise RuntimeError(f"SDP reconstruction failed in mode(s) {modes}: last status {prob.status}")
