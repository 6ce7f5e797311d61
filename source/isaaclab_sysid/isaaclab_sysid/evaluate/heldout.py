"""Replay a fit result's parameters and the nominal ones beside it, and score both (``--eval_params``).

The nominal (baseline) parameters are the model's own joint properties: no
armature, friction or viscous damping and no delay, clipped into the bounds.
Both are rolled out in a single backend call (candidate 0 = nominal,
candidate 1 = fitted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.data.schema import EE_POS, EE_QUAT, joint_cols
from isaaclab_sysid.evaluate.metrics import RunMetrics, rollout_metrics
from isaaclab_sysid.fit.loss import LossWeights
from isaaclab_sysid.fit.result import FitResult
from isaaclab_sysid.sim.interface import ReplayBackend, RunRollout
from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_json
from isaaclab_sysid.utils.json_io import jsonable

EVAL_RESULT_FILE = "eval_result.json"


@dataclass
class EvalResult:
    """Baseline-vs-fitted scores per run.

    Attributes:
        runs: run names, in order.
        baseline, fitted: metrics per run.
        params: the fitted parameters (``best_params_decoded`` layout).
        nominal: the baseline parameters (same layout).
        rollouts: the raw rollouts (2 candidates: nominal, fitted) per run.
    """

    runs: list[str]
    baseline: list[RunMetrics]
    fitted: list[RunMetrics]
    params: dict
    nominal: dict
    source: str | None = None
    rollouts: list[RunRollout] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "params": self.params,
            "nominal": self.nominal,
            "runs": {
                name: {"baseline": b.to_dict(), "fitted": f.to_dict()}
                for name, b, f in zip(self.runs, self.baseline, self.fitted)
            },
        }

    def split(self, n_first: int) -> "tuple[EvalResult, EvalResult | None]":
        """The first ``n_first`` runs (the fit runs) and the rest (held-out; None if there are none)."""

        def part(sl: slice) -> EvalResult:
            return EvalResult(runs=self.runs[sl], baseline=self.baseline[sl], fitted=self.fitted[sl], params=self.params,
                              nominal=self.nominal, source=self.source, rollouts=self.rollouts[sl])

        return part(slice(0, n_first)), (part(slice(n_first, None)) if len(self.runs) > n_first else None)

    def table(self, joint_names: Sequence[str] | None = None) -> str:
        """Plain-text table: per run loss, per-joint q RMS [mrad], dq RMS [mrad/s], EE RMS [mm]."""
        lines = []
        for name, b, f in zip(self.runs, self.baseline, self.fitted):
            n = len(f.q_rms_mrad)
            jn = list(joint_names or [f"j{i + 1}" for i in range(n)])
            w = max(22, max(len(j) for j in jn) + 18)
            lines.append(f"run {name}")
            lines.append(f"  {'':{w}s}{'baseline':>12s}{'fitted':>12s}")
            lines.append(f"  {'loss':{w}s}{b.loss:12.4g}{f.loss:12.4g}" + ("  (fitted DIVERGED)" if f.diverged else "")
                         + ("  (baseline DIVERGED: its RMS are nan)" if b.diverged else ""))
            for j in range(n):
                lines.append(f"  {'q RMS ' + jn[j] + ' [mrad]':{w}s}{b.q_rms_mrad[j]:12.3f}{f.q_rms_mrad[j]:12.3f}")
            for j in range(n):
                lines.append(f"  {'dq RMS ' + jn[j] + ' [mrad/s]':{w}s}{b.dq_rms_mrad_s[j]:12.2f}{f.dq_rms_mrad_s[j]:12.2f}")
            lines.append(f"  {'q RMS all [mrad]':{w}s}{b.q_rms_all_mrad:12.3f}{f.q_rms_all_mrad:12.3f}")
            lines.append(f"  {'EE RMS [mm]':{w}s}{b.ee_rms_mm:12.3f}{f.ee_rms_mm:12.3f}")
        return "\n".join(lines)


def evaluate_params(
    backend: ReplayBackend,
    result: FitResult,
    runs: Sequence[Run],
    weights: LossWeights = LossWeights(),
    source: str | None = None,
) -> EvalResult:
    """Roll out the nominal parameters and ``result``'s values on every run (one call) and score both."""
    space = result.space
    fitted = result.values
    nominal = space.nominal_values()
    dec = {g: np.stack([np.asarray(nominal[g]), np.asarray(fitted[g])]) for g in space.group_names}
    rollouts = backend.rollout(space.batch_from_decoded(dec, 2), list(runs))
    base = [rollout_metrics(ro, run, 0, weights) for ro, run in zip(rollouts, runs)]
    fit = [rollout_metrics(ro, run, 1, weights) for ro, run in zip(rollouts, runs)]
    return EvalResult(
        runs=[r.name for r in runs],
        baseline=base,
        fitted=fit,
        params=space.decoded_to_json(fitted),
        nominal=space.decoded_to_json(nominal),
        source=source,
        rollouts=list(rollouts),
    )


def rollout_frame(run: Run, ro: RunRollout, i: int) -> pd.DataFrame:
    """Candidate ``i``'s simulated states on the run's time base, in the run format's column names."""
    n = run.n_dof
    cols: dict[str, np.ndarray] = {"t_s": run.t}
    for k, c in enumerate(joint_cols("q", n)):
        cols[c] = ro.q[i, :, k]
    for k, c in enumerate(joint_cols("dq", n)):
        cols[c] = ro.dq[i, :, k]
    for k, c in enumerate(EE_POS):
        cols[c] = ro.ee_pos[i, :, k]
    for k, c in enumerate(EE_QUAT):
        cols[c] = ro.ee_quat[i, :, k]
    for k, c in enumerate(joint_cols("tau", n)):
        cols[c] = ro.tau[i, :, k]
    return pd.DataFrame(cols)


def write_eval_outputs(out_dir: str | Path, runs: Sequence[Run], result: EvalResult) -> list[Path]:
    """``eval_rollout_<run>.csv`` (fitted candidate, real time base) per run and ``eval_result.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for run, ro in zip(runs, result.rollouts):
        p = out / f"eval_rollout_{run.name}.csv"
        with atomic_path(p) as tmp:
            rollout_frame(run, ro, 1).to_csv(tmp, index=False, float_format="%.9g")
        paths.append(p)
    p = out / EVAL_RESULT_FILE
    atomic_write_json(p, jsonable(result.to_dict()))
    paths.append(p)
    return paths
