"""The CMA-ES loop: one batched backend call per generation.

The optimizer (the ``cma`` package) works on the unit cube of
:class:`~isaaclab_sysid.objective.param_space.ParamSpace`. Every generation it asks
for ``popsize`` candidates, decodes them into one :class:`CandidateBatch`, has
the backend roll the whole population out on every run in a single call
(candidate i in env i of every run's block), scores them with
:func:`~isaaclab_sysid.objective.loss.total_loss` and tells the losses back.

Every generation offers its best candidate to the fit's shared
:class:`~isaaclab_sysid.fit.best.BestSoFar` record; the optimizer knows nothing
of the stages after it.

Determinism: ``cma`` samples through :class:`SeededRandn`, an RNG seeded with
``seed`` that lives inside the strategy object, and nothing here touches
numpy's global RNG. The optimizer's state (:class:`CmaesState`: the pickled
``CMAEvolutionStrategy`` with that RNG and the history) is checkpointed after
each generation, so a run resumed from it continues bit-for-bit like an
uninterrupted one (given a deterministic backend).

Convergence (:meth:`CmaesFit.verdict`): the ``cma`` stopping rules are off, so the stage
always ends on its budget (``--max_iter`` generations). It converged only when its own best
(the running minimum of the generations' best losses) had stopped improving: by at most
:data:`CMA_RTOL` of the loss over the last :func:`stall_window` generations. It did not
converge when it was still improving then, when its best never improved on the first
generation's (a flat loss), or when it ran too few generations to tell.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import cma
import numpy as np

from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.objective.loss import LossBreakdown
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.result import FitResult, RefineSummary, SearchDistribution, StageVerdict

#: CMA-ES converged when its best improved by at most this fraction over the last :func:`stall_window` generations
CMA_RTOL = 1e-3


def stall_window(generations: int) -> int:
    """Generations over which CMA-ES must have stopped improving: a fifth of them, at least 3."""
    return max(3, -(-generations // 5))


@dataclass(frozen=True)
class CmaesSettings:
    """Optimizer settings.

    Attributes:
        popsize: candidates per generation (= envs per run block).
        max_iter: generations.
        sigma0: initial step size in the normalized space (the cube is [0, 1]).
        seed: RNG seed (same seed, same runs, same backend -> same result).
        x0: start point in the normalized space (None = the centre, 0.5).
    """

    popsize: int = 64
    max_iter: int = 40
    sigma0: float = 0.25
    seed: int = 0
    x0: tuple[float, ...] | None = None


@dataclass
class GenerationRecord:
    """What one generation produced (one row of progress.csv)."""

    iteration: int
    evaluations: int
    best: float
    median: float
    best_ever: float
    sigma: float
    n_diverged: int
    popsize: int
    contrib_best: list[float]
    wall_s: float

    def to_row(self, run_names: Sequence[str]) -> dict:
        row = {k: v for k, v in asdict(self).items() if k != "contrib_best"}
        for name, c in zip(run_names, self.contrib_best):
            row[f"wL_{name}"] = c
        return row


@dataclass
class CmaesState:
    """Everything needed to continue the CMA-ES stage exactly (pickled into checkpoints)."""

    es: cma.CMAEvolutionStrategy
    iteration: int = 0
    evaluations: int = 0
    history: list[GenerationRecord] = field(default_factory=list)


class SeededRandn:
    """``randn(*shape)`` from an RNG owned by the optimizer, so pickling ``es`` pickles its RNG state."""

    def __init__(self, seed: int) -> None:
        self.rs = np.random.RandomState(seed)

    def __call__(self, *shape: int) -> np.ndarray:
        return self.rs.randn(*shape)


def make_es(space: ParamSpace, settings: CmaesSettings) -> cma.CMAEvolutionStrategy:
    """A fresh ``CMAEvolutionStrategy`` on the unit cube, sampling from its own seeded RNG."""
    x0 = np.full(space.dim, 0.5) if settings.x0 is None else np.asarray(settings.x0, dtype=float)
    if x0.shape != (space.dim,):
        raise ValueError(f"x0 has {x0.size} entries, the parameter space {space.dim}")
    opts = {
        "popsize": int(settings.popsize),
        "bounds": [0.0, 1.0],
        "maxiter": int(settings.max_iter),
        "verbose": -9,
        "verb_disp": 0,
        "verb_log": 0,
        "tolfun": 0.0,
        "tolfunhist": 0.0,
        "tolflatfitness": 10**9,
        "tolstagnation": 10**9,
        "randn": SeededRandn(int(settings.seed)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cma.CMAEvolutionStrategy(x0, float(settings.sigma0), opts)


class CmaesFit:
    """The CMA-ES fit of a parameter space against recorded runs through one backend."""

    def __init__(self, objective: ReplayObjective, settings: CmaesSettings = CmaesSettings(),
                 state: CmaesState | None = None, best: BestSoFar | None = None) -> None:
        self.objective = objective
        self.space = objective.space
        self.runs = objective.runs
        self.settings = settings
        self.state = state if state is not None else CmaesState(es=make_es(self.space, settings))
        self.best = best if best is not None else BestSoFar()

    @property
    def run_names(self) -> list[str]:
        return self.objective.run_names

    @property
    def done(self) -> bool:
        return self.state.iteration >= self.settings.max_iter

    def evaluate(self, X: np.ndarray) -> LossBreakdown:
        """Roll out P normalized candidates (P, D) on every run in one backend call and score them."""
        return self.objective.loss(X)

    def step(self) -> GenerationRecord:
        """One generation: ask, one batched rollout, tell; updates the best-so-far."""
        st = self.state
        t0 = time.perf_counter()
        X = np.clip(np.asarray(st.es.ask(), dtype=float), 0.0, 1.0)
        lb = self.evaluate(X)
        f = lb.total
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            st.es.tell(list(X), f.tolist())
        i = int(np.argmin(f))
        self.best.offer(X[i], float(f[i]), lb.contrib[:, i], bool(lb.diverged[i]), "cmaes")
        st.iteration += 1
        st.evaluations += len(X)
        rec = GenerationRecord(
            iteration=st.iteration,
            evaluations=st.evaluations,
            best=float(f[i]),
            median=float(np.median(f)),
            best_ever=self.best.score,
            sigma=float(st.es.sigma),
            n_diverged=int(lb.diverged.sum()),
            popsize=len(X),
            contrib_best=[float(c) for c in lb.contrib[:, i]],
            wall_s=time.perf_counter() - t0,
        )
        st.history.append(rec)
        return rec

    def run(self, on_generation: Callable[[GenerationRecord, "CmaesFit"], None] | None = None) -> CmaesState:
        """Run generations until ``max_iter``; ``on_generation`` is called after each."""
        while not self.done:
            rec = self.step()
            if on_generation is not None:
                on_generation(rec, self)
        return self.state

    def verdict(self) -> StageVerdict | None:
        """Whether the generations converged (module docstring); None before the first generation."""
        hist = self.state.history
        n = len(hist)
        if n == 0:
            return None
        own = np.minimum.accumulate([r.best for r in hist])
        more = f"raise --max_iter (now {self.settings.max_iter} generations)"
        k = stall_window(n)
        if n <= k:
            return StageVerdict("cmaes", False, f"{n} generation(s) are too few to tell whether it stopped improving "
                                f"(it needs more than {k})", more)
        if not own[-1] < own[0]:
            return StageVerdict("cmaes", False, f"its best never improved on the first generation's ({own[0]:.4e} "
                                f"over {n} generations): a flat loss, or no candidate the loss can tell apart",
                                "start elsewhere (--x0) or widen the search (--sigma)")
        ref = own[-k - 1]
        gain = (ref - own[-1]) / max(abs(ref), 1e-300)
        if gain > CMA_RTOL:
            return StageVerdict("cmaes", False, f"it ran out of its {n} generations while still improving: its best "
                                f"fell {100 * gain:.2g} % over the last {k} (> {100 * CMA_RTOL:g} %)", more)
        return StageVerdict("cmaes", True, f"its best fell {100 * gain:.2g} % over the last {k} of {n} generations "
                            f"(<= {100 * CMA_RTOL:g} %)")

    def search_distribution(self) -> SearchDistribution:
        """The current search distribution in the normalized space (sigma^2 C is its covariance)."""
        es = self.state.es
        return SearchDistribution(np.asarray(es.mean, dtype=float).copy(), float(es.sigma), np.asarray(es.sm.C, dtype=float).copy())

    def result(self, refine: RefineSummary | None = None) -> FitResult:
        """The fit result from the shared best-so-far record, this search's counts and ``refine``'s summary."""
        b = self.best
        if b.x is None:
            raise RuntimeError("no generation has run yet")
        contrib = b.contrib if b.contrib is not None else np.zeros(len(self.runs))
        return FitResult.from_search(
            self.space, b.x, b.score, run_names=self.run_names, weighted_loss=np.asarray(contrib, dtype=float),
            traj_weights=np.asarray(self.objective.traj_weights, dtype=float).copy(), loss_weights=self.objective.weights,
            best_diverged=b.diverged,
            iterations=self.state.iteration, evaluations=self.state.evaluations, seed=self.settings.seed,
            popsize=self.settings.popsize, backend=self.objective.backend.name,
            search=self.search_distribution(), refine=refine,
        )
