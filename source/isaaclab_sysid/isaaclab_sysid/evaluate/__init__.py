"""Scoring a fit: metrics, held-out evaluation (``--eval_params``), plots and the report."""

from isaaclab_sysid.evaluate.metrics import RunMetrics, rollout_metrics, rms_between_runs
from isaaclab_sysid.evaluate.heldout import EvalResult, evaluate_params, write_eval_outputs

__all__ = [
    "EvalResult",
    "RunMetrics",
    "evaluate_params",
    "rms_between_runs",
    "rollout_metrics",
    "write_eval_outputs",
]
