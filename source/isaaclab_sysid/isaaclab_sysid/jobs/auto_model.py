"""``--fit_groups auto``, the model choice on evidence, in one place: after the Coulomb fit, the static-friction
step (the score test and a static refit where it may pay: jobs/model_choice.py, evaluate/friction_score.py) and the
friction-law step (each law of ``--auto_laws`` weighed by the BIC on the fit runs' residual, refitted where its
Gauss-Newton forecast could win: jobs/law_choice.py). The fit job calls :func:`run_auto` with the one way it refits
(``refit``: a search from a start in a sub-folder of the fit's folder); every choice goes to the log and to the
folder (``fit_groups_auto.json``, ``friction_law_auto.json``)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from isaaclab_sysid.evaluate.friction_score import StaticFrictionTest, augmented_space, coulomb_as_static
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.loss import DIVERGENCE_PENALTY
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.law_starts import load_split_start
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.fit.search import Search
from isaaclab_sysid.jobs import law_choice as lc
from isaaclab_sysid.jobs.model_choice import (
    FrictionChoice,
    decide,
    not_applicable,
    score_test,
    static_groups,
    worth_refit,
)
from isaaclab_sysid.utils.atomic import atomic_write_json

#: a refit: (options, problem, its folder, start (D,) normalized) -> the search and its result
Refit = Callable[[FitArgs, FitProblem, Path, np.ndarray], tuple[Search, FitResult]]


def run_auto(args: FitArgs, problem: FitProblem, search: Search, coulomb: FitResult, log: Callable[[str], None],
             refit: Refit
             ) -> tuple[Search, FitResult, FrictionChoice, StaticFrictionTest | None, lc.LawChoice | None]:
    """Both steps after the Coulomb fit ``coulomb``; returns the answer's search and result, the static step's
    choice, the score test (None when the answer is not the Coulomb model: the test is of that model) and the law
    step's choice (None when that step did not apply)."""
    run_dir = search.run_dir
    search, result, choice, test = auto_friction(args, problem, search, coulomb, log, refit)
    search, result, law = auto_law(args, problem, search, result, coulomb, run_dir, log, refit)
    if law is not None and law.chosen != law.base:
        test = None  # the score test is of the Coulomb model
    return search, result, choice, test, law


def diverged(result: FitResult) -> bool:
    """Whether a fit's best candidate diverged (no answer to report)."""
    return bool(result.best_diverged or not result.best_score < DIVERGENCE_PENALTY)


def auto_friction(args: FitArgs, problem: FitProblem, search: Search, coulomb: FitResult, log: Callable[[str], None],
                  refit: Refit) -> tuple[Search, FitResult, FrictionChoice, StaticFrictionTest | None]:
    """``--fit_groups auto`` after the Coulomb fit (jobs/model_choice.py): the score test, the static-friction refit
    from the Coulomb optimum where the test or its Gauss-Newton forecast says it may pay (its checkpoints in
    ``<run_dir>/static_friction``), the choice (logged and written to
    ``fit_groups_auto.json``); returns the search and result that are the answer and the score test (None when the
    answer is the static fit: the test is of the Coulomb model)."""
    run_dir = search.run_dir
    groups = list(coulomb.space.group_names)
    margin = args.params.auto_static_margin
    why_not = not_applicable(problem, coulomb)
    test = None if why_not is not None else score_test(problem, coulomb)
    if why_not is not None:
        choice = FrictionChoice(groups, groups, False, why_not)
    elif not worth_refit(test, margin):
        choice = decide(coulomb, test, None, margin)
    else:
        static_args = copy.deepcopy(args)
        static_args.params.fit_groups = ",".join(static_groups(groups))
        space = augmented_space(coulomb.space, args.params.mu_static_bounds, args.params.dynamic_ratio_bounds)
        x0 = coulomb_as_static(coulomb.space, coulomb.best_x, space)
        log(f"--fit_groups auto: refitting with {static_args.params.fit_groups} from the Coulomb optimum")
        refit_search, static = refit(static_args, dataclasses.replace(problem, space=space),
                                     _mkdir(run_dir / "static_friction"), x0)
        choice = (decide(coulomb, test, float(static.best_score), margin) if not diverged(static) else
                  FrictionChoice(groups, groups, False, "the static refit diverged: kept Coulomb"))
    log(choice.line())
    atomic_write_json(RunFolder(run_dir).model_choice, choice.to_json())
    if not choice.static:
        return search, coulomb, choice, test
    RunFolder(_mkdir(run_dir / "coulomb")).write_result(coulomb)
    return refit_search, static, choice, None


def auto_law(args: FitArgs, problem: FitProblem, search: Search, base: FitResult, coulomb: FitResult, run_dir: Path,
             log: Callable[[str], None], refit: Refit) -> tuple[Search, FitResult, lc.LawChoice | None]:
    """``--fit_groups auto``'s second step (jobs/law_choice.py): each law of ``--auto_laws`` weighed against the base
    answer by the BIC on the fit runs' residual, refitted (in ``<run_dir>/law_<name>``) only where its Gauss-Newton
    forecast could win (the base refined first with the same budget, in ``<run_dir>/base_refined``, so that a law
    cannot win on convergence the base did not finish); the answer is the lowest BIC among the laws that
    cross-validated prediction confirms (:func:`confirm_laws`; logged,
    ``<run_dir>/friction_law_auto.json``; the base answer kept
    in ``<run_dir>/<its law>`` when another wins). Returns the answer's search
    and result, and the choice (None when the step does not apply, said in the log)."""
    try:
        laws = lc.parse_laws(args.params.auto_laws)
    except ValueError as exc:
        raise FitError(str(exc)) from None
    groups = list(base.space.group_names)
    cands, why = lc.candidates_for(groups, laws)
    if not laws:
        return search, base, None
    if why is not None:
        log(f"--fit_groups auto, friction law: kept {lc.law_of_groups(groups).name} ({why})")
        return search, base, None
    base_obj = dataclasses.replace(problem, space=base.space).objective()
    stats = lc.channel_stats(base_obj, base.best_x)
    n, n_eff = stats.n_total, stats.n_eff_total
    base_name = lc.model_name(groups)
    k0 = lc.continuous_count(base.space)
    scores = [lc.LawScore(base_name, groups, k0, float(base.best_score), lc.bic_of(stats.ssr, stats, k0), refit=True,
                          note="the base model")]
    best_bic = scores[0].bic
    base_refined = False
    law_hits: dict[str, set[str]] = {}  # law -> its refit's armature entries at a bound
    refitted: dict[str, tuple[Search, FitResult, FitProblem, lc.LawScore]] = {}
    for law in cands:
        space = lc.law_space(base.space, law, args.params)
        bad = [g for g in space.group_names if g not in problem.backend.supported_groups]
        k = lc.continuous_count(space)
        if bad:
            scores.append(lc.LawScore(law, list(space.group_names), k, note=f"the {problem.backend.name} backend cannot "
                                      f"represent {', '.join(bad)}"))
            continue
        sub = dataclasses.replace(problem, space=space)
        x0 = lc.law_start(coulomb.space, coulomb.best_x, space, law, base=(base.space, base.best_x),
                          stribeck_velocity=args.params.stribeck_velocity)
        fc = lc.forecast(sub.objective(), x0)
        if fc is None:
            scores.append(lc.LawScore(law, list(space.group_names), k, note="its start did not replay finitely"))
            continue
        sc = lc.LawScore(law, list(space.group_names), k, forecast_loss=fc[0], forecast_bic=lc.bic_of(fc[1], stats, k))
        scores.append(sc)
        if not sc.forecast_bic < best_bic:
            sc.note = "its forecast cannot beat the best BIC: not refitted"
            continue
        if not base_refined:  # the same refit budget for the base first: a law must not win on convergence alone
            base_refined = True
            b_args = copy.deepcopy(args)
            b_args.params.fit_groups = ",".join(groups)
            b_srch, b_res = refit(b_args, dataclasses.replace(problem, space=base.space), _mkdir(run_dir / "base_refined"),
                                  base.best_x)
            if not diverged(b_res) and b_res.best_score < base.best_score:
                log(f"--fit_groups auto: the {base_name} fit refined as far as a law refit goes: loss "
                    f"{base.best_score:.6g} -> {b_res.best_score:.6g}")
                search, base = b_srch, b_res
                scores[0].loss = float(base.best_score)
                scores[0].bic = lc.bic_of(lc.channel_ssr(base_obj, base.best_x), stats, k0)
                scores[0].note = "the base model, refined with a law refit's budget"
                best_bic = scores[0].bic
            if not sc.forecast_bic < best_bic:
                sc.note = "its forecast cannot beat the refined base's BIC: not refitted"
                continue
        law_args = copy.deepcopy(args)
        law_args.params.fit_groups = ",".join(space.group_names)
        origin = ("static answer" if law == "stribeck" and "mu_static" in base.space.group_names
                  else "Coulomb optimum")
        log(f"--fit_groups auto: refitting with the {law} friction law ({law_args.params.fit_groups}) from the "
            f"{origin} (forecast loss {fc[0]:.4g} against {base.best_score:.4g})")
        srch, res = refit(law_args, sub, _mkdir(RunFolder(run_dir).law_dir(law)), x0)
        if law == "load":  # the corner cannot tell the coefficients apart: a second start inside the box
            srch, res = _second_start(law_args, sub, RunFolder(run_dir), x0, (srch, res), sc, log, refit)
        if diverged(res):
            sc.note = "the refit diverged"
            continue
        sc.refit, sc.loss = True, float(res.best_score)
        law_hits[law] = lc.armature_at_bound(res)
        sc.bic = lc.bic_of(lc.channel_ssr(sub.objective(), res.best_x), stats, k)
        stopped = res.not_converged
        if stopped:  # its BIC is an upper bound: a law that did not converge may be rejected too early
            sc.note = "its refit did not converge (" + "; ".join(v.reason for v in stopped) + "): its BIC is an upper bound"
        refitted[law] = (srch, res, sub, sc)
        best_bic = min(best_bic, sc.bic)  # a later law is refitted only where its forecast could beat this one
    answer, reason, loro_runs, loro_note = confirm_laws(problem, base_obj, search, base, base_name, scores[0],
                                                        refitted)
    chosen = answer[2]
    choice = lc.LawChoice(base_name, chosen, n, n_eff, scores, reason,
                          freed=lc.freed_by(lc.armature_at_bound(base), law_hits), loro_runs=loro_runs,
                          loro_note=loro_note)
    log(choice.line())
    for line in choice.freed_lines():
        log(f"--fit_groups auto: {line}")
    atomic_write_json(RunFolder(run_dir).law_choice, choice.to_json())
    if chosen == base_name:
        return search, base, choice
    RunFolder(_mkdir(run_dir / base_name)).write_result(base)
    return answer[0], answer[1], choice


def confirm_laws(problem: FitProblem, base_obj, search: Search, base: FitResult, base_name: str,
                 base_score: lc.LawScore, refitted: dict[str, tuple[Search, FitResult, FitProblem, lc.LawScore]]
                 ) -> tuple[tuple[Search, FitResult, str], str, list[str], str]:
    """The answer among the base and the refitted laws: the lowest BIC among the laws whose BIC is below the base's
    *and* whose cross-validated prediction of the fit runs (each run's halves left out in turn,
    :func:`lc.leave_one_block_out`, :func:`lc.confirm`) beats the base's; each such law's and the base's scores go
    into their :class:`lc.LawScore`. Returns the answer (search, result, law), the reason, the left-out blocks and
    the check's note (one fit run: said; the check then runs between its halves alone)."""
    ranked = sorted((sc.bic, law) for law, (_, _, _, sc) in refitted.items() if sc.bic < base_score.bic)
    if not ranked:
        return (search, base, base_name), "no law lowers the BIC on the fit runs", [], ""
    per = lc.CV_BLOCKS_PER_RUN
    one = len(problem.runs) < 2
    base_cv = lc.leave_one_block_out(base_obj, base.best_x, per)
    if base_cv is None:
        law = ranked[0][1]
        srch, res, _, _ = refitted[law]
        return ((srch, res, law), "the lowest BIC on the fit runs, unconfirmed", [],
                f"the {base_name} model's cross-validation replay did not stay finite: the law rests on the BIC alone")
    base_score.loro, base_score.loro_in = base_cv.score, base_cv.in_score
    confirmed: list[str] = []
    for _, law in ranked:
        _, res, sub, sc = refitted[law]
        cv = lc.leave_one_block_out(sub.objective(), res.best_x, per, block_stats=base_cv.stats)
        if cv is None:
            sc.confirmed, sc.note = False, (sc.note + "; " if sc.note else "") + "its optimum does not replay finitely"
            continue
        c = lc.confirm(law, cv, base_cv)
        sc.loro, sc.loro_delta, sc.confirmed, sc.loro_in = cv.score, c.delta, c.confirmed, cv.in_score
        if c.confirmed:
            confirmed.append(law)
    note = (f"cross-validation: each fit run cut in {per}, each block replayed at the numbers fitted on the other "
            f"samples; predictive score per block {', '.join(base_cv.blocks)}"
            + ("; one fit run: no run to leave out, its halves are the only folds (record a second run for a "
               "stronger check)" if one else ""))
    if confirmed:
        law = confirmed[0]  # ranked by BIC
        srch, res, _, _ = refitted[law]
        return ((srch, res, law), "the lowest BIC on the fit runs, confirmed by cross-validated prediction",
                base_cv.blocks, note)
    return ((search, base, base_name),
            f"the BIC preferred {' then '.join(law for _, law in ranked)}, but no such law predicts the samples left "
            f"out of its fit better than {base_name}: kept {base_name}", base_cv.blocks, note)


def _second_start(args: FitArgs, problem: FitProblem, folder: RunFolder, corner: np.ndarray,
                  first: tuple[Search, FitResult], score: lc.LawScore, log: Callable[[str], None],
                  refit: Refit) -> tuple[Search, FitResult]:
    """The load law refitted again from its split start (fit/law_starts.py, in ``law_load/split_start`` of the run
    ``folder``); returns the better of that refit and ``first`` (the refit from the Coulomb corner ``corner``),
    records both losses in ``score.starts`` and writes the other one as ``law_load/other_start.json`` (the interval
    stage scores it as the law's other basin)."""
    folder.other_start("load").unlink(missing_ok=True)  # a file of an earlier run in this folder is not this one's
    split = load_split_start(problem.objective(), corner)
    c_loss = None if diverged(first[1]) else float(first[1].best_score)
    if split is None:
        score.starts = {"coulomb corner": c_loss}
        log("--fit_groups auto: the load law's split start did not replay finitely: refitted from the Coulomb "
            "corner alone")
        return first
    log(f"--fit_groups auto: refitting the load law again from its split start ({split.describe()}): at the Coulomb "
        "corner a finite difference cannot tell the motor-side coefficient from the external one")
    second = refit(args, problem, _mkdir(folder.law_dir("load") / "split_start"), split.x)
    s_loss = None if diverged(second[1]) else float(second[1].best_score)
    score.starts = {"coulomb corner": c_loss, f"split start ({split.level:g})": s_loss}
    keep = second if s_loss is not None and (c_loss is None or s_loss < c_loss) else first
    other = first if keep is second else second
    if not diverged(other[1]):  # the interval stage scores it as the law's other basin (intervals/basins.py)
        folder.write_other_start("load", other[1])
    log(f"--fit_groups auto: the load law from the Coulomb corner: loss {c_loss if c_loss is not None else 'diverged'}"
        f"; from the split start: {s_loss if s_loss is not None else 'diverged'}; kept the "
        + ("split start's" if keep is second else "corner's"))
    return keep


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path

