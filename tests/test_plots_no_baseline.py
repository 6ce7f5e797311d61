"""The PNG plots of a run that states no servo gains (docs/servo_arms.md section 5): no nominal curve, no nominal
error panel, no nominal RMS bar, and the reason ("no baseline: the runs state no gains") in the figure, as in the
console table, report.md, report.html and eval_result.json. A run that states its gains keeps its nominal curve."""

from __future__ import annotations

import dataclasses

import numpy as np
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.evaluate import plots
from isaaclab_sysid.evaluate.heldout import NO_BASELINE, evaluate_params
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.objective.result import FitResult


def _runs():
    """Two Panda joint_pd runs: the first states its gains, the second leaves them unstated (NaN)."""
    stated = make_run("joint_pd", 50.0, n=40, seed=0)
    unstated = make_run("joint_pd", 50.0, n=40, seed=1)
    nan = np.full(unstated.n_dof, np.nan)
    meta = dataclasses.replace(unstated.meta, kp=nan, kd=nan.copy())
    unstated = dataclasses.replace(unstated, name="unstated", meta=meta)
    return [dataclasses.replace(stated, name="stated"), unstated]


def _evaluation():
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)
    values = {"armature": TRUE["armature"].copy(), "friction": TRUE["friction"].copy(),
              "viscous": TRUE["viscous"].copy(), "delay": np.int64(TRUE["delay"])}
    result = FitResult(space=space, best_x=space.normalize(values), values=values, best_score=0.0,
                       run_names=["stated", "unstated"], weighted_loss=np.zeros(2), traj_weights=np.ones(2))
    runs = _runs()
    return runs, evaluate_params(FakeBackend(), result, runs)


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def _line_labels(fig) -> set[str]:
    return {ln.get_label() for ax in fig.axes for ln in ax.get_lines()}


def test_plots_leave_out_the_nominal_curve_of_a_run_without_a_baseline(tmp_path, monkeypatch):
    runs, ev = _evaluation()
    assert ev.no_baseline == [False, True]
    figs = {}
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: (figs.__setitem__(path.name, fig), real_save(fig, path))[1])
    names = [f"panda_joint{j + 1}" for j in range(7)]
    paths = plots.plot_evaluation(tmp_path, runs, ev, names)
    assert sorted(p.name for p in paths) == ["real_vs_sim_stated.png", "real_vs_sim_unstated.png", "rms_per_joint.png"]
    assert all(p.is_file() and p.stat().st_size > 10_000 for p in paths)
    n_cells = runs[0].n_dof + 3

    # the run that states its gains: real, nominal and fitted, an error panel per set, no note
    fig = figs["real_vs_sim_stated.png"]
    assert {"nominal", "fitted", "real"} <= _line_labels(fig)
    assert len(fig.axes) == 3 * n_cells
    assert sum(s.startswith("nominal sim - real") for s in _texts(fig)) == n_cells
    assert NO_BASELINE not in fig._suptitle.get_text()

    # the run without: real and fitted only, one error panel per cell, the reason in the title and the legend
    fig = figs["real_vs_sim_unstated.png"]
    assert "nominal" not in _line_labels(fig) and "fitted" in _line_labels(fig)
    assert len(fig.axes) == 2 * n_cells
    assert not any(s.startswith("nominal") for s in _texts(fig))
    assert sum(s.startswith("fitted sim - real") for s in _texts(fig)) == n_cells
    assert NO_BASELINE in fig._suptitle.get_text()
    legend = fig.axes[0].get_legend()
    assert legend is not None and any(NO_BASELINE in t.get_text() for t in legend.get_texts())
    assert "panda_joint1 q [rad]" in [ax.get_title() for ax in fig.axes]  # the joint names reach the panels

    # the RMS bars: nominal and fitted for the stated run, fitted only for the other, with the reason
    fig = figs["rms_per_joint.png"]
    stated_ax, unstated_ax = fig.axes
    assert [c.get_label() for c in stated_ax.containers] == ["nominal", "fitted"]
    assert [c.get_label() for c in unstated_ax.containers] == ["fitted"]
    np.testing.assert_allclose([b.get_height() for b in unstated_ax.containers[0]], ev.fitted[1].q_rms_mrad)
    assert NO_BASELINE in unstated_ax.get_title() and NO_BASELINE not in stated_ax.get_title()
    assert [t.get_text() for t in stated_ax.get_xticklabels()] == names


def test_every_run_with_a_baseline_plots_as_before(tmp_path, monkeypatch):
    runs, ev = _evaluation()
    ev = dataclasses.replace(ev, no_baseline=[])  # older callers: every run has its baseline
    figs = {}
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: (figs.__setitem__(path.name, fig), real_save(fig, path))[1])
    plots.plot_evaluation(tmp_path, runs, ev)
    for name in ("real_vs_sim_stated.png", "real_vs_sim_unstated.png"):
        assert "nominal" in _line_labels(figs[name]) and NO_BASELINE not in figs[name]._suptitle.get_text()
    assert all(len(ax.containers) == 2 for ax in figs["rms_per_joint.png"].axes)
