"""Evaluation: metric units, noise floor, nominal-vs-fitted scoring, outputs, plots and report."""

import json

import numpy as np
import pandas as pd
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.evaluate.heldout import evaluate_params, write_eval_outputs
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.evaluate.metrics import rms_between_runs, rollout_metrics
from isaaclab_sysid.evaluate.plots import plot_rms_bars, plot_run
from isaaclab_sysid.evaluate.report import eval_report
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.sim.interface import RunRollout


def _space():
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)


def test_metric_units():
    run = make_run(n=30)
    q = run.q[None] + 0.002  # 2 mrad everywhere
    ee = run.ee_pos[None] + np.array([0.003, 0.004, 0.0])  # 5 mm
    ro = RunRollout(q=q, dq=run.dq[None] + 0.01, ee_pos=ee, ee_quat=run.ee_quat[None], tau=np.zeros((1, 30, 7)),
                    diverged=np.array([False]))
    m = rollout_metrics(ro, run, 0)
    np.testing.assert_allclose(m.q_rms_mrad, 2.0)
    np.testing.assert_allclose(m.dq_rms_mrad_s, 10.0)
    np.testing.assert_allclose(m.ee_rms_mm, 5.0)
    assert not m.diverged


def test_noise_floor_between_twins():
    a, b = make_run(n=30, seed=0), make_run(n=30, seed=0)
    b.q = b.q + 1e-3
    assert np.isclose(rms_between_runs(a, b)["q_rms_all_mrad"], 1.0)


def test_evaluate_params_fitted_beats_nominal_and_writes(tmp_path):
    runs = [make_run(n=25, seed=0)]
    truth = {"armature": TRUE["armature"].tolist(), "friction": TRUE["friction"].tolist(),
             "viscous": TRUE["viscous"].tolist(), "motor_delay_steps": TRUE["delay"]}
    p = tmp_path / "sysid_best_params.json"
    p.write_text(json.dumps({"best_score": 0.0, "best_params_decoded": truth}))
    result = FitResult.read(p, space=_space())  # a foreign file: best_params_decoded only
    be = FakeBackend()
    ev = evaluate_params(be, result, runs, source=str(p))
    assert be.calls == 1  # nominal and fitted in one call
    assert ev.fitted[0].loss < 1e-20 < ev.baseline[0].loss
    assert "q RMS j7 [mrad]" in ev.table()
    paths = write_eval_outputs(tmp_path, runs, ev)
    df = pd.read_csv(paths[0])
    np.testing.assert_allclose(df["t_s"].to_numpy(), runs[0].t)
    np.testing.assert_allclose(df[[f"q{i}" for i in range(1, 8)]].to_numpy(), runs[0].q, atol=1e-8)
    res = json.loads((tmp_path / "eval_result.json").read_text())
    assert res["runs"][runs[0].name]["fitted"]["loss"] < res["runs"][runs[0].name]["baseline"]["loss"]
    pngs = [plot_run(runs[0], {"fitted": ev.rollouts[0].q[1]}, {"fitted": ev.rollouts[0].ee_pos[1]}, tmp_path / "r.png"),
            plot_rms_bars(ev, tmp_path / "b.png")]
    assert all(x.stat().st_size > 1000 for x in pngs)
    md = eval_report(tmp_path, ev, [f"j{i}" for i in range(1, 8)], pngs).read_text()
    assert "| run |" in md and "r.png" in md


def test_params_file_without_decoded_is_refused(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{}")
    import pytest

    with pytest.raises(ValueError, match="best_params_decoded"):
        FitResult.read(p, space=_space())
    p.write_text(json.dumps({"best_params_decoded": {"armature": [0.1] * 7}}))
    with pytest.raises(ValueError, match="param_space"):
        FitResult.read(p)  # no recorded space and none given: refused, not guessed
