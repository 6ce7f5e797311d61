"""Physical feasibility: the all-pose audit of M(q) and the SDP reconstruction.

(a) :func:`audit_mass_matrix` asks whether the joint-space inertia M(q) implied
    by a parameter set is positive definite over a stated pose domain, sampled
    by a structured grid + uniform draws + draws from a dense region, and reports counts, the minimum eigenvalue
    and the seeds.
(b) :func:`reconstruct_standard` finds standard link parameters (10 per link)
    whose every 4x4 pseudo-inertia is positive definite, consistent with the
    identified base parameters (Mahalanobis distance under their covariance) and
    nearest to the URDF prior (a Gaussian prior with a relative std per
    parameter): a semidefinite program solved with cvxpy (CLARABEL, else SCS). A feasible standard set
    makes M(q) positive definite at every pose, which the audit then confirms.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

import cvxpy as cp
import numpy as np

from isaaclab_sysid.rigid_body.base_params import BaseParameters
from isaaclab_sysid.rigid_body.estimate import whitener
from isaaclab_sysid.rigid_body.log_cholesky import pseudo_inertia
from isaaclab_sysid.robots.regressor import Regressor


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
def link_min_eigs(pi: np.ndarray, n_links: int) -> np.ndarray:
    """(n_links,) smallest eigenvalue of each link's pseudo-inertia."""
    return np.array([np.linalg.eigvalsh(pseudo_inertia(pi[10 * i : 10 * i + 10]))[0] for i in range(n_links)])


@dataclass
class Reconstruction:
    """A physically consistent standard parameter set.

    Attributes:
        pi: (P,) standard parameters.
        mode: "map" (Mahalanobis distance to the identified base parameters + prior
            term, the default) or "exact" (base parameters reproduced exactly).
        status: solver status.
        solver: solver name.
        base_mahalanobis: d^2 = (K pi - pi_b)^T Cov^-1 (K pi - pi_b).
        base_dof: b, the degrees of freedom of d^2 under the LS error model.
        base_p_value: P(chi^2_b >= d^2): how consistent the reconstruction stays with
            the identified base parameters (large = well inside their confidence region).
        base_max_abs_error: max |K pi - pi_b|.
        link_min_eig: (n_links,) smallest pseudo-inertia eigenvalue per link.
        prior_distance: sqrt(sum ((pi - prior) / prior_std)^2) over the link parameters.
        prior_std: (P,) the prior standard deviation used per parameter (inf: no prior).
        prior_weight: multiplier of the prior term.
        masses: (n_links,) reconstructed link masses [kg]; prior_masses: the prior's.
    """

    pi: np.ndarray
    mode: str
    status: str
    solver: str
    base_mahalanobis: float
    base_dof: int
    base_p_value: float
    base_max_abs_error: float
    link_min_eig: np.ndarray
    prior_distance: float
    prior_std: np.ndarray
    prior_weight: float
    masses: np.ndarray
    prior_masses: np.ndarray

    def summary(self) -> dict:
        """JSON-ready dict (``pi`` omitted: the caller names its entries)."""
        d = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items() if k != "pi"}
        d["prior_std"] = [None if not np.isfinite(x) else float(x) for x in self.prior_std]
        return d


def prior_std(
    regressor: Regressor,
    prior: np.ndarray,
    rel_std: float = 0.3,
    min_radius: float = 0.05,
) -> np.ndarray:
    """(P,) prior standard deviation of each standard parameter, link-consistently scaled.

    For link i with prior mass m and radius r = max(sqrt(tr(I_origin) / (2 m)), min_radius) [m]
    (the radius of gyration about the link origin, including the com offset):
    mass m -> rel_std m; first moments m c -> rel_std m r; inertias about the origin ->
    rel_std m r^2. Scaling with the link's own size (not with |prior_k|) gives a
    proper std to parameters whose prior is zero (off-diagonal inertias, com
    components on an axis). Joint terms (armature, friction, offset) have no URDF
    prior: inf (no prior term).
    """
    n = regressor.n_dof
    s = np.full(regressor.n_params, np.inf)
    for i in range(n):
        p = prior[10 * i : 10 * i + 10]
        m = max(float(p[0]), 1e-6)
        tr = float(p[4] + p[6] + p[9])
        r = max(np.sqrt(max(tr, 0.0) / (2.0 * m)), min_radius)
        s[10 * i] = rel_std * m
        s[10 * i + 1 : 10 * i + 4] = rel_std * m * r
        s[10 * i + 4 : 10 * i + 10] = rel_std * m * r * r
    return s


def chi2_sf(x: float, dof: int) -> float:
    """P(chi^2_dof >= x)."""
    import scipy.stats

    return float(scipy.stats.chi2.sf(x, dof))


def reconstruct_standard(
    regressor: Regressor,
    base: BaseParameters,
    pi_b: np.ndarray,
    cov_b: np.ndarray,
    prior: np.ndarray | None = None,
    eps: float = 1e-6,
    mode: str = "map",
    prior_rel_std: float = 0.3,
    prior_weight: float = 1.0,
    mass_upper_factor: float | None = None,
    mass_lower_factor: float | None = None,
) -> Reconstruction:
    """Standard parameters with every pseudo-inertia >= eps I, consistent with ``pi_b``, nearest the prior.

    ``map`` (default) minimizes a maximum-a-posteriori objective: the Mahalanobis distance
    of the implied base parameters to the identified ones plus a Gaussian prior toward
    the URDF link parameters,

        (K pi - pi_b)^T Cov^-1 (K pi - pi_b) + prior_weight * sum_k ((pi_k - prior_k) / s_k)^2,

    with ``s`` from :func:`prior_std` (``prior_rel_std`` of the link mass, scaled by the
    link's radius of gyration for first moments and inertias; no prior on joint terms),
    subject to every link's 4x4 pseudo-inertia >= eps I, armature/viscous/Coulomb >= 0
    and the optional mass bounds. The data decide the identifiable combinations, the
    prior the rest (the unidentifiable parameters and how grouped ones split).

    Args:
        regressor: defines the standard vector (P,).
        base: the base-parameter map K (b, P).
        pi_b: (b,) identified base parameters; cov_b: (b, b) their covariance.
        prior: (P,) the URDF prior (default: the regressor's robot).
        eps: margin on each pseudo-inertia's eigenvalues [kg m^2 scale].
        mode: "map", "exact" (K pi = pi_b, minimize the prior term; usually infeasible for
            noisy estimates), or "auto" (exact, falling back to map when infeasible).
        prior_rel_std: relative prior std (0.3: 30 % of the link mass, see :func:`prior_std`).
        prior_weight: multiplier of the prior term (1: a proper Gaussian prior; 0: pure
            Mahalanobis, nearest to the data only).
        mass_upper_factor, mass_lower_factor: optional bounds factor x prior link mass
            (the UR10e authors used 0 < m <= 1.1 m_URDF).
    """
    prior = regressor.prior() if prior is None else np.asarray(prior, dtype=float)
    n_links = regressor.n_dof
    s = prior_std(regressor, prior, prior_rel_std)
    has_prior = np.isfinite(s)
    inv_s = np.where(has_prior, 1.0 / np.where(has_prior, s, 1.0), 0.0)
    K = base.K
    pi = cp.Variable(regressor.n_params)
    cons = _feasibility_constraints(regressor, pi, prior, eps, mass_upper_factor, mass_lower_factor)
    prior_term = cp.sum_squares(cp.multiply(inv_s, pi - prior))
    Linv = whitener(cov_b)
    if mode == "penalized":  # the earlier name of "map"
        mode = "map"
    modes = ["exact", "map"] if mode == "auto" else [mode]
    failures = []
    for md in modes:
        if md == "exact":
            prob = cp.Problem(cp.Minimize(prior_term), cons + [K @ pi == pi_b])
        elif md == "map":
            maha = cp.sum_squares(Linv @ (K @ pi - pi_b))
            prob = cp.Problem(cp.Minimize(maha + prior_weight * prior_term), cons)
        else:
            raise ValueError(f"unknown mode {md!r}; choose map, exact or auto")
        solver, errors = _solve(prob)
        if solver != "none" and pi.value is not None:
            x = np.asarray(pi.value, dtype=float)
            e = K @ x - pi_b
            d2 = float(np.sum((Linv @ e) ** 2))
            return Reconstruction(
                pi=x,
                mode=md,
                status=str(prob.status),
                solver=solver,
                base_mahalanobis=d2,
                base_dof=int(base.rank),
                base_p_value=chi2_sf(d2, base.rank),
                base_max_abs_error=float(np.max(np.abs(e))),
                link_min_eig=link_min_eigs(x, n_links),
                prior_distance=float(np.sqrt(np.sum(((x - prior) * inv_s) ** 2))),
                prior_std=s,
                prior_weight=float(prior_weight),
                masses=x[0 : 10 * n_links : 10].copy(),
                prior_masses=prior[0 : 10 * n_links : 10].copy(),
            )
        failures.append(f"{md}: status {prob.status}" + (f" ({'; '.join(errors)})" if errors else ""))
    raise RuntimeError(f"SDP reconstruction failed in mode(s) {modes}: {', '.join(failures)}")


def _feasibility_constraints(
    regressor: Regressor,
    pi: cp.Variable,
    prior: np.ndarray,
    eps: float,
    mass_upper_factor: float | None,
    mass_lower_factor: float | None,
) -> list:
    """Every link's 4x4 pseudo-inertia >= eps I, the optional mass bounds (factor x prior mass [kg])
    and armature/viscous/Coulomb >= 0, on the standard vector ``pi`` (P,)."""
    n_links = regressor.n_dof
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
    for i in range(n_links):
        if mass_upper_factor is not None:
            cons.append(pi[10 * i] <= mass_upper_factor * prior[10 * i])
        if mass_lower_factor is not None:
            cons.append(pi[10 * i] >= mass_lower_factor * prior[10 * i])
    for term in ("armature", "viscous", "coulomb"):
        if term in regressor.joint_terms:
            cons.append(pi[regressor.term_slice(term)] >= 0)
    return cons


def _solve(prob: cp.Problem) -> tuple[str, list[str]]:
    """Solve with CLARABEL, else SCS: (the solver that reached an optimum or "none",
    the solver errors met on the way, each "<solver>: <message>")."""
    errors = []
    for solver in ("CLARABEL", "SCS"):
        try:
            prob.solve(solver=solver)
        except cp.error.SolverError as exc:
            errors.append(f"{solver}: {exc}")
            continue
        if prob.status in ("optimal", "optimal_inaccurate"):
            return solver, errors
    return "none", errors


# ------------------------------------------------------------------ what the data say of each link's mass
#: a link's mass is fixed by the data when every mass they allow lies within this fraction of the range's middle
#: (the issue-43 bar: masses within 10 %)
MASS_FIXED_WITHIN = 0.10
#: the level of the mass ranges (a profile: chi^2 with one degree of freedom)
MASS_RANGE_LEVEL = 0.95


@dataclass(frozen=True)
class MassRange:
    """The masses of one link that the data allow, against the value written (issue 43).

    On a fixed-base arm a link's mass is rarely a base parameter: it enters the torque only in combinations with
    other links' parameters, so the data fix the combinations and the SDP's prior chooses the split. The range is
    every mass of a physically consistent standard set (the SDP's constraints) whose base parameters stay within the
    LS estimate's confidence region: Mahalanobis distance at most the smallest any physical set reaches plus the
    chi^2_1 quantile at :data:`MASS_RANGE_LEVEL` (a profile interval).

    Attributes:
        link: the moving body; value: its SDP mass [kg]; prior: its URDF (config) mass [kg].
        lower, upper: the range [kg] (upper inf: the data do not bound it; nan: the solver failed).
        bounds: the stated mass bounds (lower, upper factor x prior; None: none), which the range obeys.
    """

    link: str
    value: float
    prior: float
    lower: float
    upper: float
    bounds: tuple[float | None, float | None] = (None, None)

    @property
    def fixed(self) -> bool:
        """Every mass the data allow lies within :data:`MASS_FIXED_WITHIN` of the range's middle."""
        mid = 0.5 * (self.lower + self.upper)
        return bool(np.isfinite(mid) and mid > 0 and self.upper - self.lower <= 2 * MASS_FIXED_WITHIN * mid)

    def text(self) -> str:
        """``<link> <lower>-<upper>`` [kg] (a lower end within the SDP's margin of 0 reads 0)."""
        up = "unbounded" if np.isinf(self.upper) else f"{self.upper:.3g}"
        return f"{self.link} {0.0 if self.lower < 1e-3 else self.lower:.3g}-{up}"

    def summary(self) -> dict:
        return {"value": self.value, "prior": self.prior, "lower": _finite_or_none(self.lower),
                "upper": _finite_or_none(self.upper), "fixed_by_data": self.fixed,
                "fixed_within": MASS_FIXED_WITHIN, "level": MASS_RANGE_LEVEL, "mass_bound_factors": list(self.bounds)}


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def mass_ranges(
    regressor: Regressor,
    base: BaseParameters,
    pi_b: np.ndarray,
    cov_b: np.ndarray,
    masses: np.ndarray,
    eps: float = 1e-6,
    mass_upper_factor: float | None = None,
    mass_lower_factor: float | None = None,
    level: float = MASS_RANGE_LEVEL,
) -> list[MassRange]:
    """Each link's :class:`MassRange`: the smallest and largest mass of a set under the SDP's constraints (same
    ``eps`` and mass bounds) within the LS's confidence region (``pi_b`` (b,), ``cov_b`` (b, b): the covariance the
    SDP used); ``masses`` (n_links,) are the SDP's values. 1 + 2 x n_links small SDPs."""
    import scipy.stats

    prior = regressor.prior()
    bounds = (mass_lower_factor, mass_upper_factor)
    pi = cp.Variable(regressor.n_params)
    cons = _feasibility_constraints(regressor, pi, prior, eps, mass_upper_factor, mass_lower_factor)
    d2 = cp.sum_squares(whitener(cov_b) @ (base.K @ pi - pi_b))
    nearest = cp.Problem(cp.Minimize(d2), cons)
    solver, _ = _solve(nearest)
    out = []
    if solver == "none":
        return [MassRange(link, float(masses[i]), float(prior[10 * i]), np.nan, np.nan, bounds)
                for i, link in enumerate(regressor.link_names)]
    # one problem, its objective a parameter: canonicalized once, solved 2 x n_links times
    c = cp.Parameter(regressor.n_params)
    limit = float(nearest.value) + float(scipy.stats.chi2.ppf(level, 1))
    prob = cp.Problem(cp.Minimize(c @ pi), cons + [d2 <= limit])
    for i, link in enumerate(regressor.link_names):
        ends = []
        for sign in (1.0, -1.0):  # the smallest mass, then the largest (the smallest of minus it)
            e = np.zeros(regressor.n_params)
            e[10 * i] = sign
            c.value = e
            ends.append(sign * _bound(prob))
        lower = max(ends[0], 0.0) if np.isfinite(ends[0]) else ends[0]
        out.append(MassRange(link, float(masses[i]), float(prior[10 * i]), lower, ends[1], bounds))
    return out


def _bound(prob: cp.Problem) -> float:
    """The optimum of a minimization (-inf: unbounded below, CLARABEL's certificate taken as it is; nan: no solver
    reached one)."""
    try:
        prob.solve(solver="CLARABEL")
        if "unbounded" in str(prob.status):
            return -np.inf
    except cp.error.SolverError:
        pass
    if prob.status in ("optimal", "optimal_inaccurate"):
        return float(prob.value)
    solver, _ = _solve(prob)
    if solver != "none":
        return float(prob.value)
    return -np.inf if "unbounded" in str(prob.status) else np.nan


def mass_sentence(ranges: list[MassRange]) -> str:
    """One line: which masses the data fix, and the range of the others (the value written is then the prior's
    choice among them)."""
    fixed = [r.link for r in ranges if r.fixed]
    free = [r for r in ranges if not r.fixed]
    lo, up = ranges[0].bounds if ranges else (None, None)
    stated = "" if lo is None and up is None else f" and the stated mass bounds (x[{lo}, {up}] the prior)"
    head = (f"link masses the data{stated} fix within {100 * MASS_FIXED_WITHIN:.0f} %: "
            + (", ".join(fixed) if fixed else "none"))
    if not free:
        return head
    return (head + f"; the others enter the torque only in combinations, so the masses written for them are the "
            f"prior's choice among those the data allow ({100 * MASS_RANGE_LEVEL:.0f} %, kg): "
            + ", ".join(r.text() for r in free))
