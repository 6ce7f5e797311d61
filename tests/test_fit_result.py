"""The typed fit result, the shared best-so-far record and the one finite-difference Jacobian."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import make_run
from test_fit_fakes import FakeBackend

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.fit import BestSoFar, CmaesFit, CmaesSettings, FitResult, ParamSpace
from isaaclab_sysid.objective.jacobian import stencil
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings

NAMES = [f"panda_joint{i + 1}" for i in range(7)]


def _space():
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7, NAMES)


def _fit():
    runs = [make_run(n=40, seed=0), dataclasses.replace(make_run(n=30, seed=1), name="other")]
    fit = CmaesFit(ReplayObjective(_space(), FakeBackend(), runs, traj_weights=[1.0, 2.0]), CmaesSettings(popsize=8, max_iter=4, seed=2))
    fit.run()
    return fit, runs


def test_result_round_trips_through_its_json_and_keeps_the_franka_tooling_keys(tmp_path):
    fit, _ = _fit()
    res = fit.result()
    js = json.loads(json.dumps(res.to_json()))
    # the keys the Franka tooling's apply_sysid_params.py reads
    assert isinstance(js["best_score"], float) and isinstance(js["best_params_decoded"]["motor_delay_steps"], int)
    assert len(js["best_params_decoded"]["armature"]) == 7
    back = FitResult.read(RunFolder(tmp_path).write_result(res))
    assert back.to_json() == res.to_json()
    assert back.space.labels()[0] == "armature[panda_joint1]"
    assert back.by_joint("friction")["panda_joint3"] == pytest.approx(float(res.values["friction"][2]))
    assert back.loss_per_run["other"] == pytest.approx(res.weighted_loss[1] / 2.0)


def test_an_older_result_file_with_an_intervals_entry_still_reads(tmp_path):
    """``FitResult.intervals`` is gone (intervals.json holds the report); a file that carries one still reads."""
    fit, _ = _fit()
    res = fit.result()
    js = res.to_json()
    js["intervals"] = {"level": 0.95, "selected": "curvature", "sets": {}}
    (tmp_path / "sysid_best_params.json").write_text(json.dumps(js))
    back = FitResult.read(tmp_path / "sysid_best_params.json")
    assert back.to_json() == res.to_json()
    assert not hasattr(back, "intervals")


def test_stages_report_into_one_best_so_far_record():
    fit, runs = _fit()
    cma_best = fit.best.score
    assert fit.best.stage == "cmaes"
    ref = LMRefiner(fit.objective, RefineSettings(max_iter=3), best=fit.best)
    state = ref.run(ref.start(fit.best.x))
    assert fit.best.score == state.best().loss < cma_best and fit.best.stage == "refine"
    res = fit.result(state.summary())
    assert res.best_score == fit.best.score and res.refine.iterations == state.iteration
    b = BestSoFar()
    assert b.offer(np.zeros(2), 1.0, np.ones(1)) and not b.offer(np.ones(2), 1.0, np.ones(1))  # strictly lower only


def test_stencils_give_the_exact_jacobian_of_a_linear_map_and_go_one_sided_at_bounds():
    A = np.random.default_rng(0).normal(size=(5, 3))
    x0 = np.array([0.5, 0.9995, 0.0])  # entry 1 within a step of the upper bound, entry 2 at the lower bound
    for scheme in ("forward", "central"):
        st = stencil(x0, np.arange(3), 1e-3, scheme)
        R = st.X @ A.T
        J, notes = st.jacobian(R, np.zeros(len(st.X), dtype=bool))
        np.testing.assert_allclose(J, A, rtol=1e-9, atol=1e-12)
        assert np.all((st.X >= 0) & (st.X <= 1))
    assert set(notes) == {1, 2}
    st = stencil(x0, np.arange(3), 1e-3, "central")
    div = np.zeros(len(st.X), dtype=bool)
    div[st.plus[0]] = True  # the plus neighbour of entry 0 diverged: fall back to the minus side
    J, notes = st.jacobian(st.X @ A.T, div, on_diverged="one_sided")
    np.testing.assert_allclose(J[:, 0], A[:, 0], rtol=1e-9)
    assert "diverged" in notes[0]
    Jz, _ = st.jacobian(st.X @ A.T, div, on_diverged="zero")
    assert np.all(Jz[:, 0] == 0.0)
