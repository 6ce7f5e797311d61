"""All interval methods on one fit, which one the export uses, and the intervals file.

``compute_all`` runs, on a :class:`~isaaclab_sysid.objective.result.FitResult`:

1. one batched rollout on the fit runs (optimum + finite-difference neighbours +
   every integer delay) -> ``curvature`` (used), ``bootstrap`` and ``per_run``;
2. ``cma`` from the optimizer's final covariance (no rollout);
3. one rollout of the fitted parameters on the held-out runs -> the
   structure-error ratio rho = (held-out loss per run) / (fit loss per run), from
   which the export derives its allowance (export/ranges.py).
4. the torque disturbance the replay cannot see (``intervals/process_noise.py``):
   estimated per joint from the residual's coloured part, propagated through
   replicate rollouts, and every curvature / bootstrap interval narrower than
   what it causes is widened to it.
5. the delay's uncertainty (``intervals/delay_union.py``): the delay profile re-optimized around the fitted
   delay and tested by likelihood ratio on the HAC scale; where more than the fitted delay is accepted,
   every curvature / bootstrap interval becomes the union over the accepted delays (each widened as in 3-4)
   and the warnings name the delays and the numbers that move.
6. a group the fit leaves out (``viscous``, held at 0; intervals/omitted.py): the linearized refit with it
   free, from one rollout of its forward differences; every curvature / bootstrap interval becomes the union of
   itself and the free model's interval (moved by that refit's shift, widened by the ratio of the two
   curvatures' standard errors).

**Which one the export uses, and why.** ``curvature`` (the HAC sandwich): it is
the only one that is both cheap (one rollout of 2p + 1 + delays candidates) and
calibrated against the twin (benchmarks/interval_coverage.py), it accounts for
the residuals' autocorrelation, and it gives the correlation matrix.
``bootstrap`` is its resampling twin (same information, blocks instead of a
kernel) and should agree; a large disagreement is flagged. ``per_run`` has
R - 1 degrees of freedom (R = 2-3 runs) and ``cma`` measures the optimizer's
state, not the data's noise, so neither is used. ``--interval_method widest``
takes, per number, the widest of curvature and bootstrap (the cautious choice).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights, total_loss
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.intervals.basins import joint_masks, score_lines, search_basin, widen_for_basin, widen_for_line
from isaaclab_sysid.intervals.bootstrap import block_bootstrap_intervals, per_run_intervals
from isaaclab_sysid.intervals.cma_cov import cma_intervals
from isaaclab_sysid.intervals.common import Interval, IntervalSet
from isaaclab_sysid.intervals.consistency import Consistency, consistency
from isaaclab_sysid.intervals.curvature import IntervalError, Sensitivity, curvature_intervals, sensitivity
from isaaclab_sysid.intervals.delay_union import DelayUnion, mark_unreliable, profile_delays, union_intervals, union_warnings
from isaaclab_sysid.intervals.omitted import OMITTED_GROUPS, omitted_shift, widen_for_omitted
from isaaclab_sysid.intervals.omitted import applies as omitted_applies
from isaaclab_sysid.intervals.process_noise import N_RELINEARIZED, ProcessNoise, assess_process_noise, widening_factors
from isaaclab_sysid.sim.friction import LAWS
from isaaclab_sysid.sim.interface import ReplayBackend
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.json_io import jsonable, read_json

INTERVALS_SCHEMA = "isaaclab_sysid.intervals/1"
METHODS = ("curvature", "bootstrap", "per_run", "cma")
SELECTABLE = ("curvature", "bootstrap", "widest")
DEFAULT_METHOD = "curvature"


@dataclass
class IntervalReport:
    """Every method's intervals, the selected set and the structure-error ratio.

    Attributes:
        sets: method -> :class:`IntervalSet`.
        selected: the method the export uses (``curvature``, ``bootstrap`` or ``widest``).
        structure: held-out vs fit loss per run (``rho`` = their ratio of means; None without held-out runs).
        warnings: warnings of the selected set plus cross-method checks.
    """

    sets: dict[str, IntervalSet]
    selected: str
    level: float
    space: dict
    structure: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    timing_s: dict = field(default_factory=dict)
    source: str | None = None
    diagnostics: dict = field(default_factory=dict)

    def chosen(self) -> IntervalSet:
        if self.selected == "widest":
            return widest(self.sets["curvature"], self.sets["bootstrap"])
        return self.sets[self.selected]

    def to_dict(self) -> dict:
        return {
            "schema": INTERVALS_SCHEMA,
            "source": self.source,
            "level": self.level,
            "selected": self.selected,
            "why_selected": "curvature: HAC sandwich at the optimum (autocorrelation-aware, cheap, calibrated on the twin); "
            "see docs/intervals_and_export.md",
            "param_space": self.space,
            "structure": self.structure,
            "warnings": self.warnings,
            "timing_s": self.timing_s,
            "methods": {k: v.to_dict() for k, v in self.sets.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "IntervalReport":
        if d.get("schema") != INTERVALS_SCHEMA:
            raise ValueError(f"not an intervals file (schema {d.get('schema')!r}, expected {INTERVALS_SCHEMA})")
        return cls(sets={k: IntervalSet.from_dict(v) for k, v in d["methods"].items()}, selected=d["selected"],
                   level=float(d["level"]), space=d["param_space"], structure=d.get("structure", {}),
                   warnings=list(d.get("warnings", [])), timing_s=d.get("timing_s", {}), source=d.get("source"))


def widest(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """Per number, the union of two methods' intervals (unbounded if either is)."""
    bb = b.by_label()
    out = []
    for iv in a.intervals:
        o = bb.get(iv.label)
        if o is None:
            out.append(iv)
            continue
        flags = dict(reliable=iv.reliable and o.reliable, at_bound=iv.at_bound or o.at_bound)
        if not (iv.bounded and o.bounded):
            out.append(Interval(iv.label, iv.group, iv.joint, iv.value, None, None, None, False,
                                iv.note or o.note or "unbounded in one method", **flags))
            continue
        std = max(x for x in (iv.std, o.std, 0.0) if x is not None) or None
        note = "; ".join(n for n in ("widest of curvature and bootstrap", iv.note) if n)
        out.append(Interval(iv.label, iv.group, iv.joint, iv.value, min(iv.lower, o.lower), max(iv.upper, o.upper), std,
                            True, note, **flags))
    return IntervalSet("widest", a.level, out, a.warnings + b.warnings, {"of": [a.method, b.method]}, a.cov, a.cov_labels)


def structure_ratio(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, fit_runs: Sequence[Run],
                    heldout: Sequence[Run], weights: LossWeights) -> dict:
    """Loss per run of the fitted parameters on the fit and held-out runs, and rho, the held-out excess.

    rho is the largest, over the channels q, dq and EE position, of (mean held-out MSE) / (mean fit MSE): the
    loss as a whole is dominated by the velocity noise, which hides a position error the model makes on the
    held-out run; each channel's ratio is kept too.
    """
    if not heldout:
        return {"rho": None, "note": "no held-out runs: no structure-error allowance can be derived"}
    runs = list(fit_runs) + list(heldout)
    rollouts = backend.rollout(space.to_batch(np.asarray([x0])), runs)
    lb = total_loss(rollouts, runs, weights)
    per = lb.per_run[:, 0]
    fit_l, ho_l = per[: len(fit_runs)], per[len(fit_runs):]
    mse = np.array([[float(np.mean((getattr(ro, a)[0] - getattr(r, b)) ** 2)) for a, b in
                     (("q", "q"), ("dq", "dq"), ("ee_pos", "ee_pos"))] for ro, r in zip(rollouts, runs)])
    nf = len(fit_runs)
    with np.errstate(all="ignore"):
        ch = np.mean(mse[nf:], axis=0) / np.mean(mse[:nf], axis=0)
    ch = {k: (float(v) if np.isfinite(v) else None) for k, v in zip(("q", "dq", "ee_pos"), ch)}
    finite = [v for v in ch.values() if v is not None]
    rho = max(finite) if finite else None
    return {
        "rho": rho,
        "rho_per_channel": ch,
        "rho_loss": float(np.mean(ho_l) / np.mean(fit_l)) if np.mean(fit_l) > 0 else None,
        "fit_loss_per_run": {r.name: float(v) for r, v in zip(fit_runs, fit_l)},
        "heldout_loss_per_run": {r.name: float(v) for r, v in zip(heldout, ho_l)},
        "heldout_diverged": bool(lb.diverged[0]),
        "note": "rho = the largest channel ratio (q, dq, EE) of mean held-out MSE / mean fit MSE; rho > 1: the model "
                "misses something",
    }


def delay_heldout_profile(backend: ReplayBackend, result: FitResult, heldout: Sequence[Run],
                          tol: float = 0.02) -> dict | None:
    """The held-out loss at each delay's re-optimized parameters (the refinement's per-delay tracks).

    Returns None without held-out runs or with fewer than two delay tracks; else the held-out loss per delay,
    its best delay and the delays whose held-out loss is within ``tol`` (relative) of the best.
    """
    if not heldout or result.refine is None:
        return None
    per = result.refine.best_per_delay()
    if len(per) < 2 or any(t.x.size != result.space.dim for t in per.values()):
        return None
    delays = list(per)
    X = np.asarray([per[d].x for d in delays])
    lb = total_loss(backend.rollout(result.space.to_batch(X), list(heldout)), list(heldout), result.loss_weights)
    loss = {d: float(v) for d, v in zip(delays, lb.total)}
    best = min(loss, key=loss.get)
    near = sorted(d for d, v in loss.items() if v <= (1.0 + tol) * loss[best])
    return {"heldout_loss": {str(d): v for d, v in loss.items()}, "fit_loss": {str(d): per[d].loss for d in delays},
            "heldout_best": best, "within_tol": near, "tol": tol,
            "note": f"held-out loss at each delay's fit optimum; delays within {100 * tol:g} % of the best are "
                    "indistinguishable on the held-out runs"}


def inflate(s: IntervalSet, factor: float | dict[str, float], space: ParamSpace, why: str) -> None:
    """Widen every bounded continuous interval of ``s`` about its value by ``factor`` (per label when a dict;
    clipped to the search bounds)."""
    lo_b, hi_b = space.bounds()
    labels = space.labels()
    for iv in s.intervals:
        if not iv.bounded or iv.group == "delay":
            continue
        f = factor.get(iv.label, 1.0) if isinstance(factor, dict) else factor
        if f <= 1.0:
            continue
        i = labels.index(iv.label)
        iv.lower = float(max(lo_b[i], iv.value - f * (iv.value - iv.lower)))
        iv.upper = float(min(hi_b[i], iv.value + f * (iv.upper - iv.value)))
        iv.std = None if iv.std is None else float(iv.std * f)
        iv.note = "; ".join(n for n in (iv.note, why.format(f=f)) if n)


def widen_for_process_noise(sets: dict[str, IntervalSet], pn: ProcessNoise, space: ParamSpace) -> list[str]:
    """Widen the curvature and bootstrap intervals to the standard errors the estimated torque disturbance causes
    (intervals/process_noise.py); returns the warnings."""
    if pn.skipped:
        return [f"intervals: process-noise check skipped ({pn.skipped})"] if "backend" in pn.skipped else []
    factors = {m: widening_factors(pn, {iv.label: iv.std for iv in sets[m].intervals}) for m in ("curvature", "bootstrap")}
    for m, f in factors.items():
        inflate(sets[m], f, space, "widened x{f:.2f}: the torque disturbance the replay cannot see (process noise)")
    worst = max(factors["curvature"].values(), default=1.0)
    if worst <= 1.0:
        return []
    sig = ", ".join(f"{s:.2g}" for s in pn.sigma_w)
    if pn.source == "torque_input":
        return [f"intervals: the logged torque's white noise (measured from the log: [{sig}] N m per row) drives the "
                f"replay and moves the fitted numbers more than the window-cluster sandwich sees: intervals widened up "
                f"to x{worst:.1f} (intervals/torque_input_noise.py)"]
    carried = pn.sigma_w if pn.propagated is None else pn.propagated
    f = pn.relinearized_factor
    bent = ""
    if f is not None and np.any(np.isfinite(f) & (f > 1.0)):
        top = int(np.nanargmax(f))
        bent = (f"; {pn.relinearized} replicates solved again at their one-step estimate spread up to x{f[top]:.2f} "
                f"further ({pn.labels[top]}; the ratio holds finite-difference and sampling error as well as how far "
                "the answer departs from linear in the disturbance): each number's error carries its own ratio where "
                "above 1 (structure.process_noise.relinearized_factor)")
    return [f"intervals: an unmodelled torque disturbance of about {pn.sigma_common:.2g} N m per 1 ms tick (per joint, "
            f"propagated at [{', '.join(f'{s:.2g}' for s in carried)}] from the split [{sig}]; "
            f"estimated from the residual's smooth part) moves the fitted numbers more than the measurement noise "
            f"does: intervals widened up to x{worst:.1f}" + bent
            + (f"; {pn.relinearize_note}" if pn.relinearize_note else "")]


def widen_conditional(sets: dict[str, IntervalSet], agree: Consistency, pn: ProcessNoise, labels: list[str],
                      space: ParamSpace) -> None:
    """Widen the curvature and bootstrap sets of another optimum (another delay) as the fitted delay's were: by the
    runs' Birge ratio and to the process noise's standard errors."""
    if agree.ratio is not None and agree.ratio > 1.0:
        for m in ("curvature", "bootstrap"):
            inflate(sets[m], agree.factors(labels), space,
                    "widened x{f:.2f}: the runs' own optima disagree beyond their noise (Birge ratio)")
    widen_for_process_noise(sets, pn, space)


def delay_union(objective: ReplayObjective, sens: Sensitivity, result: FitResult, sets: dict[str, IntervalSet],
                agree: Consistency, pn: ProcessNoise, level: float, fd_step: float, n_boot: int, seed: int,
                max_iter: int = 5, max_delays: int = 8) -> tuple[DelayUnion | None, list[str]]:
    """Carry the delay's uncertainty into the curvature and bootstrap intervals (intervals/delay_union.py).

    Returns the record (None when the delay is not fitted) and the warnings; ``sets`` change only when a delay
    other than the fitted one is accepted.
    """
    prof = profile_delays(objective, sens, result, level, max_iter, max_delays)
    if prof is None:
        return None, []
    rec = DelayUnion(prof)
    others = [d for d in prof.union_delays if d != prof.fitted]
    rec.conditional[prof.fitted] = {iv.label: [iv.lower, iv.upper] for iv in sets["curvature"].intervals
                                    if iv.group != "delay"}
    if others:
        space = objective.space
        at: dict[int, dict[str, IntervalSet]] = {}
        values = {}
        for d in others:
            try:
                sd = sensitivity(objective, prof.points[d].x, fd_step, profile_delay=False)
            except IntervalError:  # diverges at that delay: nothing bounds the numbers there
                at[d] = {m: IntervalSet(m, level, []) for m in ("curvature", "bootstrap")}
                values[d] = {}
                continue
            at[d] = {"curvature": curvature_intervals(sd, level),
                     "bootstrap": block_bootstrap_intervals(sd, level, n_boot=n_boot, seed=seed)}
            widen_conditional(at[d], agree, pn, list(sd.labels), space)
            values[d] = dict(zip(sd.labels, (float(v) for v in sd.value[sd.cont])))
            rec.conditional[d] = {iv.label: [iv.lower, iv.upper] for iv in at[d]["curvature"].intervals
                                  if iv.group != "delay"}
        for m in ("curvature", "bootstrap"):
            r = union_intervals(sets[m], {d: at[d][m] for d in others}, prof, values)
            if m == "curvature":
                rec.width_ratio = r
    warns = union_warnings(prof, rec.width_ratio)
    if prof.fitted_rejected:
        mark_unreliable([sets["curvature"], sets["bootstrap"]],
                        f"fitted at delay {prof.fitted}, which the re-optimized delay profile rejects")
    return rec, warns


#: |correlation| with a number at its search bound from which an interval is marked unreliable (``tied_to_bounds``)
BOUND_CORRELATION = 0.5


def tied_to_bounds(curv: IntervalSet | None, bounded: Sequence[str],
                   threshold: float = BOUND_CORRELATION) -> dict[str, tuple[str, float]]:
    """Numbers whose curvature correlation with an identified number at its search bound reaches ``threshold``:
    label -> (that bounded label, the correlation).

    An optimum on a bound is a constrained one: a number correlated ``rho`` with the clamped one has moved to make up
    for it, by up to ``rho`` of its own standard error per standard error the clamped one would have gone past the
    bound, and its interval (computed as if every number were free) does not hold that shift. On the full-size
    servo twin 4 of 12 missed numbers were such (``mu_static`` and ``dynamic_ratio`` of wrist_roll and the gripper,
    |rho| 0.64-0.94 with a Stribeck velocity or viscous friction at its bound; docs/servo_arms.md). A bounded number
    that is not identifiable (null space, wider than its box) is left out: its correlations carry no information.
    """
    if curv is None or curv.cov is None or not bounded:
        return {}
    labels = list(curv.cov_labels)
    corr = curv.correlation()
    by = curv.by_label()
    idx = {lab: k for k, lab in enumerate(labels)}
    anchors = [b for b in bounded if b in idx and b in by and by[b].identifiable and by[b].lower is not None]
    out: dict[str, tuple[str, float]] = {}
    for lab, k in idx.items():
        if lab in bounded:
            continue
        best = max(((abs(float(corr[k, idx[b]])), b) for b in anchors), default=None)
        if best is not None and best[0] >= threshold:
            out[lab] = (best[1], float(corr[k, idx[best[1]]]))
    return out


def flag_intervals(sets: dict[str, IntervalSet], result: FitResult, delay_profile: dict | None) -> list[str]:
    """Mark what the intervals cannot promise: values at a search bound and the numbers tied to them
    (:func:`tied_to_bounds`), a misfit, a delay the held-out runs dispute.

    Returns the warnings. Every method's set is marked the same way.
    """
    warns: list[str] = []
    hits = {h.label: h for h in result.at_bounds()}
    misfit = result.adequacy is not None and result.adequacy.misfit
    for lab, h in hits.items():
        warns.append(f"intervals: {h.describe()}: its interval assumes an interior optimum; unreliable")
    tied = tied_to_bounds(sets.get("curvature"), list(hits))
    if tied:
        warns.append("intervals: " + ", ".join(f"{lab} (rho {r:+.2f} with {b})" for lab, (b, r) in tied.items())
                     + f" are correlated |rho| >= {BOUND_CORRELATION:g} with a number at its search bound: their "
                     "intervals assume it free, so they are marked unreliable")
    if misfit:
        warns.append("intervals: the model misfits the data (" + "; ".join(result.adequacy.messages[:2]) + "): every "
                     "interval assumes the model is right and is marked unreliable")
    dwarn = None
    if delay_profile is not None and result.delay is not None:
        near = delay_profile["within_tol"]
        if len(near) > 1 or delay_profile["heldout_best"] != result.delay:
            dwarn = (f"delay not identified on the held-out runs: delays {near} fit them within "
                     f"{100 * delay_profile['tol']:g} % (best {delay_profile['heldout_best']}, fitted {result.delay})")
            warns.append(f"intervals: {dwarn}; the delay interval is widened to cover them")
    mwarn = misfit_delay_note(result, delay_profile) if misfit else None
    if mwarn is not None:
        warns.append(f"intervals: {mwarn}")
    for s in sets.values():
        for iv in s.intervals:
            notes = []
            if iv.label in hits:
                iv.at_bound = hits[iv.label].side
                notes.append(f"at its {iv.at_bound} search bound")
            elif iv.label in tied:
                b, r = tied[iv.label]
                notes.append(f"tied to {b} at its search bound (rho {r:+.2f})")
            if misfit:
                notes.append("fitted under a misfit")
            if iv.group == "delay" and mwarn is not None:
                notes.append("the misfit model's delay, biased by what the model lacks (see the warnings)")
            if iv.group == "delay" and dwarn is not None:
                notes.append(dwarn)
                if iv.bounded:
                    iv.lower = float(min(iv.lower, *delay_profile["within_tol"]))
                    iv.upper = float(max(iv.upper, *delay_profile["within_tol"]))
            if notes:
                iv.reliable = False
                iv.note = "; ".join([n for n in (iv.note, *notes) if n])
    return warns


def misfit_delay_note(result: FitResult, delay_profile: dict | None) -> str | None:
    """What a misfit means for the fitted delay (None when no delay is fitted).

    A model that lacks a term moves its delay to absorb what it lacks, and the more data the more firmly: issue 45's
    Coulomb model on the demo's static-friction twin (true delay 2) ends at delay 2 on 12 s of one chirp and at delay 0
    on 48 s, where re-optimized at each delay held fixed it prefers 0 over 1 by 11 and over 2 by 43 on the
    likelihood-ratio scale (L(d) - L_min) / (L_min / n_eff): the in-sample delay profile, and every delay interval
    built on it, is conditional on the model. The held-out runs are the check that does not share the bias (there the
    held-out multiband's loss at the fit's delay-0 optimum was 18 % above that at its delay-2 track): with them the note names the delay
    they prefer; without them, that none checks it."""
    if result.delay is None:
        return None
    head = (f"the delay ({result.delay} ticks) is this misfit model's optimum, not a measurement of the actuator: a "
            "model that lacks a term shifts the delay to absorb it, more firmly the more data (the delay profile and "
            "its interval are conditional on the model)")
    if delay_profile is None:
        return head + "; no held-out run checks it (give one with --heldout), so refit with the model the adequacy " \
                      "verdict names before trusting the delay"
    hl = {int(d): float(v) for d, v in delay_profile["heldout_loss"].items()}
    best = int(delay_profile["heldout_best"])
    losses = ", ".join(f"{d}: {v / hl[best]:.3g}" for d, v in sorted(hl.items()))
    if best == result.delay and delay_profile["within_tol"] == [best]:
        return head + f"; the held-out runs agree (their loss at each delay's fit optimum, over the best: {losses})"
    return head + (f"; the held-out runs prefer delay {best} (their loss at each delay's fit optimum, over the best: "
                   f"{losses}), and the delay interval covers it")


def compute_all(
    backend: ReplayBackend,
    result: FitResult,
    runs: Sequence[Run],
    heldout: Sequence[Run] = (),
    level: float = 0.95,
    method: str = DEFAULT_METHOD,
    fd_step: float = 1e-3,
    n_boot: int = 1000,
    seed: int = 0,
    source: str | None = None,
    delay_iter: int = 5,
    delay_max: int = 8,
    omitted_groups: Sequence[str] = OMITTED_GROUPS,
    basins: bool = True,
    process_noise_floor: bool = True,
    process_noise_relinearized: int = N_RELINEARIZED,
    other_starts: Sequence[FitResult] = (),
) -> IntervalReport:
    """Every interval method on one fit (see module docstring); the result's loss and run weights are used.

    ``delay_iter``: LM iterations per round of the delay profile's re-optimization; ``delay_max``: at most this many
    delays re-optimized (intervals/delay_union.py; 0 keeps the intervals conditional on the fitted delay).
    ``omitted_groups``: groups the fit left out whose free refit every interval holds (intervals/omitted.py; empty
    keeps the intervals conditional on their nominal values). ``basins``: search a friction law's other basin and
    hold it in every interval where it is within the noise (intervals/basins.py; False keeps them local).
    ``process_noise_floor``: each joint's torque disturbance at least the common level (intervals/process_noise.py;
    False: the per-joint split alone, for benchmarks/process_noise_coverage.py's comparison).
    ``process_noise_relinearized``: the process noise's replicates solved again at their one-step estimate
    (intervals/process_noise.py; 0: one Gauss-Newton step only, for the same benchmark's comparison).
    ``other_starts``: the law step's refits from the starts it did not keep (the load law's, fit/law_starts.py),
    each scored as a basin and held in every interval where it is within the noise (with ``basins``).
    """
    if method not in SELECTABLE:
        raise ValueError(f"unknown interval method '{method}' (choose from {', '.join(SELECTABLE)})")
    space, weights, traj_weights = result.space, result.loss_weights, result.traj_weights
    if len(traj_weights) != len(runs):
        raise ValueError(f"the fit result has {len(traj_weights)} run weights for {len(runs)} runs")
    x0 = np.asarray(result.best_x, dtype=float)
    timing = {}
    t0 = time.perf_counter()
    objective = ReplayObjective(space, backend, runs, weights, traj_weights)
    sens = sensitivity(objective, x0, fd_step)
    timing["batched_rollout"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sets = {
        "curvature": curvature_intervals(sens, level),
        "bootstrap": block_bootstrap_intervals(sens, level, n_boot=n_boot, seed=seed),
        "per_run": per_run_intervals(sens, level),
        "cma": cma_intervals(result, level),
    }
    timing["statistics"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    structure = structure_ratio(backend, space, x0, runs, heldout, weights)
    delay_prof = delay_heldout_profile(backend, result, heldout)
    if delay_prof is not None:
        structure["delay_profile"] = delay_prof
    timing["heldout_rollout"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sens_held = [sensitivity(ReplayObjective(space, backend, heldout, weights), x0, fd_step, profile_delay=False)] \
        if heldout else []
    agree = consistency([sens, *sens_held])
    structure["consistency"] = agree.to_json()
    timing["consistency"] = time.perf_counter() - t0
    flag_warns = []
    if agree.ratio is not None and agree.ratio > 1.0:
        for m in ("curvature", "bootstrap"):
            inflate(sets[m], agree.factors(sens.labels), space,
                    "widened x{f:.2f}: the runs' own optima disagree beyond their noise (Birge ratio)")
        flag_warns.append(f"intervals: the runs' own optima (fit and held-out) disagree {agree.ratio:.2f}x beyond their "
                          "noise (Birge ratio): model-structure error the noise does not explain; every interval widened "
                          "by max(that, its own ratio)")
    t0 = time.perf_counter()
    pn = assess_process_noise(backend, space, x0, runs, sens, weights, traj_weights, seed=seed,
                              common_floor=process_noise_floor, relinearized=process_noise_relinearized)
    structure["process_noise"] = pn.to_json()
    timing["process_noise"] = time.perf_counter() - t0
    flag_warns += widen_for_process_noise(sets, pn, space)
    if delay_max > 0:
        t0 = time.perf_counter()
        du, dwarns = delay_union(objective, sens, result, sets, agree, pn, level, fd_step, n_boot, seed, delay_iter,
                                 delay_max)
        if du is not None:
            structure["delay"] = du.to_json(space)
        flag_warns += dwarns
        timing["delay_union"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for group in [g for g in omitted_groups if omitted_applies(space, backend, runs, g)]:
        om = omitted_shift(backend, sens, runs, weights, traj_weights, group, fd_step)
        if om is None:
            flag_warns.append(f"intervals: could not test the left-out {group} (its rollout diverged or is not "
                              f"finite at the fitted point): every interval is conditional on {group} at its nominal")
            continue
        structure.setdefault("omitted", {})[group] = om.to_json()
        flag_warns += widen_for_omitted(sets, om, space)
    timing["omitted"] = time.perf_counter() - t0
    if basins:  # a friction law's shape: its other basin (intervals/basins.py)
        t0 = time.perf_counter()
        for other in other_starts:  # an optimum the law step reached from another start, scored before J is released
            if list(other.space.labels()) != list(space.labels()):
                continue
            for scan in score_lines(objective, sens, space.normalize(other.values),
                                    "the load law's refit from the start the fit did not keep",
                                    joint_masks(space, LAWS["load"].fit_groups), level):
                structure.setdefault("alternatives", []).append(scan.to_json())
                flag_warns += widen_for_line(sets, scan)
        bs = search_basin(objective, sens, level, release_jacobian=True)  # the last reader of sens.J
        if bs is not None:
            structure["basins"] = bs.to_json()
            flag_warns += widen_for_basin(sets, bs)
        timing["basins"] = time.perf_counter() - t0
    flag_warns += flag_intervals(sets, result, delay_prof)
    warns = list(sets["curvature"].warnings) + flag_warns
    c, b = sets["curvature"].by_label(), sets["bootstrap"].by_label()
    for lab, iv in c.items():
        o = b.get(lab)
        if iv.std and o is not None and o.std and not (0.5 < o.std / iv.std < 2.0):
            warns.append(f"{lab}: bootstrap and curvature standard errors differ by more than 2x ({o.std:.3g} vs {iv.std:.3g})")
    rep = IntervalReport(sets, method, level, space.describe(), structure, warns, timing, source,
                         {"sensitivity_candidates": sens.n_candidates})
    if method != "curvature":
        rep.warnings += [w for w in rep.chosen().warnings if w not in rep.warnings]
    return rep


def write_intervals(path: str | Path, report: IntervalReport) -> Path:
    """Write ``intervals.json`` atomically."""
    path = Path(path)
    atomic_write_json(path, jsonable(report.to_dict()))
    return path


def read_intervals(path: str | Path) -> IntervalReport:
    path = Path(path)
    d = read_json(path, "intervals")
    try:
        return IntervalReport.from_dict(d)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
