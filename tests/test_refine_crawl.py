"""Issue 45: the rtol stop needs the Gauss-Newton forecast too (``RefineSettings.crawl_level``).

At 96 s every delay track of the default fit stopped on ``rtol`` far above the 48 s fit's loss per sample: a step
that gains less than 1e-4 of the loss was read as convergence while the track was crawling. A step is small either
because the point is at the minimum (the forecast of the remaining gain is small too) or because the step is
over-damped or the valley curved (the forecast is large). The fake here is linear in its parameters (the forecast
is exact) with white noise beside it (the loss has a floor, so the likelihood-ratio scale means something); a large
initial damping (1e6) makes the first steps crawl: ``rtol`` fires on them while the forecast says the loss can still fall
by thousands of its likelihood-ratio units."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings, chi2_1
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.objective.replay_objective import ReplayObjective

GROUPS = ("armature", "friction", "viscous")  # no delay: phase 1 only, one track


class NoisyFake(FakeBackend):
    """The fake plus a fixed white measurement noise on every channel (the same for every candidate)."""

    def rollout(self, batch, runs):
        out = super().rollout(batch, runs)
        for k, (ro, run) in enumerate(zip(out, runs)):
            rng = np.random.default_rng(200 + k)
            ro.q = ro.q + 1e-3 * rng.normal(size=run.q.shape)[None]
            ro.dq = ro.dq + 1e-3 * rng.normal(size=run.dq.shape)[None]
            ro.ee_pos = ro.ee_pos + 1e-3 * rng.normal(size=run.ee_pos.shape)[None]
        return out


def _refiner(**kw) -> tuple[LMRefiner, np.ndarray]:
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, 7)
    runs = [make_run("task_impedance", 50.0, n=200, seed=1), make_run("task_impedance", 50.0, n=150, seed=2)]
    ref = LMRefiner(ReplayObjective(space, NoisyFake(), runs), RefineSettings(**kw))
    x0 = space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                          "viscous": TRUE["viscous"] + 0.2})
    return ref, x0


def _lr_above_optimum(ref: LMRefiner, st) -> float:
    """The best track's loss above the converged optimum's, on the likelihood-ratio scale."""
    opt, x0 = _refiner(max_iter=30, stat_tol=0.01)
    o = opt.run(opt.start(st.tracks[0].x)).best()
    assert o.stop in ("negligible", "rtol") and o.crawls == 0  # a plain start converges without any crawl
    b = st.best()
    return (b.loss - o.loss) / (o.loss / o.n_eff)


@pytest.mark.parametrize("accumulate", [False, True])
def test_rtol_on_a_crawl_is_not_convergence(accumulate):
    # over-damped: lambda0 1e6, so the first step (at lambda0 / 10) gains far less than rtol of the loss while the
    # forecast (nearly all of the loss: the start is far from the optimum) is hundreds on the likelihood-ratio scale;
    # accumulate: on the normal equations (every step from a fresh stencil, as the 96 s fit ran)
    off, x0 = _refiner(max_iter=10, lambda0=1e6, crawl_level=None, normal_equations=accumulate)
    st_off = off.run(off.start(x0))
    b_off = st_off.best()
    assert b_off.stop == "rtol" and b_off.accepted == 1  # the rule before: one crawling step read as convergence
    assert b_off.last_gain < 1e-4  # rtol
    # ... while the forecast said that more than half the loss was left, far above what a test could miss
    assert b_off.remaining * b_off.loss / b_off.n_eff > 0.5 * b_off.loss and b_off.remaining > 10 * chi2_1(0.95)
    assert off.verdict(st_off).converged  # and called converged
    assert _lr_above_optimum(off, st_off) > 100  # it was nowhere near the optimum

    on, x0 = _refiner(max_iter=10, lambda0=1e6, normal_equations=accumulate)
    st_on = on.run(on.start(x0))
    b_on = st_on.best()
    assert b_on.crawls >= 1  # the same first step, now read as a crawl
    assert b_on.stop in ("rtol", "negligible") and on.verdict(st_on).converged
    if b_on.stop == "rtol":  # a stop on rtol now comes with a small forecast
        assert b_on.remaining <= chi2_1(0.95)
    assert _lr_above_optimum(on, st_on) < chi2_1(0.95)  # it went on to the optimum


def test_a_crawl_out_of_budget_says_so_and_is_not_converged():
    ref, x0 = _refiner(max_iter=1, jacobian_reuse=0, lambda0=1e6)  # one Jacobian, one crawling step
    st = ref.run(ref.start(x0))
    b = st.best()
    assert b.stop == "budget" and b.crawls == 1
    v = ref.verdict(st)
    assert not v.converged
    assert "crawling" in v.reason and "not a minimum" in v.reason and "raise --refine_iter" in v.remedy


def test_a_converged_track_stops_on_rtol_as_before():
    # from a plain start the forecast at the rtol step is small: the crawl rule changes nothing
    runs = {}
    for level in (None, 0.95):
        ref, x0 = _refiner(max_iter=30, stat_tol=None, crawl_level=level)
        st = ref.run(ref.start(x0))
        runs[level] = (st.best(), st.iteration)
    (b0, it0), (b1, it1) = runs[None], runs[0.95]
    assert b0.stop == b1.stop == "rtol" and b1.crawls == 0 and it0 == it1
    np.testing.assert_array_equal(b0.x, b1.x)
