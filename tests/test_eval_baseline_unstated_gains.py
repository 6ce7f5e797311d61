"""The report's baseline for runs that state no servo gains (docs/servo_arms.md section 5): "no baseline: the runs
state no gains" in every table, instead of a nominal servo at kp = its lower bound that lets the arm fall and reads
"diverged". Also measured: why not the nominal joint terms with the fitted gains (they diverge too). A run that
states its gains keeps its nominal baseline."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from isaaclab_sysid.evaluate.heldout import NO_BASELINE, evaluate_params
from isaaclab_sysid.evaluate.html_report import run_figures
from isaaclab_sysid.evaluate.report import eval_sections, render_markdown
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.twin.servo import SO101_TRUTH, record_servo_twin
from isaaclab_sysid.twin.targets import skeleton_run

BOUNDS = {"kp": (1.0, 60.0), "kd": (0.0, 2.0), "armature": (0.0, 0.05), "delay": (0, 12)}


@pytest.fixture(scope="module")
def case():
    """A 1.5 s SO-101 servo twin run (30 fps, gains unstated), its twin with the true gains stated, a fit result at
    the truth's kp / kd / armature / delay, and a MuJoCo backend with the torque limit and gravity."""
    robot = load_robot("so101")
    n = robot.n_dof
    rng = np.random.default_rng(3)
    centre = 0.5 * (robot.q_lower + robot.q_upper)
    targets = centre + np.cumsum(rng.normal(0.0, 0.01, (45, n)), axis=0)
    t = np.arange(len(targets)) / 30.0
    target = skeleton_run(robot, "joint_pd", t, targets, np.full(n, np.nan), np.full(n, np.nan), q_init=targets[0],
                          control_rate_hz=30.0, name="ep")
    truth = dataclasses.replace(SO101_TRUTH, encoder_offset=np.zeros(n), friction=np.zeros(n),
                                static_friction=np.zeros(n), viscous=np.zeros(n), state_age_max_ms=0)
    unstated = record_servo_twin(robot, target, truth, seed=0, warmup_ticks=0)
    assert np.isnan(unstated.meta.kp).all()
    stated = dataclasses.replace(unstated, name="ep_stated",
                                 meta=dataclasses.replace(unstated.meta, kp=truth.kp.copy(), kd=truth.kd.copy()))
    space = ParamSpace.from_bounds(BOUNDS, n, robot.joint_names)
    values = {"kp": truth.kp.copy(), "kd": truth.kd.copy(), "armature": truth.armature.copy(), "delay": np.int64(truth.delay)}
    result = FitResult(space=space, best_x=space.normalize(values), values=values, best_score=0.0, run_names=["ep"],
                       weighted_loss=np.zeros(1), traj_weights=np.ones(1))
    be = MujocoBackend(robot, ReplayOptions(warmup_ticks=0, torque_clamp=True, gravity=True), n_threads=1)
    yield robot, unstated, stated, result, be, truth
    be.close()


def test_unstated_gains_have_no_baseline_said_everywhere(case):
    robot, unstated, stated, result, be, truth = case
    ev = evaluate_params(be, result, [stated, unstated])
    assert ev.no_baseline == [False, True]
    assert ev.has_baseline(0) and not ev.has_baseline(1)
    assert ev.baseline_q(1) is None
    np.testing.assert_array_equal(ev.baseline_q(0), ev.rollouts[0].q[0])
    # the unstated run's nominal replay (a servo at kp = 1 N m/rad: 0 clipped to the bound) is what used to be shown
    # and that falls (or diverges): 300 mrad RMS here, against the fitted replay's few mrad
    assert ev.nominal["kp"] == [1.0] * robot.n_dof
    assert ev.baseline[1].diverged or ev.baseline[1].q_rms_all_mrad > 100 > 10 * ev.fitted[1].q_rms_all_mrad, ev.baseline[1]
    # the stated run's nominal replay diverges too on this arm (armature 0: see the next test); it is a baseline, shown
    assert ev.baseline[0].diverged and not ev.fitted[0].diverged and not ev.fitted[1].diverged
    # the JSON: null for the run without one, the reason at the top
    d = ev.to_dict()
    assert d["runs"]["ep"]["baseline"] is None and d["runs"]["ep_stated"]["baseline"]["loss"] == ev.baseline[0].loss
    assert d["no_baseline"] == NO_BASELINE
    # the console table: the unstated run has the fitted column and the reason, no nominal numbers
    table = ev.table(robot.joint_names).split("run ep\n")[1]
    assert f"({NO_BASELINE})" in table and "baseline" not in table.replace(NO_BASELINE, "") and "DIVERGED" not in table
    assert f"{ev.fitted[1].q_rms_all_mrad:12.3f}" in table
    # the Markdown and the HTML
    md = render_markdown("r", eval_sections("Held-out runs: nominal vs fitted", ev, robot.joint_names))
    assert f"| ep | {NO_BASELINE} | " in md and "(ep)" in md
    assert f"| ep_stated | {ev.baseline[0].loss:.4g} (diverged) | " in md and md.count("diverged") == 1
    fig = run_figures(unstated, ev.baseline_q(1), ev.rollouts[1].q[1], robot.joint_names)[0]
    assert {tr.name for tr in fig.data} == {"real", "fitted", "fitted sim - real"}
    assert any(NO_BASELINE in a.text for a in fig.layout.annotations)
    both = run_figures(stated, ev.baseline_q(0), ev.rollouts[0].q[1], robot.joint_names)[0]
    assert "nominal" in {tr.name for tr in both.data}
    # split() keeps the flags with their runs
    fit_part, held_part = ev.split(1)
    assert fit_part.no_baseline == [False] and held_part.no_baseline == [True]


def test_fitted_gains_with_nominal_joint_terms_is_no_baseline_either(case):
    """The alternative the module rejects: the nominal joint terms (armature 0, no friction, delay 0) replayed with
    the *true* gains diverge on the SO-101 at 1 ms ticks; with the true armature they do not."""
    robot, unstated, _, _, be, truth = case
    n = robot.n_dof
    gains = dict(kp=truth.kp[None], kd=truth.kd[None], delay=np.array([0]))
    bare = be.rollout(CandidateBatch(armature=np.zeros((1, n)), **gains), [unstated])[0]
    with_rotor = be.rollout(CandidateBatch(armature=truth.armature[None], **gains), [unstated])[0]
    assert bare.diverged[0] and not with_rotor.diverged[0]


def test_stated_gains_keep_the_nominal_baseline(case):
    robot, _, stated, result, be, _ = case
    ev = evaluate_params(be, result, [stated])
    assert ev.no_baseline == [False] and "no_baseline" not in ev.to_dict()
    assert NO_BASELINE not in ev.table(robot.joint_names)
    md = render_markdown("r", eval_sections("t", ev, robot.joint_names))
    assert NO_BASELINE not in md and f"| ep_stated | {ev.baseline[0].loss:.4g} (diverged) | " in md
