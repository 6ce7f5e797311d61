"""Identifiability table: how much the replay loss moves when each fitted parameter moves.

Around a nominal candidate theta0 (per-joint armature, Coulomb friction, viscous
friction, and the actuator delay), every parameter is stepped by ``rel_step``
of its fit bounds' width, up and down where the bounds allow, and the design's
run is replayed for all candidates in one batched ``rollout`` call. The nominal
replay plays the part of the real arm, so the loss of a stepped candidate
(the fit's loss: w_q MSE(q) + w_dq MSE(qd) + w_x MSE(x_ee), objective/loss.py
weights) is exactly what the fit would see if the parameter were off by that
step:

    r(theta)   residual vector with |r|^2 = loss (each term scaled by sqrt(w / count))
    J_i        = (r(theta0 + step e_i) - r(theta0 - step e_i)) / (2 step / width)
    dL_i       = |J_i|^2 rel_step^2            the loss increase of the step alone ("raw")
    dL_cond_i  = rel_step^2 / (F^-1)_ii        with F = J^T J: the loss increase left when every
                                               other parameter re-fits to absorb the step
                                               (linearized), i.e. what the fit can actually see.

A parameter whose dL_cond is far below the others' is one that the design
cannot see (or cannot tell apart from another one): the fit will return
whatever its start or prior says. Coulomb friction is not smooth: the central
difference is a secant over the step, which is the right scale for a fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.param_space import GROUPS
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, RunRollout

#: Fit bounds and units (the fit's defaults, from objective/param_space.py GROUPS).
BOUNDS = {g: GROUPS[g].default_bounds for g in ("armature", "friction", "viscous", "delay")}
UNITS = {g: GROUPS[g].unit for g in BOUNDS}
#: Nominal candidate: plausible Panda values inside the bounds.
NOMINAL = {"armature": 0.1, "friction": 0.5, "viscous": 0.5, "delay": 1}


@dataclass
class SensitivityRow:
    group: str
    joint: int | None  # 1-based; None for the arm-wide delay
    nominal: float
    step: float
    loss_increase: float  # dL: loss increase of the step alone
    conditional: float  # dL_cond: loss increase left after the other parameters re-fit


@dataclass
class IdentifiabilityTable:
    rows: list[SensitivityRow]
    weights: LossWeights
    rel_step: float
    meta: dict = field(default_factory=dict)

    def value(self, group: str, joint: int | None = None) -> SensitivityRow:
        for r in self.rows:
            if r.group == group and r.joint == joint:
                return r
        raise KeyError((group, joint))

    def to_dict(self) -> dict:
        return {
            "rel_step": self.rel_step,
            "loss_weights": {"w_q": self.weights.w_q, "w_dq": self.weights.w_dq, "w_x": self.weights.w_x},
            "rows": [r.__dict__ for r in self.rows],
            **self.meta,
        }

    def format(self) -> str:
        """Text tables (one line per group, one column per joint): dL and dL_cond."""
        groups = [g for g in ("armature", "friction", "viscous") if any(r.group == g for r in self.rows)]
        n = max((r.joint or 0) for r in self.rows)
        lines = []
        for attr, title in (("loss_increase", "dL: loss increase of a step"),
                            ("conditional", "dL_cond: what is left after the other parameters re-fit")):
            lines.append(f"{title} (step = {self.rel_step:.0%} of each bound width; delay 1 tick)")
            lines.append(f"{'group':<22}" + "".join(f"{'j' + str(j + 1):>10}" for j in range(n)))
            for g in groups:
                vals = [getattr(self.value(g, j + 1), attr) for j in range(n)]
                lines.append(f"{g + ' [' + UNITS[g] + ']':<22}" + "".join(f"{v:10.2e}" for v in vals))
            if any(r.group == "delay" for r in self.rows):
                lines.append(f"{'delay [ticks]':<22}{getattr(self.value('delay'), attr):10.2e}")
        return "\n".join(lines)


def _residuals(ro: RunRollout, w: LossWeights) -> np.ndarray:
    """(P, M) residuals of every candidate relative to candidate 0, with |r|^2 = the fit's loss."""
    p = ro.q.shape[0]
    parts = []
    for arr, wt in ((ro.q, w.w_q), (ro.dq, w.w_dq), (ro.ee_pos, w.w_x)):
        d = (arr - arr[:1]).reshape(p, -1)
        parts.append(np.sqrt(wt / d.shape[1]) * d)
    return np.concatenate(parts, axis=1)


def identifiability(
    backend: ReplayBackend,
    runs: list[Run],
    n_dof: int,
    nominal: Mapping[str, float] | None = None,
    rel_step: float = 0.05,
    weights: LossWeights = LossWeights(),
    groups: tuple[str, ...] = ("armature", "friction", "viscous", "delay"),
) -> IdentifiabilityTable:
    """Finite-difference sensitivity of the replay loss (summed over ``runs``) to each parameter.

    One batched rollout of 1 + 2 candidates per parameter (nominal +/- step).

    Raises:
        ValueError: the nominal is closer to a bound than one step.
        RuntimeError: the nominal candidate diverged on a run.
    """
    nom = dict(NOMINAL)
    nom.update(nominal or {})
    # every group is set at its nominal (a group left None would fall back to the model's zeros)
    base = {g: np.full(n_dof, float(nom[g])) for g in ("armature", "friction", "viscous")}
    cands: list[dict] = [dict(base, delay=int(nom["delay"]))]
    plan: list[tuple[str, int | None, float, float, int]] = []
    for g in groups:
        lo, hi = BOUNDS[g]
        step = 1.0 if g == "delay" else rel_step * (hi - lo)
        if not (lo <= float(nom[g]) - step and float(nom[g]) + step <= hi):
            raise ValueError(f"nominal {g} {nom[g]} is within one step ({step:g}) of its bounds {BOUNDS[g]}")
        for j in ([None] if g == "delay" else range(n_dof)):
            first = len(cands)
            for sign in (+1, -1):
                c = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in cands[0].items()}
                if g == "delay":
                    c["delay"] = c["delay"] + sign * int(step)
                else:
                    c[g][j] = c[g][j] + sign * step
                cands.append(c)
            plan.append((g, None if j is None else j + 1, float(nom[g]), step, first))
    batch = CandidateBatch(
        armature=np.stack([c["armature"] for c in cands]),
        friction=np.stack([c["friction"] for c in cands]),
        viscous=np.stack([c["viscous"] for c in cands]),
        delay=np.array([c["delay"] for c in cands], dtype=np.int64),
    )
    outs = backend.rollout(batch, runs)
    res = []
    diverged = np.zeros(len(cands), dtype=bool)
    for ro, run in zip(outs, runs):
        if ro.diverged[0]:
            raise RuntimeError(f"the nominal candidate diverged on '{run.name}': check gains and amplitudes")
        res.append(_residuals(ro, weights))
        diverged |= ro.diverged
    r = np.concatenate(res, axis=1)
    cols = []
    for g, _, _, step, first in plan:
        width = BOUNDS[g][1] - BOUNDS[g][0]
        cols.append((r[first] - r[first + 1]) / (2 * step / width))
    jac = np.stack(cols, axis=1)  # (M, n_params) per unit normalized parameter
    if not np.all(np.isfinite(jac)):
        raise RuntimeError(f"non-finite replay states ({int(diverged.sum())} diverged candidates): reduce the step or check the design")
    fisher = np.einsum("mi,mj->ij", jac, jac)
    cov = np.linalg.pinv(fisher, rcond=1e-12)
    rows = []
    for i, (g, joint, nominal_val, step, _) in enumerate(plan):
        width = BOUNDS[g][1] - BOUNDS[g][0]
        rel = step / width
        raw = float(fisher[i, i] * rel**2)
        cond = float(rel**2 / cov[i, i]) if cov[i, i] > 0 else 0.0
        rows.append(SensitivityRow(g, joint, nominal_val, step, raw, cond))
    return IdentifiabilityTable(rows, weights, rel_step, meta={
        "nominal": {k: float(v) for k, v in nom.items()},
        "n_candidates": len(cands),
        "diverged_candidates": int(diverged.sum()),
        "runs": [r_.name for r_ in runs],
        "fisher_condition": float(np.linalg.cond(fisher)),
    })
