"""Converged means converged, in every optimizer stage (issue 24, part 3).

Each stage is forced to fail cheaply (a budget too small, a flat objective, a start it cannot leave)
and must say so in its record, with the flag that gives it more room; a normal small case must still
say converged.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.evaluate.report import fit_sections, render_markdown
from isaaclab_sysid.fit.fast_path import FastPath, FastPathSettings, evidence_line
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings, GenerationRecord
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
from isaaclab_sysid.objective.result import FitResult, StageVerdict
from isaaclab_sysid.sim.interface import RunRollout

GROUPS = ("armature", "friction", "viscous", "delay")


def _space(groups=GROUPS):
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in groups}, 7)


def _runs():
    return [make_run("task_impedance", 50.0, n=40, seed=1), make_run("task_impedance", 50.0, n=30, seed=2)]


class FlatBackend(FakeBackend):
    """A loss that no parameter moves: every candidate replays the log plus the same offset."""

    name = "flat"

    def rollout(self, batch, runs):
        out = []
        for run in runs:
            P = batch.size
            q = np.broadcast_to(run.q[None] + 0.01, (P, *run.q.shape)).copy()
            out.append(RunRollout(q=q, dq=np.broadcast_to(run.dq[None], q.shape).copy(),
                                  ee_pos=np.broadcast_to(run.ee_pos[None], (P, run.q.shape[0], 3)).copy(),
                                  ee_quat=np.broadcast_to(run.ee_quat[None], (P, run.q.shape[0], 4)).copy(),
                                  tau=np.zeros(q.shape), diverged=np.zeros(P, dtype=bool)))
        return out


def _wrong_start(space):
    return space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                            "viscous": TRUE["viscous"] + 0.2, "delay": 0})


# ------------------------------------------------------------------ the replay LM refinement
def test_refine_says_converged_on_a_smooth_problem():
    space = _space()
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), _runs()), RefineSettings(max_iter=10, delay_neighbours=1))
    st = ref.run(ref.start(_wrong_start(space)))
    v = ref.verdict(st)
    assert v.converged, v
    assert v.warning == "" and "converged" in v.line()


def _no_delay_start(space):
    return space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                            "viscous": TRUE["viscous"] + 0.2})


def test_refine_out_of_budget_while_improving_is_not_converged():
    space = _space(GROUPS[:3])  # no delay: one phase, so one iteration is the whole budget
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), _runs()), RefineSettings(max_iter=1))
    st = ref.run(ref.start(_no_delay_start(space)))
    v = ref.verdict(st)
    assert not v.converged
    assert "ran out" in v.reason and "--refine_iter" in v.remedy
    assert "did NOT converge" in v.warning


def test_refine_on_a_flat_loss_ended_at_its_start():
    space = _space()
    ref = LMRefiner(ReplayObjective(space, FlatBackend(), _runs()), RefineSettings(max_iter=10, delay_neighbours=0))
    st = ref.run(ref.start(_wrong_start(space)))
    v = ref.verdict(st)
    assert not v.converged
    assert "ended at its start" in v.reason and "--x0" in v.remedy


def test_refine_that_cannot_improve_on_a_converged_earlier_optimum_is_converged():
    space = _space(GROUPS[:3])
    x = space.normalize({g: TRUE[g] for g in GROUPS[:3]})  # the exact optimum: no step can lower the loss
    ref = LMRefiner(ReplayObjective(space, FakeBackend(), _runs()), RefineSettings(max_iter=10))
    st = ref.run(ref.start(x))
    assert not ref.verdict(st).converged  # on its own, a start it never left proves nothing
    v = ref.verdict(st, converged_starts=[x])  # the fast path's converged optimum, in the CMA-ES fallback
    assert v.converged and "converged earlier stage" in v.reason


# ------------------------------------------------------------------ the fast path
def test_fast_path_out_of_budget_says_so_in_its_evidence():
    space = _space(GROUPS[:3])
    fp = FastPath(ReplayObjective(space, FakeBackend(), _runs()), FastPathSettings(refine_iter=1))
    st = fp.run(fp.start(_no_delay_start(space)))
    assert not st.evidence.converged
    assert "--refine_iter" in st.evidence.convergence
    assert "did NOT converge" in evidence_line(st.evidence)
    assert not fp.verdict(st).converged and fp.verdict(st).stage == "fast"


def test_fast_path_on_a_flat_loss_points_at_cmaes():
    space = _space()
    fp = FastPath(ReplayObjective(space, FlatBackend(), _runs()), FastPathSettings(refine_iter=3, delay_neighbours=0))
    st = fp.run(fp.start(_wrong_start(space)))
    v = fp.verdict(st)
    assert not v.converged and "ended at its start" in v.reason and "--strategy cmaes" in v.remedy
    assert not st.evidence.converged


def test_fast_path_converged_case_says_converged():
    space = _space()
    fp = FastPath(ReplayObjective(space, FakeBackend(), _runs()), FastPathSettings(refine_iter=10, delay_neighbours=1))
    st = fp.run(fp.start(_wrong_start(space)))
    assert st.evidence.converged and st.evidence.convergence == ""
    assert "did NOT converge" not in evidence_line(st.evidence)


# ------------------------------------------------------------------ CMA-ES
def test_cmaes_out_of_generations_while_improving_is_not_converged():
    fit = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()),
                   CmaesSettings(popsize=8, max_iter=8, sigma0=0.3, seed=0))
    fit.run()
    v = fit.verdict()
    assert not v.converged and v.stage == "cmaes"
    assert "still improving" in v.reason and "--max_iter" in v.remedy


def test_cmaes_too_few_generations_is_not_converged():
    fit = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), CmaesSettings(popsize=6, max_iter=1, seed=0))
    assert fit.verdict() is None  # nothing ran: no verdict
    fit.run()
    v = fit.verdict()
    assert not v.converged and "too few" in v.reason and "--max_iter" in v.remedy


def test_cmaes_on_a_flat_loss_never_improved():
    fit = CmaesFit(ReplayObjective(_space(), FlatBackend(), _runs()), CmaesSettings(popsize=6, max_iter=5, seed=0))
    fit.run()
    v = fit.verdict()
    assert not v.converged and "never improved" in v.reason


def test_cmaes_that_stopped_improving_is_converged():
    fit = CmaesFit(ReplayObjective(_space(), FakeBackend(), _runs()), CmaesSettings(popsize=6, max_iter=20, seed=0))
    best = [1.0, 0.5, 0.2, 0.1] + [0.05] * 16  # a stalled best: what a converged search leaves
    fit.state.history = [GenerationRecord(i + 1, 6 * (i + 1), b, b, b, 0.1, 0, 6, [b], 0.0) for i, b in enumerate(best)]
    fit.state.iteration = 20
    v = fit.verdict()
    assert v.converged and v.warning == "", v


# ------------------------------------------------------------------ the search, the result file and the report
def _fake_search(tmp_path, strategy: str, generations: int):
    """A Search on the fake backend (three groups, no delay), one refinement iteration; and its log lines."""
    from isaaclab_sysid.objective.loss import LossWeights
    from isaaclab_sysid.fit.problem import FitProblem
    from isaaclab_sysid.fit.search import Search, SearchSettings
    from isaaclab_sysid.robots import load_robot

    space = _space(GROUPS[:3])
    problem = FitProblem(_runs(), [], load_robot("franka_panda"), space, FakeBackend(), LossWeights(), np.ones(2))
    x0 = _no_delay_start(space)
    settings = SearchSettings(CmaesSettings(popsize=6, max_iter=generations, seed=0, x0=tuple(x0)), refine_iter=1,
                              quiet=True, strategy=strategy)
    lines: list[str] = []
    return Search(problem, settings, tmp_path, log=lines.append), x0, lines


def test_search_records_prints_and_reports_an_unconverged_stage(tmp_path):
    search, x0, lines = _fake_search(tmp_path, "cmaes", 2)
    res = search.run(x0_extra=x0)
    assert [v.stage for v in res.convergence] == ["cmaes", "refine"]
    assert not any(v.converged for v in res.convergence)
    assert any(line.startswith("warning:") and "--refine_iter" in line for line in lines), lines
    assert any(line.startswith("warning:") and "--max_iter" in line for line in lines), lines
    js = json.loads(json.dumps(res.to_json()))
    assert [c["converged"] for c in js["convergence"]] == [False, False]
    back = FitResult.from_json(js)
    assert back.convergence == res.convergence
    md = render_markdown("t", fit_sections(back))
    assert "## Convergence" in md and "**Not converged**" in md and "--refine_iter" in md
    from isaaclab_sysid.evaluate.html_report import _section_html

    conv = [sec for sec in fit_sections(back) if sec.title == "Convergence"]
    assert conv and conv[0].kind == "verdict"
    html = _section_html(conv[0])
    assert "verdict" in html and "Not converged" in html and "--refine_iter" in html


def test_fast_strategy_search_records_the_fast_paths_verdict(tmp_path):
    search, x0, lines = _fake_search(tmp_path, "fast", 4)
    res = search.run(x0_extra=x0)
    assert res.convergence[0].stage == "fast" and not res.convergence[0].converged
    assert [v.stage for v in res.convergence] == (["fast", "cmaes", "refine"] if search.fell_back else ["fast"])
    assert any("--refine_iter" in line for line in lines), lines


def test_older_result_files_without_verdicts_still_read():
    space = _space()
    res = FitResult.from_search(space, np.full(space.dim, 0.5), 1.0, run_names=["a"], weighted_loss=np.ones(1),
                                traj_weights=np.ones(1))
    js = res.to_json()
    js.pop("convergence")
    back = FitResult.from_json(js)
    assert back.convergence == []
    assert "Convergence" not in render_markdown("t", fit_sections(back))


def test_report_says_converged_when_every_stage_did():
    space = _space()
    res = FitResult.from_search(space, np.full(space.dim, 0.5), 1.0, run_names=["a"], weighted_loss=np.ones(1),
                                traj_weights=np.ones(1), convergence=[StageVerdict("refine", True, "rtol")])
    md = render_markdown("t", fit_sections(res))
    assert "## Convergence" in md and "converged (rtol)" in md and "NOT" not in md


# ------------------------------------------------------------------ drive gains (output-error Levenberg-Marquardt)
@pytest.fixture(scope="module")
def gain_runs():
    from rigid_body_twin import fourier_trajectory, twin

    from isaaclab_sysid.robots import LinkInertial
    from isaaclab_sysid.rigid_body.drive_gains import predict_current
    from isaaclab_sysid.rigid_body.preprocess import Processed

    reg, base, true, _ = twin()
    gains = np.array([10.4, 11.7, 9.2, 10.9, 9.6, 10.3])
    pl = LinkInertial(2.8, np.array([0.02, 0.16, -0.06]), np.diag([4e-3, 6e-3, 5e-3])).to_pi()
    rng = np.random.default_rng(0)
    unloaded, loaded = [], []
    for k, p in enumerate([None, pl]):
        t, q, qd, qdd = fourier_trajectory(reg.n_dof, T=400, dt=0.02, seed=100 + k, f0=0.05)
        cur = predict_current(reg, true, gains, Processed(t, q, qd, qdd), p)
        cur = cur + rng.normal(0.0, 0.05, cur.shape)
        (loaded if p is not None else unloaded).append(Processed(t, q, qd, qdd, {"current": cur}))
    return reg, base, unloaded, loaded


def test_drive_gains_out_of_evaluations_is_not_converged(gain_runs):
    from isaaclab_sysid.rigid_body.drive_gains import Payload, identify_drive_gains

    reg, base, unloaded, loaded = gain_runs
    ok = identify_drive_gains(reg, base, unloaded, loaded, Payload(2.8), hac_lags=1)
    assert ok.converged, ok.message
    cut = identify_drive_gains(reg, base, unloaded, loaded, Payload(2.8), hac_lags=1, max_nfev=1)
    assert not cut.converged
    assert "ran out of its" in cut.message and "residual evaluations" in cut.message and "--gain-method equation_error" in cut.message
    assert cut.summary()["converged"] is False


def test_drive_gains_lm_that_never_left_its_start_is_not_converged():
    import scipy.optimize

    from isaaclab_sysid.rigid_body.drive_gains import lm_verdict

    z0 = np.array([1.0, 2.0])
    stuck = scipy.optimize.OptimizeResult(x=z0.copy(), status=2, nfev=3, message="`ftol` termination condition is satisfied.")
    assert lm_verdict(stuck, z0)[0] is False and "ended at its start" in lm_verdict(stuck, z0)[1]
    at_optimum = scipy.optimize.OptimizeResult(x=z0.copy(), status=1, nfev=1, message="`gtol` termination condition is satisfied.")
    assert lm_verdict(at_optimum, z0)[0] is True  # the gradient test passed at the start: already the optimum


# ------------------------------------------------------------------ RLS friction tracker
def _one_way_and_both_ways(n: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 0.01
    qd = np.column_stack([0.5 * np.sin(2 * np.pi * 0.5 * t), 0.3 + 0.2 * np.sin(2 * np.pi * 0.5 * t)])
    y = 1.0 * np.sign(qd) + 0.4 * qd + 0.1 + rng.normal(0, 0.02, qd.shape)
    return t, qd, y


def test_rls_joint_that_turns_one_way_is_not_converged():
    from isaaclab_sysid.online import FrictionSamples, RLSOptions, TrackOptions, track

    t, qd, y = _one_way_and_both_ways()
    res = track([FrictionSamples("r", t, qd, y)], ("both_ways", "one_way"), RLSOptions(forgetting=0.98),
                TrackOptions(chunk_s=0.5))
    assert res.converged == [True, False]
    assert len(res.warnings) == 1 and res.warnings[0].startswith("one_way: friction estimate not converged")
    assert "coulomb" in res.warnings[0] and "offset" in res.warnings[0] and "--deadband" in res.warnings[0]
    assert res.to_json()["converged"] == [True, False]


def test_rls_joint_at_rest_and_windup_are_not_converged():
    from isaaclab_sysid.online import FrictionRLS, RLSOptions

    f = FrictionRLS(1, RLSOptions(forgetting=0.9, guard="none", deadband=0.05))
    for k in range(50):  # at rest: every sample inside the deadband
        f.update(0.1 * (k + 1), np.zeros((5, 1)), np.zeros((5, 1)))
    ok, warns = f.verdict(("j1",))
    assert not ok[0] and "wound up" in warns[0] and "--guard" in warns[0]


# ------------------------------------------------------------------ contact (direct least squares)
def test_contact_press_without_penetration_change_is_refused_not_fitted():
    from isaaclab_sysid.contact import ContactInputError, identify_contact
    from isaaclab_sysid.contact.io import ContactRun, ContactTest

    run = make_run(n=200, seed=0)
    run.q[:] = run.q[0]  # the arm held still: the penetration never changes
    force = np.zeros((200, 3))
    force[:, 2] = np.linspace(3.0, 30.0, 200)
    cr = ContactRun(run, ContactTest("press", np.array([0.0, 0.0, 1.0])), force)
    with pytest.raises(ContactInputError, match="the line is not determined") as e:
        identify_contact(load_robot_cached(), [cr])
    assert "\n" not in str(e.value) and "press deeper" in str(e.value)


def load_robot_cached():
    from isaaclab_sysid.robots import load_robot

    return load_robot("franka_panda")


# ------------------------------------------------------------------ payload (direct least squares)
def test_payload_that_cannot_be_separated_is_refused_not_fitted():
    from isaaclab_sysid.payload import PayloadInputError, PayloadOptions, identify_payload
    from isaaclab_sysid.payload.identify import LinkInertial
    from isaaclab_sysid.payload.twin import PayloadTwin, hold_trajectory, record_payload_runs

    robot = load_robot_cached()
    pose = np.asarray(robot.q_home if hasattr(robot, "q_home") else np.zeros(robot.n_dof), dtype=float)[None]
    tw = PayloadTwin(LinkInertial(0.8, np.array([0.01, -0.02, 0.15]), np.diag([2e-3, 2e-3, 1e-3])), rate_hz=100.0)
    loaded, ref = record_payload_runs(robot, hold_trajectory(pose, 1.0, 1.0, 100.0), tw, 0)
    with pytest.raises(PayloadInputError, match="cannot separate the payload"):
        identify_payload(robot, [loaded], [ref], PayloadOptions(mc_samples=1000))
