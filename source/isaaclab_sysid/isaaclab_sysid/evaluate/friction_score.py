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
from isaaclab_sysid.intervals.curvature import Sensitivity, hac_bandwidth, run_meats, sensitivity
from isaaclab_sysid.intervals.process_noise import estimate_process_noise, replicate_residuals
from isaaclab_sysid.sim.friction import law_of_groups
from isaaclab_sysid.sim.interface import ReplayBackend
from isaaclab_sysid.sim.shooting import is_torque_run

ALPHA = 0.001


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


def static_friction_test(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, runs: Sequence[Run],
                         weights: LossWeights = LossWeights(), traj_weights: Sequence[float] | None = None,
                         alpha: float = ALPHA) -> StaticFrictionTest | None:
    """The score test (see module docstring) at the fitted normalized vector ``x0`` on the fit ``runs``.

    Returns None where it does not apply: the fit has no Coulomb ``friction`` group or already fits the static
    group, the backend cannot represent ``mu_static``, or the runs are torque runs.
    """
    aug = augmented_space(space)
    if aug is None or "mu_static" not in backend.supported_groups or any(is_torque_run(r) for r in runs):
        return None
    xa = coulomb_as_static(space, x0, aug)
    sens = sensitivity(ReplayObjective(aug, backend, list(runs), weights, traj_weights), xa, profile_delay=False)
    labels = aug.labels()
    tested_labels = [labels[i] for i in range(*aug.slice("dynamic_ratio").indices(aug.dim))]
    S = np.array([sens.labels.index(lab) for lab in tested_labels])
    F = np.array([k for k in range(len(sens.labels)) if k not in set(S.tolist())])
    H = sens.hessian()
    g = sum(s.sum(axis=0) for s in sens.scores())
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
    return StaticFrictionTest([float(v) for v in z], thr, joints, alpha, list(space.joint_names),
                              predicted_gain(aug, sens))


def bounded_step(space: ParamSpace, sens: Sensitivity) -> np.ndarray | None:
    """(p,) the bounded Gauss-Newton step ``min ||r + J dx||^2`` over the continuous entries, each kept inside its
    search bounds (decoded units); None when the Jacobian or the residual is not finite."""
    J = np.concatenate([j.reshape(-1, j.shape[-1]) for j in sens.J])
    r = np.concatenate([v.reshape(-1) for v in sens.r])
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
        return None
    lo, hi = space.bounds()
    k = np.asarray(sens.cont)
    v = np.asarray(sens.value, dtype=float)[k]
    lo_d, hi_d = np.minimum(lo[k] - v, 0.0), np.maximum(hi[k] - v, 0.0)
    return lsq_linear(J, -r, bounds=(lo_d, hi_d + 1e-15 * (hi_d <= lo_d))).x


def predicted_gain(space: ParamSpace, sens: Sensitivity) -> float | None:
    """The share of the loss (sum of squared residuals at the optimum) that the :func:`bounded_step` would remove:
    the linear model's forecast of a refit from this point (None when the Jacobian is not finite)."""
    r = np.concatenate([v.reshape(-1) for v in sens.r])
    step = bounded_step(space, sens) if np.any(r) else None
    if step is None:
        return None
    J = np.concatenate([j.reshape(-1, j.shape[-1]) for j in sens.J])
    return float(max(0.0, 1.0 - float(np.sum((r + J @ step) ** 2)) / float(r @ r)))


def _replicate_sd(backend: ReplayBackend, space: ParamSpace, x: np.ndarray, runs: Sequence[Run], sens: Sensitivity,
                  weights: LossWeights, traj_weights: Sequence[float] | None, C: np.ndarray) -> np.ndarray:
    """(|S|,) standard error of the efficient score over replicates pushed by the estimated torque disturbance
    (intervals/process_noise.py): under process noise the kernel meat under-counts the score's variance."""
    try:
        est = estimate_process_noise(backend, space, x, list(runs), sens, weights, traj_weights)
    except TypeError:  # a backend that cannot inject a disturbance: the kernel estimate alone
        return np.zeros(C.shape[0])
    S = np.asarray([C @ sens.score_sum(rs) for rs in
                    replicate_residuals(backend, space, x, list(runs), weights, traj_weights, est.sigma_w, est.base,
                                        est.white)])
    return np.sqrt(np.mean(S**2, axis=0))
