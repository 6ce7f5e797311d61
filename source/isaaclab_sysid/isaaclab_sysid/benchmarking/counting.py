"""What a benchmark contender spent: rollouts and env-steps through its backend, and its best-so-far trace.

``benchmarking/peers.py`` gives every contender a :class:`CountingBackend` around its MuJoCo backend
and a :class:`TracingBest` record, so the contenders are compared at equal counts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.sim.interface import CandidateBatch, LossScore, ReplayBackend, RunRollout


@dataclass
class Counts:
    """(candidate, run) rollouts and 1 ms env-steps (warm-up included) so far."""

    rollouts: int = 0
    env_steps: int = 0


class CountingBackend(ReplayBackend):
    """A backend wrapper counting rollouts and env-steps into a :class:`Counts`.

    Every member of the :class:`ReplayBackend` contract is the inner backend's (``name``, ``supported_groups``,
    ``options``, ``scores_loss``, ``rollout_states``, ``windows_of``, ``loss``, ``close``); ``inner`` is the wrapped
    backend. Only :meth:`rollout` and :meth:`rollout_states` do more: they count P x len(runs) rollouts and their
    env-steps (warm-up + the run's ticks).
    """

    def __init__(self, inner: ReplayBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.supported_groups = inner.supported_groups
        self.options = inner.options
        self.scores_loss = inner.scores_loss
        self.counts = Counts()

    @property
    def rollouts(self) -> int:
        return self.counts.rollouts

    @property
    def env_steps(self) -> int:
        return self.counts.env_steps

    def _count(self, batch: CandidateBatch, runs: Sequence[Run]) -> None:
        P = batch.size
        self.counts.rollouts += P * len(runs)
        self.counts.env_steps += P * sum(self.inner.options.warmup_ticks + int(r.sample_ticks()[-1]) + 1 for r in runs)

    def rollout(self, batch: CandidateBatch, runs: Sequence[Run], **kw) -> list[RunRollout]:
        self._count(batch, runs)
        return self.inner.rollout(batch, runs, **kw)

    def rollout_states(self, batch: CandidateBatch, runs: Sequence[Run]) -> list[RunRollout]:
        """The inner backend's states-only rollout, counted like :meth:`rollout`."""
        self._count(batch, runs)
        return self.inner.rollout_states(batch, runs)

    def windows_of(self, runs: Sequence[Run]) -> list[np.ndarray]:
        """The inner backend's shooting windows of ``runs``."""
        return self.inner.windows_of(runs)

    def loss(self, batch: CandidateBatch, runs: Sequence[Run], score: LossScore):
        """The inner backend's loss (only with ``scores_loss``), counted like :meth:`rollout`."""
        self._count(batch, runs)
        return self.inner.loss(batch, runs, score)

    def close(self) -> None:
        """Close the inner backend."""
        self.inner.close()


class TracingBest(BestSoFar):
    """The best-so-far record that also notes (wall [s], rollouts, x) at every improvement (for time-to-error)."""

    def __init__(self, backend: CountingBackend, t0: float) -> None:
        super().__init__()
        self._counts, self._t0 = backend.counts, t0
        self.points: list[tuple[float, int, np.ndarray]] = []

    def offer(self, x, score, contrib, diverged=False, stage=""):
        kept = super().offer(x, score, contrib, diverged, stage)
        if kept:
            self.points.append((time.perf_counter() - self._t0, self._counts.rollouts, np.asarray(x, float).copy()))
        return kept
