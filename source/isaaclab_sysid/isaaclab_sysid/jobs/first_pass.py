"""A long fit's first pass on windows, then a polish on the full runs (issue 45, "use long data well").

On long runs the replay is linear in the length, but the search's iteration count grows with it (the delay tracks,
the law choice's refits, the static refit all walk further on more samples). When the fit runs total more than
``FIRST_PASS_MULTIPLE`` times the window budget (``--first_pass_s``, 0 = off), the fit

1. **first pass**: runs its whole default search (the fast path or CMA-ES as ``--strategy`` says, ``--fit_groups
   auto``'s static and law steps, every delay track) on windows cut from the runs
   (:func:`~isaaclab_sysid.data.run_windows.plan_windows`: about ``--first_pass_s`` seconds in all, in windows of
   ``--first_pass_window_s``, spread evenly over every run, each starting from the measured state at the sample of
   least speed near its nominal start), in ``<fit>/first_pass/`` (its own checkpoints, its auto sub-folders);
2. **polish**: refines on the full runs from the first pass's answer, in the groups it chose, as a refit (no
   ``low`` start), with the delay profile started at the first pass's delay and its two neighbours, widened one
   tick past an edge whenever the best delay sits there (the refinement's own rule,
   :class:`~isaaclab_sysid.fit.refine.RefineSettings` ``widen_delays``): a delay the windows got wrong by one tick
   or more is walked back on the full data's evidence, so narrowing the profile loses no delay the data prefer
   in the start's basin.

Resume (``--resume``): the first pass and then the polish resume from their own checkpoints (each search's stages
as a direct fit's do; the first pass's finished stages are read back, not rerun). What it chose and cost goes to the
log, to ``<fit>/first_pass.json`` and to report.md.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.run_windows import WindowSpec, cut_windows, plan_windows
from isaaclab_sysid.evaluate.friction_score import StaticFrictionTest
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.fit.search import Search
from isaaclab_sysid.jobs.auto_model import diverged, run_auto
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.jobs.law_choice import LawChoice
from isaaclab_sysid.jobs.model_choice import FrictionChoice, score_test
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.utils.atomic import atomic_write_json

#: the first pass runs when the fit runs total more than this many times ``--first_pass_s``
FIRST_PASS_MULTIPLE = 2.0
#: the first pass's summary in the fit folder
FIRST_PASS_FILE = "first_pass.json"
FIRST_PASS_DIR = "first_pass"

#: a search: (options, problem, its folder, start (D,) normalized or None = --x0, refit) -> the search and result
SearchFn = Callable[[FitArgs, FitProblem, Path, "np.ndarray | None", bool], tuple[Search, FitResult]]


@dataclass
class FirstPassPlan:
    """Whether a fit runs a first pass, why, and on which windows.

    Attributes:
        applies: the first pass runs.
        reason: the rule and its figures, one line for the log and the report.
        total_s: the fit runs' total duration [s].
        windows: the windows (empty when it does not apply).
    """

    applies: bool
    reason: str
    total_s: float
    windows: list[WindowSpec] = field(default_factory=list)

    def line(self) -> str:
        return f"first pass: {self.reason}"


@dataclass
class FirstPassOutcome:
    """The first pass and the polish: the polish's search and result (the fit's answer), the first pass's choices
    (``--fit_groups auto``'s: made on the windows; the score test recomputed on the full runs), its answer and
    what each pass cost."""

    search: Search
    result: FitResult
    first: FitResult
    choice: FrictionChoice | None
    test: StaticFrictionTest | None
    law: LawChoice | None
    summary: dict

    def report_lines(self) -> list[str]:
        """report.md's lines on the two passes."""
        s = self.summary
        return [f"first pass ({FIRST_PASS_FILE}): {s['rule']}; {len(s['windows'])} window(s), "
                f"{s['window_total_s']:.1f} s of {s['total_s']:.1f} s; chose {','.join(s['first']['groups'])}, "
                f"delay {s['first']['delay']} (its answer's refinement: {s['first']['answer_lm_iterations']} LM iterations), "
                f"{s['first']['wall_s']:.0f} s in all; "
                f"polish on the full runs from its answer: {s['polish']['lm_iterations']} LM iterations, "
                f"{s['polish']['wall_s']:.0f} s, delay {s['polish']['delay']}, loss {s['polish']['start_loss']:.6g} -> "
                f"{s['polish']['loss']:.6g}"]


def plan_first_pass(args: FitArgs, problem: FitProblem) -> FirstPassPlan:
    """The rule: the fit runs total more than :data:`FIRST_PASS_MULTIPLE` x ``--first_pass_s`` seconds, every fit
    run an arm controller's run (``joint_pd`` or ``task_impedance``: a torque replay already cuts its runs into
    shooting windows; servo runs are not measured), and the refinement is on."""
    s = args.search
    total = float(sum(r.duration for r in problem.runs))
    budget = float(s.first_pass_s)
    if budget <= 0:
        return FirstPassPlan(False, "off (--first_pass_s 0)", total)
    limit = FIRST_PASS_MULTIPLE * budget
    if total <= limit:
        return FirstPassPlan(False, f"not needed: the fit runs total {total:.1f} s <= {FIRST_PASS_MULTIPLE:g} x "
                                    f"--first_pass_s {budget:g} s", total)
    if any(r.meta.controller == "torque" for r in problem.runs):
        return FirstPassPlan(False, "not for a torque replay (its runs are already cut into shooting windows)", total)
    if any(r.meta.controller == "servo" for r in problem.runs):
        return FirstPassPlan(False, "not for servo runs (a window would start without the firmware's torque-off "
                                    "phase and the rows' state age before it; not measured)", total)
    if args.replay.backend != "mujoco":
        return FirstPassPlan(False, f"not on the {args.replay.backend} backend (a window starts moving, and only the "
                                    "mujoco backend replays a run from a measured velocity; --backend mujoco for it)",
                             total)
    if s.refine_iter < 1:
        return FirstPassPlan(False, "not without the refinement (--refine_iter 0: nothing to polish with)", total)
    windows = plan_windows(problem.runs, budget, s.first_pass_window_s)
    got = sum(w.t1_s - w.t0_s for w in windows)
    return FirstPassPlan(True, f"the fit runs total {total:.1f} s > {FIRST_PASS_MULTIPLE:g} x --first_pass_s "
                               f"{budget:g} s: the whole search on {len(windows)} window(s) of about "
                               f"{s.first_pass_window_s:g} s ({got:.1f} s in all), then a polish on the full runs "
                               "(--first_pass_s 0: off)", total, windows)


def window_problem(problem: FitProblem, windows: list[WindowSpec]) -> FitProblem:
    """``problem`` with its fit runs replaced by ``windows`` (each with its run's loss weight)."""
    runs = cut_windows(problem.runs, windows)
    tw = np.asarray([float(problem.traj_weights[w.run]) for w in windows], dtype=float)
    return dataclasses.replace(problem, runs=runs, traj_weights=tw)


def run_first_pass(args: FitArgs, problem: FitProblem, plan: FirstPassPlan, run_dir: Path,
                   log: Callable[[str], None], search: SearchFn) -> FirstPassOutcome | None:
    """The first pass on ``plan``'s windows in ``run_dir/first_pass``, then the polish on the full runs in ``run_dir``
    (module docstring). Returns None when the first pass's answer diverged (the caller then fits directly)."""
    t0 = time.perf_counter()
    fp_dir = run_dir / FIRST_PASS_DIR
    fp_dir.mkdir(parents=True, exist_ok=True)
    wprob = window_problem(problem, plan.windows)
    log(f"first pass: the default search on {len(wprob.runs)} window(s) "
        f"[{', '.join(f'{r.name} {w.t0_s:.1f}-{w.t1_s:.1f} s' for r, w in zip(wprob.runs, plan.windows))}] -> {fp_dir}")
    s1, r1 = search(args, wprob, fp_dir, None, False)
    choice = test = law = None
    if diverged(r1):
        log("first pass: its best candidate diverged on a window: fitting the full runs directly")
        return None
    if args.params.auto:
        def refit(a: FitArgs, p: FitProblem, d: Path, x0: np.ndarray) -> tuple[Search, FitResult]:
            return search(a, p, d, x0, True)

        s1, r1, choice, test, law = run_auto(args, wprob, s1, r1, log, refit)
    RunFolder(fp_dir).write_result(r1)
    t1 = time.perf_counter()
    first_delay = _delay(r1)
    log(f"first pass done in {t1 - t0:.0f} s: {','.join(r1.space.group_names)}, delay {first_delay}, window loss "
        f"{r1.best_score:.6g}; polishing on the full runs from its answer (the delay profile at {first_delay} and its "
        "neighbours, widened past an edge on evidence)")
    p_args = copy.deepcopy(args)
    p_args.params.fit_groups = ",".join(r1.space.group_names)
    pprob = dataclasses.replace(problem, space=r1.space)
    start_loss = float(pprob.objective().loss(r1.best_x[None]).total[0])
    s2, r2 = search(p_args, pprob, run_dir, r1.best_x, True)
    if test is not None:  # the score test is of the Coulomb answer: on the data the answer is reported for
        test = score_test(pprob, r2)
    t2 = time.perf_counter()
    summary = {
        "rule": plan.reason, "total_s": plan.total_s, "window_total_s": float(sum(w.t1_s - w.t0_s for w in plan.windows)),
        "windows": [{**w.to_json(), "name": r.name} for w, r in zip(plan.windows, wprob.runs)],
        "first": {"groups": list(r1.space.group_names), "delay": first_delay, "loss_windows": float(r1.best_score),
                  "answer_lm_iterations": _iterations(r1), "wall_s": t1 - t0, "folder": FIRST_PASS_DIR},
        "polish": {"start_loss": start_loss, "loss": float(r2.best_score), "delay": _delay(r2),
                   "lm_iterations": _iterations(r2), "wall_s": t2 - t1,
                   "start_x": [float(v) for v in r1.best_x]},
        "note": "the first pass ran the whole default search on the windows; the polish refined on the full runs "
                "from its answer in its groups, the delay profile started at its delay and widened on evidence "
                "(docs/fit.md, 'Long recordings')"}
    atomic_write_json(run_dir / FIRST_PASS_FILE, summary)
    log(f"polish done in {t2 - t1:.0f} s: loss {start_loss:.6g} at the first pass's answer -> {r2.best_score:.6g}, "
        f"delay {summary['polish']['delay']}; wrote {run_dir / FIRST_PASS_FILE}")
    return FirstPassOutcome(s2, r2, r1, choice, test, law, summary)


def _delay(result: FitResult) -> int | None:
    d = result.decoded_json().get("motor_delay_steps")
    return None if d is None else int(d)


def _iterations(result: FitResult) -> int:
    """The LM iterations of the search that gave ``result`` (an auto answer: its last stage's alone)."""
    return int(result.refine.iterations) if result.refine is not None else 0


__all__ = ["FIRST_PASS_FILE", "FIRST_PASS_MULTIPLE", "FirstPassOutcome", "FirstPassPlan", "plan_first_pass",
           "run_first_pass", "window_problem"]
