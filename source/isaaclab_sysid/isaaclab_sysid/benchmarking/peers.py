"""Peers side by side: ``mujoco.sysid``, a PACE-style CMA-ES fit and ours, on the same twin runs (docs/benchmarks.md).

Work: two run sets recorded from a hidden truth (not the defaults; Stribeck friction with
static friction 1.2x Coulomb, encoder/velocity/torque noise and quantization, 1 kHz), one
with joint PD, one with task impedance, each with two fit runs and a held-out run of another
waveform at other gains (plus its repeat with other noise: the floor). Every contender gets
the same runs, the parameter set armature, Coulomb friction, viscous friction and the delay,
the fit's default bounds and a stated budget:

* ``mujoco.sysid``: :mod:`isaaclab_sysid.benchmarking.mjsysid` (Gauss-Newton, its default residual).
* ``pace``: PACE's choices on our replay: CMA-ES only (``CmaesFit``), the joint-position MSE as
  the only loss term, the centre of the bounds as the start, sigma 0.5 of the half-range
  (0.25 in our unit cube), PACE's population guidance (256-512 "fast prototyping"), no local
  refinement, and the final CMA-ES mean as the answer (PACE's ``get_best_sim_params``).
* ``ours``: the ``cmaes`` strategy (population, generations and refinement of
  ``SearchConfig``'s defaults at full size), ``ours@<peer>``: CMA-ES then LM stopped at a
  peer's wall time, and ``fast``: ``--strategy fast`` from three starts (low, center, random).

Figures per contender: wall time, rollouts ((candidate, run) pairs) and 1 ms env-steps,
per-parameter relative error (Coulomb friction: the distance to [Coulomb, static], as in
``jobs/twin_study.py``), delay error, held-out q RMS over the noise floor (every contender's values
replayed by the same backend, a fractional delay rounded to whole ticks) and the 95 % interval
coverage where the tool gives intervals (ours: the curvature intervals; ``mujoco.sysid``:
``calculate_intervals``; PACE gives none).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.benchmarking.counting import CountingBackend, TracingBest
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.evaluate.metrics import rms_between_runs
from isaaclab_sysid.jobs.fit_args import SearchConfig
from isaaclab_sysid.fit.fast_path import FastFitState
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings, CmaesState, make_es
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.fit.search import Search, SearchSettings
from isaaclab_sysid.fit.state import FitState
from isaaclab_sysid.intervals.curvature import curvature_intervals, sensitivity
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.twin.demo import joint_target, task_target
from isaaclab_sysid.twin.params import TwinNoise, TwinParams
from isaaclab_sysid.twin.recorder import record_twin

GROUPS = ("armature", "friction", "viscous", "delay")
#: hidden truth (away from the defaults, the bounds' centres and the low start; delay 3, the low start's is 2)
TRUTH = {
    "armature": np.array([0.22, 0.34, 0.15, 0.24, 0.06, 0.09, 0.035]),
    "friction": np.array([0.45, 0.7, 0.35, 0.5, 0.18, 0.25, 0.1]),
    "viscous": np.array([0.3, 0.5, 0.25, 0.35, 0.12, 0.15, 0.07]),
    "delay": 3,
}
STATIC_OVER_COULOMB = 1.2
STRIBECK_VELOCITY = 0.05  # [rad/s]
NOISE = TwinNoise(q_std=5e-5, dq_std=2e-3, tau_J_std=0.02, actuator_tau_std=0.01, q_quantum=6e-6, tau_quantum=1e-3)


@dataclass(frozen=True)
class PeerSize:
    """How big the benchmark is: run lengths [s] and each contender's budget."""

    name: str
    fit_seconds: float
    heldout_seconds: float
    ours_popsize: int
    ours_generations: int
    refine_iter: int
    pace_popsize: int
    pace_generations: int
    sysid_max_iters: int
    starts: tuple[str, ...] = ("low", "center", "random")
    sysid_starts: tuple[str, ...] = ("low", "center")


#: ``--quick``: the suite's size (tests/test_vs_peers.py); every figure, tiny budgets
QUICK = PeerSize("quick", 1.2, 1.2, 8, 2, 2, 16, 2, 2, ("low", "center"), ("low",))
#: full size: ours with SearchConfig's defaults (64 x 40 + its LM budget per phase), PACE 256 x 8 (the low end of its
#: "fast prototyping" population), mujoco.sysid 25 Gauss-Newton iterations; 2.5 s runs to fit ~15 min on 2 cores
FULL = PeerSize("full", 2.5, 2.5, SearchConfig.num_envs, SearchConfig.max_iter, SearchConfig.refine_iter, 256, 8, 25)


@dataclass
class Workload:
    """One run set: fit runs, the held-out run, its repeat, the floor [mrad]."""

    controller: str
    fit: list[Run]
    heldout: Run
    repeat: Run
    floor_mrad: float


def twin(static_over_coulomb: float = STATIC_OVER_COULOMB) -> TwinParams:
    """The benchmark twin (:data:`TRUTH`, Stribeck friction whose static level is ``static_over_coulomb`` x the
    Coulomb level (1: Coulomb truth), :data:`NOISE`)."""
    return TwinParams(robot="franka_panda", armature=TRUTH["armature"], friction=TRUTH["friction"],
                      viscous=TRUTH["viscous"], delay=TRUTH["delay"], friction_model="stribeck",
                      static_friction=static_over_coulomb * TRUTH["friction"],
                      stribeck_velocity=np.full(7, STRIBECK_VELOCITY), torque_clamp=False, slew_limit=False, noise=NOISE)


def workload(robot: Robot, controller: str, size: PeerSize, seed: int = 0,
             static_over_coulomb: float = STATIC_OVER_COULOMB) -> Workload:
    """Record one run set (joint_pd or task_impedance) at 1 kHz (see module docstring) from :func:`twin`."""
    p = twin(static_over_coulomb)
    f, h = size.fit_seconds, size.heldout_seconds
    if controller == "joint_pd":
        targets = [joint_target(robot, f, 40 + seed, "fit_a"), joint_target(robot, f, 50 + seed, "fit_b")]
        held = joint_target(robot, h, 60 + seed, "heldout", kp=1.5 * np.array([300, 300, 300, 300, 120, 80, 40.0]),
                            kd=1.2 * np.array([25, 25, 25, 25, 10, 8, 4.0]))
    elif controller == "task_impedance":
        targets = [task_target(robot, "chirp", f, 200.0, 20.0, 40 + seed, "fit_a"),
                   task_target(robot, "multiband", f, 200.0, 20.0, 50 + seed, "fit_b")]
        held = task_target(robot, "multiband", h, 500.0, 30.0, 60 + seed, "heldout")
    else:
        raise ValueError(f"unknown controller '{controller}' (joint_pd, task_impedance)")
    fit = [record_twin(robot, t, p, seed=1000 * seed + i, log_rate_hz=1000.0) for i, t in enumerate(targets)]
    ho = record_twin(robot, held, p, seed=1000 * seed + 7, log_rate_hz=1000.0)
    rep = record_twin(robot, held, p, seed=1000 * seed + 8, log_rate_hz=1000.0, name="heldout_repeat")
    return Workload(controller, fit, ho, rep, float(rms_between_runs(ho, rep)["q_rms_all_mrad"]))


@dataclass
class Score:
    """One contender's figures on one run set.

    Attributes:
        contender, controller, start: what ran where from where.
        budget: the stated budget in words.
        wall_s: wall time of the fit [s]; rollouts, env_steps: what it rolled out.
        rel_err: group -> (N,) relative error per parameter; delay: fitted [ticks] (float for a continuous delay).
        heldout_mrad: held-out q RMS [mrad]; floor_mrad: the noise floor [mrad].
        coverage: share of bounded 95 % intervals meeting the truth (None: the tool gives none); unbounded: count.
        note: what the contender could not represent, or how it ended.
    """

    contender: str
    controller: str
    start: str
    budget: str
    wall_s: float
    rollouts: int
    env_steps: int
    rel_err: dict[str, list[float]]
    delay: float
    heldout_mrad: float
    floor_mrad: float
    coverage: float | None = None
    unbounded: int | None = None
    note: str = ""
    trace: list[tuple[float, int, float]] = field(default_factory=list)

    @property
    def delay_err(self) -> float:
        return float(self.delay - TRUTH["delay"])

    @property
    def heldout_over_floor(self) -> float:
        return self.heldout_mrad / self.floor_mrad

    def median_err(self, group: str | None = None) -> float:
        v = np.concatenate([self.rel_err[g] for g in (GROUPS[:3] if group is None else (group,))])
        return float(np.median(v))

    def max_err(self) -> float:
        return float(np.max(np.concatenate([self.rel_err[g] for g in GROUPS[:3]])))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["delay_err"] = self.delay_err
        d["heldout_over_floor"] = self.heldout_over_floor
        return d


def space_of(robot: Robot) -> ParamSpace:
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, robot.n_dof, robot.joint_names)


def start_vector(name: str, space: ParamSpace, seed: int = 7) -> np.ndarray:
    """A start in the unit cube: ``low`` (sliding regime), ``center`` or ``random`` (seeded, uniform)."""
    if name == "low":
        return space.low_start()
    if name == "center":
        return np.full(space.dim, 0.5)
    if name == "random":
        return np.random.default_rng(seed).uniform(0.0, 1.0, space.dim)
    raise ValueError(f"unknown start '{name}' (low, center, random)")


def rel_errors(values: dict) -> dict[str, list[float]]:
    """group -> per-joint relative error; Coulomb friction: the distance to [Coulomb, static] over Coulomb."""
    out = {}
    for g in GROUPS[:3]:
        v, t = np.asarray(values[g], dtype=float), TRUTH[g]
        if g == "friction":
            hi = STATIC_OVER_COULOMB * t
            out[g] = ((np.maximum(t - v, 0) + np.maximum(v - hi, 0)) / t).tolist()
        else:
            out[g] = (np.abs(v - t) / t).tolist()
    return out


def heldout_rms(robot: Robot, values: dict, run: Run) -> float:
    """Held-out q RMS [mrad] of decoded values replayed by the plain MuJoCo backend (delay rounded to whole ticks)."""
    be = MujocoBackend(robot, ReplayOptions())
    try:
        b = CandidateBatch(armature=np.asarray(values["armature"], float)[None], friction=np.asarray(values["friction"], float)[None],
                           viscous=np.asarray(values["viscous"], float)[None], delay=np.array([int(round(float(values["delay"])))]))
        ro = be.rollout(b, [run])[0]
    finally:
        be.close()
    if ro.diverged[0]:
        return float("inf")
    return float(np.sqrt(np.mean((ro.q[0] - run.q) ** 2)) * 1e3)


def _coverage(lower: np.ndarray, upper: np.ndarray) -> tuple[float | None, int]:
    """(share of bounded intervals meeting the truth, count unbounded) over the 21 continuous numbers."""
    t_lo = np.concatenate([TRUTH[g] for g in GROUPS[:3]])
    t_hi = t_lo.copy()
    t_hi[7:14] *= STATIC_OVER_COULOMB
    ok = np.isfinite(lower) & np.isfinite(upper)
    if not ok.any():
        return None, int((~ok).sum())
    hit = (lower[ok] <= t_hi[ok]) & (t_lo[ok] <= upper[ok])
    return float(hit.mean()), int((~ok).sum())


def our_coverage(objective: ReplayObjective, x: np.ndarray) -> tuple[float | None, int]:
    """Coverage of our curvature intervals at ``x`` (one batched central-difference rollout, not counted)."""
    ivs = curvature_intervals(sensitivity(objective, x, 1e-3, profile_delay=False)).intervals
    cont = [iv for iv in ivs if iv.group != "delay"]
    lo = np.array([iv.lower if iv.lower is not None else -np.inf for iv in cont], dtype=float)
    hi = np.array([iv.upper if iv.upper is not None else np.inf for iv in cont], dtype=float)
    return _coverage(lo, hi)


def _trace(robot: Robot, space: ParamSpace, best: TracingBest, run: Run) -> list[tuple[float, int, float]]:
    """(wall, rollouts, held-out q RMS [mrad]) at each improvement, scored after the fit in one batched rollout."""
    if not best.points:
        return []
    be = MujocoBackend(robot, ReplayOptions())
    try:
        ro = be.rollout(space.to_batch(np.array([p[2] for p in best.points])), [run])[0]
    finally:
        be.close()
    err = np.sqrt(np.mean((ro.q - run.q[None]) ** 2, axis=(1, 2))) * 1e3
    return [(w, n, float(e) if not d else float("inf")) for (w, n, _), e, d in zip(best.points, err, ro.diverged)]


class Bench:
    """Runs every contender on one workload (see module docstring)."""

    def __init__(self, robot: Robot, work: Workload, size: PeerSize, log=print) -> None:
        self.robot, self.work, self.size, self.log = robot, work, size, log
        self.space = space_of(robot)

    def _problem(self, weights: LossWeights = LossWeights()) -> tuple[FitProblem, CountingBackend]:
        be = CountingBackend(MujocoBackend(self.robot, ReplayOptions()))
        return FitProblem(list(self.work.fit), [], self.robot, self.space, be, weights, np.ones(len(self.work.fit))), be

    def _score(self, name: str, start: str, budget: str, wall: float, be: CountingBackend, x: np.ndarray,
               coverage=(None, None), note: str = "", trace=()) -> Score:
        values = self.space.decode(x)
        return Score(name, self.work.controller, start, budget, wall, be.rollouts, be.env_steps, rel_errors(values),
                     float(values["delay"]), heldout_rms(self.robot, values, self.work.heldout), self.work.floor_mrad,
                     coverage[0], coverage[1], note, list(trace))

    def ours(self, strategy: str, start: str) -> Score:
        """Our search (``cmaes`` or ``fast``) with the size's population/generations/refinement."""
        s = self.size
        prob, be = self._problem()
        x0 = start_vector(start, self.space)
        t0 = time.perf_counter()
        best = TracingBest(be, t0)
        es = CmaesState(es=make_es(self.space, CmaesSettings(s.ours_popsize, s.ours_generations, 0.25, 0, tuple(x0))))
        state = (FastFitState(es, best) if strategy == "fast" else FitState(es, best))
        settings = SearchSettings(CmaesSettings(s.ours_popsize, s.ours_generations, 0.25, 0, tuple(x0)),
                                  refine_iter=s.refine_iter, quiet=True, strategy=strategy)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory() as d:
            search = Search(prob, settings, d, state=state, log=self.log)
            res = search.run(x0_extra=x0)
            wall = time.perf_counter() - t0
        cov = our_coverage(ReplayObjective(self.space, be.inner, self.work.fit), res.best_x)
        be.inner.close()
        if strategy == "fast":
            ev = search.state.fast.evidence
            note = (f"fell back to CMA-ES ({'; '.join(ev.reasons)})" if search.fell_back
                    else f"no fallback (residual {ev.floor_ratio:.2f}x white noise)")
            budget = f"LM {s.refine_iter}/phase, all delays; fallback CMA-ES {s.ours_popsize}x{s.ours_generations}"
        else:
            note, budget = "", f"CMA-ES {s.ours_popsize}x{s.ours_generations} + LM {s.refine_iter}/phase"
        return self._score("fast" if strategy == "fast" else "ours", start, budget, wall, be, res.best_x, cov, note,
                           _trace(self.robot, self.space, best, self.work.heldout))

    def ours_within(self, budget_s: float, peer: str) -> Score:
        """Ours stopped at a wall time: CMA-ES (population 16) for 40 % of it, then LM over every delay until it ends."""
        prob, be = self._problem()
        obj = prob.objective()
        x0 = self.space.low_start()
        t0 = time.perf_counter()
        best = TracingBest(be, t0)
        cm = CmaesFit(obj, CmaesSettings(16, 10**6, 0.25, 0, tuple(x0)), best=best)
        while True:
            cm.step()
            if time.perf_counter() - t0 > 0.4 * budget_s:
                break
        ref = LMRefiner(obj, RefineSettings(max_iter=10**6), best=best)
        st = ref.start(best.x, extra_starts=[x0])
        while not st.done and time.perf_counter() - t0 < budget_s:
            ref.step(st)
        wall = time.perf_counter() - t0
        cov = our_coverage(ReplayObjective(self.space, be.inner, self.work.fit), best.x)
        be.inner.close()
        return self._score(f"ours@{peer}", "low", f"{budget_s:.0f} s wall ({cm.state.iteration} gen x 16, "
                           f"{st.iteration} LM)", wall, be, best.x, cov, trace=_trace(self.robot, self.space, best, self.work.heldout))

    def pace(self) -> Score:
        """PACE's choices on our replay (module docstring)."""
        s = self.size
        prob, be = self._problem(LossWeights(1.0, 0.0, 0.0))
        obj = prob.objective()
        t0 = time.perf_counter()
        best = TracingBest(be, t0)
        cm = CmaesFit(obj, CmaesSettings(s.pace_popsize, s.pace_generations, 0.25, 0, None), best=best)
        cm.run()
        wall = time.perf_counter() - t0
        mean = np.clip(np.asarray(cm.state.es.mean, dtype=float), 0.0, 1.0)
        be.inner.close()
        return self._score("pace", "center", f"CMA-ES {s.pace_popsize}x{s.pace_generations}, q-MSE only", wall, be, mean,
                           note="answer = final CMA-ES mean (PACE); no intervals",
                           trace=_trace(self.robot, self.space, best, self.work.heldout))

    def sysid(self, start: str) -> Score:
        """``mujoco.sysid`` from a start (raises ImportError without the [peers] extra)."""
        from isaaclab_sysid.benchmarking.mjsysid import fit_sysid

        x0 = start_vector(start, self.space)
        v0 = self.space.decode(x0)
        out = fit_sysid(self.robot, self.work.fit, {g: DEFAULT_BOUNDS[g] for g in GROUPS}, v0, self.size.sysid_max_iters)
        v = out.values
        lo = np.concatenate([np.asarray(v[g]) - out.half_width[g] for g in GROUPS[:3]])
        hi = np.concatenate([np.asarray(v[g]) + out.half_width[g] for g in GROUPS[:3]])
        cov = _coverage(lo, hi)
        note = ("native MuJoCo position actuators + actuator delay (linear interp)" if out.delay_fitted else
                "custom_rollout (our C closed loop): delay rounded to ticks, Gauss-Newton cannot move it")
        return Score("mujoco.sysid", self.work.controller, start, f"Gauss-Newton <= {self.size.sysid_max_iters} it",
                     out.wall_s, out.rollouts, out.env_steps, rel_errors(v), float(v["delay"]),
                     heldout_rms(self.robot, v, self.work.heldout), self.work.floor_mrad, cov[0], cov[1], note)


def sysid_available() -> str | None:
    """None when ``mujoco.sysid`` imports, else the reason (the [peers] extra is missing)."""
    try:
        from isaaclab_sysid.benchmarking.mjsysid import import_sysid

        import_sysid()
    except ImportError as exc:
        return str(exc)
    return None


def run_all(robot: Robot, size: PeerSize, controllers: Sequence[str] = ("joint_pd", "task_impedance"),
            log=print) -> tuple[list[Score], list[str]]:
    """Every contender on every run set; returns the scores and the skip notes."""
    scores: list[Score] = []
    skipped: list[str] = []
    why = sysid_available()
    if why is not None:
        skipped.append(f"mujoco.sysid skipped: {why}")
        log(skipped[-1])
    for ctrl in controllers:
        work = workload(robot, ctrl, size)
        b = Bench(robot, work, size, log)
        log(f"== {ctrl}: {len(work.fit)} fit runs of {size.fit_seconds:g} s, held-out {size.heldout_seconds:g} s, "
            f"floor {work.floor_mrad:.3f} mrad")

        def add(s: Score) -> Score:
            scores.append(s)
            log(f"  {s.contender:14s} start {s.start:7s} {s.wall_s:7.1f} s {s.rollouts:7d} rollouts  delay {s.delay:.2f}  "
                f"median err {100 * s.median_err():.1f} %  held-out {s.heldout_over_floor:.2f}x floor  {s.note}")
            return s

        add(b.ours("cmaes", "low"))
        for st in size.starts:
            add(b.ours("fast", st))
        pace = add(b.pace())
        add(b.ours_within(pace.wall_s, "pace"))
        if why is None:
            sy = [add(b.sysid(st)) for st in size.sysid_starts]
            add(b.ours_within(max(sy[0].wall_s, 1.0), "sysid"))
    return scores, skipped


def time_to(score: Score, target_mrad: float) -> tuple[float | None, int | None]:
    """(wall [s], rollouts) from which the contender's best-so-far replays the held-out run within ``target_mrad`` and
    stays there to the end (None when its final best does not)."""
    out: tuple[float | None, int | None] = (None, None)
    for w, n, e in reversed(score.trace):
        if e > target_mrad:
            break
        out = (w, n)
    return out


def _fmt(v: float | None, f: str) -> str:
    return "n/a" if v is None else format(v, f)


def table(scores: Sequence[Score]) -> str:
    """The Markdown table, with each figure's ratio against ours (default strategy) on the same run set."""
    lines = ["| run set | contender | start | budget | wall [s] | rollouts | env-steps | median rel. err arm / Coulomb / visc "
             "| max rel. err | delay (true 3) | held-out / floor | coverage (unbounded) | wall / ours | rollouts / ours "
             "| held-out / ours | note |", "|" + "---|" * 16]
    for s in scores:
        ref = next((r for r in scores if r.controller == s.controller and r.contender == "ours"), s)
        cov = "n/a" if s.coverage is None else f"{s.coverage:.2f} ({s.unbounded})"
        lines.append(
            f"| {s.controller} | {s.contender} | {s.start} | {s.budget} | {s.wall_s:.1f} | {s.rollouts} | {s.env_steps:.3g} | "
            f"{100 * s.median_err('armature'):.1f} / {100 * s.median_err('friction'):.1f} / {100 * s.median_err('viscous'):.1f} % | "
            f"{100 * s.max_err():.0f} % | {s.delay:.2f} | {s.heldout_over_floor:.2f} | {cov} | {s.wall_s / ref.wall_s:.2f} | "
            f"{s.rollouts / max(ref.rollouts, 1):.2f} | {s.heldout_mrad / ref.heldout_mrad:.2f} | {s.note} |")
    return "\n".join(lines)


def time_to_table(scores: Sequence[Score], tol: float = 1.1) -> str:
    """Rollouts and wall time until each of our contenders' best replays the held-out run within ``tol`` x the best
    held-out error any of ours reached on that run set."""
    lines = ["| run set | contender | start | target [mrad] | wall to target [s] | rollouts to target | final held-out [mrad] |",
             "|---|---|---|---|---|---|---|"]
    for ctrl in dict.fromkeys(s.controller for s in scores):
        mine = [s for s in scores if s.controller == ctrl and s.trace]
        if not mine:
            continue
        target = tol * min(s.heldout_mrad for s in mine)
        for s in mine:
            w, n = time_to(s, target)
            lines.append(f"| {ctrl} | {s.contender} | {s.start} | {target:.4f} | {_fmt(w, '.1f')} | {_fmt(n, 'd')} | "
                         f"{s.heldout_mrad:.4f} |")
    return "\n".join(lines)
