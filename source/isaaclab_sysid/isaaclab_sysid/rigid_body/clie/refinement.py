"""The refinement (trust-region least squares), its sandwich covariance and the audit gate.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from isaaclab_sysid.rigid_body.clie.objective import ClieObjective
from isaaclab_sysid.rigid_body.clie.starts import GROUP_TO_TERM, JOINT_GROUPS
from isaaclab_sysid.rigid_body.feasibility import audit_mass_matrix, AuditResult, default_domain
from isaaclab_sysid.rigid_body.log_cholesky import pseudo_inertia


@dataclass
class ClieResult:
    """The refined set, its uncertainty, the audit and the acceptance.

    Attributes:
        pi: (P,) the refined standard set; pi_start: (P,) the SDP set it started from.
        accepted: the refined set passed the audit (else the SDP set stands: :attr:`pi_accepted`).
        reason: why it was not accepted ("" when it was).
        bodies: the refined bodies; z, z0: (D,) coordinates at the end and the start.
        joint, joint_start: armature, friction, viscous (N,) each, refined and the joint fit's; delay [ticks].
        sigma: (N,) the input-error noise level of the last pass [N m].
        passes: per pass: sigma, kappa, cost at start and end, evaluations, Jacobians, status message.
        cov_z: (D, D) sandwich covariance of z.
        subset: indices of the inertial base parameters; base, base_std: their refined values and std;
            base_start: the SDP's; base_ls, base_ls_std: the LS estimate and its (HAC) std.
        clean: (len(subset),) the base parameter depends on refined coordinates only (its std is complete);
            one that also holds a body left at the SDP set carries that body's error outside ``base_std``.
        joint_std: armature, friction, viscous std (N,) each (zeros when not refined).
        audit: the all-pose audit of the refined set.
        link_min_eig: (N,) smallest pseudo-inertia eigenvalue of every moving body.
        convergence: ``last_gain``, the cost reduction of the last least-squares attempt,
            ``budget_ran_out`` (it ended on ``max_iter``, not on a tolerance), ``accepted_steps`` (of the
            last pass), ``last_accepted`` (of its last attempt), ``moved`` and ``converged``: the gain is
            at most :data:`PROGRESS_COST`, the last attempt accepted a step, the pass moved, and the attempt
            either ended on a tolerance or was a restart (see :func:`_convergence`). When not converged,
            ``warning`` says why and that the intervals describe a point on the way, not the optimum.
        ls_check: the LS term's consistency with the closed loop at the end: chi2, redundancy, factor
            (:func:`ls_variance_factor`), scale (the weight divisor of the last pass) and the factor the
            intervals used (1 with ``ls_consistency`` off).
        n_rollouts: (candidate, run) replays spent; timing_s: wall time per step [s].
    """

    pi: np.ndarray
    pi_start: np.ndarray
    accepted: bool
    reason: str
    bodies: tuple[str, ...]
    z: np.ndarray
    z0: np.ndarray
    joint: dict[str, np.ndarray]
    joint_start: dict[str, np.ndarray]
    delay: int
    sigma: np.ndarray
    passes: list[dict]
    cov_z: np.ndarray
    subset: np.ndarray
    base: np.ndarray
    base_std: np.ndarray
    base_start: np.ndarray
    base_ls: np.ndarray
    base_ls_std: np.ndarray
    joint_std: dict[str, np.ndarray]
    clean: np.ndarray
    audit: AuditResult
    link_min_eig: np.ndarray
    ls_check: dict[str, float] = field(default_factory=dict)
    convergence: dict = field(default_factory=dict)
    n_rollouts: int = 0
    timing_s: dict[str, float] = field(default_factory=dict)

    @property
    def pi_accepted(self) -> np.ndarray:
        """(P,) the set to use: the refined one when accepted, else the SDP's."""
        return self.pi if self.accepted else self.pi_start

    @property
    def joint_accepted(self) -> dict[str, np.ndarray]:
        """The joint terms to use with :attr:`pi_accepted`."""
        return self.joint if self.accepted else self.joint_start


def hac_scores(J: np.ndarray, r: np.ndarray, blocks: Sequence[tuple[int, int]], n_dof: int, lags: int) -> np.ndarray:
    """(D, D) Newey-West sum of the scores g_t = J_t^T r_t (one per sample t, joints summed), lags within each block.

    Args:
        J: (M, D) Jacobian rows of the whitened residuals r (M,), sample-major within each block.
        blocks: (start, stop) row ranges of the runs; n_dof: rows per sample; lags: the window [samples].
    """
    D = J.shape[1]
    S = np.zeros((D, D))
    for a, b in blocks:
        g = (J[a:b] * r[a:b, None]).reshape(-1, n_dof, D).sum(axis=1)  # (T, D)
        S += g.T @ g
        for lag in range(1, min(lags, g.shape[0] - 1) + 1):
            G = g[lag:].T @ g[:-lag]
            S += (1.0 - lag / (lags + 1.0)) * (G + G.T)
    return S


def ls_variance_factor(obj: ClieObjective, J: np.ndarray, r: np.ndarray) -> tuple[float, float, float]:
    """The LS term's Helmert variance component at a solution: (chi2, redundancy, factor = chi2 / redundancy).

    chi2 is the LS block's share of the whitened sum of squares (at the current weight), the redundancy
    its number of rows less its leverage tr(J_L H^-1 J_L^T): what chi2 should be if the LS estimate and
    the closed loop agree within the LS covariance. A factor above 1 says they disagree by more. With a
    redundancy below 1 the factor is 1 (nothing to check by).
    """
    M, nL = obj.n_replay(), obj.subset.size
    if nL == 0 or obj.options.ls_weight == 0:
        return 0.0, 0.0, 1.0
    JL, rL = J[M: M + nL], r[M: M + nL]
    Hi = np.linalg.pinv(J.T @ J, rcond=1e-12)
    redundancy = float(nL - np.trace(JL @ Hi @ JL.T))
    chi2 = float(rL @ rL)
    if redundancy < 1.0:  # the fit absorbs (nearly) every LS row: nothing left to check them by
        return chi2, redundancy, 1.0
    return chi2, redundancy, chi2 / redundancy


#: a least-squares attempt that still lowered the cost (half the whitened sum of squares) by more than this
#: (2 chi^2 units: the estimate still moving by more than about 1.4 std) has not converged
PROGRESS_COST = 1.0


def _sandwich(obj: ClieObjective, J: np.ndarray, r: np.ndarray, ls_factor: float = 1.0) -> np.ndarray:
    """(D, D) H^-1 S H^-1: H = J^T J; S = Newey-West of the replay scores + the LS information times
    ``ls_factor`` (its variance factor, >= 1) + the prior information."""
    M, nL = obj.n_replay(), obj.subset.size
    H = J.T @ J
    blocks, a = [], 0
    for rows in obj.rows:
        blocks.append((a, a + rows.size * obj.n_dof))
        a += rows.size * obj.n_dof
    JL, JP = J[M: M + nL], J[M + nL:]
    S = hac_scores(J[:M], r[:M], blocks, obj.n_dof, obj.hac_lags()) + ls_factor * (JL.T @ JL) + JP.T @ JP
    Hi = np.linalg.pinv(H, rcond=1e-12)
    cov = Hi @ S @ Hi
    return 0.5 * (cov + cov.T)


def _convergence(passes: list[dict], o) -> dict:  # noqa: ANN001 - ClieOptions
    """The convergence record of the end point from the passes' records (see :attr:`ClieResult.convergence`).

    Converged takes evidence: the last least-squares attempt gained at most :data:`PROGRESS_COST`, it
    accepted at least one step (a trust region that rejected every step it tried shows a Jacobian that
    points nowhere, not an optimum), and it either ended on a tolerance or was a restart (a first attempt
    that ran out of budget without gaining shows nothing). A last pass that accepted no step at all ended
    at its start.
    """
    last = passes[-1]
    gain, budget_out, steps = last["last_gain"], last["status"] == 0, last["last_accepted"]
    moved = any(p["accepted_steps"] > 0 for p in passes)
    # scipy's gradient test (status 1) at a point whose gradient vanishes needs no step to be an optimum
    evidence = steps > 0 or last["status"] == 1
    out = {"last_gain": gain, "budget_ran_out": budget_out, "accepted_steps": last["accepted_steps"],
           "last_accepted": steps, "moved": moved,
           "converged": (gain <= PROGRESS_COST and evidence and (moved or last["status"] == 1)
                         and (last["restarts"] > 0 or not budget_out))}
    if not out["converged"]:
        if not moved:
            why = (f"no pass accepted a step (the last: none in {last['evaluations']} evaluations): it ended at its start "
                   f"(every trial step raised the cost or diverged)")
        elif gain > PROGRESS_COST:
            why = f"its last least-squares attempt still lowered the cost by {gain:.3g} (more than {PROGRESS_COST:g})"
        elif steps == 0:
            why = "its last least-squares attempt rejected every step it tried, so nothing shows it had stopped moving"
        else:
            why = "its only least-squares attempt ran out of budget with no restart to show that it had stopped moving"
        out["warning"] = (f"the refinement did not converge: {why}, so the intervals describe a point on the way, "
                          f"not the optimum; raise --max-iter (now {o.max_iter}), --restarts (now {o.restarts}) "
                          f"or --passes (now {o.passes})")
    return out


def _attempt(obj: ClieObjective, z: np.ndarray, o) -> scipy.optimize.OptimizeResult:  # noqa: ANN001 - ClieOptions
    """One trust-region least-squares attempt from z, in coordinates shifted to start at 0.

    scipy's ``trf`` opens its trust region at ||x0 / x_scale||: in the absolute coordinates (log-Cholesky
    coordinates have an arbitrary origin, the joint terms are in physical units) that was thousands of
    Jacobian-scaled units, so the first iteration spent most of a small budget shrinking it through
    replays that diverge, and a restart reopened it just as wide and walked the same rejections again.
    From u = 0 the region opens at one scaled unit (a step that changes the whitened residuals by about
    one) and grows as steps succeed. Returns scipy's result with ``x`` back in absolute coordinates.
    """
    z_a = np.asarray(z, dtype=float).copy()
    res = scipy.optimize.least_squares(
        lambda u: obj.residuals(z_a + u), np.zeros_like(z_a), jac=lambda u: obj.jacobian(z_a + u),
        bounds=(obj.lower - z_a, obj.upper - z_a), method="trf", x_scale="jac",
        ftol=o.ftol, xtol=1e-12, gtol=1e-12, max_nfev=3 * o.max_iter,
    )
    res.x = np.clip(z_a + res.x, obj.lower, obj.upper)
    return res


def refine(obj: ClieObjective, log=print) -> ClieResult:  # noqa: ANN001 - a print-like callable
    """Run the refinement passes, the covariance and the audit (see the module docstring)."""
    o, timing = obj.options, {}
    z = obj.z0.copy()
    obj.ls_scale = 1.0
    passes = []
    t0 = time.perf_counter()
    for k in range(o.passes):
        sigma, kappa = obj.set_sigma(z)
        if k > 0 and o.ls_consistency:
            chi2, red, f = ls_variance_factor(obj, obj.jacobian(z), obj.residuals(z))
            obj.ls_scale = max(1.0, obj.ls_scale * f)
            log(f"[clie pass {k + 1}/{o.passes}] LS term: chi2 {chi2:.4g} on {red:.3g} redundant rows "
                f"(factor {f:.3g}); its weight is now ls_weight / {obj.ls_scale:.3g}")
        cost0 = 0.5 * float(np.sum(obj.residuals(z) ** 2))
        rec = {"pass": k + 1, "sigma": sigma.tolist(), "kappa": kappa.tolist(), "ls_scale": obj.ls_scale,
               "cost_start": cost0, "evaluations": 0, "jacobians": 0, "restarts": 0, "accepted_steps": 0}
        cost = cost0
        for attempt in range(o.restarts + 1):
            res = _attempt(obj, z, o)
            # trf evaluates the Jacobian once at its start and once after every accepted step
            accepted = max(int(res.njev or 0) - 1, 0)
            z, gain, cost = res.x, cost - float(res.cost), float(res.cost)
            rec["evaluations"] += int(res.nfev)
            rec["jacobians"] += int(res.njev or 0)
            rec["accepted_steps"] += accepted
            # restart while still moving, or to see whether a first attempt that ran out of budget had stopped
            more = (gain > PROGRESS_COST or (res.status == 0 and attempt == 0)) and attempt < o.restarts
            log(f"[clie pass {k + 1}/{o.passes}] kappa {' '.join(f'{v:.3g}' for v in kappa)}; cost {cost0:.6g} -> "
                f"{cost:.6g} after {res.njev} Jacobians, {accepted} accepted steps ({res.message})"
                + ("; still moving: the trust region restarts from there" if more else ""))
            if not more:
                break
        rec.update({"restarts": attempt, "cost_end": cost, "status": int(res.status),
                    "message": str(res.message), "last_gain": gain, "last_accepted": accepted})
        passes.append(rec)
    timing["refine"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = obj.residuals(z)
    J = obj.jacobian(z)
    ls_chi2, ls_red, ls_f = ls_variance_factor(obj, J, r)
    ls_factor = max(1.0, ls_f) if o.ls_consistency else 1.0
    cov_z = _sandwich(obj, J, r, ls_factor)
    timing["covariance"] = time.perf_counter() - t0
    pi = obj.standard(z)
    dpi = obj.dstandard(z)
    G = obj.K_I @ dpi
    free = np.zeros(obj.reg.n_params, dtype=bool)  # standard parameters that move with z
    free[obj.prior_cols] = True
    if o.joint_terms:
        for g in JOINT_GROUPS:
            if GROUP_TO_TERM[g] in obj.reg.joint_terms:
                free[obj.reg.term_slice(GROUP_TO_TERM[g])] = True
    clean = ~np.any((np.abs(obj.K_I) > 1e-12) & ~free[None], axis=1)
    base_cov = G @ cov_z @ G.T
    joint_std = {g: np.zeros(obj.n_dof) for g in JOINT_GROUPS}
    if o.joint_terms:
        d = np.sqrt(np.maximum(np.diag(cov_z)[obj.n_body_coords:], 0.0))
        joint_std = {g: d[k * obj.n_dof: (k + 1) * obj.n_dof] for k, g in enumerate(JOINT_GROUPS)}
    t0 = time.perf_counter()
    audit = audit_mass_matrix(obj.reg, pi, domain=default_domain(obj.reg), grid_points=o.audit_grid,
                              n_uniform=o.audit_uniform, n_dense=o.audit_dense, seeds=tuple(o.audit_seeds))
    timing["audit"] = time.perf_counter() - t0
    links = obj.links(z)
    lmin = np.array([np.linalg.eigvalsh(pseudo_inertia(p))[0] for p in links])
    reason = ""
    if not audit.passed:
        reason = (f"the all-pose audit failed: {audit.n_violations} of {audit.n_poses} poses with "
                  f"lambda_min(M) <= {audit.threshold:g} (min {audit.min_eig:.3g})")
    elif not np.isfinite(r).all():
        reason = "the replay diverges at the refined set"
    std_ls = np.sqrt(np.diag(obj.start.cov))[obj.subset]
    return ClieResult(
        pi=pi, pi_start=obj.start.pi_sdp.copy(), accepted=not reason, reason=reason, bodies=obj.body_names,
        z=z, z0=obj.z0.copy(), joint=obj.joint_values(z), joint_start=obj.joints.values(),
        delay=int(obj.joints.delay), sigma=obj.sigma.copy(), passes=passes, cov_z=cov_z, subset=obj.subset,
        base=obj.K_I @ pi, base_std=np.sqrt(np.maximum(np.diag(base_cov), 0.0)),
        base_start=obj.K_I @ obj.start.pi_sdp, base_ls=obj.theta_I.copy(), base_ls_std=std_ls,
        joint_std=joint_std, clean=clean, audit=audit, link_min_eig=lmin,
        convergence=_convergence(passes, o),
        ls_check={"chi2": ls_chi2, "redundancy": ls_red, "factor": ls_f, "scale": obj.ls_scale,
                  "interval_factor": ls_factor}, n_rollouts=obj.n_rollouts, timing_s=timing,
    )
