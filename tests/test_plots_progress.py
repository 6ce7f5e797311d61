"""Plots a user reads (error panels sim - real in mrad, nominal and fitted) and the fit's progress lines
(at most 160 characters, elapsed and time left; a bar only on a terminal)."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from conftest import make_run
from test_fit_fakes import FakeBackend

from isaaclab_sysid.evaluate import plots
from isaaclab_sysid.evaluate.html_report import run_figures
from isaaclab_sysid.fit import progress as progress_mod
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.fit.optimizer import CmaesSettings
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.fit.progress import MAX_WIDTH, FitProgress, fit_line, fmt_duration, wrap
from isaaclab_sysid.fit.search import Search, SearchSettings
from isaaclab_sysid.robots import load_robot


# ------------------------------------------------------------------------------------------------ plots
def _sets(run):
    t = run.t[:, None]
    nominal = run.q + 0.05 * np.sin(2 * t + np.arange(run.n_dof))  # 50 mrad off
    fitted = run.q + 1e-4 * np.sin(3 * t + np.arange(run.n_dof))  # 0.1 mrad off
    return nominal, fitted


def test_real_vs_sim_has_an_error_panel_per_joint_and_set_where_0p1_mrad_fills_the_axis(tmp_path, monkeypatch):
    run = make_run("task_impedance", 50.0, n=120, seed=0)
    nominal, fitted = _sets(run)
    figs = []
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: (figs.append(fig), real_save(fig, path))[1])
    ee = {"nominal": run.ee_pos + 0.01, "fitted": run.ee_pos + 1e-4}
    path = plots.plot_run(run, {"nominal": nominal, "fitted": fitted}, ee, tmp_path / "rvs.png")
    assert path.is_file() and path.stat().st_size > 10_000
    (fig,) = figs
    assert len(fig.axes) == (run.n_dof + 3) * 3  # q (or EE) + nominal error + fitted error, per joint (and axis)
    texts = {ax: " ".join(t.get_text() for t in ax.texts) for ax in fig.axes}
    fitted_axes = [ax for ax, s in texts.items() if s.startswith("fitted sim - real")]
    nominal_axes = [ax for ax, s in texts.items() if s.startswith("nominal sim - real")]
    assert len(fitted_axes) == len(nominal_axes) == run.n_dof + 3
    for ax in fitted_axes[: run.n_dof]:
        lo, hi = ax.get_ylim()
        assert "mrad" in texts[ax] and hi - lo < 0.5  # the 0.1 mrad error fills its own axis ...
    for ax in nominal_axes[: run.n_dof]:
        lo, hi = ax.get_ylim()
        assert hi - lo > 50  # ... beside the 50 mrad one on its own
    assert "RMS 0.07" in texts[fitted_axes[0]]  # 0.1 mrad amplitude sine: RMS ~0.0707
    assert all("[mm]" in ax.get_ylabel() for ax in fitted_axes[run.n_dof:])


def test_report_html_run_figure_has_the_error_columns():
    run = make_run("task_impedance", 50.0, n=80, seed=1)
    nominal, fitted = _sets(run)
    (fig,) = run_figures(run, nominal, fitted, [f"panda_joint{j + 1}" for j in range(run.n_dof)])
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:3] == ["panda_joint1 q [rad]", titles[1], titles[2]]
    assert titles[1].startswith("nominal sim - real [mrad], RMS") and titles[2].startswith("fitted sim - real [mrad], RMS 0.07")
    assert len(fig.data) == run.n_dof * 5
    err = [tr for tr in fig.data if tr.name == "fitted sim - real"]
    assert len(err) == run.n_dof and np.max(np.abs(err[0].y)) == pytest.approx(0.1, abs=0.01)


# ------------------------------------------------------------------------------------------------ progress lines
def test_line_fitting_cuts_optional_parts_and_wraps_long_notes():
    line = fit_line("[x]", ["a" * 50, "b" * 50], [("names:", [f"run_{i:02d} 1.0e-04" for i in range(10)]),
                                                  ("at bound:", [f"p{i}" for i in range(20)])])
    assert len(line) <= MAX_WIDTH and "+" in line and "more" in line and line.endswith("at bound: 20")
    assert len(fit_line("[x]", ["z" * 300])) == MAX_WIDTH
    lines = wrap("word " * 100)
    assert len(lines) > 2 and all(len(ln) <= MAX_WIDTH for ln in lines) and lines[1].startswith("    ")
    assert [fmt_duration(s) for s in (3.21, 42, 125, 3725)] == ["3.2s", "42s", "2m05s", "1h02m"]


def _problem(long_names: bool):
    runs = [make_run("task_impedance", 50.0, n=40, seed=1), make_run("task_impedance", 50.0, n=30, seed=2)]
    if long_names:
        runs = [dataclasses.replace(r, name=f"a_rather_long_run_name_for_the_{k}_fit") for k, r in
                zip(("joint_multisine", "task_chirp_low"), runs)]
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous")}, 7)
    return FitProblem(runs, [], load_robot("franka_panda"), space, FakeBackend(), LossWeights(), np.ones(2))


@pytest.mark.parametrize("strategy", ["cmaes", "fast"])
def test_search_progress_lines_are_short_and_carry_elapsed_and_time_left(tmp_path, strategy):
    problem = _problem(long_names=True)
    settings = SearchSettings(CmaesSettings(popsize=6, max_iter=3, seed=0), refine_iter=3, strategy=strategy)
    lines: list[str] = []
    search = Search(problem, settings, tmp_path, log=lines.append)
    assert search.progress.bar is None  # not print: plain lines
    search.run()
    prog = [ln for ln in lines if ln.startswith(("[gen", "[refine", "[fast"))]
    assert prog and all(len(ln) <= MAX_WIDTH for ln in prog), [len(ln) for ln in prog]
    gens = [ln for ln in prog if ln.startswith("[gen")]
    refs = [ln for ln in prog if ln.startswith("[refine")]
    assert refs and all(" left]" in ln for ln in refs) and " <=" in refs[0]
    if strategy == "cmaes":
        assert [ln.split()[1] for ln in gens] == ["1/3", "2/3", "3/3"]
        assert all(" left]" in ln and "w*L" in ln and "diverged" in ln for ln in gens)
        assert "~" in gens[0] and gens[-1].split("]")[0].endswith("0s left")
    else:
        assert any(ln.startswith("[fast ") for ln in prog)


def test_bar_only_where_print_goes_to_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert FitProgress(print, 3, 2).bar is None  # a log file / CI / pytest's capture: lines only
    monkeypatch.setattr("sys.stdout", Tty())
    assert FitProgress(lambda s: None, 3, 2).bar is None  # someone else's log: lines only
    p = FitProgress(print, 3, 2)
    assert isinstance(p.bar, progress_mod._Bar)
    p.close()
    # the bar follows the stage and stops at its end (forced on, lines to a list)
    lines: list[str] = []
    t = [0.0]
    p = FitProgress(lines.append, 2, 2, bar=True, clock=lambda: t[0])
    from isaaclab_sysid.fit.optimizer import GenerationRecord

    for g in (1, 2):
        t[0] += 1.0
        p.generation(GenerationRecord(g, 6 * g, 1.0, 2.0, 1.0, 0.2, 0, 6, [0.5, 0.5], 1.0), ["a", "b"])
    assert not p.bar.started and len(lines) == 2 and lines[0].startswith("[gen 1/2 1.0s, ~1.0s left]")
    p.close()


def test_refine_line_says_which_start_each_track_came_from():
    from isaaclab_sysid.fit.progress import FitProgress

    rec = {"iteration": 1, "best": 1e-3, "evaluations": 12, "tracks": [
        {"start": "x0", "delay": 2, "loss": 1e-3, "active": True},
        {"start": "low", "delay": 2, "loss": 2e-3, "active": False}]}
    line = FitProgress(lambda s: None, 3, 5, bar=False).refine_line(rec)
    assert "x0 (delay 2): 1.000e-03" in line and "low (delay 2): 2.000e-03 (done)" in line
    old = {**rec, "tracks": [{k: v for k, v in t.items() if k != "start"} for t in rec["tracks"]]}  # older records
    assert "delay 2: 1.000e-03" in FitProgress(lambda s: None, 3, 5, bar=False).refine_line(old)


@pytest.mark.parametrize("strategy", ["cmaes", "fast"])
def test_report_summary_says_what_the_search_did(tmp_path, strategy):
    """No 'population 6, 0 generations, 0 evaluations' for a fast path that ran no CMA-ES: what it did instead."""
    from isaaclab_sysid.evaluate.report import search_summary

    settings = SearchSettings(CmaesSettings(popsize=6, max_iter=3, seed=0), refine_iter=3, strategy=strategy)
    result = Search(_problem(long_names=False), settings, tmp_path, log=lambda s: None).run()
    text = search_summary(result)
    assert "0 generations" not in text and "0 evaluations" not in text, text
    if strategy == "cmaes":
        assert text == f"population 6, 3 generations, {result.evaluations} evaluations"
    elif result.iterations == 0:
        assert text.startswith("fast path: Levenberg-Marquardt refinement") and "no CMA-ES generations" in text, text
    else:
        assert text.startswith("fast path, then CMA-ES on its evidence: population 6, 3 generations"), text


@pytest.mark.parametrize("strategy,labels", [("fast", ["x0", "low"]), ("cmaes", ["CMA-ES best"])])
def test_refinement_tracks_are_named_by_their_start(tmp_path, strategy, labels):
    settings = SearchSettings(CmaesSettings(popsize=6, max_iter=3, seed=0), refine_iter=3, strategy=strategy)
    lines: list[str] = []
    Search(_problem(long_names=False), settings, tmp_path, log=lines.append).run()
    first = next(ln for ln in lines if ln.startswith("[refine"))
    assert all(f"{name}: " in first or f"{name} (delay" in first for name in labels), first
