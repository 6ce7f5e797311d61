"""The fit job behind ``scripts/sysid_franka_osc.py``: it only sequences the stages (the jobs layer).

1. :func:`~isaaclab_sysid.jobs.fit_args.resolve_problem`: options checked, runs read and
   validated, robot, parameter space and backend built (a bad input costs nothing);
2. :class:`~isaaclab_sysid.fit.search.Search`: CMA-ES, then the refinement,
   checkpointed (``--resume`` continues it), into a :class:`~isaaclab_sysid.objective.result.FitResult`;
3. ``sysid_best_params.json``;
4. evaluation of the result against the nominal parameters on the fit and held-out
   runs, the adequacy verdict (:func:`~isaaclab_sysid.jobs.assessment.assess_fit`), plots and ``report.md``.

``--eval_params`` replaces 2-3 by reading a result file. docs/architecture.md
shows the path of the parameter vector through these stages.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from isaaclab_sysid.evaluate.friction_score import StaticFrictionTest
from isaaclab_sysid.evaluate.heldout import EvalResult, evaluate_params, write_eval_outputs
from isaaclab_sysid.evaluate.noise_floor import resolve_noise_floor
from isaaclab_sysid.objective.shooting_floor import shooting_floor
from isaaclab_sysid.evaluate.plots import plot_convergence, plot_evaluation
from isaaclab_sysid.evaluate.html_report import convergence_figure, run_figures, write_html_report
from isaaclab_sysid.evaluate.report import Section, Table, eval_report, fit_sections, write_report
from isaaclab_sysid.evaluate.window_scores import WindowComparison, compare_on_windows
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.fit.fast_path import FastPathSettings
from isaaclab_sysid.fit.optimizer import CmaesSettings
from isaaclab_sysid.fit.outputs import write_config
from isaaclab_sysid.fit.problem import FitProblem, params_file, seed_from_parts, start_point
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import EVAL_SUFFIX, MODEL_CHOICE_FILE, RESULT_FILE, RunFolder
from isaaclab_sysid.fit.search import Search, SearchSettings
from isaaclab_sysid.fit.tracking import WandbLog
from isaaclab_sysid.jobs.assessment import assess_fit
from isaaclab_sysid.jobs.fit_args import FitArgs, resolve_problem
from isaaclab_sysid.jobs.auto_model import diverged, run_auto
from isaaclab_sysid.jobs.first_pass import plan_first_pass, run_first_pass
from isaaclab_sysid.jobs.law_choice import LawChoice
from isaaclab_sysid.jobs.model_choice import FrictionChoice
from isaaclab_sysid.sim.interface import UnsupportedParameterError
from isaaclab_sysid.sim.shooting import backend_windows
from isaaclab_sysid.utils.atomic import atomic_write_json


def resumed_args(args: FitArgs) -> FitArgs:
    """With ``--resume DIR``: the options of ``DIR/config.json`` (``--quiet`` and the cluster flags: this command's)."""
    if not args.output.resume:
        return args
    folder = RunFolder.of_fit(args.output.resume, "--resume")
    resume_dir = folder.path
    config = folder.read_config()
    saved = FitArgs.from_config(config)
    raw = config.get("job") or config.get("args") or {}
    if "strategy" not in raw.get("search", raw):  # a folder from before --strategy existed: a CMA-ES fit
        saved.search.strategy = "cmaes"
    if "first_pass_s" not in raw.get("search", raw):  # a folder from before the first pass: its fit was direct
        saved.search.first_pass_s = 0.0
    saved.output.resume = str(resume_dir)
    saved.output.quiet = args.output.quiet
    saved.cluster = args.cluster  # where it runs never changes the answer: --cluster/--ray_* of this command line
    return saved


def run_fit(args: FitArgs, log: Callable[[str], None] = print) -> Path:
    """Run the whole job (fit + evaluation, or ``--eval_params`` alone); returns the output folder."""
    t_start = time.perf_counter()
    args = resumed_args(args)
    # a fit's output folder stands for its sysid_best_params.json (the folder the fit printed)
    if args.output.eval_params:
        args.output.eval_params = params_file("--eval_params", args.output.eval_params)
    if args.search.x0 not in ("low", "center"):
        args.search.x0 = params_file("--x0", args.search.x0)
    problem = resolve_problem(args, log)
    if args.output.eval_params:
        return _eval_only(args, problem, log)
    floor = resolve_noise_floor(args.output.noise_floor_mrad, args.output.noise_floor_from, log,
                                admit_aborted=args.replay.admit_aborted)  # repeat files read and checked before the fit
    def search_in(a: FitArgs, p: FitProblem, d: Path, x0: np.ndarray | None, refit: bool
                  ) -> tuple[Search, FitResult]:
        return _search(a, p, log, run_dir=d, x0=x0, refit=refit)

    plan = plan_first_pass(args, problem)
    log(plan.line())
    first, run_dir = None, None
    if plan.applies:  # long runs: the whole search on windows, then a polish on the full runs (jobs/first_pass.py)
        run_dir = Path(args.output.resume) if args.output.resume else _open_folder(args, problem)
        first = run_first_pass(args, problem, plan, run_dir, log, search_in)
    if first is not None:
        search, result = first.search, first.result
        _refusediverged(result, search.run_dir)
        run_dir, choice, test, law = search.run_dir, first.choice, first.test, first.law
    else:
        search, result = _search(args, problem, log, run_dir=run_dir)
        _refusediverged(result, search.run_dir)
        run_dir, choice, test, law = search.run_dir, None, None, None
        if args.params.auto:
            search, result, choice, test, law = run_auto(args, problem, search, result, log,
                                                         lambda a, p, d, x0: search_in(a, p, d, x0, True))
    path = RunFolder(run_dir).write_result(result)
    log(f"best loss {result.best_score:.6g}; wrote {path}")
    log("  " + result.summary_line())
    _evaluate_and_report(args, problem, result, run_dir, search.cmaes.state.history, log,
                         time.perf_counter() - t_start, floor, choice, test, law,
                         first.report_lines() if first is not None else [])
    return run_dir


def _search(args: FitArgs, problem: FitProblem, log: Callable[[str], None], run_dir: Path | None = None,
            x0: np.ndarray | None = None, refit: bool = False) -> tuple[Search, FitResult]:
    """Stage 2: CMA-ES + refinement in a new (or the resumed) output folder, or in ``run_dir`` (a stage of
    ``--fit_groups auto``: resumed there with ``--resume``) from ``x0`` (D,) normalized (default: ``--x0``);
    ``refit``: from ``x0`` alone (no second track at the ``low`` start), by the refinement (CMA-ES from ``x0`` when
    ``--refine_iter 0`` turned the refinement off)."""
    s = args.search
    if x0 is None:
        x0 = start_point(s.x0, problem.space)
        parts = problem.robot.config.servo_model
        if parts is not None and s.x0 in ("low", "center"):  # the arm config's servo parts seed the start
            x0 = seed_from_parts(x0, problem.space, parts, log)
    x0 = np.asarray(x0, dtype=float)
    settings = SearchSettings(CmaesSettings(popsize=s.num_envs, max_iter=s.max_iter, sigma0=s.sigma, seed=s.seed,
                                            x0=tuple(x0)),
                              refine_iter=s.refine_iter, delay_neighbours=s.refine_delay_neighbours,
                              save_interval=args.output.save_interval, quiet=args.output.quiet,
                              strategy="fast" if refit and s.refine_iter >= 1 else strategy_of(s),
                              fast=FastPathSettings(probe_generations=s.fast_probe_generations,
                                                    probe_popsize=s.fast_probe_popsize,
                                                    probe_margin=s.fast_probe_margin),
                              low_start=not refit, jacobian_reuse=s.refine_jacobian_reuse,
                              active_set=s.refine_active_set)
    job_dict, problem_dict = args.job_dict(), args.problem.to_dict()  # config.json's job and problem
    if run_dir is not None:
        search = (Search.resumed(problem, settings, run_dir, log) if args.output.resume
                  else Search(problem, settings, run_dir, log=log))
    elif args.output.resume:
        run_dir = Path(args.output.resume)
        search = Search.resumed(problem, settings, run_dir, log)
    else:
        run_dir = _open_folder(args, problem)
        search = Search(problem, settings, run_dir, log=log)
    wb = WandbLog(args.output.wandb, run_dir, {**problem_dict, **job_dict}, log)
    search.on_generation = lambda rec: wb.log(rec.to_row(search.cmaes.run_names), rec.iteration)
    sp = problem.space
    log(f"fitting {sp.dim} parameters ({', '.join(sp.group_names)}) on {len(problem.runs)} run(s) "
        f"[{', '.join(search.cmaes.run_names)}] with backend '{args.replay.backend}', population {s.num_envs}, "
        f"{s.max_iter} generations -> {run_dir}")
    try:
        result = search.run(x0_extra=x0)
    except UnsupportedParameterError as exc:
        raise FitError(str(exc)) from None
    finally:
        wb.finish()
    return search, result


def _open_folder(args: FitArgs, problem: FitProblem) -> Path:
    """A new fit folder under ``--out`` with its ``config.json`` (the problem, the job, the space and the runs)."""
    run_dir = RunFolder.new(args.output.log_dir).path
    write_config(run_dir, args.problem.to_dict(), args.job_dict(),
                 {"param_space": problem.space.describe(), "robot": problem.robot.name,
                  "ee_frame": problem.robot.ee_frame, "runs": [str(r.source) for r in problem.runs],
                  "heldout_runs": [str(r.source) for r in problem.heldout]})
    return run_dir


def strategy_of(s) -> str:
    """The search strategy of ``--strategy``, or the default: fast, cmaes when the refinement is off (``--refine_iter 0``)."""
    return s.strategy if s.strategy is not None else ("fast" if s.refine_iter > 0 else "cmaes")


def _refusediverged(result: FitResult, run_dir: Path) -> None:
    """A best candidate that diverged is no result: exit non-zero and write no sysid_best_params.json."""
    if diverged(result):
        raise FitError(f"the best candidate diverged on at least one run (loss {result.best_score:.4g}): no parameters "
                       f"to report, no {RESULT_FILE} written ({run_dir} keeps the checkpoints). Check the bounds "
                       "(e.g. --delay_bounds), the runs' gains and --torque_clamp/--slew_limit", code=4)


def _evaluate_and_report(args: FitArgs, problem: FitProblem, result: FitResult, run_dir: Path, history: list,
                         log: Callable[[str], None], wall_s_so_far: float, floor=None,
                         choice: FrictionChoice | None = None, test: StaticFrictionTest | None = None,
                         law: LawChoice | None = None, first_pass: list[str] | None = None) -> None:
    """Stage 4: fit and held-out runs, nominal vs fitted, in one backend call; plots and report.md (``history``: the
    CMA-ES generations of the answer's search, empty when none ran; ``choice``/``test``/``law``: ``--fit_groups
    auto``'s; ``first_pass``: the first pass's report lines, jobs/first_pass.py)."""
    t0 = time.perf_counter()
    all_runs = problem.all_runs
    ev = evaluate_params(problem.backend, result, all_runs, problem.weights, source=str(RunFolder(run_dir).result))
    write_eval_outputs(run_dir, all_runs, ev)
    fit_ev, held_ev = ev.split(len(problem.runs))
    log(ev.table(result.space.joint_names))
    windows = _window_comparisons(problem.backend, all_runs, ev, len(problem.runs), ("nominal", "fitted"), run_dir,
                                  result.space.joint_names, log)
    ages = [float(args.runs.state_age_ms or 0) if not r.is_1khz else 0.0 for r in all_runs]
    if floor is None and args.replay.replay == "torque":  # the drift of the windows' start states, not white noise
        floor = shooting_floor(problem.runs, ev.rollouts[: len(problem.runs)],
                               backend_windows(problem.backend, problem.runs))
    result.adequacy = assess_fit(problem.backend, result, all_runs, ev.rollouts, len(problem.runs), problem.robot,
                                 floor, ages, friction_test=test)
    RunFolder(run_dir).write_result(result)
    log(f"model adequacy: {result.adequacy.verdict}")
    for m in result.adequacy.messages:
        log(f"  {m}")
    for h in result.at_bounds():
        log(f"warning: {h.describe()}: the data may want a value outside the search box (widen its bounds) or "
            "cannot pin it down; its export range is widened to the search bounds")
    pngs: list[Path] = []
    if args.output.plots:
        if history:  # empty when the fast strategy never fell back to CMA-ES
            pngs.append(plot_convergence(history, result.run_names, run_dir / "convergence.png"))
        pngs += plot_evaluation(run_dir, all_runs, ev, result.space.joint_names, backend_windows(problem.backend, all_runs))
    context = _context(args, problem) + ([f"friction model: `{choice.line()}` ({MODEL_CHOICE_FILE})"] if choice else [])
    if law is not None:  # the law step's scores, the cross-validation included
        context.append(f"friction law: `{law.line()}` ({RunFolder(run_dir).law_choice.name})")
    context += list(first_pass or [])
    sections = fit_sections(result, fit_ev, held_ev, wall_s_so_far + time.perf_counter() - t0, context)
    sections += _window_sections(windows, result.space.joint_names)
    report = write_report(run_dir, sections, pngs)
    if args.output.plots:
        figs = [convergence_figure(history)] if history else []
        for i, (run, ro) in enumerate(zip(all_runs, ev.rollouts)):
            figs += run_figures(run, ev.baseline_q(i), ro.q[1], result.space.joint_names)
        log(f"report: {report} and {write_html_report(run_dir, 'System identification report', sections, figs)}")
    else:
        log(f"report: {report}")


def _window_comparisons(backend, runs, ev: EvalResult, n_fit: int, labels: tuple[str, ...], out: Path,
                        joint_names, log: Callable[[str], None]) -> list[WindowComparison]:
    """Torque runs: the evaluation's candidates (``labels``) scored window by window on the fit runs (the first
    ``n_fit``) and on the held-out runs, on every window and on the windows where all stayed finite (issue 28: a
    nominal that diverges in most windows gets a number on the same samples as the fit); logged and written to
    ``out/window_scores.json``. Empty for controller runs."""
    wins = backend_windows(backend, runs)
    if wins is None:
        return []
    out_list = []
    for title, idx in (("fit runs", range(n_fit)), ("held-out runs", range(n_fit, len(runs)))):
        idx = [i for i in idx if wins[i] is not None]
        if idx:
            out_list.append(compare_on_windows(title, [ev.rollouts[i] for i in idx], [runs[i] for i in idx],
                                               [wins[i] for i in idx], labels))
    for c in out_list:
        for line in c.lines(joint_names):
            log(line)
    if out_list:
        atomic_write_json(RunFolder(out).window_scores, {"comparisons": [c.to_json() for c in out_list],
                                                     "note": "window RMS of q and qd per model; 'common': the "
                                                             "windows where every model stayed finite"})
    return out_list


def _window_sections(windows: list[WindowComparison], joint_names) -> list[Section]:
    """Report sections of :func:`_window_comparisons`' tables."""
    return [Section(f"Window RMS, {c.title}: every window and the common ones",
                    ["Each window starts at the measured state; a model that diverged in a window is scored only on "
                     "the windows where every model stayed finite.", Table(*c.rows(joint_names))]) for c in windows]


def _context(args: FitArgs, problem: FitProblem) -> list[str]:
    """Report lines about how the runs were replayed (what the log does not record)."""
    out = [f"robot: `{problem.robot.name}` ({problem.robot.n_dof} joints); EE frame used: {problem.robot.ee_frame} "
           "(config.json: problem.replay.ee_offset)"]
    r = args.replay
    if r.replay == "torque":
        out.append(f"torque replay (--replay torque): `{r.torque_signal}`"
                   + (f" x drive gains {list(r.drive_gains)} N m/A" if r.torque_signal == "current" else "")
                   + f", gravity {'included' if r.torque_includes_gravity else 'excluded'}; shooting windows of "
                   f"{r.window_s:g} s from the measured q, qd; per-joint RMS below = window RMS (docs/replay.md)")
    slow = [r.name for r in problem.all_runs if not r.is_1khz]
    if slow:
        out.append(f"state age of rows below 1 kHz ({', '.join(slow)}): 0..{args.runs.state_age_ms} ms, uniform "
                   "(--state_age_ms or the sidecars' state_age)")
    return out


def _eval_only(args: FitArgs, problem: FitProblem, log: Callable[[str], None]) -> Path:
    """``--eval_params FILE``: score a result file (and the nominal parameters) on the given runs."""
    path = args.output.eval_params
    try:
        given = FitResult.read(path, space=problem.space, joint_names=problem.robot.joint_names)
        result = given.in_space(problem.space.restricted_to(given.decoded_json()))
        ev: EvalResult = evaluate_params(problem.backend, result, problem.all_runs, problem.weights, source=str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise FitError(f"--eval_params {path}: {exc}") from None
    out = RunFolder.new(args.output.log_dir, suffix=EVAL_SUFFIX).path
    write_config(out, args.problem.to_dict(), args.job_dict())
    write_eval_outputs(out, problem.all_runs, ev)
    joint_names = problem.space.joint_names
    log(ev.table(joint_names))
    windows = _window_comparisons(problem.backend, problem.all_runs, ev, len(problem.runs), ("nominal", "given"), out,
                                  joint_names, log)
    pngs = plot_evaluation(out, problem.all_runs, ev, joint_names, backend_windows(problem.backend, problem.all_runs)) \
        if args.output.plots else []
    report = eval_report(out, ev, joint_names, pngs, _window_sections(windows, joint_names))
    log(f"wrote {RunFolder(out).eval_result} and eval_rollout_<run>.csv; report: {report}")
    return out


def main_from_args(args: FitArgs, run: Callable[[FitArgs], object] | None = None) -> int:
    """Run (``run``: default :func:`run_fit`; the pipeline passes the fit and its later stages) and map user errors
    to one stderr line and an exit status (no traceback); a ``run`` that returns an int returns that status."""
    try:
        out = (run or run_fit)(args)
        if isinstance(out, int):
            return out
    except FitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


__all__ = ["FitArgs", "FitError", "main_from_args", "run_fit"]
