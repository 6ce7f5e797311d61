"""The best-so-far record that every search stage (CMA-ES, the refinement) reports into.

Stages never reach into each other: each one offers its candidates to one
:class:`BestSoFar`, and the fit result is built from that record alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BestSoFar:
    """The lowest-loss candidate any stage has seen.

    Attributes:
        x: (D,) normalized parameter vector (None before the first offer).
        score: its total loss (sum over runs of w_run L_run).
        contrib: (R,) its weighted loss per run, w_run L_run.
        diverged: the candidate diverged on at least one run.
        stage: which stage found it (``cmaes`` or ``refine``).
    """

    x: np.ndarray | None = None
    score: float = float("inf")
    contrib: np.ndarray | None = None
    diverged: bool = False
    stage: str = ""

    def offer(self, x: np.ndarray, score: float, contrib: np.ndarray, diverged: bool = False, stage: str = "") -> bool:
        """Keep ``x`` when it scores strictly lower than the best so far; returns whether it was kept."""
        if not score < self.score:
            return False
        self.x = np.asarray(x, dtype=float).copy()
        self.score = float(score)
        self.contrib = np.asarray(contrib, dtype=float).copy()
        self.diverged = bool(diverged)
        self.stage = stage
        return True
