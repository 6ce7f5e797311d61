"""The Levenberg-Marquardt refinement: converges on a smooth problem, picks the right delay, resumes exactly."""

from __future__ import annotations

import pickle

import numpy as np
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.loss import LossWeights, total_loss
from isaaclab_sysid.objective.residuals import stacked_residuals, weighted_residuals
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
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
    assert {t.delay for t in st.tracks} == {0, 1, 2, 3}  # widened from 0 up to one past the best (issue 26)


def test_refine_state_resumes_exactly():
    space, runs = _space(), _runs()
    x0 = space.normalize({"armature": TRUE["armature"] * 0.5, "friction": TRUE["friction"] * 1.5,
                          "viscous": TRUE["viscous"], "delay": 1})
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=4))
    st = ref.start(x0)
    ref.step(st)
    ref.step(st)
    st.drop_jacobians()  # as a checkpoint does (Search checkpoints every jacobian_reuse + 1 iterations)
    snapshot = pickle.loads(pickle.dumps(st))
    while not st.done:
        ref.step(st)
    ref2 = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=4))
    while not snapshot.done:
        ref2.step(snapshot)
    np.testing.assert_array_equal(st.best().x, snapshot.best().x)
    assert st.best().loss == snapshot.best().loss


def test_delay_profile_starts_at_the_neighbours_and_widens_only_from_an_edge():
    """Issue 26: d-1..d+1 first; one tick further only while the best delay sits at an edge of the profile."""
    space, runs = _space(), _runs()
    x_true = {"armature": TRUE["armature"] * 1.1, "friction": TRUE["friction"] * 0.9, "viscous": TRUE["viscous"]}
    d_true = int(TRUE["delay"])
    # from the true delay: the neighbours alone, no widening
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=6))
    st = ref.run(ref.start(space.normalize({**x_true, "delay": d_true})))
    assert {t.delay for t in st.tracks} == {d_true - 1, d_true, d_true + 1}
    assert int(space.decode(st.best().x)["delay"]) == d_true
    # from delay 0: widened tick by tick up to the true delay and one past it, the same answer as every delay at once
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=6))
    st = ref.run(ref.start(space.normalize({**x_true, "delay": 0})))
    full = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=6, widen_delays=False))
    sf = full.run(full.start(space.normalize({**x_true, "delay": 0})))
    assert {t.delay for t in st.tracks} == set(range(0, min(d_true + 1, 4) + 1))
    assert st.best().delay == sf.best().delay == d_true
    # the same optimum (the widened tracks start from a Broyden-updated Jacobian of another moment: not bit-identical)
    np.testing.assert_allclose(st.best().x, sf.best().x, rtol=0, atol=1e-9)


def test_single_damping_converges_with_fewer_trials():
    space, runs = _space(), _runs()
    start = space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                             "viscous": TRUE["viscous"] + 0.2, "delay": int(TRUE["delay"])})
    out = {}
    for single in (False, True):
        ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs),
                        RefineSettings(max_iter=10, delay_neighbours=0, single_damping=single, jacobian_reuse=0))
        st = ref.run(ref.start(start))
        out[single] = (st.best().loss, sum(r["evaluations"] for r in st.history), st.history[-1]["evaluations"])
    loss0 = ref.start(start).best().loss
    assert out[True][0] < 1e-10 * loss0 and out[False][0] < 1e-10 * loss0
    n_c = len(space.continuous_index())
    # the Jacobian and one trial, or the trial alone (a rejected step keeps its Jacobian: same point, same stencil)
    assert out[True][2] in (n_c + 1 + 1, 1)


def test_broyden_updates_reach_the_same_optimum_with_fewer_rollouts():
    """Issue 26: steps from a Broyden-updated Jacobian between stencils; the stopping test is taken on a fresh one.

    The fake is exact: the loss falls to ~1e-36, where rounding noise decides the relative-decrease test, and the
    plain LM crawls there for a machine-dependent number of iterations (10 sufficed on an earlier machine's BLAS
    kernels, 20 do not on this one): the budget is 30, so that both variants stop on a test, not on the budget."""
    space, runs = _space(), _runs()
    start = space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                             "viscous": TRUE["viscous"] + 0.2, "delay": int(TRUE["delay"])})
    out = {}
    for reuse in (0, 3):
        ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs),
                        RefineSettings(max_iter=30, delay_neighbours=1, jacobian_reuse=reuse))
        st = ref.run(ref.start(start))
        out[reuse] = (st, sum(r["evaluations"] for r in st.history), ref.verdict(st))
    (a, na, va), (b, nb, vb) = out[0], out[3]
    assert va.converged and vb.converged, (va.reason, vb.reason)
    assert a.best().delay == b.best().delay == int(TRUE["delay"])
    np.testing.assert_allclose(b.best().x, a.best().x, rtol=0, atol=1e-6)
    assert b.best().loss <= 1.01 * a.best().loss + 1e-12
    assert nb < 0.7 * na, (nb, na)
    print(f"rollouts: {na} with a stencil every iteration, {nb} with Broyden updates")
    # the rollouts of an iteration from an updated Jacobian: one trial per active track, no stencil
    n_c = len(space.continuous_index())
    assert any(r["evaluations"] < n_c for r in b.history)
    assert a.history[0]["evaluations"] >= n_c + 1


def test_widening_counts_only_the_profile_not_other_basins_tracks():
    """Issue 27's servo twin: a phase-1 track of another basin at delay 3 (far worse) made 3 count as profiled, so
    the walk from delay 1 stopped at 2 and called it converged. Only the profile's tracks decide where it widens."""
    from isaaclab_sysid.fit.refine import RefineState, RefineTrack

    space, runs = _space(), _runs()
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=6))
    x = space.normalize({"armature": TRUE["armature"], "friction": TRUE["friction"], "viscous": TRUE["viscous"],
                         "delay": 1})

    def track(d: int, loss: float, profile: bool) -> RefineTrack:
        return RefineTrack(x=space.with_delay(x, d), loss=loss, contrib=np.zeros(1), lam=1e-2, active=False,
                           delay=d, profile=profile)

    other = track(3, 100.0, False)
    st = RefineState(tracks=[track(1, 0.7, True), other, track(0, 1.0, True), track(2, 0.5, True)], phase=2,
                     warm=space.with_delay(x, 1))
    ref._maybe_widen(st)
    new = [t for t in st.tracks if t.active]
    assert [t.delay for t in new] == [3] and new[0].profile and new[0] is not other
    # warm-started from the edge's optimum (delay 2's point), not from the phase-1 optimum
    np.testing.assert_array_equal(np.delete(new[0].x, space.delay_index), np.delete(st.tracks[3].x, space.delay_index))
    # the profile's best at an inner delay: no widening
    st2 = RefineState(tracks=[track(1, 0.5, True), track(0, 0.7, True), track(2, 0.6, True), track(5, 100.0, False)],
                      phase=2, warm=space.with_delay(x, 1))
    ref._maybe_widen(st2)
    assert not any(t.active for t in st2.tracks)


def test_widening_reseeds_a_neighbour_left_in_a_worse_basin():
    """Issue 27's servo twin with viscous fitted: the walk from delay 6 (a bad basin) fell into a 300x better basin
    at 3; 4's track, warm-started from 6, ended 280x above 3. The walk re-seeds 4 from 3's optimum."""
    from isaaclab_sysid.fit.refine import RefineState, RefineTrack

    space, runs = _space(), _runs()
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=6))
    x = space.normalize({"armature": TRUE["armature"], "friction": TRUE["friction"], "viscous": TRUE["viscous"],
                         "delay": 1})

    def track(d: int, loss: float, parent: int) -> RefineTrack:
        return RefineTrack(x=space.with_delay(x, d) * (1.0 - 0.01 * d), loss=loss, contrib=np.zeros(1), lam=1e-2,
                           active=False, delay=d, profile=True, parent=parent)

    # 6 the phase-1 winner; 5, 7 from 6; 4 from 5; 3 from 4 (jumped basins); 2 from 3
    st = RefineState(tracks=[track(6, 9.3e-4, -1), track(5, 9.1e-4, 0), track(7, 9.5e-4, 0), track(4, 8.9e-4, 1),
                             track(3, 3.1e-6, 3), track(2, 4.1e-6, 4)], phase=2, warm=space.with_delay(x, 6))
    ref._maybe_widen(st)
    new = [t for t in st.tracks if t.active]
    assert [t.delay for t in new] == [4] and new[0].parent == 4
    np.testing.assert_array_equal(np.delete(new[0].x, space.delay_index), np.delete(st.tracks[4].x, space.delay_index))
    # a smooth profile (neighbours within prune_ratio of the best): nothing re-seeded
    st2 = RefineState(tracks=[track(6, 1.0, -1), track(5, 1.2, 0), track(7, 1.1, 0)], phase=2,
                      warm=space.with_delay(x, 6))
    ref._maybe_widen(st2)
    assert not any(t.active for t in st2.tracks)


def test_budget_bound_refinement_costs_no_more_with_broyden_steps():
    """Issue 26: the Broyden steps are charged to --refine_iter's rollout budget, so a refinement that runs out of it
    (every real log's) costs no more rollouts than with a stencil every iteration; it said 'ran out' before too."""
    space, runs = _space(), _runs()
    start = space.normalize({"armature": TRUE["armature"] * 2.5, "friction": TRUE["friction"] * 0.3,
                             "viscous": TRUE["viscous"] + 0.6, "delay": int(TRUE["delay"])})
    out = {}
    for reuse in (0, 3):
        ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs),
                        RefineSettings(max_iter=2, delay_neighbours=0, jacobian_reuse=reuse))
        st = ref.run(ref.start(start))
        out[reuse] = (st, sum(r["evaluations"] for r in st.history), ref.verdict(st))
    (a, na, va), (b, nb, vb) = out[0], out[3]
    assert not va.converged and not vb.converged and "budget of 2" in vb.reason, (va.reason, vb.reason)
    n_c = len(space.continuous_index())
    assert na == 2 * 2 * (n_c + 4)  # two finite-difference iterations in each of the two phases, nothing else
    assert nb <= na, (nb, na)
    assert b.best().loss <= a.best().loss + 1e-9 * a.start_loss, (b.best().loss, a.best().loss)
    print(f"budget-bound: {na} rollouts (loss {a.best().loss:.3e}) against {nb} with Broyden steps "
          f"(loss {b.best().loss:.3e})")


def test_budget_verdict_does_not_call_a_small_broyden_gain_still_improving():
    """The verdict said 'still improving: its last step lowered the loss by 0.0062 % (> rtol 0.01 %)' when the last
    step, from a Broyden-updated Jacobian, gained less than rtol and the budget left no stencil to confirm it."""
    from isaaclab_sysid.fit.refine import RefineState, RefineTrack

    space, runs = _space(), _runs()
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=3))
    t = RefineTrack(x=np.full(space.dim, 0.5), loss=1.0, contrib=np.zeros(1), lam=1e-2, active=False, delay=1,
                    stop="budget", accepted=5, last_gain=6.2e-5)
    v = ref.verdict(RefineState(tracks=[t], start_loss=2.0))
    assert not v.converged and "0.0062 % (< rtol 0.01 %)" in v.reason and "still improving" not in v.reason
    t.last_gain = 2e-3
    assert "still improving" in ref.verdict(RefineState(tracks=[t], start_loss=2.0)).reason


def test_a_converged_phase_1_winner_is_not_refined_again_in_phase_2():
    """A phase-1 winner that passed a stopping test on a finite-difference Jacobian (rtol, damping cap) is converged
    at its delay: phase 2 refines the other delays only (it re-ran the winner's stencil and trials before, ~1 s of
    a 10 s joint-PD fit job per stage). One stopped by the budget goes on in phase 2."""
    space, runs = _space(), _runs()
    d_true = int(TRUE["delay"])
    start = space.normalize({"armature": TRUE["armature"] * 1.1, "friction": TRUE["friction"] * 0.9,
                             "viscous": TRUE["viscous"], "delay": d_true})
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=10, delay_neighbours=1))
    st = ref.start(start)
    while st.phase == 1:
        ref.step(st)
    winner = st.tracks[0]
    stop = winner.stop
    assert stop in ("rtol", "rejected") and not winner.active and winner.accepted > 0  # exact fit: the damping cap
    x1, n1 = winner.x.copy(), winner.accepted
    ref.run(st)
    assert winner.stop == stop and winner.accepted == n1
    np.testing.assert_array_equal(winner.x, x1)  # no phase-2 step moved it
    assert st.best() is winner and ref.verdict(st).converged
    assert {t.delay for t in st.tracks} == {d_true - 1, d_true, d_true + 1}
    # a budget-stopped winner goes on in phase 2
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs), RefineSettings(max_iter=1, delay_neighbours=1))
    st = ref.start(space.normalize({"armature": TRUE["armature"] * 2.0, "friction": TRUE["friction"] * 0.5,
                                    "viscous": TRUE["viscous"] + 0.4, "delay": d_true}))
    while st.phase == 1:
        ref.step(st)
    assert st.tracks[0].active and st.tracks[0].stop == ""


class _CoupledBackend(FakeBackend):
    """FakeBackend whose friction error also excites armature's basis: the two groups trade off, as on a real arm."""

    def rollout(self, batch, runs):
        out = super().rollout(batch, runs)
        for r, (ro, run) in enumerate(zip(out, runs)):
            T, N = run.q.shape
            t = np.arange(T) / T
            basis = np.sin(2 * np.pi * (1 + r) * t[:, None] + np.arange(N)[None, :])
            c = (batch.friction - TRUE["friction"])[:, None, :] * basis[None] * 0.05 * 0.95
            ro.q[...] += c
            ro.dq[...] += 2 * c
        return out


def test_free_coordinates_hold_only_a_bound_the_gradient_pushes_against():
    from isaaclab_sysid.fit.refine import free_coordinates, lm_step

    x = np.array([0.0, 0.0, 1.0, 1.0, 0.5])
    g = np.array([1.0, -1.0, -1.0, 1.0, 1.0])  # descent is -g: out, in, out, in, free
    np.testing.assert_array_equal(free_coordinates(x, g), [False, True, False, True, True])
    A = np.eye(5) + 0.5
    step = lm_step(A, g, 0.0, free_coordinates(x, g))
    assert step[0] == 0.0 and step[2] == 0.0 and np.all(np.isfinite(step))


def test_active_set_steps_reach_the_bounded_optimum_where_clipped_steps_crawl():
    """Issue 26: with the truth outside the box on some joints and a parameter that trades off against them, the
    clipped LM step is bent every iteration (under task impedance it crawled along the bounds and ran out of budget);
    the step over the free coordinates reaches the bounded optimum in a few iterations and says converged."""
    space = ParamSpace.from_bounds({"armature": (0.0, 0.18), "friction": (0.0, 3.0),
                                    "viscous": DEFAULT_BOUNDS["viscous"], "delay": DEFAULT_BOUNDS["delay"]}, 7)
    x0 = space.normalize({"armature": np.full(7, 0.05), "friction": np.full(7, 0.3), "viscous": np.full(7, 0.1),
                          "delay": TRUE["delay"]})
    out = {}
    for active_set in (True, False):
        be = _CoupledBackend()
        ref = LMRefiner(ReplayObjective(space, be, _runs()),
                        RefineSettings(max_iter=10, delay_neighbours=0, active_set=active_set))
        st = ref.start(x0)
        while not st.done:
            ref.step(st)
        out[active_set] = (st.best(), be.calls, ref.verdict(st))
    best, calls, verdict = out[True]
    clipped, clipped_calls, clipped_verdict = out[False]
    assert verdict.converged and best.stop == "rtol"
    arm = space.decode(best.x)["armature"]
    np.testing.assert_allclose(arm[:3], 0.18, rtol=1e-9)  # truth 0.30, 0.25, 0.20: above the box
    assert best.loss < clipped.loss * (1 - 1e-3)
    assert not clipped_verdict.converged and clipped.stop == "budget"  # the clipped steps still crawl after 10
    assert calls * 5 < clipped_calls
