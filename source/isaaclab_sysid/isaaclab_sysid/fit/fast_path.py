"""The fast search strategy: Levenberg-Marquardt straight from the start, CMA-ES only when a better basin exists.

``--strategy fast`` (``SearchConfig.strategy``) skips the CMA-ES generations when a local
method can do the job. It runs the refinement (:class:`~isaaclab_sysid.fit.refine.LMRefiner`)
straight from the start point and from the sliding-regime ``low`` start beside it (phase 1,
each at its own delay), then re-optimizes every other delay within the bounds warm-started
from that optimum (phase 2, the delay profile), and then judges its own answer from three
pieces of evidence, each of which only makes it *suspect* that it is stuck:

* **residual over the noise floor**: the fit runs' joint-position residual RMS over the white
  measurement noise estimated from its first differences (``sqrt(mean(diff(e)^2) / 2)``, the
  adequacy stage's estimate, :mod:`isaaclab_sysid.evaluate.adequacy`). A start on the sticking
  plateau (joints held by a too-high friction) ends far above it (10-100x); a right model
  ends near 1x on 1 kHz logs; but so does a model that cannot fit (every real log, Stribeck
  friction fitted Coulomb-only): a large residual is no evidence that a better optimum exists.
* **disagreeing starts**: the phase-1 tracks from different starts ending at losses more than
  ``agree_ratio`` apart, while the best is not convincingly at the floor.

Only the fit runs are read (issue 26): held-out runs never steer the search; they are scored
after it. A suspect answer runs the **probe**: ``probe_generations`` small CMA-ES generations
(``probe_popsize`` candidates, step ``probe_sigma``, seeded) centred at the local optimum. Its
cost is bounded (generations x popsize candidates, each one rollout per fit run) and stated in
the log line and in :class:`FastEvidence` (``fast_path.json`` in the fit folder). Only when the
probe's best beats the local optimum's loss by the margin (``probe_best < (1 - probe_margin) x
local``: evidence that a better basin exists) does the search fall back to today's path: CMA-ES
from the configured start, then the refinement, with the fast path's optimum and the probe's
best as more refinement starts (every stage reports into the same
:class:`~isaaclab_sysid.fit.best.BestSoFar`, so the fallback can only improve on it). When the
probe does not beat it, the fast path stops at its local optimum and the adequacy verdict
(after the search, on the fit and held-out runs) says whether the model fits.
``probe_generations=0`` restores the behaviour before the probe (fall back whenever suspect).
CMA-ES stays the explicit choice (``--strategy cmaes``); docs/fit.md, "Search strategy", and
docs/benchmarks.md give the figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from isaaclab_sysid.fit.best import BestSoFar
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings, RefineState
from isaaclab_sysid.objective.shooting_floor import shooting_floor
from isaaclab_sysid.fit.state import FitState
from isaaclab_sysid.sim.shooting import backend_windows


@dataclass(frozen=True)
class FastPathSettings:
    """Settings of the fast path.

    Attributes:
        refine_iter: Levenberg-Marquardt finite-difference Jacobians per phase (phase 1 at the starts' delays, phase 2 the other delays).
        delay_neighbours: delays profiled beside the best one, d-k..d+k ticks (None = every delay in the bounds).
        max_floor_ratio: suspect when the fit q RMS exceeds this multiple of the white-noise estimate [-].
        agree_ratio: phase-1 tracks whose final losses differ by more than this factor disagree [-].
        agree_floor_ratio: disagreeing starts are suspect only while the best's floor ratio exceeds this [-].
        probe_generations: CMA-ES generations of the probe a suspect answer runs (0 = no probe: fall back to
            CMA-ES whenever suspect, the behaviour before the probe).
        probe_popsize: candidates per probe generation.
        probe_sigma: the probe's CMA-ES step in the normalized space (the cube is [0, 1]).
        probe_margin: the probe must lower the local optimum's loss by this fraction to send the search to CMA-ES [-].
        probe_seed: the probe's RNG seed.
        widen_delays, single_damping, jacobian_reuse, active_set: the refinement's
            (:class:`~isaaclab_sysid.fit.refine.RefineSettings`).
    """

    refine_iter: int = 10
    delay_neighbours: int | None = None
    max_floor_ratio: float = 2.0
    agree_ratio: float = 1.5
    agree_floor_ratio: float = 1.2
    probe_generations: int = 3
    probe_popsize: int = 16
    probe_sigma: float = 0.15
    probe_margin: float = 0.05
    probe_seed: int = 0
    widen_delays: bool = True
    single_damping: bool = False
    jacobian_reuse: int = 3
    active_set: bool = True

    def __post_init__(self) -> None:
        if self.refine_iter < 1:
            raise ValueError("the fast path needs refine_iter >= 1 (it is the refinement)")
        if not (self.max_floor_ratio > 0 and self.agree_ratio >= 1):
            raise ValueError("fast-path ratios must be positive (agree_ratio >= 1)")
        if self.probe_generations < 0 or self.probe_popsize < 2 or not self.probe_sigma > 0 or not self.probe_margin < 1:
            raise ValueError("the probe needs generations >= 0, popsize >= 2, sigma > 0 and margin < 1")


@dataclass
class ProbeRecord:
    """What the probe ran and found.

    Attributes:
        generations, popsize: its CMA-ES budget; candidates: generations x popsize.
        rollouts: (candidate, fit run) rollouts it cost; wall_s: its wall time [s].
        local_loss: the local optimum's loss; best_loss: the probe's best candidate's loss.
        margin: the fraction the probe had to beat the local optimum by.
        beat: best_loss < (1 - margin) x local_loss (a better basin exists: CMA-ES runs).
        best_x: the probe's best candidate (normalized), a refinement start when it beat.
    """

    generations: int
    popsize: int
    candidates: int
    rollouts: int
    wall_s: float
    local_loss: float
    best_loss: float
    margin: float
    beat: bool
    best_x: list[float] = field(default_factory=list)

    def line(self) -> str:
        rel = self.best_loss / max(self.local_loss, 1e-300)
        return (f"probe {self.generations} gen x {self.popsize} = {self.candidates} candidates ({self.rollouts} rollouts, "
                f"{self.wall_s:.1f} s): best {self.best_loss:.4e} = {rel:.3f}x the local optimum's "
                f"{self.local_loss:.4e} ({'beats' if self.beat else 'does not beat'} it by {100 * self.margin:g} %)")


@dataclass
class FastEvidence:
    """What the fast path's answer says about itself.

    Attributes:
        fit_q_rms_mrad: the fit runs' joint-position residual RMS [mrad] (pooled over runs and joints).
        white_floor_mrad: the white measurement noise estimated from the residual's first differences [mrad].
        floor_ratio: fit_q_rms_mrad / white_floor_mrad [-].
        start_losses: final loss of each phase-1 track (one per distinct start).
        disagree: the starts' losses differ by more than ``agree_ratio``.
        stuck: the evidence asks for the CMA-ES fallback (suspect, and the probe beat the local optimum, or no probe).
        reasons: plain words for each piece of evidence that made the answer suspect (and the probe's, when it beat).
        suspect: the residual or the starts made the answer suspect (the probe ran, when it is on).
        probe: what the probe ran and found (None when it did not run).
        converged: the fast path's refinement converged (:meth:`LMRefiner.verdict`; the stuck verdict
            above is separate: a converged refinement can be stuck on a plateau, an unconverged one at the floor).
        convergence: its verdict's warning with the flag that gives it more room ('' when converged).
    """

    fit_q_rms_mrad: float
    white_floor_mrad: float
    floor_ratio: float
    start_losses: list[float]
    disagree: bool
    stuck: bool
    reasons: list[str] = field(default_factory=list)
    converged: bool = True
    convergence: str = ""
    suspect: bool = False
    probe: ProbeRecord | None = None

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


def residual_evidence(objective: ReplayObjective, x: np.ndarray) -> tuple[float, float]:
    """(fit q RMS [mrad], white-noise floor [mrad]) of one normalized candidate (D,): one rollout on the fit runs."""
    X = np.asarray(x, dtype=float)[None]
    ro = objective.rollouts(X)
    if any(bool(r.diverged[0]) for r in ro):
        return float("inf"), float("nan")
    errs = [run.q - r.q[0] for run, r in zip(objective.runs, ro)]
    fit_rms = float(np.sqrt(np.mean([np.mean(e**2) for e in errs]))) * 1e3
    windows = backend_windows(objective.backend, objective.runs)
    if windows is not None:  # a torque replay's floor is its start states' drift, not the white noise
        floor = shooting_floor(objective.runs, ro, windows, candidate=0).pooled_mrad
    else:
        floor = float(np.sqrt(np.mean([np.mean(white_floor(e) ** 2) for e in errs]))) * 1e3
    return fit_rms, floor


class FastPath:
    """LM from the start (and the ``low`` start) with the delay profiled, then the verdict (module docstring).

    It reads only ``objective``'s runs (the fit runs): no held-out run steers it.
    """

    def __init__(self, objective: ReplayObjective, settings: FastPathSettings = FastPathSettings(),
                 best: BestSoFar | None = None) -> None:
        self.objective = objective
        self.settings = settings
        self.best = best if best is not None else BestSoFar()
        self.refiner = LMRefiner(objective, RefineSettings(max_iter=settings.refine_iter,
                                                           delay_neighbours=settings.delay_neighbours,
                                                           widen_delays=settings.widen_delays,
                                                           single_damping=settings.single_damping,
                                                           jacobian_reuse=settings.jacobian_reuse,
                                                           active_set=settings.active_set), best=self.best)

    def start(self, x0: np.ndarray, extra_starts: Sequence[np.ndarray] = (), labels: Sequence[str] = ()) -> FastState:
        """Evaluate the starts once (duplicates merged); ``x0`` (D,) normalized, ``extra_starts`` beside it
        (``labels``: their names in the progress lines, ``x0`` first)."""
        st = self.refiner.start(np.asarray(x0, dtype=float), extra_starts=[np.asarray(e, dtype=float) for e in extra_starts],
                                labels=labels)
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
        """The evidence of the finished refinement (one rollout of its best on the fit runs; the probe when suspect)."""
        s = self.settings
        best = state.refine.best()
        fit_rms, floor = residual_evidence(self.objective, best.x)
        ratio = fit_rms / floor if floor > 0 and np.isfinite(floor) else float("inf")
        losses = [float(t.loss) for t in state.refine.tracks[: state.n_starts]]
        disagree = len(losses) > 1 and max(losses) > s.agree_ratio * max(min(losses), 1e-300)
        reasons = []
        if not ratio <= s.max_floor_ratio:
            reasons.append(f"fit residual {ratio:.2f}x the white measurement noise (> {s.max_floor_ratio:g})")
        if disagree and not ratio <= s.agree_floor_ratio:
            reasons.append(f"the starts disagree (losses {min(losses):.3e} .. {max(losses):.3e}) and the best is "
                           f"{ratio:.2f}x the noise (> {s.agree_floor_ratio:g})")
        suspect = bool(reasons)
        probe = None
        stuck = suspect
        if suspect and s.probe_generations > 0:
            probe = self.probe(best.x, float(best.loss))
            stuck = probe.beat
            if probe.beat:
                reasons.append(f"the probe's best is {probe.best_loss / max(probe.local_loss, 1e-300):.3f}x the local "
                               f"optimum's loss (< {1 - s.probe_margin:g}): a better basin exists")
        v = self.verdict(state)
        return FastEvidence(fit_rms, floor, ratio, losses, bool(disagree), bool(stuck), reasons,
                            v.converged, v.warning, suspect, probe)

    def probe(self, x_local: np.ndarray, local_loss: float) -> ProbeRecord:
        """``probe_generations`` CMA-ES generations of ``probe_popsize`` centred at ``x_local`` (its own best record:
        what it finds enters the fit only when it beats the local optimum by the margin and the fallback runs)."""
        s = self.settings
        t0 = time.perf_counter()
        rec = BestSoFar()
        cm = CmaesFit(self.objective, CmaesSettings(popsize=s.probe_popsize, max_iter=s.probe_generations,
                                                    sigma0=s.probe_sigma, seed=s.probe_seed,
                                                    x0=tuple(float(v) for v in x_local)), best=rec)
        cm.run()
        n = cm.state.evaluations
        beat = bool(rec.x is not None and not rec.diverged and rec.score < (1.0 - s.probe_margin) * local_loss)
        return ProbeRecord(s.probe_generations, s.probe_popsize, n, n * len(self.objective.runs),
                           time.perf_counter() - t0, float(local_loss), float(rec.score), float(s.probe_margin), beat,
                           [] if rec.x is None else [float(v) for v in rec.x])


def evidence_line(ev: FastEvidence) -> str:
    """One console line for the fast path's verdict (the probe's cost and answer when it ran)."""
    head = (f"[fast] residual {ev.fit_q_rms_mrad:.4g} mrad = {ev.floor_ratio:.2f}x the white noise; "
            f"starts {'disagree' if ev.disagree else 'agree'}")
    probe = getattr(ev, "probe", None)
    if probe is not None:
        head += "; " + probe.line()
    if ev.stuck:
        tail = " -> stuck, falling back to CMA-ES: " + "; ".join(ev.reasons)
    elif probe is not None:
        tail = (" -> no better basin found: stop at the local optimum (the adequacy verdict judges the model; "
                "suspect: " + "; ".join(ev.reasons) + ")")
    else:
        tail = " -> done"
    return head + tail + ("" if getattr(ev, "converged", True) else f" (warning: {ev.convergence})")
