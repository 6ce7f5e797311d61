"""Replay a fit result's parameters and the nominal ones beside it, and score both (``--eval_params``).

The nominal (baseline) parameters are the model's own joint properties: no
armature, friction or viscous damping and no delay, clipped into the bounds.
Both are rolled out in a single backend call (candidate 0 = nominal,
candidate 1 = fitted).

A run that states no servo gains (a position servo whose sidecar leaves ``gains.kp`` / ``kd`` null,
NaN in memory: docs/servo_arms.md sections 2 and 5) has **no baseline**: :data:`NO_BASELINE` is said
where its nominal scores would stand, and ``eval_result.json`` holds null for them. The nominal
parameters give such a run a servo at the ``kp`` group's nominal (0, clipped to the lower bound),
which lets the arm fall: a "diverged" (or far-off) baseline that says nothing about the fit. The alternative, the
nominal joint terms replayed with the *fitted* ``kp`` / ``kd``, was considered and rejected as not
meaningful: (1) the servo's gains and its armature (the rotor reflected through the gearbox) are both
properties of the servo the fit supplies, and the nominal model has neither; on the SO-101 twin the
nominal joint terms (armature 0) under the true gains diverge at 1 ms ticks all the same, and with the
true armature they do not (tests/test_eval_baseline_unstated_gains.py); (2) the
fitted gains were fitted together with the joint terms and the fitted ``kd`` also carries the joint's
viscous friction (``kd dq = viscous dq``), so such a baseline would not be independent of the fit.
Candidate 0 is still the nominal replay (the rollout layout is fixed; ``EvalResult.baseline`` keeps
its metrics in memory), but no table, HTML figure or PNG plot (evaluate/plots.py) shows it for such a
run. A run that states its gains keeps its
nominal baseline (the candidate's gains fill unstated entries only: sim/servo.py).
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
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.sim.interface import ReplayBackend, RunRollout
from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_json
from isaaclab_sysid.utils.json_io import jsonable
from isaaclab_sysid.fit.run_folder import EVAL_RESULT_FILE, eval_rollout_name


#: What stands in the baseline column of a run that states no servo gains (module docstring: why).
NO_BASELINE = "no baseline: the runs state no gains"


@dataclass
class EvalResult:
    """Baseline-vs-fitted scores per run.

    Attributes:
        runs: run names, in order.
        baseline, fitted: metrics per run.
        params: the fitted parameters (``best_params_decoded`` layout).
        nominal: the baseline parameters (same layout).
        rollouts: the raw rollouts (2 candidates: nominal, fitted) per run.
        no_baseline: per run, True when it states no servo gains: its nominal replay is no baseline
            (:data:`NO_BASELINE`); ``baseline`` still holds that replay's metrics, which no table shows.
            Empty (older callers): every run has its baseline.
    """

    runs: list[str]
    baseline: list[RunMetrics]
    fitted: list[RunMetrics]
    params: dict
    nominal: dict
    source: str | None = None
    rollouts: list[RunRollout] = field(default_factory=list, repr=False)
    no_baseline: list[bool] = field(default_factory=list)

    def has_baseline(self, i: int) -> bool:
        """Whether run ``i``'s nominal replay is a baseline (False: the run states no servo gains)."""
        return not (self.no_baseline and self.no_baseline[i])

    def baseline_q(self, i: int) -> np.ndarray | None:
        """Run ``i``'s (T, N) baseline q [rad] (candidate 0), or None when it has no baseline."""
        return self.rollouts[i].q[0] if self.has_baseline(i) else None

    def to_dict(self) -> dict:
        """The JSON of ``eval_result.json``; a run without a baseline has ``"baseline": null``."""
        return {
            "source": self.source,
            "params": self.params,
            "nominal": self.nominal,
            "runs": {
                name: {"baseline": b.to_dict() if self.has_baseline(i) else None, "fitted": f.to_dict()}
                for i, (name, b, f) in enumerate(zip(self.runs, self.baseline, self.fitted))
            },
            **({"no_baseline": NO_BASELINE} if not all(map(self.has_baseline, range(len(self.runs)))) else {}),
        }

    def split(self, n_first: int) -> "tuple[EvalResult, EvalResult | None]":
        """The first ``n_first`` runs (the fit runs) and the rest (held-out; None if there are none)."""

        def part(sl: slice) -> EvalResult:
            return EvalResult(runs=self.runs[sl], baseline=self.baseline[sl], fitted=self.fitted[sl], params=self.params,
                              nominal=self.nominal, source=self.source, rollouts=self.rollouts[sl],
                              no_baseline=self.no_baseline[sl])

        return part(slice(0, n_first)), (part(slice(n_first, None)) if len(self.runs) > n_first else None)

    def table(self, joint_names: Sequence[str] | None = None) -> str:
        """Plain-text table: per run loss, per-joint q RMS [mrad], dq RMS [mrad/s], EE RMS [mm]."""
        lines = []
        for r, (name, b, f) in enumerate(zip(self.runs, self.baseline, self.fitted)):
            n = len(f.q_rms_mrad)
            jn = list(joint_names or [f"j{i + 1}" for i in range(n)])
            w = max(22, max(len(j) for j in jn) + 18)
            lines.append(f"run {name}")
            if not self.has_baseline(r):
                lines += self._fitted_only(f, jn, w)
                continue
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

    @staticmethod
    def _fitted_only(f: RunMetrics, jn: Sequence[str], w: int) -> list[str]:
        """The table rows of a run without a baseline: the fitted column and the reason."""
        lines = [f"  ({NO_BASELINE})", f"  {'':{w}s}{'fitted':>12s}",
                 f"  {'loss':{w}s}{f.loss:12.4g}" + ("  (fitted DIVERGED)" if f.diverged else "")]
        lines += [f"  {'q RMS ' + j + ' [mrad]':{w}s}{v:12.3f}" for j, v in zip(jn, f.q_rms_mrad)]
        lines += [f"  {'dq RMS ' + j + ' [mrad/s]':{w}s}{v:12.2f}" for j, v in zip(jn, f.dq_rms_mrad_s)]
        return lines + [f"  {'q RMS all [mrad]':{w}s}{f.q_rms_all_mrad:12.3f}", f"  {'EE RMS [mm]':{w}s}{f.ee_rms_mm:12.3f}"]


def runs_state_no_gains(runs: Sequence[Run]) -> list[bool]:
    """Per run: whether it leaves a servo gain unstated (a NaN entry in ``meta.kp`` or ``meta.kd``)."""
    return [not (np.all(np.isfinite(np.asarray(r.meta.kp, dtype=float)))
                 and np.all(np.isfinite(np.asarray(r.meta.kd, dtype=float)))) for r in runs]


def evaluate_params(
    backend: ReplayBackend,
    result: FitResult,
    runs: Sequence[Run],
    weights: LossWeights = LossWeights(),
    source: str | None = None,
) -> EvalResult:
    """Roll out the nominal parameters and ``result``'s values on every run (one call) and score both.

    A run that states no servo gains gets no baseline (``EvalResult.no_baseline``; module docstring: why).
    """
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
        no_baseline=runs_state_no_gains(runs),
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
        p = out / eval_rollout_name(run.name)
        with atomic_path(p) as tmp:
            rollout_frame(run, ro, 1).to_csv(tmp, index=False, float_format="%.9g")
        paths.append(p)
    p = out / EVAL_RESULT_FILE
    atomic_write_json(p, jsonable(result.to_dict()))
    paths.append(p)
    return paths
