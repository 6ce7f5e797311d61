"""What a group the fit leaves out would change: intervals that hold the refit with it.

A fit that leaves a group out holds it at its nominal value, and every interval it reports is conditional on
that value. The servo fits leave ``viscous`` out by default: below the torque limit the servo's damping ``kd dq``
and the joint's viscous friction ``viscous dq`` are one torque, so the fitted ``kd`` stands for ``kd + viscous``.
At the torque limit they part: the servo's PD torque is clamped, with its damping, and the friction is not. On the
most saturated joints of the servo twin the fitted ``kd`` (and, through the coupling, a neighbour's armature) took
a bias of one or two interval half-widths that no interval held (docs/servo_arms.md, section 6).

:func:`omitted_shift` asks, at the optimum, what freeing the group would do. One rollout of forward differences in
the group's entries (its nominal, 0, is its lower bound) and the fit's own Jacobian give the linearized refit: the
bounded Gauss-Newton step ``min ||r + J_F dF + J_S dS||^2`` (every entry inside its search bounds, ``dS >= 0``),
minus the same step with ``dS = 0`` (what the fit's own stopping left), is the shift each fitted number takes
when the group is freed. A ``kd``'s shift counts ``kd + viscous``, the torque it stands for. The same curvature,
with the group's columns and without, gives each number's standard error with the group free over that with it
held (:func:`marginal_ratios`; >= 1: freeing a group can only take information away). :func:`widen_for_omitted`
makes each curvature / bootstrap interval the union of itself and the free model's interval (itself moved by the
shift and scaled by the ratio), as the delay's union does for the delays the data accept
(intervals/delay_union.py): the interval then holds both models. On the servo twin the ratio is what matters for
shoulder_pan, which gravity does not load: in saturation its viscous friction trades against its scale (kp, kd
and armature together), and freeing it widens those three intervals x4-5.4 (docs/servo_arms.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import lsq_linear

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, GroupSpec, ParamSpace
from isaaclab_sysid.objective.residuals import weighted_residuals
from isaaclab_sysid.intervals.common import IntervalSet
from isaaclab_sysid.intervals.curvature import Sensitivity, pinv_normalized
from isaaclab_sysid.sim.interface import ReplayBackend
from isaaclab_sysid.sim.shooting import is_torque_run

#: the groups tested when the fit leaves them out (those with a physical zero the fit may have assumed)
OMITTED_GROUPS = ("viscous",)
#: a fitted group that stands for itself plus an omitted one below the torque limit: its shift counts both
STANDS_FOR = {"kd": "viscous"}
#: shifts below this share of an interval's half-width are not named in the warning (the union still holds them)
NAMED_SHARE = 0.25
#: nor widening ratios below this
NAMED_RATIO = 1.25


@dataclass
class OmittedShift:
    """The linearized refit with an omitted group freed.

    Attributes:
        group: the omitted group (held at ``nominal`` by the fit).
        step: (N,) its bounded Gauss-Newton entries per joint (decoded units; >= 0 from a nominal at the lower bound).
        shift: fitted continuous label -> its shift in decoded units (``kd`` counts ``kd + viscous``).
        gain: the share of the fit loss the free group would remove beyond the fitted groups alone (linear forecast).
        joint_names: the arm's joints, in the order of ``step``.
        widen: fitted continuous label -> its standard error with the group free over that with it held (>= 1: the
            group takes information the held fit gave to the number).
    """

    group: str
    nominal: float
    step: list[float]
    shift: dict[str, float]
    gain: float
    joint_names: list[str] = field(default_factory=list)
    widen: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"group": self.group, "nominal": self.nominal, "step": list(self.step), "shift": dict(self.shift),
                "gain": self.gain, "joint_names": list(self.joint_names), "widen": dict(self.widen)}


def augmented_with(space: ParamSpace, group: str) -> ParamSpace:
    """``space`` with ``group`` appended at its default bounds."""
    lo, hi = DEFAULT_BOUNDS[group]
    return ParamSpace([*space.groups, GroupSpec(group, float(lo), float(hi))], space.n_dof, space.joint_names)


def applies(space: ParamSpace, backend: ReplayBackend, runs: Sequence[Run], group: str) -> bool:
    """Whether :func:`omitted_shift` tests ``group``: the fit leaves it out, the backend can represent it, and the
    runs are not torque runs (their fits carry viscous friction)."""
    return group not in space.group_names and group in backend.supported_groups and not any(map(is_torque_run, runs))


def omitted_shift(backend: ReplayBackend, sens: Sensitivity, runs: Sequence[Run], weights: LossWeights,
                  traj_weights: Sequence[float] | None, group: str, step: float = 1e-3) -> OmittedShift | None:
    """The linearized refit with the omitted ``group`` freed (module docstring), from the fit's sensitivity ``sens``.

    Call it where :func:`applies`. Returns None where it cannot tell: the group's rollout diverges or its Jacobian
    or residual is not finite.
    """
    space = sens.space
    aug = augmented_with(space, group)
    vals = space.decode(sens.x0)
    nominal = float(aug.nominal_values()[group][0])
    vals[group] = np.full(space.n_dof, nominal)
    xa = aug.normalize(vals)
    sl = aug.slice(group)
    idx = np.arange(aug.dim)[sl]
    X = np.repeat(xa[None], 1 + idx.size, axis=0)
    width = aug.widths()[idx]
    h = np.where(xa[idx] + step <= 1.0, step, -step)  # forward from the lower bound; backward only at the upper
    X[1 + np.arange(idx.size), idx] += h
    obj = ReplayObjective(aug, backend, list(runs), weights, traj_weights)
    res = weighted_residuals(obj.states(X), list(runs), weights, obj.traj_weights)
    R = [r.per_sample() for r in res]  # per run, (P, T, C)
    if any(np.any(r.diverged) for r in res):
        return None
    lo, hi = space.bounds()
    k = np.asarray(sens.cont)
    v = np.asarray(sens.value, dtype=float)[k]
    wF = space.widths()[k]
    scale = np.r_[wF, width]  # normalized columns: a step of 1 is the whole search box
    H = np.zeros((k.size + idx.size,) * 2)
    g = np.zeros(k.size + idx.size)
    ssr = 0.0
    for J, r in zip(sens.J, R):  # per run, so no (samples x numbers) matrix of every run is ever stacked
        JS = ((r[1:] - r[0][None]) / (h * width)[:, None, None]).reshape(idx.size, -1).T
        A = np.hstack([np.nan_to_num(J).reshape(-1, J.shape[-1]), JS]) * scale
        r0 = r[0].reshape(-1)
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(r0))):
            return None
        H += A.T @ A
        g += A.T @ r0
        ssr += float(r0 @ r0)
    if ssr <= 0.0:
        return None
    loF, hiF = np.minimum(lo[k] - v, 0.0) / wF, np.maximum(hi[k] - v, 0.0) / wF
    hiF = hiF + 1e-12 * (hiF <= loF)
    loS, hiS = (aug.bounds()[0][idx] - nominal) / width, (aug.bounds()[1][idx] - nominal) / width
    F = np.arange(k.size)
    fixed, loss_fixed = bounded_gauss_newton(H[np.ix_(F, F)], g[F], loF, hiF)
    free, loss_free = bounded_gauss_newton(H, g, np.r_[loF, loS], np.r_[hiF, hiS])
    dF = (free[:k.size] - fixed) * wF
    dS = free[k.size:] * width
    # per fitted number, the group's entry (its joint) it stands with (-1: none): kd[j] stands for kd[j] + viscous[j]
    entries = space.entries()
    pair = np.array([space.joint_names.index(entries[i].joint) if STANDS_FOR.get(entries[i].group) == group else -1
                     for i in k])
    dF = dF + np.where(pair >= 0, dS[pair], 0.0)
    shift = {lab: float(d) for lab, d in zip(sens.labels, dF)}
    gain = float(max(0.0, (loss_fixed - loss_free) / ssr))
    widen = dict(zip(sens.labels, marginal_ratios(H / np.outer(scale, scale), scale, pair)))
    return OmittedShift(group, nominal, [float(d) for d in dS], shift, gain, list(space.joint_names), widen)


def marginal_ratios(H: np.ndarray, scale: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """(p,) per fitted number, its standard error with the omitted group free over that with it held (>= 1).

    Args:
        H: (p + m, p + m) Gauss-Newton curvature J^T J in decoded units: the p fitted numbers, then the group's m.
        scale: (p + m,) the search-box widths (the pseudo-inverses' rank tolerance is taken in x / scale).
        pair: (p,) the group's entry a fitted number stands with (measured as their sum: ``kd + viscous``), or -1.
    """
    p = pair.size
    Hf = pinv_normalized(H, scale, rtol=1e-10).Hinv
    Hc = pinv_normalized(H[:p, :p], scale[:p], rtol=1e-10).Hinv
    C = np.zeros((p, H.shape[0]))
    C[np.arange(p), np.arange(p)] = 1.0
    C[np.flatnonzero(pair >= 0), p + pair[pair >= 0]] = 1.0
    var_f = np.einsum("ij,jk,ik->i", C, Hf, C)
    var_c = np.diag(Hc)
    ok = (var_c > 0) & (var_f > var_c)
    return np.where(ok, np.sqrt(np.where(ok, var_f, 1.0) / np.where(ok, var_c, 1.0)), 1.0)


def bounded_gauss_newton(H: np.ndarray, g: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, float]:
    """``argmin x^T H x + 2 g^T x`` over ``lo <= x <= hi`` (H = A^T A, g = A^T r: the bounded linear least squares
    ``min ||r + A x||^2`` from its normal equations) and the loss change there. H's eigenvalues are floored at
    1e-12 of the largest, so a direction the data cannot see (kd against viscous below the torque limit) gets
    the smallest move the bounds allow instead of a singular solve."""
    w, V = np.linalg.eigh(0.5 * (H + H.T))
    w = np.maximum(w, max(float(w.max()), 1e-300) * 1e-12)
    R = np.sqrt(w)[:, None] * V.T  # R^T R = H
    b = -(V.T @ g) / np.sqrt(w)
    x = lsq_linear(R, b, bounds=(lo, hi), method="bvls").x
    return x, float(x @ H @ x + 2.0 * g @ x)


def widen_for_omitted(sets: dict[str, IntervalSet], om: OmittedShift, space: ParamSpace) -> list[str]:
    """Make each curvature / bootstrap interval the union of itself and the free model's interval: itself moved by
    ``om``'s shift and scaled about the moved value by ``om``'s widening ratio (clipped to the search bounds).

    Returns the warning naming the numbers moved by at least :data:`NAMED_SHARE` of their half-width or widened by
    at least :data:`NAMED_RATIO` (none when nothing changes that much)."""
    lo_b, hi_b = space.bounds()
    labels = space.labels()
    named: dict[str, tuple[float, float]] = {}
    for m in ("curvature", "bootstrap"):
        for iv in sets[m].intervals:
            d = om.shift.get(iv.label)
            if d is None or not iv.bounded or iv.group == "delay":
                continue
            half = 0.5 * (iv.upper - iv.lower)
            i = labels.index(iv.label)
            f = om.widen.get(iv.label, 1.0)
            iv.lower = float(max(lo_b[i], min(iv.lower, iv.value + d - f * (iv.value - iv.lower))))
            iv.upper = float(min(hi_b[i], max(iv.upper, iv.value + d + f * (iv.upper - iv.value))))
            share = abs(d) / half if half > 0 else np.inf
            if share >= NAMED_SHARE or f >= NAMED_RATIO:
                iv.note = "; ".join(n for n in (iv.note, f"union with the fit with {om.group} free (moved {d:+.3g}, "
                                                          f"{share:.2f} of its half-width; x{f:.2f} wider)") if n)
                if m == "curvature":
                    named[iv.label] = (share, f)
    if not named:
        return []
    steps = ", ".join(f"{j} {s:.3g}" for j, s in zip(om.joint_names, om.step) if s > 0)
    worst = sorted(named.items(), key=lambda t: -max(t[1][0], t[1][1] - 1.0))
    return [f"intervals: {om.group} is not fitted (held at {om.nominal:g}); the data see it apart from the fitted "
            f"numbers (a linearized refit with it free takes it to [{steps or 'nominal'}] and removes "
            f"{100 * om.gain:.2g} % of the loss). With it free these move (share of their half-width) or widen: "
            + ", ".join(f"{lab} ({s:.2f}, x{f:.2f})" for lab, (s, f) in worst)
            + ". Each interval holds both fits (fitting " + om.group + " as well, in --fit_groups, tells it from what "
            "it trades against only as far as these runs do: for kd, the samples at the torque limit)"]
