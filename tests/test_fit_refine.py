"""The Levenberg-Marquardt refinement: converges on a smooth problem, picks the right delay, resumes exactly."""

from __future__ import annotations

import pickle

import numpy as np
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.fit.objective import ReplayObjective
from isaaclab_sysid.fit.loss import LossWeights, total_loss
from isaaclab_sysid.fit.residuals import stacked_residuals, weighted_residuals
from isaaclab_sysid.fit.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings

GROUPS = ("armature", "friction", "viscous", "delay")


def _space():
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, 7)


def _runs():
    return [make_run("task_impedance", 50.0, n=80, seed=1), make_run("task_impedance", 50.0, n=60, seed=2)]


def test_residual_norm_is_the_loss():
    space, runs, be = _space(), _runs(), FakeBackend()
    X = np.random.default_rng(0).uniform(size=(5, space.dim))
    ro = be.rollout(space.to_batch(X), runs)
    R, div = stacked_residuals(weighted_residuals(ro, runs, LossWeights(), [1.0, 2.5]))
    lb = total_loss(ro, runs, LossWeights(), [1.0, 2.5])
    assert not div.any()
    np.testing.assert_allclose((R**2).sum(axis=1), lb.total, rtol=1e-12)


def test_refine_converges_and_finds_the_delay_from_a_wrong_start():
    space, runs, be = _space(), _runs(), FakeBackend()
    start = space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                             "viscous": TRUE["viscous"] + 0.2, "delay": 0})
    ref = LMRefiner(ReplayObjective(space, be, runs), RefineSettings(max_iter=10))
    st = ref.start(start)
    loss0 = st.best().loss
    while not st.done:
        ref.step(st)
    best = st.best()
    dec = space.decode(best.x)
    assert best.loss < 1e-10 * loss0
    assert int(dec["delay"]) == TRUE["delay"]
    for g in ("armature", "friction", "viscous"):
        np.testing.assert_allclose(dec[g], TRUE[g], atol=1e-6)
    assert {t.delay for t in st.tracks} == {0, 1, 2, 3, 4}


def test_refine_state_resumes_exactly():
    space, runs = _space(), _runs()
    x0 = space.normalize({"armature": TRUE["armature"] * 0.5, "friction": TRUE["friction"] * 1.5,
                          "viscous": TRUE["viscous"], "delay": 1})
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=4))
    st = ref.start(x0)
    ref.step(st)
    ref.step(st)
    snapshot = pickle.loads(pickle.dumps(st))
    while not st.done:
        ref.step(st)
    ref2 = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=4))
    while not snapshot.done:
        ref2.step(snapshot)
    np.testing.assert_array_equal(st.best().x, snapshot.best().x)
    assert st.best().loss == snapshot.best().loss
