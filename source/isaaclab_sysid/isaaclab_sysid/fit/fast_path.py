"""The fast search strategy: Levenberg-Marquardt straight from the start, CMA-ES only when the fast path is stuck.

``--strategy fast`` (``SearchConfig.strategy``) skips the CMA-ES generations when a local
method can do the job. It runs the refinement (:class:`~isaaclab_sysid.fit.refine.LMRefiner`)
straight from the start point and from the sliding-regime ``low`` start beside it (phase 1,
each at its own delay), then re-optimizes every other delay within the bounds warm-started
from that optimum (phase 2, the delay profile), and then judges its own answer from three
pieces of evidence:

* **residual over the noise floor**: the fit runs' joint-position residual RMS over the white
  measurement noise estimated from its first differences (``sqrt(mean(diff(e)^2) / 2)``, the
  adequacy stage's estimate, :mod:`isaaclab_sysid.evaluate.adequacy`). A start on the sticking
  plateau (joints held by a too-high friction) ends far above it (10-100x); a right model
  ends near 1x on 1 kHz logs.
* **held-out over fit** (when the problem has held-out runs): the held-out q RMS over the fit
  q RMS; a fit that bent its parameters into a wrong basin does not generalize.
* **disagreeing starts**: the phase-1 tracks from different starts ending at losses more than
  ``agree_ratio`` apart, while the best is not convincingly at the floor.

Only when that evidence says *stuck* does the search fall back to today's path: CMA-ES from
the configured start, then the refinement, with the fast path's optimum as one more
refinement start (every stage reports into the same :class:`~isaaclab_sysid.fit.best.BestSoFar`,
so the fallback can only improve on it). CMA-ES stays the explicit default
(``--strategy cmaes``); docs/fit.md, "Search strategy", and docs/benchmarks.md give the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.fit.objective import ReplayObjective
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings, RefineState
from isaaclab_sysid.fit.state import FitState
from isaaclab_sysid.sim.shooting import backend_windows


@dataclass(frozen=True)
class FastPathSettings:
    """Settings of the fast path.

    Attributes:
        refine_iter: Levenberg-Marquardt iterations per phase (phase 1 at the starts' delays, phase 2 the other delays).
        delay_neighbours: delays profiled beside the best one, d-k..d+k ticks (None = every delay in the bounds).
        max_floor_ratio: stuck when the fit q RMS exceeds this multiple of the white-noise estimate [-].
        max_heldout_ratio: stuck when the held-out q RMS exceeds this multiple of the fit q RMS [-].
        agree_ratio: phase-1 tracks whose final losses differ by more than this factor disagree [-].
        agree_floor_ratio: disagreeing starts mean stuck only while the best's floor ratio exceeds this [-].
    """

    refine_iter: int = 10
    delay_neighbours: int | None = None
    max_floor_ratio: float = 2.0
    max_heldout_ratio: float = 2.0
    agree_ratio: float = 1.5
    agree_floor_ratio: float = 1.2

    def __post_init__(self) -> None:
        if self.refine_iter < 1:
            raise ValueError("the fast path needs refine_iter >= 1 (it is the refinement)")
        if not (self.max_floor_ratio > 0 and self.max_heldout_ratio > 0 and self.agree_ratio >= 1):
            raise ValueError("fast-path ratios must be positive (agree_ratio >= 1)")


@dataclass
class FastEvidence:
    """What the fast path's answer says about itself.

    Attributes:
        fit_q_rms_mrad: the fit runs' joint-position residual RMS [mrad] (pooled over runs and joints).
        white_floor_mrad: the white measurement noise estimated from the residual's first differences [mrad].
        floor_ratio: fit_q_rms_mrad / white_floor_mrad [-].
        heldout_ratio: held-out q RMS / fit q RMS (None without held-out runs) [-].
        start_losses: final loss of each phase-1 track (one per distinct start).
        disagree: the starts' losses differ by more than ``agree_ratio``.
        stuck: the evidence asks for the CMA-ES fallback.
        reasons: plain words for each piece of evidence that said stuck.
        converged: the fast path's refinement converged (:meth:`LMRefiner.verdict`; the stuck verdict
            above is separate: a converged refinement can be stuck on a plateau, an unconverged one at the floor).
        convergence: its verdict's warning with the flag that gives it more room ('' when converged).
    """

    fit_q_rms_mrad: float
    white_floor_mrad: float
    floor_ratio: float
    heldout_ratio: float | None
    start_losses: list[float]
    disagree: bool
    stuck: bool
    reasons: list[str] = field(default_factory=list)
    converged: bool = True
    convergence: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FastState:
    """The fast path's progress (pickled into checkpoints with the rest of the fit).

    Attributes:
        refine: the fast path's own refinement (None before it started).
        n_starts: phase-1 tracks (distinct starts) at the front of ``refine.tracks``.
        evidence: the verdict once the refinement finished (None before).
    """

    refine: RefineState | None = None
    n_starts: int = 0
    evidence: FastEvidence | None = None

    @property
    def fell_back(self) -> bool:
        return self.evidence is not None and self.evidence.stuck


@dataclass
class FastFitState(FitState):
    """A :class:`FitState` with the fast path's stage (``--strategy fast``)."""

    fast: FastState = field(default_factory=FastState)


def white_floor(e: np.ndarray) -> np.ndarray:
    """(N,) white measurement noise of a residual (T, N) from its first differences: sqrt(mean(diff(e)^2) / 2)."""
    return np.sqrt(np.mean(np.diff(e, axis=0) ** 2, axis=0) / 2.0)


def residual_evidence(objective: ReplayObjective, x: np.ndarray,
                      heldout: Sequence[Run] = ()) -> tuple[float, float, float | None]:
    """(fit q RMS [mrad], white-noise floor [mrad], held-out / fit q RMS or None) of one normalized candidate (D,).

    One rollout on the fit runs and, when ``heldout`` is given, one on the held-out runs (same backend).
    """
    X = np.asarray(x, dtype=float)[None]
    ro = objective.rollouts(X)
    if any(bool(r.diverged[0]) for r in ro):
        return float("inf"), float("nan"), None
    errs = [run.q - r.q[0] for run, r in zip(objective.runs, ro)]
    fit_rms = float(np.sqrt(np.mean([np.mean(e**2) for e in errs]))) * 1e3
    windows = backend_windows(objective.backend, objective.runs)
    if windows is not None:  # a torque replay's floor is its start states' drift, not the white noise
        from isaaclab_sysid.evaluate.shooting_floor import shooting_floor

        floor = shooting_floor(objective.runs, ro, windows, candidate=0).pooled_mrad
    else:
        floor = float(np.sqrt(np.mean([np.mean(white_floor(e) ** 2) for e in errs]))) * 1e3
    held = None
    if heldout:
        ho = ReplayObjective(objective.space, objective.backend, list(heldout), objective.weights).rollouts(X)
        if any(bool(r.diverged[0]) for r in ho):
            held = float("inf")
        else:
            h_rms = float(np.sqrt(np.mean([np.mean((run.q - r.q[0]) ** 2) for run, r in zip(heldout, ho)]))) * 1e3
            held = h_rms / max(fit_rms, 1e-300)
    return fit_rms, floor, held


class FastPath:
    """LM from the start (and the ``low`` start) with the delay profiled, then the stuck verdict (module docstring)."""

    def __init__(self, objective: ReplayObjective, settings: FastPathSettings = FastPathSettings(),
                 best: BestSoFar | None = None, heldout: Sequence[Run] = ()) -> None:
        self.objective = objective
        self.settings = settings
        self.best = best if best is not None else BestSoFar()
        self.heldout = list(heldout)
        self.refiner = LMRefiner(objective, RefineSettings(max_iter=settings.refine_iter,
                                                           delay_neighbours=settings.delay_neighbours), best=self.best)

    def start(self, x0: np.ndarray, extra_starts: Sequence[np.ndarray] = ()) -> FastState:
        """Evaluate the starts once (duplicates merged); ``x0`` (D,) normalized, ``extra_starts`` beside it."""
        st = self.refiner.start(np.asarray(x0, dtype=float), extra_starts=[np.asarray(e, dtype=float) for e in extra_starts])
        return FastState(refine=st, n_starts=len(st.tracks))

    def run(self, state: FastState, on_iteration: Callable[[dict, RefineState], None] | None = None) -> FastState:
        """Finish the refinement (both phases) and judge it; returns ``state`` with its evidence."""
        if state.refine is None:
            raise ValueError("FastPath.run needs a started state (FastPath.start)")
        self.refiner.run(state.refine, on_iteration)
        if state.evidence is None:
            state.evidence = self.judge(state)
        return state

    def verdict(self, state: FastState):  # -> StageVerdict
        """Whether the fast path's refinement converged (its best track; :meth:`LMRefiner.verdict`)."""
        return self.refiner.verdict(state.refine, "fast",
                                    start_remedy="start elsewhere (--x0) or search first (--strategy cmaes)")

    def judge(self, state: FastState) -> FastEvidence:
        """The evidence of the finished refinement (two rollouts of its best: fit runs, held-out runs)."""
        s = self.settings
        best = state.refine.best()
        fit_rms, floor, held = residual_evidence(self.objective, best.x, self.heldout)
        ratio = fit_rms / floor if floor > 0 and np.isfinite(floor) else float("inf")
        losses = [float(t.loss) for t in state.refine.tracks[: state.n_starts]]
        disagree = len(losses) > 1 and max(losses) > s.agree_ratio * max(min(losses), 1e-300)
        reasons = []
        if not ratio <= s.max_floor_ratio:
            reasons.append(f"fit residual {ratio:.2f}x the white measurement noise (> {s.max_floor_ratio:g})")
        if held is not None and not held <= s.max_heldout_ratio:
            reasons.append(f"held-out error {held:.2f}x the fit error (> {s.max_heldout_ratio:g})")
        if disagree and not ratio <= s.agree_floor_ratio:
            reasons.append(f"the starts disagree (losses {min(losses):.3e} .. {max(losses):.3e}) and the best is "
                           f"{ratio:.2f}x the noise (> {s.agree_floor_ratio:g})")
        v = self.verdict(state)
        return FastEvidence(fit_rms, floor, ratio, held, losses, bool(disagree), bool(reasons), reasons,
                            v.converged, v.warning)


def evidence_line(ev: FastEvidence) -> str:
    """One console line for the fast path's verdict."""
    held = "" if ev.heldout_ratio is None else f", held-out {ev.heldout_ratio:.2f}x fit"
    head = (f"[fast] residual {ev.fit_q_rms_mrad:.4g} mrad = {ev.floor_ratio:.2f}x the white noise"
            f"{held}; starts {'disagree' if ev.disagree else 'agree'}")
    tail = " -> stuck, falling back to CMA-ES: " + "; ".join(ev.reasons) if ev.stuck else " -> done"
    return head + tail + ("" if getattr(ev, "converged", True) else f" (warning: {ev.convergence})")
