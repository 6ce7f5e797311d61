"""Do the data ask for the static friction a Coulomb-only fit left out? A score (Lagrange multiplier) test.

A Coulomb-only fit of a joint that sticks can hide the missing static friction in
its other numbers: the friction level rises, the viscous damping falls, and where
the logged rows are noisy (50 Hz rows with a random 0-10 ms state age) the
residual stays at the noise floor, so the residual-based verdicts
(:mod:`isaaclab_sysid.evaluate.adequacy`) say "adequate" while intervals miss the
truth (docs/fit.md, the recovery matrix's 50 Hz cell). Yet the same data identify
the static group when it is fitted. The score test asks that question without a
second fit: at the Coulomb optimum, written in the static group's coordinates
(``mu_static`` = the fitted friction, ``dynamic_ratio`` = 1, which is exactly the
Coulomb model), does the loss fall when a joint's friction gets a static peak
(``dynamic_ratio`` below 1)?

One batched finite-difference rollout (:func:`~isaaclab_sysid.intervals.curvature.sensitivity`
in the augmented space) gives the Jacobian J and residual r. The efficient score of
the tested entries S against the fitted ones F is ``g_S - H_SF H_FF^+ g_F`` (g = J^T r,
H = J^T J), its covariance ``C M C^T`` with C = [-H_SF H_FF^+, I] and M the
autocorrelation-robust meat of the curvature intervals (Newey-West), or, where
larger, its spread over replicates pushed by the estimated torque disturbance
(:mod:`isaaclab_sysid.intervals.process_noise`: under task impedance the kernel
meat under-counts it and the test cried wolf on a right model). Per joint,
``z_j`` = efficient score / its standard error, positive when the loss wants a
static peak. The test fires when some ``z_j`` exceeds the one-sided Bonferroni
threshold at ``alpha`` (0.001 over the joints), so a right model seldom cries wolf.

Memory (issue 45). The dense test holds the weighted residuals of every stencil candidate, K x M floats (M the
samples x channels; K = 50 for the 28 entries of the Coulomb arm's augmented space, ``dynamic_ratio`` one-sided at its
bound), beside the Jacobian, p x M, and, for the predicted gain, its stacked copy: 106 columns of M, 346 MB for a 24 s
run at 1 kHz, the fit's peak there (docs/benchmarks.md, issue 45). Where those would exceed :data:`DENSE_LIMIT_MB` (the
refinement's ``RefineSettings.dense_limit_mb``) the test streams its sensitivity (:func:`streamed_sensitivity`): it rolls out the stencil a few columns' candidates at
a time and writes each chunk straight into the Jacobian, so only the Jacobian, the optimum's residuals and one chunk
are held; the predicted gain is solved from the normal equations (p x p) instead of the stacked Jacobian. The numbers
are the dense ones (the same differences in the same order; ``tests/test_normal_equations.py``). The Jacobian
itself still grows with the samples: the process-noise replicates project their residuals on it
(intervals/process_noise.py), which needs every column at every sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import lsq_linear
from scipy.stats import norm

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, GroupSpec, ParamSpace
from isaaclab_sysid.intervals.curvature import (SENSITIVITY_CHUNK, IntervalError, Sensitivity, _per_sample_residuals,
                                                candidates_per_call, central_stencil, hac_bandwidth, run_meats,
                                                sensitivity)
from isaaclab_sysid.objective.jacobian import Stencil
from isaaclab_sysid.objective.residuals import stacked_size
from isaaclab_sysid.sim.shooting import backend_windows
from isaaclab_sysid.intervals.process_noise import estimate_process_noise, replicate_residuals
from isaaclab_sysid.sim.friction import law_of_groups
from isaaclab_sysid.sim.interface import ReplayBackend
from isaaclab_sysid.sim.shooting import is_torque_run

ALPHA = 0.001
#: above this size [MB] of the dense test's arrays (every stencil candidate's residuals, the Jacobian and its stacked
#: copy) the score test streams its sensitivity (:func:`streamed_sensitivity`); the refinement's ``dense_limit_mb`` default
DENSE_LIMIT_MB = 256.0


@dataclass
class StaticFrictionTest:
    """The score test's outcome.

    Attributes:
        z: (N,) per joint, the efficient score over its standard error (> 0: the data want a static peak).
        threshold: the one-sided Bonferroni threshold on z at ``alpha``.
        joints: joint names whose z exceeds it (the data ask for static friction there).
        alpha: the test's level over all joints; joint_names: the arm's joints, in the order of z.
        predicted_gain: the share of the fit loss a bounded Gauss-Newton step in the static group's coordinates
            predicts it would remove (from the same Jacobian and residual; 0 when the data want no static peak).
    """

    z: list[float]
    threshold: float
    joints: list[str]
    alpha: float
    joint_names: list[str]
    predicted_gain: float | None = None

    @property
    def significant(self) -> bool:
        return bool(self.joints)

    def message(self) -> str:
        zs = ", ".join(f"{j} z={z:.1f}" for j, z in zip(self.joint_names, self.z) if j in self.joints)
        return (f"the data ask for static friction the model lacks (score test at the Coulomb optimum, {zs}; "
                f"threshold {self.threshold:.1f}): refit with the static-friction group "
                "(--fit_groups armature,mu_static,dynamic_ratio,viscous,delay)")

    def to_json(self) -> dict:
        return asdict(self)


def augmented_space(space: ParamSpace, mu_static_bounds: tuple[float, float] | None = None,
                    dynamic_ratio_bounds: tuple[float, float] | None = None) -> ParamSpace | None:
    """``space`` with its Coulomb ``friction`` replaced, in place, by ``mu_static`` and ``dynamic_ratio`` (every other
    group and its bounds kept; None if not applicable). Bounds: the given ones, else the defaults widened to hold
    the friction group's."""
    names = space.group_names
    if "friction" not in names or "mu_static" in names or "dynamic_ratio" in names:
        return None
    if law_of_groups(names).name != "coulomb":  # the load / Dahl laws read friction too: no static group beside them
        return None
    groups = []
    for g in space.groups:
        if g.name == "friction":
            ms = mu_static_bounds or (min(DEFAULT_BOUNDS["mu_static"][0], g.lower),
                                      max(DEFAULT_BOUNDS["mu_static"][1], g.upper))
            groups.append(GroupSpec("mu_static", *map(float, ms)))
            groups.append(GroupSpec("dynamic_ratio", *map(float, dynamic_ratio_bounds or DEFAULT_BOUNDS["dynamic_ratio"])))
        else:
            groups.append(g)
    return ParamSpace(groups, space.n_dof, space.joint_names)


def coulomb_as_static(space: ParamSpace, x: np.ndarray, aug: ParamSpace) -> np.ndarray:
    """(D',) the Coulomb-model vector ``x`` (D,) of ``space`` in :func:`augmented_space` ``aug``: ``mu_static`` = the
    friction, ``dynamic_ratio`` = 1 (exactly the Coulomb model), every other group as it is; clipped to the bounds."""
    dec = space.decode(np.asarray(x, dtype=float))
    vals = {k: v for k, v in dec.items() if k != "friction"}
    vals["mu_static"] = dec["friction"]
    vals["dynamic_ratio"] = np.ones(space.n_dof)
    return aug.normalize(vals)


def dense_sensitivity_mb(space: ParamSpace, x0: np.ndarray, runs: Sequence[Run], step: float = 1e-3) -> float:
    """The size [MB] of the dense test's arrays at ``x0``: every central-stencil candidate's weighted residuals, the
    Jacobian and its stacked copy (:func:`predicted_gain`), (K + 2p) x M float64 (M = samples x channels over the
    runs), held at once."""
    st = central_stencil(space, x0, step)[2]
    return (len(st.X) + 2 * len(st.index)) * stacked_size(runs) * 8 / 1e6


def streamed_sensitivity(objective: ReplayObjective, x0: np.ndarray, step: float = 1e-3,
                         chunk: int = SENSITIVITY_CHUNK) -> Sensitivity:
    """:func:`~isaaclab_sysid.intervals.curvature.sensitivity` without the delay profile, holding only the Jacobian
    (per run (T, C, p)), the optimum's residuals and one chunk of candidates: the central stencil is rolled out
    ``chunk // 2`` columns (their two candidates each) at a time and each chunk's differences are written straight into
    the Jacobian by the same :meth:`~isaaclab_sysid.objective.jacobian.Stencil.jacobian` (a one-sided difference where
    a neighbour diverged, NaN where both did), so the numbers are the dense ones."""
    space, runs = objective.space, objective.runs
    chunk = candidates_per_call(runs, chunk)
    x0, cont, st = central_stencil(space, x0, step)
    p = len(cont)
    W = space.widths()[cont]
    R0, div0 = _per_sample_residuals(objective, st.X[:1], chunk)
    if div0[0]:
        raise IntervalError("the fitted candidate diverges on at least one run: no interval can be computed there")
    r0 = [R[0] for R in R0]  # (T, C) per run, its own arrays (R0 is (1, T, C))
    Js = [np.empty(r.shape + (p,)) for r in r0]
    notes = dict(st.notes)
    per = max(1, chunk // 2)
    for a in range(0, p, per):
        cols = np.arange(a, min(p, a + per))
        rows = sorted({int(i) for i in np.concatenate([st.plus[cols], st.minus[cols]])} - {0})
        where = {0: 0, **{k: j + 1 for j, k in enumerate(rows)}}  # stencil row -> row of this chunk's block
        R, div = _per_sample_residuals(objective, st.X[rows], chunk) if rows else ([np.empty((0,) + r.shape) for r in r0],
                                                                                   np.zeros(0, dtype=bool))
        sub = Stencil(st.X[[0, *rows]], st.index[cols], np.array([where[int(i)] for i in st.plus[cols]]),
                      np.array([where[int(i)] for i in st.minus[cols]]), st.h[cols], st.step,
                      {i: v for i, v in st.notes.items() if i in set(st.index[cols].tolist())})
        div_c = np.concatenate([[False], div])
        for J, r, Rr in zip(Js, r0, R):
            Jc, n = sub.jacobian(np.concatenate([r[None], Rr]), div_c, scale=W[cols], on_diverged="one_sided")
            J[..., cols] = Jc
            notes.update(n)
        del R
    labels = space.labels()
    windows = backend_windows(objective.backend, runs) or [None] * len(runs)
    return Sensitivity(
        space=space, x0=x0, value=space.decoded_vector(x0), cont=cont, labels=[labels[i] for i in cont], r=r0, J=Js,
        run_names=[r.name for r in runs], delays=[], r_delay={}, delay0=space.delay_of(x0), n_candidates=len(st.X),
        fd_notes=notes, step=step, windows=windows,
    )


def static_friction_test(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, runs: Sequence[Run],
                         weights: LossWeights = LossWeights(), traj_weights: Sequence[float] | None = None,
                         alpha: float = ALPHA, streamed: bool | None = None,
                         dense_limit_mb: float = DENSE_LIMIT_MB) -> StaticFrictionTest | None:
    """The score test (see module docstring) at the fitted normalized vector ``x0`` on the fit ``runs``.

    ``streamed``: roll out the sensitivity a chunk at a time (:func:`streamed_sensitivity`) and solve the predicted
    gain from the normal equations; None (the default): when the dense sensitivity would exceed ``dense_limit_mb``
    (:func:`dense_sensitivity_mb`). The statistic is the same either way (to rounding).

    Returns None where it does not apply: the fit has no Coulomb ``friction`` group or already fits the static
    group, the backend cannot represent ``mu_static``, or the runs are torque runs.
    """
    aug = augmented_space(space)
    if aug is None or "mu_static" not in backend.supported_groups or any(is_torque_run(r) for r in runs):
        return None
    xa = coulomb_as_static(space, x0, aug)
    if streamed is None:
        streamed = dense_sensitivity_mb(aug, xa, runs) > dense_limit_mb
    objective = ReplayObjective(aug, backend, list(runs), weights, traj_weights)
    sens = streamed_sensitivity(objective, xa) if streamed else sensitivity(objective, xa, profile_delay=False)
    labels = aug.labels()
    tested_labels = [labels[i] for i in range(*aug.slice("dynamic_ratio").indices(aug.dim))]
    S = np.array([sens.labels.index(lab) for lab in tested_labels])
    F = np.array([k for k in range(len(sens.labels)) if k not in set(S.tolist())])
    H = sens.hessian()
    g = sum(s.sum(axis=0) for s in sens.scores())
    gain = predicted_gain_normal(aug, sens, H, g) if streamed else predicted_gain(aug, sens)
    H = np.where(np.isfinite(H), H, 0.0)
    g = np.where(np.isfinite(g), g, 0.0)
    A = H[np.ix_(S, F)] @ np.linalg.pinv(H[np.ix_(F, F)], rcond=1e-10)
    C = np.zeros((S.size, len(sens.labels)))
    C[:, F] = -A
    C[np.arange(S.size), S] = 1.0
    V = C @ run_meats(sens, hac_bandwidth(sens.r)) @ C.T
    sd = np.sqrt(np.clip(np.diag(V), 1e-300, None))
    sd = np.maximum(sd, _replicate_sd(backend, aug, xa, runs, sens, weights, traj_weights, C))
    # the loss rises with dynamic_ratio where a static peak helps: g_S = J_S^T r > 0 (d loss / d ratio = 2 g_S)
    z = (C @ g) / sd
    thr = float(norm.isf(alpha / space.n_dof))
    joints = [space.joint_names[j] for j in range(space.n_dof) if np.isfinite(z[j]) and z[j] > thr]
    return StaticFrictionTest([float(v) for v in z], thr, joints, alpha, list(space.joint_names), gain)


def bounded_step(space: ParamSpace, sens: Sensitivity) -> np.ndarray | None:
    """(p,) the bounded Gauss-Newton step ``min ||r + J dx||^2`` over the continuous entries, each kept inside its
    search bounds (decoded units); None when the Jacobian or the residual is not finite."""
    J = np.concatenate([j.reshape(-1, j.shape[-1]) for j in sens.J])
    r = np.concatenate([v.reshape(-1) for v in sens.r])
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
        return None
    return lsq_linear(J, -r, bounds=_step_bounds(space, sens)).x


def _step_bounds(space: ParamSpace, sens: Sensitivity) -> tuple[np.ndarray, np.ndarray]:
    """(p,) lower and upper bounds of a step from ``sens``'s point that keep each continuous entry inside its search
    bounds (decoded units; a zero-width side widened by 1e-15 for the solver)."""
    lo, hi = space.bounds()
    k = np.asarray(sens.cont)
    v = np.asarray(sens.value, dtype=float)[k]
    lo_d, hi_d = np.minimum(lo[k] - v, 0.0), np.maximum(hi[k] - v, 0.0)
    return lo_d, hi_d + 1e-15 * (hi_d <= lo_d)


def predicted_gain(space: ParamSpace, sens: Sensitivity) -> float | None:
    """The share of the loss (sum of squared residuals at the optimum) that the :func:`bounded_step` would remove:
    the linear model's forecast of a refit from this point (None when the Jacobian is not finite)."""
    r = np.concatenate([v.reshape(-1) for v in sens.r])
    step = bounded_step(space, sens) if np.any(r) else None
    if step is None:
        return None
    J = np.concatenate([j.reshape(-1, j.shape[-1]) for j in sens.J])
    return float(max(0.0, 1.0 - float(np.sum((r + J @ step) ** 2)) / float(r @ r)))


def bounded_step_normal(space: ParamSpace, sens: Sensitivity, H: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """:func:`bounded_step` from the normal equations ``H`` = J^T J, ``g`` = J^T r (p x p, not the stacked M x p
    Jacobian): ``||r + J dx||^2 = r^T r + 2 g^T dx + dx^T H dx``, minimized over the same bounds by the same
    bounded least squares on a p x p factor of H (its eigen-directions above 1e-14 of the largest; g lies in
    their span). None when H or g is not finite. Memory: p x p, whatever the samples (issue 45)."""
    if not (np.all(np.isfinite(H)) and np.all(np.isfinite(g))):
        return None
    lam, V = np.linalg.eigh(0.5 * (H + H.T))
    keep = lam > 1e-14 * max(float(lam.max()), 1e-300)
    A = np.sqrt(lam[keep])[:, None] * V[:, keep].T
    b = -(V[:, keep].T @ g) / np.sqrt(lam[keep])
    return lsq_linear(A, b, bounds=_step_bounds(space, sens)).x


def predicted_gain_normal(space: ParamSpace, sens: Sensitivity, H: np.ndarray, g: np.ndarray) -> float | None:
    """:func:`predicted_gain` from the normal equations (:func:`bounded_step_normal`)."""
    rr = float(sum(np.sum(r**2) for r in sens.r))
    step = bounded_step_normal(space, sens, H, g) if rr > 0 else None
    if step is None:
        return None
    return float(max(0.0, -float(2.0 * g @ step + step @ H @ step) / rr))


def _replicate_sd(backend: ReplayBackend, space: ParamSpace, x: np.ndarray, runs: Sequence[Run], sens: Sensitivity,
                  weights: LossWeights, traj_weights: Sequence[float] | None, C: np.ndarray) -> np.ndarray:
    """(|S|,) standard error of the efficient score over replicates pushed by the estimated torque disturbance
    (intervals/process_noise.py; each joint at least the common level, as the intervals propagate it): under process
    noise the kernel meat under-counts the score's variance."""
    try:
        est = estimate_process_noise(backend, space, x, list(runs), sens, weights, traj_weights)
    except TypeError:  # a backend that cannot inject a disturbance: the kernel estimate alone
        return np.zeros(C.shape[0])
    S = np.asarray([C @ sens.score_sum(rs) for rs in
                    replicate_residuals(backend, space, x, list(runs), weights, traj_weights, est.propagated, est.base,
                                        est.white)])
    return np.sqrt(np.mean(S**2, axis=0))
