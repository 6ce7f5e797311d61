"""The search stage: CMA-ES generations, then the Levenberg-Marquardt refinement, checkpointed, into a :class:`FitResult`.

Both optimizers report into one :class:`~isaaclab_sysid.fit.best.BestSoFar`; the
:class:`~isaaclab_sysid.fit.state.FitState` (each stage's state plus that record)
is checkpointed after every generation that ``save_interval`` selects and after
every refinement iteration, so ``--resume`` repeats an interrupted fit exactly.

Two strategies (``SearchSettings.strategy``, ``--strategy``):

* ``cmaes`` (default): CMA-ES generations, then the refinement over the delays.
* ``fast``: the refinement straight from the start and the ``low`` start with the delay
  profiled (:mod:`~isaaclab_sysid.fit.fast_path`); CMA-ES and a second refinement run only
  when a short CMA-ES probe around the fast optimum beats it by a margin (the probe runs
  only when the residual above the white noise or disagreeing starts make the answer
  suspect). The search reads only the fit runs: held-out runs are scored after it.

Every stage that finished leaves its convergence verdict (:class:`~isaaclab_sysid.objective.result.StageVerdict`)
in :attr:`FitResult.convergence` and on the console: a stage that ended on its budget while still
improving, at its start, or with every step rejected says so, with the flag that gives it more room.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.fit.checkpoint import latest_state, save_checkpoint
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.fit.fast_path import FastFitState, FastPath, FastPathSettings, evidence_line
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings, GenerationRecord
from isaaclab_sysid.fit.outputs import write_progress
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.fit.progress import FitProgress
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings, RefineState
from isaaclab_sysid.objective.result import FitResult, StageVerdict
from isaaclab_sysid.fit.state import FitState
from isaaclab_sysid.utils.atomic import atomic_write_text

#: the fast path's verdict (its evidence and the probe's cost and answer) in the fit folder
FAST_PATH_FILE = "fast_path.json"


@dataclass(frozen=True)
class SearchSettings:
    """How the search runs.

    Attributes:
        cmaes: the CMA-ES settings (population, generations, step, seed, start).
        refine_iter: Levenberg-Marquardt finite-difference Jacobians per phase (0 = no refinement).
        delay_neighbours: delays refined beside the best one, d-k..d+k (None = every delay in the bounds).
        save_interval: checkpoint every this many generations (and at the end).
        quiet: no per-generation progress line.
        strategy: ``cmaes`` (CMA-ES, then the refinement) or ``fast`` (the refinement from the start with the
            delay profiled, CMA-ES only when stuck; :mod:`~isaaclab_sysid.fit.fast_path`).
        fast: the fast path's stuck thresholds and probe (its iterations, delays and damping are this object's).
        widen_delays: with ``delay_neighbours=None``, profile d-1..d+1 first and widen only while the best delay sits
            at an edge (:class:`~isaaclab_sysid.fit.refine.RefineSettings`); False: every delay at once.
        single_damping: one damping trial per LM iteration after a track's first accepted step (three before).
        low_start: the fast path also starts a track at the ``low`` start (False: the start point alone, as a refit
            from a known optimum does).
        jacobian_reuse: Broyden-updated Jacobian steps between finite-difference Jacobians
            (:class:`~isaaclab_sysid.fit.refine.RefineSettings`); the refinement checkpoints every ``jacobian_reuse + 1``
            iterations, where the Jacobians are dropped, so that a resumed fit repeats the uninterrupted one.
        active_set: each LM step over the free coordinates only (:class:`~isaaclab_sysid.fit.refine.RefineSettings`).
    """

    cmaes: CmaesSettings
    refine_iter: int = 10
    delay_neighbours: int | None = None
    save_interval: int = 5
    quiet: bool = False
    strategy: Literal["cmaes", "fast"] = "cmaes"
    fast: FastPathSettings | None = None
    widen_delays: bool = True
    single_damping: bool = False
    low_start: bool = True
    jacobian_reuse: int = 3
    active_set: bool = True


class Search:
    """CMA-ES + refinement on one :class:`FitProblem`, writing progress and checkpoints to ``run_dir``."""

    def __init__(self, problem: FitProblem, settings: SearchSettings, run_dir: Path, state: FitState | None = None,
                 log: Callable[[str], None] = print,
                 on_generation: Callable[[GenerationRecord], None] | None = None) -> None:
        p = problem
        self.problem = problem
        self.settings = settings
        self.run_dir = Path(run_dir)
        self.log = log
        self.progress = FitProgress(log, settings.cmaes.max_iter, settings.refine_iter)  # lines <= 160 chars, clock
        self.on_generation = on_generation
        best = state.best if state is not None else BestSoFar()
        objective = p.objective()
        self.cmaes = CmaesFit(objective, settings.cmaes, state=None if state is None else state.cmaes, best=best)
        self.refiner = LMRefiner(objective, RefineSettings(max_iter=settings.refine_iter,
                                                           delay_neighbours=settings.delay_neighbours,
                                                           widen_delays=settings.widen_delays,
                                                           single_damping=settings.single_damping,
                                                           jacobian_reuse=settings.jacobian_reuse,
                                                           active_set=settings.active_set), best=best)
        if settings.strategy not in ("cmaes", "fast"):
            raise FitError(f"--strategy {settings.strategy}: expected cmaes or fast")
        self.fast: FastPath | None = None
        if settings.strategy == "fast":
            if settings.refine_iter < 1:
                raise FitError("--strategy fast needs --refine_iter >= 1 (the fast path is the refinement)")
            if state is not None and not isinstance(state, FastFitState):
                raise FitError(f"{run_dir}: its checkpoints are of a --strategy cmaes fit; resume it with that strategy")
            fs = replace(settings.fast or FastPathSettings(), refine_iter=settings.refine_iter,
                         delay_neighbours=settings.delay_neighbours, widen_delays=settings.widen_delays,
                         single_damping=settings.single_damping, jacobian_reuse=settings.jacobian_reuse,
                         active_set=settings.active_set)
            self.fast = FastPath(objective, fs, best=best)  # the fit runs only: no held-out run steers the search
            self.state: FitState = FastFitState(self.cmaes.state, best, None if state is None else state.refine,
                                                **({} if state is None else {"fast": state.fast}))
        else:
            self.state = FitState(self.cmaes.state, best, None if state is None else state.refine)

    @classmethod
    def resumed(cls, problem: FitProblem, settings: SearchSettings, run_dir: Path, log: Callable[[str], None] = print,
                **kw) -> "Search":
        """A search continuing from ``run_dir``'s newest readable checkpoint (from the start if none)."""
        state, ck = latest_state(run_dir, log)
        log(f"resuming {run_dir} from {ck.name if ck else 'the start (no checkpoint yet)'}")
        return cls(problem, settings, run_dir, state, log, **kw)

    def result(self) -> FitResult:
        """The fit result so far (a fast path that did not fall back has no CMA-ES search distribution)."""
        if self._fast_only():
            fast = self.state.fast.refine
            return replace(self.cmaes.result(None if fast is None else fast.summary()), search=None,
                           convergence=self.verdicts())
        refine = self.state.refine
        return replace(self.cmaes.result(None if refine is None else refine.summary()), convergence=self.verdicts())

    def verdicts(self) -> list[StageVerdict]:
        """The convergence verdict of every stage that has finished, in the order they ran."""
        out, vouched = [], []
        fs = getattr(self.state, "fast", None)
        if self.fast is not None and fs is not None and fs.refine is not None and fs.refine.done:
            out.append(self.fast.verdict(fs))
            if out[-1].converged:  # the fallback's refinement may find nothing better than this optimum
                vouched.append(fs.refine.best().x)
        if self.cmaes.done and self.cmaes.state.history:
            out.append(self.cmaes.verdict())
        if self.state.refine is not None and self.state.refine.done:
            out.append(self.refiner.verdict(self.state.refine, converged_starts=vouched))
        return out

    def _say(self, v: StageVerdict | None) -> None:
        """A finished stage's verdict: a warning always, a converged line unless quiet."""
        if v is None:
            return
        if not v.converged:
            self.log(f"warning: {v.warning}")
        elif not self.settings.quiet:
            self.log(f"[{v.stage}] {v.line()}")

    def _fast_only(self) -> bool:
        """The fast strategy before (or without) its CMA-ES fallback."""
        return isinstance(self.state, FastFitState) and not self.state.fast.fell_back

    @property
    def fell_back(self) -> bool:
        """The fast strategy's evidence sent it to CMA-ES (always False for ``cmaes``)."""
        return isinstance(self.state, FastFitState) and self.state.fast.fell_back

    def checkpoint(self) -> Path:
        return save_checkpoint(self.state, self.result(), self.run_dir)

    def _generation(self, rec: GenerationRecord, fit: CmaesFit) -> None:
        if not self.settings.quiet:
            hits = self.problem.space.at_bounds(self.state.best.x) if self.state.best.x is not None else []
            self.progress.generation(rec, fit.run_names, hits)
        write_progress(self.run_dir, fit.state.history, fit.run_names)
        if rec.iteration % self.settings.save_interval == 0 or fit.done:
            self.checkpoint()
        if self.on_generation is not None:
            self.on_generation(rec)

    def _refinement(self, rec: dict, state: RefineState) -> None:
        if not self.settings.quiet:
            self.progress.refinement(rec, self.problem.space.at_bounds(self.state.best.x))
        if rec["iteration"] % (self.settings.jacobian_reuse + 1) == 0 or state.done:
            state.drop_jacobians()  # as the checkpoint does: a fit resumed from it repeats this one exactly
            self.checkpoint()

    def run(self, x0_extra: np.ndarray | None = None) -> FitResult:
        """Run (or finish) the strategy's stages; ``x0_extra`` is a second refinement start (the CMA-ES start point)."""
        extra = [] if x0_extra is None else [np.asarray(x0_extra, dtype=float)]
        names = ["CMA-ES best"] + ([] if x0_extra is None else ["x0"])  # the tracks' labels in the progress lines
        if self.fast is not None:
            if not self._run_fast():
                write_progress(self.run_dir, self.cmaes.state.history, self.cmaes.run_names)  # no generations: header
                return self.result()
            extra.append(self.state.fast.refine.best().x.copy())  # the fallback can only improve on the fast optimum
            names.append("fast optimum")
            probe = getattr(self.state.fast.evidence, "probe", None)
            if probe is not None and probe.best_x:  # and starts from the probe's better basin too
                extra.append(np.asarray(probe.best_x, dtype=float))
                names.append("probe best")
        self.cmaes.run(self._generation)
        self._say(self.cmaes.verdict())
        if self.settings.refine_iter > 0:
            if self.state.refine is None:
                self.state.refine = self.refiner.start(self.state.best.x, extra_starts=extra, labels=names)
                self.checkpoint()
            self.refiner.run(self.state.refine, self._refinement)
            self._say(self.verdicts()[-1])
        write_progress(self.run_dir, self.cmaes.state.history, self.cmaes.run_names)
        return self.result()

    def _run_fast(self) -> bool:
        """The fast path (started at the CMA-ES start point and the ``low`` start); returns whether it fell back."""
        fs = self.state.fast
        if fs.refine is None:
            c = self.settings.cmaes
            x0 = np.full(self.problem.space.dim, 0.5) if c.x0 is None else np.asarray(c.x0, dtype=float)
            extra = [self.problem.space.low_start()] if self.settings.low_start else []
            started = self.fast.start(x0, extra_starts=extra, labels=("x0", "low")[: 1 + len(extra)])
            fs.refine, fs.n_starts = started.refine, started.n_starts
            self.checkpoint()
        had_verdict = fs.evidence is not None
        self.fast.run(fs, self._refinement)
        if not had_verdict:
            if not self.settings.quiet:
                self.progress.note(evidence_line(fs.evidence))  # carries the convergence warning, if any
            elif not fs.evidence.converged:
                self.log(f"warning: {fs.evidence.convergence}")
            atomic_write_text(self.run_dir / FAST_PATH_FILE, json.dumps(fs.evidence.to_dict(), indent=1, default=float))
            self.checkpoint()
        return fs.fell_back
