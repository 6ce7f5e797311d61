"""Issue 45: the refinement's normal equations accumulated run by run and window by window equal the dense ones to
rounding, and a refinement that holds only them reaches the dense refinement's answer."""

from __future__ import annotations

import pickle

import numpy as np
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.objective.jacobian import stencil
from isaaclab_sysid.objective.loss import LossWeights, total_loss
from isaaclab_sysid.objective.normal_equations import stencil_normal_equations
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.objective.residuals import stacked_weighted_residuals

GROUPS = ("armature", "friction", "viscous", "delay")


def _space() -> ParamSpace:
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, 7)


def _runs():
    return [make_run("task_impedance", 50.0, n=80, seed=1), make_run("task_impedance", 50.0, n=61, seed=2)]


class NoisyFake(FakeBackend):
    """The fake backend with a fixed white "measurement noise" [rad, rad/s] between its rollouts and the runs: the
    loss has a floor above rounding (the plain fake fits to 1e-36, where the two summation orders part)."""

    def __init__(self, noise: float = 1e-3) -> None:
        super().__init__()
        self.noise = noise

    def rollout(self, batch, runs):
        out = super().rollout(batch, runs)
        for k, (ro, run) in enumerate(zip(out, runs)):
            rng = np.random.default_rng(100 + k)
            ro.q = ro.q + self.noise * rng.normal(size=run.q.shape)[None]
            ro.dq = ro.dq + self.noise * rng.normal(size=run.dq.shape)[None]
        return out


def _start(space: ParamSpace, delay: int = 0) -> np.ndarray:
    return space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                            "viscous": TRUE["viscous"] + 0.2, "delay": delay})


def test_accumulated_normal_equations_equal_the_dense_ones():
    space, runs, be = _space(), _runs(), FakeBackend()
    weights, tw = LossWeights(w_x=0.5), [1.0, 2.5]
    x0 = _start(space)
    x0[space.continuous_index()[3]] = 1.0  # one entry at its upper bound: a backward difference
    st = stencil(x0, space.continuous_index(), 1e-3, "forward")
    ro = be.rollout(space.to_batch(st.X), runs)
    lb = total_loss(ro, runs, weights, tw)
    diverged = lb.diverged.copy()
    diverged[2] = True  # a diverged difference: its column is zero in both
    R = stacked_weighted_residuals(ro, runs, weights, tw)
    J, _ = st.jacobian(R, diverged, on_diverged="zero")
    assert not J[:, 1].any() and J[:, 0].any()
    for window in (7, 512):  # windows that do not divide the runs' lengths, and one window per run
        ne = stencil_normal_equations(ro, runs, st, diverged, weights, tw, window=window)
        np.testing.assert_array_equal(ne.r, R[0])
        np.testing.assert_allclose(ne.A, J.T @ J, rtol=1e-12, atol=1e-12 * np.abs(J.T @ J).max())
        np.testing.assert_allclose(ne.g, J.T @ R[0], rtol=1e-12, atol=1e-12 * np.abs(J.T @ R[0]).max())


def _refine(normal_equations: bool, max_iter: int = 10):
    space, runs = _space(), _runs()
    ref = LMRefiner(ReplayObjective(space, NoisyFake(), runs),
                    RefineSettings(max_iter=max_iter, jacobian_reuse=0, normal_equations=normal_equations))
    assert ref.accumulate == normal_equations
    st = ref.start(_start(space))
    ref.run(st)
    return ref, st


def test_a_refinement_on_the_normal_equations_reaches_the_dense_answer():
    dense_ref, dense = _refine(False)
    acc_ref, acc = _refine(True)
    assert acc.iteration == dense.iteration
    assert [(t.delay, t.stop) for t in acc.tracks] == [(t.delay, t.stop) for t in dense.tracks]
    for a, d in zip(acc.tracks, dense.tracks):
        np.testing.assert_allclose(a.x, d.x, rtol=0, atol=1e-9)
        np.testing.assert_allclose(a.loss, d.loss, rtol=1e-9)
        assert a.J is None and a.r is None  # no dense Jacobian, no residual vector held
    dec = dense_ref.space.decode(acc.best().x)
    assert int(dec["delay"]) == TRUE["delay"]
    for g in ("armature", "friction", "viscous"):
        np.testing.assert_allclose(dec[g], TRUE[g], rtol=0.05, atol=0.01)


def test_auto_mode_accumulates_above_the_dense_limit_only():
    space, runs = _space(), _runs()
    M = sum(r.q.shape[0] * (2 * r.q.shape[1] + 3) for r in runs)
    mb = M * len(space.continuous_index()) * 8 / 1e6
    obj = ReplayObjective(space, FakeBackend(), runs)
    assert not LMRefiner(obj, RefineSettings(dense_limit_mb=2 * mb)).accumulate
    assert LMRefiner(obj, RefineSettings(dense_limit_mb=0.5 * mb)).accumulate


def test_checkpointed_refine_state_does_not_grow_with_the_samples():
    """A pickled refinement state (what a checkpoint stores) holds no Jacobian and no residuals: the same fit on a run
    five times longer pickles to the same size within a few bytes of numbers' text."""
    space = _space()
    sizes = []
    for n in (60, 300):
        runs = [make_run("task_impedance", 50.0, n=n, seed=1)]
        for ne in (False, True):
            ref = LMRefiner(ReplayObjective(space, FakeBackend(), runs),
                            RefineSettings(max_iter=3, normal_equations=ne))
            st = ref.start(_start(space, delay=2))
            ref.step(st)
            ref._stencils([st.tracks[0]])  # live: a Jacobian (or its normal equations) held at the pickle
            assert st.tracks[0].J is not None or st.tracks[0].A is not None
            sizes.append(len(pickle.dumps(st)))
    assert max(sizes) - min(sizes) < 200, sizes


def test_per_sample_stop_reads_the_gauss_newton_forecast_on_the_likelihood_ratio_scale():
    """The ``stat_tol`` stop (issue 45): at a finite-difference Jacobian the track's forecast of its remaining gain,
    on the scale L / n_eff, is exact on a linear problem (the fake); a step from it ends the track ("negligible")
    exactly when that forecast is below ``stat_tol``."""
    space, runs = _space(), _runs()
    x0 = _start(space, delay=int(TRUE["delay"]))
    full = LMRefiner(ReplayObjective(space, NoisyFake(), runs), RefineSettings(max_iter=10, stat_tol=None))
    st = full.run(full.start(x0, labels=["x0"]))
    l_min = min(t.loss for t in st.tracks if t.delay == TRUE["delay"])
    for normal_equations in (False, True):
        stops = {}
        for tol in (1e-30, 1e30):
            ref = LMRefiner(ReplayObjective(space, NoisyFake(), runs),
                            RefineSettings(max_iter=10, stat_tol=tol, normal_equations=normal_equations))
            s1 = ref.start(x0)
            l0 = s1.tracks[0].loss
            ref.step(s1)
            t = s1.tracks[0]
            assert np.isfinite(t.n_eff) and t.n_eff > 100
            forecast = t.remaining * l0 / t.n_eff  # back to loss units
            np.testing.assert_allclose(forecast, l0 - l_min, rtol=1e-3)
            stops[tol] = (t.active, t.stop)
        assert stops[1e30] == (False, "negligible")
        assert stops[1e-30][1] != "negligible"


def _one_second_twin(static_ratio: float, seed: int, target_seed: int, scale=(1.0, 1.0, 1.0)):
    """(robot, run, Coulomb space, x0, MuJoCo backend): a 1 s 1 kHz MuJoCo twin of the benchmark arm whose static
    friction is ``static_ratio`` times its Coulomb level, and x0 at its Coulomb truth with armature, friction and
    viscous scaled by ``scale``. The caller closes the backend."""
    __import__("pytest").importorskip("isaaclab_sysid.twin.recorder")
    from isaaclab_sysid.benchmarking.peers import twin
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
    from isaaclab_sysid.twin.demo import joint_target
    from isaaclab_sysid.twin.recorder import record_twin

    robot = load_robot("franka_panda")
    p = twin(static_ratio)
    run = record_twin(robot, joint_target(robot, 1.0, target_seed, "fit_a"), p, seed=seed, log_rate_hz=1000.0)
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, 7, robot.joint_names)
    x0 = space.normalize({"armature": scale[0] * np.asarray(p.armature), "friction": scale[1] * np.asarray(p.friction),
                          "viscous": scale[2] * np.asarray(p.viscous), "delay": int(p.delay)})
    return robot, run, space, x0, MujocoBackend(robot, ReplayOptions(), n_threads=1)


def test_streamed_score_test_gives_the_dense_statistic():
    """Issue 45: the static-friction score test's streamed sensitivity (``evaluate/friction_score.py``: the stencil
    rolled out a few columns at a time into the Jacobian, no (2p + 1) x M block of candidates' residuals; the
    predicted gain from the p x p normal equations) gives the dense test's z to 1e-9. A 1 s MuJoCo twin of the
    benchmark arm whose static friction is twice its Coulomb level, at the Coulomb truth: the data want a peak."""
    from isaaclab_sysid.evaluate import friction_score as fs

    robot, run, space, x0, be = _one_second_twin(2.0, seed=0, target_seed=40)
    try:
        aug = fs.augmented_space(space)
        xa = fs.coulomb_as_static(space, x0, aug)
        assert fs.dense_sensitivity_mb(aug, xa, [run]) < fs.DENSE_LIMIT_MB  # the default: dense at this size
        obj = ReplayObjective(aug, be, [run])
        from isaaclab_sysid.intervals.curvature import sensitivity

        dense_s, stream_s = sensitivity(obj, xa, profile_delay=False), fs.streamed_sensitivity(obj, xa, chunk=6)
        for a, b in zip(dense_s.J, stream_s.J):
            np.testing.assert_array_equal(a, b)  # the same differences, chunk by chunk
        # the optimum's residuals hold no more than their own samples (a view into the stencil's block would keep
        # every candidate's residuals alive as long as the sensitivity lives)
        assert all(r.base is None or r.base.size == r.size for r in dense_s.r + stream_s.r)
        assert dense_s.fd_notes == stream_s.fd_notes
        dense = fs.static_friction_test(be, space, x0, [run], streamed=False)
        stream = fs.static_friction_test(be, space, x0, [run], streamed=True)
        auto = fs.static_friction_test(be, space, x0, [run], dense_limit_mb=0.0)  # over the limit: streamed
    finally:
        be.close()
    assert max(dense.z) > 1.0  # a statistic worth comparing: the data lean towards a static peak
    np.testing.assert_allclose(stream.z, dense.z, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(auto.z, dense.z, rtol=1e-9, atol=1e-9)
    assert stream.joints == dense.joints and stream.threshold == dense.threshold
    assert dense.predicted_gain is not None and dense.predicted_gain > 0
    np.testing.assert_allclose(stream.predicted_gain, dense.predicted_gain, rtol=1e-4, atol=1e-8)


def test_streamed_law_forecast_gives_the_dense_forecast():
    """Issue 45: ``jobs/law_choice.forecast`` (the friction-law auto choice's Gauss-Newton forecast) streams its
    sensitivity above the dense limit and steps from the p x p normal equations, as the score test does: on a 1 s
    MuJoCo twin, from a start off the truth, the same forecast (total and per channel) as the dense path."""
    from isaaclab_sysid.jobs import law_choice
    from isaaclab_sysid.jobs.law_choice import forecast

    robot, run, space, x0, be = _one_second_twin(1.0, seed=1, target_seed=41, scale=(1.3, 0.7, 1.2))
    try:
        obj = ReplayObjective(space, be, [run])
        calls: list[int] = []
        orig = law_choice.streamed_sensitivity
        law_choice.streamed_sensitivity = lambda *a, **k: calls.append(1) or orig(*a, **k)
        try:
            dense = forecast(obj, x0, streamed=False)
            assert not calls  # below the limit (and forced off): the dense sensitivity
            stream = forecast(obj, x0, streamed=True)
            n_stream = len(calls)
            auto = forecast(obj, x0, dense_limit_mb=0.0)  # over the limit: streamed
        finally:
            law_choice.streamed_sensitivity = orig
        assert n_stream >= 2 and len(calls) == 2 * n_stream  # re-linearized on the streamed path, both times
    finally:
        be.close()
    assert dense is not None and stream is not None and auto is not None
    assert dense[0] > 0
    np.testing.assert_allclose(stream[0], dense[0], rtol=1e-4)
    np.testing.assert_allclose(auto[0], stream[0], rtol=1e-12)
    for c in dense[1]:
        np.testing.assert_allclose(stream[1][c], dense[1][c], rtol=1e-4, atol=1e-12 * dense[0])


def test_a_delay_track_between_jacobians_is_still_tested_for_separation():
    """Phase 2's separation test reads a track's normal equations, which an accepted step without a Broyden update
    drops (the accumulated mode never updates). It then tests the optimistic loss of the track's last Jacobian: at
    96 s the polish's delay-1 track otherwise stepped untested to its budget. True delay 2 (a fake whose delays 1
    and 3 the data reject): every wrong delay closes as "separated", in the accumulated mode and in the dense one
    without reuse alike, at the same point as the dense refinement with reuse."""
    from test_refine_delay_tie import FractionalDelayFake

    space, runs = _space(), _runs()
    x0 = _start(space, delay=2)
    ends = {}
    for ne, reuse in ((True, 3), (True, 0), (False, 0), (False, 3)):
        ref = LMRefiner(ReplayObjective(space, FractionalDelayFake(2.0), runs),
                        RefineSettings(max_iter=10, normal_equations=ne, jacobian_reuse=reuse))
        st = ref.run(ref.start(x0))
        stops = {t.delay: t.stop for t in st.tracks}
        assert stops == {2: "rtol", 1: "separated", 3: "separated"}, (ne, reuse, stops)
        wrong = [t for t in st.tracks if t.delay != 2]
        assert all(t.optimistic > st.best().loss for t in wrong)
        ends[(ne, reuse)] = st.best()
    for key, b in ends.items():
        np.testing.assert_allclose(b.loss, ends[(False, 3)].loss, rtol=1e-6, err_msg=str(key))


def test_states_only_rollouts_hold_the_loss_states_bit_for_bit():
    """The loss, its residuals and the accumulated stencils roll out through ``ReplayBackend.rollout_states``: the
    MuJoCo backend then records q, dq and ee_pos only (ee_quat and tau empty: 17 of 28 numbers per sample of the
    7-joint arm, the stencil rollouts that set a long fit's peak memory), with the full rollout's bits."""
    _, run, space, x0, be = _one_second_twin(1.5, seed=3, target_seed=4)
    try:
        X = np.stack([x0, np.clip(x0 + 0.05, 0.0, 1.0)])
        batch = space.to_batch(X)
        full, lean = be.rollout(batch, [run])[0], be.rollout_states(batch, [run])[0]
        for name in ("q", "dq", "ee_pos", "diverged"):
            np.testing.assert_array_equal(getattr(lean, name), getattr(full, name))
        assert lean.tau.shape == (2, run.q.shape[0], 0) and lean.ee_quat.shape == (2, run.q.shape[0], 0)
        assert lean.q.nbytes + lean.dq.nbytes + lean.ee_pos.nbytes == 17 * 8 * 2 * run.q.shape[0]
        obj = ReplayObjective(space, be, [run])
        np.testing.assert_array_equal(obj.loss(X).total, total_loss([full], [run]).total)
    finally:
        be.close()


def test_the_loss_is_scored_one_candidate_at_a_time_with_the_batched_bits():
    """``run_loss`` forms its squared errors one candidate at a time (a 96 s stencil's (P, T, N) temporaries set the
    fit's peak): the same bits as the mean over axes (1, 2) of the whole batch, a diverged (NaN) candidate included."""
    from isaaclab_sysid.objective.loss import run_loss
    from isaaclab_sysid.sim.interface import RunRollout

    rng = np.random.default_rng(5)
    run = make_run("task_impedance", 50.0, n=4001, seed=3)
    T, N = run.q.shape
    P = 6
    ro = RunRollout(q=run.q[None] + 1e-3 * rng.normal(size=(P, T, N)), dq=run.dq[None] + rng.normal(size=(P, T, N)),
                    ee_pos=run.ee_pos[None] + 1e-4 * rng.normal(size=(P, T, 3)), ee_quat=np.empty((P, T, 0)),
                    tau=np.empty((P, T, 0)), diverged=np.zeros(P, dtype=bool))
    ro.q[4, 17, 2] = np.nan
    for w in (LossWeights(), LossWeights(w_x=0.5, q_scale=tuple(np.linspace(0.5, 2.0, N)))):
        loss, div = run_loss(ro, run, w)
        with np.errstate(invalid="ignore"):
            ref = (w.w_q * np.mean(((ro.q - run.q[None]) * np.asarray(w.q_scale or 1.0)) ** 2, axis=(1, 2))
                   + w.w_dq * np.mean((ro.dq - run.dq[None]) ** 2, axis=(1, 2))
                   + w.w_x * np.mean((ro.ee_pos - run.ee_pos[None]) ** 2, axis=(1, 2)))
        assert div.tolist() == [False] * 4 + [True, False]
        np.testing.assert_array_equal(loss[~div], ref[~div])
