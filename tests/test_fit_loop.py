"""The CMA-ES loop with an analytic stand-in backend: batching, loss, divergence, resume, outputs."""

import json
import pickle

import numpy as np
import pytest
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit import DIVERGENCE_PENALTY, CmaesFit, CmaesSettings, LossWeights, ParamSpace, run_loss, total_loss
from isaaclab_sysid.fit.checkpoint import latest_state, list_checkpoints, save_checkpoint
from isaaclab_sysid.fit.state import FitState
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, GroupSpec
from isaaclab_sysid.sim.interface import RunRollout


def _runs():
    a = make_run(n=40, seed=0)
    b = make_run(n=30, seed=1)
    b.name = "second"
    return [a, b]


def _space():
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)


def test_loss_is_weighted_mse_and_zero_at_truth():
    run = make_run(n=20)
    P = 3
    ro = RunRollout(q=np.repeat(run.q[None], P, 0) + np.array([0, 0.1, 0.2])[:, None, None],
                    dq=np.repeat(run.dq[None], P, 0), ee_pos=np.repeat(run.ee_pos[None], P, 0),
                    ee_quat=np.repeat(run.ee_quat[None], P, 0), tau=np.zeros((P, 20, 7)), diverged=np.zeros(P, bool))
    loss, div = run_loss(ro, run, LossWeights(2.0, 0.1, 0.01))
    np.testing.assert_allclose(loss, [0.0, 2 * 0.01, 2 * 0.04])
    assert not div.any()
    lb = total_loss([ro, ro], [run, run], traj_weights=[1.0, 1.5])
    np.testing.assert_allclose(lb.contrib[1], 1.5 * lb.per_run[1])
    np.testing.assert_allclose(lb.total, 2.5 * lb.per_run[0])


def test_divergence_gets_finite_penalty():
    run = make_run(n=10)
    q = np.repeat(run.q[None], 2, 0)
    q[1, 3, 2] = np.nan
    ro = RunRollout(q=q, dq=np.repeat(run.dq[None], 2, 0), ee_pos=np.repeat(run.ee_pos[None], 2, 0),
                    ee_quat=np.repeat(run.ee_quat[None], 2, 0), tau=np.zeros((2, 10, 7)), diverged=np.array([False, False]))
    loss, div = run_loss(ro, run)
    assert list(div) == [False, True] and loss[1] == DIVERGENCE_PENALTY and np.all(np.isfinite(loss))


def test_one_backend_call_per_generation_and_progress():
    be = FakeBackend()
    fit = CmaesFit(ReplayObjective(_space(), be, _runs()), CmaesSettings(popsize=10, max_iter=6, sigma0=0.3, seed=1))
    recs = []
    fit.run(lambda r, f: recs.append(r))
    assert be.calls == 6 and len(recs) == 6
    assert recs[-1].evaluations == 60
    assert all(len(r.contrib_best) == 2 for r in recs)
    assert all(np.isclose(sum(r.contrib_best), r.best) for r in recs)
    assert [r.best_ever for r in recs] == sorted([r.best_ever for r in recs], reverse=True)


def test_fit_converges_on_analytic_problem():
    space = ParamSpace([GroupSpec("armature", 0, 0.5), GroupSpec("delay", 0, 4)], 7)
    fit = CmaesFit(ReplayObjective(space, FakeBackend(), _runs()), CmaesSettings(popsize=16, max_iter=60, sigma0=0.3, seed=0))
    fit.run()
    res = fit.result()
    assert res.delay == TRUE["delay"] and res.to_json()["best_params_decoded"]["motor_delay_steps"] == TRUE["delay"]
    np.testing.assert_allclose(res.values["armature"], TRUE["armature"], atol=0.02)
    C = np.array(res.to_json()["cma"]["C"])
    assert C.shape == (8, 8) and np.allclose(C, C.T)


def test_diverging_candidates_are_counted_and_never_best():
    fit = CmaesFit(ReplayObjective(_space(), FakeBackend(diverge_friction_above=2.5), _runs()),
                   CmaesSettings(popsize=12, max_iter=5, sigma0=0.4, seed=2))
    recs = []
    fit.run(lambda r, f: recs.append(r))
    assert sum(r.n_diverged for r in recs) > 0
    assert np.isfinite(fit.best.score) and not fit.best.diverged
    assert fit.result().values["friction"][0] <= 2.5


def test_same_seed_same_result_different_seed_differs():
    def go(seed):
        f = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), CmaesSettings(popsize=8, max_iter=4, seed=seed))
        f.run()
        return f.result().to_json()

    a, b, c = go(5), go(5), go(6)
    assert a == b
    assert a["best_params"] != c["best_params"]


def test_resume_from_checkpoint_is_exact(tmp_path):
    settings = CmaesSettings(popsize=8, max_iter=9, sigma0=0.3, seed=3)
    full = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), settings)
    full.run()

    part = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), settings)
    for _ in range(4):
        g_state = np.random.get_state()
        part.step()
        assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), g_state))  # no global-RNG side effect
        save_checkpoint(FitState(part.state, part.best), part.result(), tmp_path)
    np.random.seed(12345)  # disturb the global RNG: the resumed fit must not depend on it
    state, path = latest_state(tmp_path)
    assert path.name == "checkpoint_4.json"
    resumed = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), settings, state=state.cmaes, best=state.best)
    resumed.run()
    assert resumed.result().to_json() == full.result().to_json()
    assert [h.best for h in resumed.state.history] == [h.best for h in full.state.history]
    ck = json.loads(path.read_text())
    assert ck["iteration"] == 4 and "best_params_decoded" in ck and "resume_state" in ck
    assert [i for i, _ in list_checkpoints(tmp_path)] == [1, 2, 3, 4]


def test_corrupt_newest_checkpoint_falls_back(tmp_path):
    fit = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), CmaesSettings(popsize=8, max_iter=3, seed=0))
    fit.step()
    save_checkpoint(FitState(fit.state, fit.best), fit.result(), tmp_path)
    (tmp_path / "checkpoint_2.json").write_text("{not json")
    skipped = []
    state, path = latest_state(tmp_path, skipped.append)
    assert path.name == "checkpoint_1.json" and state.cmaes.iteration == 1
    assert len(skipped) == 1 and "checkpoint_2.json" in skipped[0]
    assert pickle.loads(pickle.dumps(state)).cmaes.iteration == 1


def test_unsupported_group_is_refused():
    from isaaclab_sysid.sim.interface import UnsupportedParameterError

    space = ParamSpace([GroupSpec("mu_static", 0, 5)], 7)
    fit = CmaesFit(ReplayObjective(space, FakeBackend(), _runs()), CmaesSettings(popsize=4, max_iter=1))
    with pytest.raises(UnsupportedParameterError):
        fit.step()
