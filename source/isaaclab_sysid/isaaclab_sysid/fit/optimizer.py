"""The CMA-ES loop: one batched backend call per generation.

The optimizer (the ``cma`` package) works on the unit cube of
:class:`~isaaclab_sysid.fit.param_space.ParamSpace`. Every generation it asks
for ``popsize`` candidates, decodes them into one :class:`CandidateBatch`, has
the backend roll the whole population out on every run in a single call
(candidate i in env i of every run's block), scores them with
:func:`~isaaclab_sysid.fit.loss.total_loss` and tells the losses back.

Determinism: ``cma`` samples through :class:`SeededRandn`, an RNG seeded with
``seed`` that lives inside the strategy object. The complete optimizer state
(the pickled ``CMAEvolutionStrategy`` with that RNG, numpy's global RNG state for
anything else that draws from it, the best-so-far and the history) is captured by :meth:`CmaesFit.state`
after each generation, so a run resumed from it continues bit-for-bit like an
uninterrupted one (given a deterministic backend).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import cma
import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.loss import LossBreakdown, LossWeights, run_weights, total_loss
from isaaclab_sysid.fit.param_space import ParamSpace
from isaaclab_sysid.sim.interface import ReplayBackend


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
class FitState:
    """Everything needed to continue a fit exactly (pickled into checkpoints)."""

    es: cma.CMAEvolutionStrategy
    rng_state: tuple
    iteration: int = 0
    evaluations: int = 0
    best_x: np.ndarray | None = None
    best_score: float = float("inf")
    best_contrib: np.ndarray | None = None
    best_diverged: bool = False
    history: list[GenerationRecord] = field(default_factory=list)
    #: the Levenberg-Marquardt refinement after the generations (fit/refine.py), once started
    refine: Any = None


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

    def __init__(
        self,
        space: ParamSpace,
        backend: ReplayBackend,
        runs: Sequence[Run],
        settings: CmaesSettings = CmaesSettings(),
        weights: LossWeights = LossWeights(),
        traj_weights: Sequence[float] | None = None,
        state: FitState | None = None,
    ) -> None:
        self.space = space
        self.backend = backend
        self.runs = list(runs)
        self.settings = settings
        self.weights = weights
        self.traj_weights = run_weights(traj_weights, len(self.runs))
        if state is None:
            es = make_es(space, settings)
            state = FitState(es=es, rng_state=np.random.RandomState(int(settings.seed)).get_state())
        self.state = state

    @property
    def run_names(self) -> list[str]:
        return [r.name for r in self.runs]

    @property
    def done(self) -> bool:
        return self.state.iteration >= self.settings.max_iter

    def evaluate(self, X: np.ndarray) -> LossBreakdown:
        """Roll out P normalized candidates (P, D) on every run in one backend call and score them."""
        batch = self.space.to_batch(X)
        rollouts = self.backend.rollout(batch, self.runs)
        return total_loss(rollouts, self.runs, self.weights, self.traj_weights)

    def step(self) -> GenerationRecord:
        """One generation: ask, one batched rollout, tell; updates the best-so-far."""
        st = self.state
        t0 = time.perf_counter()
        np.random.set_state(st.rng_state)
        X = np.asarray(st.es.ask(), dtype=float)
        st.rng_state = np.random.get_state()
        X = np.clip(X, 0.0, 1.0)
        lb = self.evaluate(X)
        f = lb.total
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            st.es.tell(list(X), f.tolist())
        i = int(np.argmin(f))
        if f[i] < st.best_score:
            st.best_score = float(f[i])
            st.best_x = X[i].copy()
            st.best_contrib = lb.contrib[:, i].copy()
            st.best_diverged = bool(lb.diverged[i])
        st.iteration += 1
        st.evaluations += len(X)
        st.rng_state = np.random.get_state()
        rec = GenerationRecord(
            iteration=st.iteration,
            evaluations=st.evaluations,
            best=float(f[i]),
            median=float(np.median(f)),
            best_ever=st.best_score,
            sigma=float(st.es.sigma),
            n_diverged=int(lb.diverged.sum()),
            popsize=len(X),
            contrib_best=[float(c) for c in lb.contrib[:, i]],
            wall_s=time.perf_counter() - t0,
        )
        st.history.append(rec)
        return rec

    def adopt(self, x: np.ndarray, score: float, contrib: np.ndarray) -> None:
        """Take ``x`` as the best parameters when it scores lower (used by the refinement)."""
        st = self.state
        if score < st.best_score:
            st.best_x = np.asarray(x, dtype=float).copy()
            st.best_score = float(score)
            st.best_contrib = np.asarray(contrib, dtype=float).copy()
            st.best_diverged = False

    def run(self, on_generation: Callable[[GenerationRecord, "CmaesFit"], None] | None = None) -> FitState:
        """Run generations until ``max_iter``; ``on_generation`` is called after each."""
        while not self.done:
            rec = self.step()
            if on_generation is not None:
                on_generation(rec, self)
        return self.state

    # ---------------------------------------------------------- results
    def covariance(self) -> dict:
        """The final search distribution in the normalized space: mean, sigma, C (sigma^2 C is the covariance)."""
        es = self.state.es
        C = np.asarray(es.sm.C, dtype=float)
        return {
            "mean": [float(v) for v in es.mean],
            "sigma": float(es.sigma),
            "C": C.tolist(),
            "note": "normalized space [0,1]^D; covariance of the search distribution = sigma^2 * C",
        }

    def result(self) -> dict:
        """The ``sysid_best_params.json`` content (deterministic: no wall times)."""
        st = self.state
        if st.best_x is None:
            raise RuntimeError("no generation has run yet")
        dec = self.space.decode(st.best_x)
        contrib = st.best_contrib if st.best_contrib is not None else np.zeros(len(self.runs))
        tw = self.traj_weights
        return {
            "best_score": st.best_score,
            "best_params": [float(v) for v in st.best_x],
            "best_params_decoded": self.space.decoded_to_json(dec),
            "loss_per_run": {n: float(c / w) if w else 0.0 for n, c, w in zip(self.run_names, contrib, tw)},
            "weighted_loss_per_run": {n: float(c) for n, c in zip(self.run_names, contrib)},
            "traj_weights": [float(w) for w in tw],
            "loss_weights": asdict(self.weights),
            "best_diverged": st.best_diverged,
            "iterations": st.iteration,
            "evaluations": st.evaluations,
            "seed": self.settings.seed,
            "popsize": self.settings.popsize,
            "backend": getattr(self.backend, "name", type(self.backend).__name__),
            "param_space": self.space.describe(),
            "cma": self.covariance(),
            "refine": None if st.refine is None else {
                "iterations": st.refine.iteration,
                "tracks": [{"delay": t.delay, "loss": t.loss} for t in st.refine.tracks],
                "note": "Levenberg-Marquardt on the replay residuals after CMA-ES (docs/fit.md)",
            },
        }
