"""Recovery studies: twins with hidden truth the model must work for, fitted and scored cell by cell.

A :class:`Cell` fixes how the twin logs (1 kHz, or 50 Hz rows with 0-10 ms stale
states), its friction truth (Coulomb, or Stribeck with static friction above
Coulomb), the fitted friction model (Coulomb ``friction`` or the static group
``mu_static, dynamic_ratio``), whether the fit models the rows' state age, and the
controller (joint PD or task impedance). :func:`run_cell` records fit runs and a
held-out run of another waveform at other gains (plus its repeat for the noise
floor), fits them through the product's own stages (the replay objective, the
Levenberg-Marquardt refinement over the delay, evaluation, the adequacy verdict,
every interval method) and scores the result against the truth:
:class:`CellScore`. ``benchmarks/fit_matrix.py`` prints the full table (docs/fit.md),
``tests/test_fit_matrix.py`` runs it CI-sized.

The fit starts from a perturbed truth (armature x1.3, friction x0.7, viscous x1.4,
the delay one tick off) and refines there: the study tests the model, the
intervals and the verdicts, not CMA-ES's global search (benchmarks/fit_recovery.py
does that).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.evaluate.heldout import evaluate_params
from isaaclab_sysid.evaluate.metrics import rms_between_runs
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.intervals.combine import compute_all
from isaaclab_sysid.jobs.assessment import assess_fit
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.sim.interface import ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.state_age import StateAgeBackend, StateAgeModel
from isaaclab_sysid.twin.demo import joint_target, task_target
from isaaclab_sysid.twin.params import TwinNoise, TwinParams
from isaaclab_sysid.twin.recorder import record_twin

#: Hidden truth of the study twins (away from the defaults, the bounds' centres and zero).
TRUTH = {
    "armature": np.array([0.26, 0.3, 0.18, 0.2, 0.08, 0.07, 0.04]),
    "friction": np.array([0.5, 0.6, 0.4, 0.45, 0.2, 0.22, 0.12]),
    "viscous": np.array([0.35, 0.45, 0.3, 0.28, 0.14, 0.12, 0.08]),
    "delay": 2,
}
STATIC_OVER_COULOMB = 1.35  # Stribeck truth: static friction = 1.35 x Coulomb
STRIBECK_VELOCITY = 0.05  # [rad/s], the fit's fixed --stribeck_velocity
NOISE = TwinNoise(q_std=5e-5, dq_std=2e-3, actuator_tau_std=0.01, q_quantum=6e-6)


@dataclass(frozen=True)
class Cell:
    """One configuration of the study (see module docstring)."""

    rate_hz: float
    truth: str  # "coulomb" | "stribeck"
    model: str  # "coulomb" | "static"
    controller: str  # "joint_pd" | "task_impedance"
    state_model: bool = True  # the fit models 50 Hz rows' state age (irrelevant at 1 kHz)

    @property
    def name(self) -> str:
        rate = "1kHz" if self.rate_hz >= 1000 else f"{self.rate_hz:g}Hz" + ("+age" if self.state_model else " no-age")
        return f"{rate} / {self.truth} truth / {self.model} fit / {self.controller}"

    @property
    def model_is_right(self) -> bool:
        """The fit's model can represent the truth (the intervals should then cover it)."""
        stale_ok = self.rate_hz >= 1000 or self.state_model
        return stale_ok and (self.truth == "coulomb" or self.model == "static")


@dataclass(frozen=True)
class StudySize:
    """How big each cell is: run lengths [s], refinement iterations, noise seeds."""

    fit_seconds: float = 2.5
    heldout_seconds: float = 2.0
    refine_iter: int = 6
    seeds: tuple[int, ...] = (0,)


CI = StudySize()
FULL = StudySize(fit_seconds=6.0, heldout_seconds=5.0, refine_iter=12, seeds=(0, 1, 2))


def matrix(extra_wrong: bool = True) -> list[Cell]:
    """The issue's matrix: {1 kHz, 50 Hz + state age} x {Coulomb, Stribeck + static fit, Stribeck + Coulomb fit}
    x {joint PD, task impedance}, plus (``extra_wrong``) a stale 50 Hz log fitted without the state-age model."""
    cells = []
    for rate in (1000.0, 50.0):
        for truth, model in (("coulomb", "coulomb"), ("stribeck", "static"), ("stribeck", "coulomb")):
            for ctrl in ("joint_pd", "task_impedance"):
                cells.append(Cell(rate, truth, model, ctrl))
    if extra_wrong:
        cells += [Cell(50.0, "coulomb", "coulomb", c, state_model=False) for c in ("joint_pd", "task_impedance")]
    return cells


def twin_params(cell: Cell) -> TwinParams:
    """The study twin's truth and noise for a cell (stale rows only for logs below 1 kHz)."""
    stribeck = cell.truth == "stribeck"
    noise = dataclasses.replace(NOISE, stale_max_ms=10 if cell.rate_hz < 1000 else 0)
    return TwinParams(robot="franka_panda", armature=TRUTH["armature"], friction=TRUTH["friction"], viscous=TRUTH["viscous"],
                      delay=TRUTH["delay"], friction_model="stribeck" if stribeck else "coulomb",
                      static_friction=STATIC_OVER_COULOMB * TRUTH["friction"] if stribeck else None,
                      stribeck_velocity=np.full(7, STRIBECK_VELOCITY) if stribeck else None,
                      torque_clamp=False, slew_limit=False, noise=noise)


def cell_runs(robot: Robot, cell: Cell, seed: int, size: StudySize) -> tuple[list[Run], Run, Run]:
    """Fit runs, the held-out run (another waveform, other gains) and its repeat (other noise seed)."""
    p = twin_params(cell)
    rate = float(cell.rate_hz)
    f, h = size.fit_seconds, size.heldout_seconds
    if cell.controller == "joint_pd":
        targets = [joint_target(robot, f, 10 + seed, "fit_a"), joint_target(robot, f, 20 + seed, "fit_b")]
        held = joint_target(robot, h, 30 + seed, "heldout", kp=1.5 * np.array([300, 300, 300, 300, 120, 80, 40.0]),
                            kd=1.2 * np.array([25, 25, 25, 25, 10, 8, 4.0]))
    else:
        targets = [task_target(robot, "chirp", f, 200.0, 20.0, 10 + seed, "fit_a"),
                   task_target(robot, "multiband", f, 200.0, 20.0, 20 + seed, "fit_b")]
        held = task_target(robot, "multiband", h, 500.0, 30.0, 30 + seed, "heldout")
    fit = [record_twin(robot, t, p, seed=100 * seed + i, log_rate_hz=rate) for i, t in enumerate(targets)]
    return fit, record_twin(robot, held, p, seed=100 * seed + 7, log_rate_hz=rate), \
        record_twin(robot, held, p, seed=100 * seed + 8, log_rate_hz=rate, name="heldout_repeat")


def space_of(cell: Cell, robot: Robot) -> ParamSpace:
    groups = ("armature", "friction", "viscous", "delay") if cell.model == "coulomb" else \
        ("armature", "mu_static", "dynamic_ratio", "viscous", "delay")
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in groups}, robot.n_dof, robot.joint_names)


def truth_interval(cell: Cell, space: ParamSpace) -> tuple[np.ndarray, np.ndarray]:
    """(D,) low and high ends of the truth: equal but for a Coulomb fit of Stribeck friction, whose one friction
    level has no single true value (any effective level between the Coulomb and the static friction is right)."""
    v = truth_vector(cell, space)
    hi = v.copy()
    if cell.truth == "stribeck" and "friction" in space.group_names:
        hi[space.slice("friction")] = STATIC_OVER_COULOMB * TRUTH["friction"]
    return v, hi


def truth_vector(cell: Cell, space: ParamSpace) -> np.ndarray:
    """(D,) the truth in the space's decoded units (a Coulomb fit's friction: the Coulomb level; see truth_interval)."""
    fc = TRUTH["friction"]
    fs = STATIC_OVER_COULOMB * fc if cell.truth == "stribeck" else fc
    per = {"armature": TRUTH["armature"], "friction": fc, "viscous": TRUTH["viscous"], "mu_static": fs,
           "dynamic_ratio": fc / fs}
    v = np.empty(space.dim)
    for g in space.groups:
        v[space.slice(g.name)] = TRUTH["delay"] if g.name == "delay" else per[g.name]
    return v


@dataclass
class CellScore:
    """What one cell's fit got right, and what it said about itself.

    Attributes:
        cell, seed: the configuration; delay: fitted (truth 2).
        rel_err: group -> (N,) |fit - truth| / truth.
        covered, checked: truths inside their 95 % curvature interval / identifiable intervals checked
            (a Coulomb fit of Stribeck friction: the interval meets [Coulomb, static]).
        missed_unflagged: intervals that miss the truth and are not marked unreliable (a confident wrong interval).
        unbounded: entries reported unidentifiable; unreliable: entries whose interval is marked unreliable.
        heldout_over_floor: held-out q RMS / RMS between the held-out run and its repeat.
        verdict, messages: the adequacy verdict.
        static_z: (N,) the score test's z per joint for a Coulomb fit (evaluate/friction_score.py), else None.
    """

    cell: Cell
    seed: int
    delay: int | None
    rel_err: dict[str, list[float]]
    covered: int
    checked: int
    unbounded: int
    unreliable: int
    heldout_over_floor: float
    verdict: str
    messages: list[str] = field(default_factory=list)
    missed_unflagged: int = 0
    static_z: list[float] | None = None

    @property
    def honest(self) -> bool:
        """Never a confident wrong interval: every interval that misses the truth is marked unreliable."""
        return self.missed_unflagged == 0


def fit_cell(robot: Robot, cell: Cell, fit: Sequence[Run], size: StudySize) -> tuple[FitResult, ReplayObjective]:
    """The refinement from a perturbed truth over the delay, through a (state-age) MuJoCo backend."""
    opts = ReplayOptions(stribeck_velocity=STRIBECK_VELOCITY)
    inner = MujocoBackend(robot, opts)
    backend = StateAgeBackend(inner, StateAgeModel(10)) if (cell.rate_hz < 1000 and cell.state_model) else inner
    space = space_of(cell, robot)
    objective = ReplayObjective(space, backend, fit)
    truth = truth_vector(cell, space)
    start = truth.copy()
    for g, f in (("armature", 1.3), ("friction", 0.7), ("mu_static", 0.7), ("viscous", 1.4)):
        if g in space.group_names:
            start[space.slice(g)] *= f
    lo, hi = space.bounds()
    x0 = np.clip((start - lo) / (hi - lo), 0, 1)
    x0 = space.with_delay(x0, TRUTH["delay"] - 1)
    ref = LMRefiner(objective, RefineSettings(max_iter=size.refine_iter, delay_neighbours=1))
    state = ref.run(ref.start(x0))
    best = state.best()
    res = FitResult.from_search(space, best.x, best.loss, run_names=objective.run_names, weighted_loss=best.contrib,
                                traj_weights=np.asarray(objective.traj_weights), loss_weights=LossWeights(),
                                backend=backend.name, refine=state.summary())
    return res, objective


def run_cell(cell: Cell, seed: int = 0, size: StudySize = CI, robot: Robot | None = None) -> CellScore:
    """Record, fit, evaluate, judge and score one cell (see module docstring)."""
    robot = robot or load_robot("franka_panda")
    fit, held, repeat = cell_runs(robot, cell, seed, size)
    result, objective = fit_cell(robot, cell, fit, size)
    try:
        runs = [*fit, held]
        ev = evaluate_params(objective.backend, result, runs)
        floor = rms_between_runs(held, repeat)["q_rms_all_mrad"]
        age = 10.0 if (cell.rate_hz < 1000 and cell.state_model) else 0.0
        result.adequacy = assess_fit(objective.backend, result, runs, ev.rollouts, len(fit), robot, None,
                                     [age] * len(runs))
        rep = compute_all(objective.backend, result, fit, [held], n_boot=200)
    finally:
        objective.backend.close()
    t_lo, t_hi = truth_interval(cell, result.space)
    value = result.space.decoded_vector(result.best_x)
    rel = {}
    for g in result.space.groups:
        if g.name != "delay":
            sl = result.space.slice(g.name)
            off = np.maximum(t_lo[sl] - value[sl], 0) + np.maximum(value[sl] - t_hi[sl], 0)
            rel[g.name] = (off / np.abs(t_lo[sl])).tolist()
    ivs = rep.sets["curvature"].intervals
    bounded = [(i, iv) for i, iv in enumerate(ivs) if iv.bounded and iv.group != "delay"]
    labels = result.space.labels()
    hit = [iv.lower <= t_hi[labels.index(iv.label)] and t_lo[labels.index(iv.label)] <= iv.upper for _, iv in bounded]
    covered = int(sum(hit))
    missed_unflagged = sum(1 for (_, iv), h in zip(bounded, hit) if not h and iv.reliable)
    held_rms = ev.fitted[-1].q_rms_all_mrad
    return CellScore(cell, seed, result.delay, rel, covered, len(bounded), sum(not iv.bounded for iv in ivs),
                     sum(not iv.reliable for iv in ivs), float(held_rms / floor), result.adequacy.verdict,
                     list(result.adequacy.messages), missed_unflagged,
                     (result.adequacy.static_friction_test or {}).get("z"))


def table(scores: Sequence[CellScore]) -> str:
    """The Markdown table of a study (one row per cell, seeds pooled)."""
    lines = ["| cell | delay exact | median rel. error | max rel. error | 95 % coverage | unidentified | "
             "held-out / floor | verdict | misses not flagged |", "|---|---|---|---|---|---|---|---|---|"]
    by: dict[str, list[CellScore]] = {}
    for s in scores:
        by.setdefault(s.cell.name, []).append(s)
    for name, ss in by.items():
        errs = np.concatenate([np.concatenate([np.asarray(v) for v in s.rel_err.values()]) for s in ss])
        cov = sum(s.covered for s in ss) / max(1, sum(s.checked for s in ss))
        verdicts = sorted({s.verdict for s in ss})
        lines.append(f"| {name} | {sum(s.delay == TRUTH['delay'] for s in ss)}/{len(ss)} | {100 * np.median(errs):.1f} % | "
                     f"{100 * errs.max():.0f} % | {cov:.2f} | {sum(s.unbounded for s in ss) / len(ss):.1f} | "
                     f"{np.mean([s.heldout_over_floor for s in ss]):.2f} | {', '.join(verdicts)} | "
                     f"{sum(s.missed_unflagged for s in ss)} |")
    return "\n".join(lines)
