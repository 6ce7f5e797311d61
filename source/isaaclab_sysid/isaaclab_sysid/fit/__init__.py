"""The replay fit: parameter space, loss, CMA-ES loop, refinement, fit result, checkpoints and outputs.

docs/architecture.md shows how the stages fit together.
"""

from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.objective.loss import DIVERGENCE_PENALTY, LossBreakdown, LossWeights, run_loss, total_loss
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings, CmaesState, GenerationRecord
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, GROUPS, GroupSpec, ParamSpace
from isaaclab_sysid.objective.result import FitResult, RefineSummary, SearchDistribution

__all__ = [
    "DEFAULT_BOUNDS",
    "DIVERGENCE_PENALTY",
    "GROUPS",
    "BestSoFar",
    "CmaesFit",
    "CmaesSettings",
    "CmaesState",
    "FitResult",
    "GenerationRecord",
    "GroupSpec",
    "LossBreakdown",
    "LossWeights",
    "ParamSpace",
    "RefineSummary",
    "SearchDistribution",
    "run_loss",
    "total_loss",
]
