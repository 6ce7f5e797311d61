"""The replay fit: parameter space, loss, CMA-ES loop, checkpoints and outputs."""

from isaaclab_sysid.fit.loss import DIVERGENCE_PENALTY, LossBreakdown, LossWeights, run_loss, total_loss
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings, FitState, GenerationRecord
from isaaclab_sysid.fit.param_space import DEFAULT_BOUNDS, GroupSpec, ParamSpace

__all__ = [
    "DEFAULT_BOUNDS",
    "DIVERGENCE_PENALTY",
    "CmaesFit",
    "CmaesSettings",
    "FitState",
    "GenerationRecord",
    "GroupSpec",
    "LossBreakdown",
    "LossWeights",
    "ParamSpace",
    "run_loss",
    "total_loss",
]
