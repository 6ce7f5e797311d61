"""The whole state of a fit in progress (pickled into checkpoints): each stage's own state and the shared best."""

from __future__ import annotations

from dataclasses import dataclass

from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.fit.optimizer import CmaesState
from isaaclab_sysid.fit.refine import RefineState


@dataclass
class FitState:
    """Everything needed to continue a fit exactly.

    Attributes:
        cmaes: the CMA-ES stage (strategy with its RNG, generation history).
        best: the best-so-far record every stage reports into.
        refine: the refinement's state, once it has started (None before).
    """

    cmaes: CmaesState
    best: BestSoFar
    refine: RefineState | None = None
