"""Issue 46, the law chosen on evidence: a law the BIC prefers is kept only where cross-validated prediction of the fit
runs confirms it (jobs/law_choice.leave_one_block_out, confirm: each run's halves left out in turn).

Two task-impedance twins (two 3 s fit runs at 1 kHz: the task targets move the arm only after about 2 s; noise on q,
dq and the torque): one whose friction is Coulomb, one whose friction is BAM's load-dependent law. On each, the Coulomb model and the load law are fitted by a few
Levenberg-Marquardt iterations from the same Coulomb start. On the load twin the BIC prefers the load law and the
cross-validation confirms it. On the Coulomb twin the BIC (n_eff by Geyer's initial positive sequence) keeps Coulomb;
the cross-validation alone would still confirm the load law there (the strict xfail)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")

from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings  # noqa: E402
from isaaclab_sysid.jobs import law_choice as lc  # noqa: E402
from isaaclab_sysid.jobs.fit_args import ParamsConfig  # noqa: E402
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace  # noqa: E402
from isaaclab_sysid.objective.replay_objective import ReplayObjective  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.sim.interface import ReplayOptions  # noqa: E402
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend  # noqa: E402
from isaaclab_sysid.twin.params import TwinNoise, TwinParams  # noqa: E402
from isaaclab_sysid.twin.recorder import record_twin  # noqa: E402
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets  # noqa: E402

ARMATURE = np.array([0.18, 0.22, 0.12, 0.15, 0.04, 0.06, 0.03])
VISCOUS = np.array([0.6, 0.9, 0.5, 0.7, 0.2, 0.25, 0.15])
COULOMB = np.array([0.35, 1.2, 0.6, 0.9, 0.3, 0.35, 0.2])
LOAD = {"load_friction_motor": np.array([0.03, 0.02, 0.04, 0.03, 0.05, 0.04, 0.05]),
        "load_friction_external": np.array([0.02, 0.03, 0.02, 0.04, 0.03, 0.02, 0.03])}
NOISE = TwinNoise(q_std=2e-4, dq_std=2e-3, actuator_tau_std=0.02)
SECONDS = 3.0
ITERS = 4


def _task(robot, kind: str, seed: int):
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets(kind, SECONDS, 50.0, seed=seed, scale=1.5)
    x, qu = task_targets(pos, quat, off)
    kp = np.array([200.0] * 3 + [20.0] * 3)
    return skeleton_run(robot, "task_impedance", t, np.hstack([x, qu]), kp, 2 * np.sqrt(kp), name=f"{kind}_{seed}")


def _fit(obj: ReplayObjective, x0: np.ndarray) -> np.ndarray:
    refiner = LMRefiner(obj, RefineSettings(max_iter=ITERS))
    state = refiner.start(np.asarray(x0, dtype=float))
    refiner.run(state)
    return np.asarray(state.best().x, dtype=float)


@functools.lru_cache(maxsize=None)
def _weigh(truth: str) -> tuple[lc.Confirmation, float, float]:
    """(the load law against Coulomb on cross-validated prediction, the BIC of each) on the twin of ``truth``."""
    robot = load_robot("franka_panda")
    fc, law = (COULOMB, None) if truth == "coulomb" else (0.6 * COULOMB, LOAD)
    tp = TwinParams(robot="franka_panda", armature=ARMATURE, friction=fc, viscous=VISCOUS, delay=0,
                    friction_model=truth, law_params=law, torque_clamp=False, slew_limit=False, noise=NOISE)
    runs = [record_twin(robot, _task(robot, k, s), tp, seed=i + 1, log_rate_hz=1000.0)
            for i, (k, s) in enumerate((("chirp", 1), ("multiband", 5)))]
    backend = MujocoBackend(robot, ReplayOptions(), n_threads=1)
    try:
        base_space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous")},
                                            robot.n_dof, robot.joint_names)
        start = base_space.normalize({"armature": ARMATURE, "friction": fc, "viscous": VISCOUS})
        base_obj = ReplayObjective(base_space, backend, runs)
        xb = _fit(base_obj, start)
        stats = lc.channel_stats(base_obj, xb)
        law_space = lc.law_space(base_space, "load", ParamsConfig())
        law_obj = ReplayObjective(law_space, backend, runs)
        xl = _fit(law_obj, lc.law_start(base_space, xb, law_space, "load"))
        bic_b = lc.bic_of(lc.channel_ssr(base_obj, xb), stats, lc.continuous_count(base_space))
        bic_l = lc.bic_of(lc.channel_ssr(law_obj, xl), stats, lc.continuous_count(law_space))
        base_loro = lc.leave_one_block_out(base_obj, xb)
        law_loro = lc.leave_one_block_out(law_obj, xl, block_stats=base_loro.stats)
        assert base_loro is not None and law_loro is not None and len(base_loro.score) == 2 * len(runs)
    finally:
        backend.close()
    c = lc.confirm("load", law_loro, base_loro)
    print(f"{truth} twin: BIC coulomb {bic_b:.1f} load {bic_l:.1f}; LORO coulomb {base_loro.score} load "
          f"{law_loro.score}; delta {c.delta}: {'confirmed' if c.confirmed else 'not confirmed'}")
    return c, bic_b, bic_l


def test_cross_validation_confirms_the_load_law_on_its_own_twin():
    c, bic_b, bic_l = _weigh("load")
    assert bic_l < bic_b
    assert c.confirmed and sum(c.delta) < 0, c


def test_the_bic_keeps_coulomb_on_a_coulomb_twin():
    """Issue 46, fourth pass: with n_eff by Geyer's initial positive sequence (lc.N_EFF_METHOD) the BIC prefers
    Coulomb on the Coulomb twin (load minus Coulomb +75), so ``auto`` never asks the cross-validation there; with the
    2/sqrt(T) cutoff it preferred the load law (-217) and the check confirmed it (a false positive)."""
    assert lc.N_EFF_METHOD == "geyer"
    _, bic_b, bic_l = _weigh("coulomb")
    assert bic_l > bic_b, (bic_b, bic_l)


@pytest.mark.xfail(strict=True, reason="issue 46, open: the twin's torque noise (0.02 N m per tick) leaves a slow "
                   "residual the noise-free replay cannot follow; the load law fits part of its realization, and the "
                   "halves of one run share its slow part, so cross-validation between them confirms the load law here "
                   "(docs/benchmarks.md, 'Issue 46, third pass'; Geyer's n_eff moves the sum from -1361 to -726, not "
                   "across zero: the BIC, not this check, now keeps Coulomb). Strict: a fix makes this pass and flags it")
def test_cross_validation_rejects_the_load_law_on_a_coulomb_twin():
    c, _, _ = _weigh("coulomb")
    assert not c.confirmed, c


def test_confirm_needs_the_sum_and_most_runs():
    base = lc.Loro(["a", "b"], [{}, {}], [-100.0, -100.0])
    assert lc.confirm("x", lc.Loro(["a", "b"], [{}, {}], [-110.0, -105.0]), base).confirmed
    assert not lc.confirm("x", lc.Loro(["a", "b"], [{}, {}], [-130.0, -95.0]), base).confirmed  # one run worse
    assert not lc.confirm("x", lc.Loro(["a", "b"], [{}, {}], [-101.0, float("inf")]), base).confirmed
    three = lc.Loro(["a", "b", "c"], [{}] * 3, [-100.0] * 3)
    assert lc.confirm("x", lc.Loro(["a", "b", "c"], [{}] * 3, [-110.0, -110.0, -95.0]), three).confirmed


def test_cv_blocks_cut_each_run():
    assert lc.cv_blocks([10, 7], 2) == [(0, 0, 5), (0, 5, 10), (1, 0, 3), (1, 3, 7)]
    assert lc.cv_blocks([10], 1) == [(0, 0, 10)]


def test_run_score_is_the_bic_s_likelihood_term_per_run():
    st = lc.ChannelStats({"q": 100, "dq": 100, "x": 0}, {"q": 10.0, "dq": 20.0, "x": 0.0},
                         {"q": 1.0, "dq": 2.0, "x": 0.0})
    ssr = {"q": 1.0, "dq": 4.0, "x": 0.0}
    assert lc.run_score(ssr, st) == pytest.approx(10 * np.log(0.01) + 20 * np.log(0.04))
    assert lc.run_score(ssr, st) == pytest.approx(lc.bic_of(ssr, st, 0))
    assert lc.run_score({"q": float("inf"), "dq": 1.0, "x": 0.0}, st) == float("inf")
