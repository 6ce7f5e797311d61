"""The load law's second start (fit/law_starts.py): half of each Coulomb level moved into both load coefficients at
the level whose replay fits best, and the law step's refit from both starts keeping the better (jobs/auto_model.py),
both losses said in the log and in friction_law_auto.json's score, the other refit written for the interval stage."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from isaaclab_sysid.fit.law_starts import LOAD_GROUPS, LOAD_SPLIT_KEEP, load_split_candidates, load_split_start
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

GROUPS = ("armature", "friction", "load_friction_motor", "load_friction_external", "viscous", "delay")


def _space(n: int = 7, names=None) -> ParamSpace:
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, n, names)


def test_split_candidates_halve_the_level_and_set_both_coefficients_alike():
    space = _space(3, ["a", "b", "c"])
    fc = np.array([0.2, 0.7, 1.3])
    x = space.normalize({"armature": np.full(3, 0.1), "friction": fc, "viscous": np.full(3, 0.3),
                         "load_friction_motor": np.zeros(3), "load_friction_external": np.zeros(3), "delay": 2})
    X = load_split_candidates(space, x, (0.4, 0.1))
    assert X.shape == (2, x.size)
    lo, hi = DEFAULT_BOUNDS["load_friction_motor"]
    for row, c in zip(X, (0.4, 0.1)):
        dec = space.decode(row)
        np.testing.assert_allclose(dec["friction"], LOAD_SPLIT_KEEP * fc, rtol=1e-9)
        for g in LOAD_GROUPS:
            np.testing.assert_allclose(dec[g], lo + c * (hi - lo), rtol=1e-9)
        np.testing.assert_allclose(dec["viscous"], 0.3, rtol=1e-9)
        assert dec["delay"] == 2
    coulomb = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous")}, 3)
    with pytest.raises(ValueError, match="load_friction_motor"):
        load_split_candidates(coulomb, np.full(9, 0.5))


@pytest.fixture(scope="module")
def load_objective():
    """A 3 s task-impedance run of the load-law twin (benchmarks/friction_laws.py's truth) and a load-law objective."""
    import friction_laws as fl

    from isaaclab_sysid.objective.replay_objective import ReplayObjective
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
    from isaaclab_sysid.twin.recorder import record_twin

    robot = load_robot("franka_panda")
    run = record_twin(robot, fl.task(robot, "multiband", 3.0, 200, 20, 5), fl.twin("load"), seed=2,
                      log_rate_hz=1000.0)
    space = _space(7, robot.joint_names)
    be = MujocoBackend(robot, ReplayOptions(), n_threads=1)
    yield ReplayObjective(space, be, [run])
    be.close()


def _corner(space: ParamSpace) -> np.ndarray:
    import friction_laws as fl

    fc, _ = fl.TRUTHS["load"]
    return space.normalize({"armature": fl.ARMATURE, "friction": np.asarray(fc) * 2.0, "viscous": fl.VISCOUS,
                            "load_friction_motor": np.zeros(7), "load_friction_external": np.zeros(7),
                            "delay": fl.DELAY})


def test_the_split_start_is_the_level_whose_replay_fits_best(load_objective):
    x = _corner(load_objective.space)
    s = load_split_start(load_objective, x, (0.4, 0.1, 0.025))
    assert s is not None and s.levels == (0.4, 0.1, 0.025) and len(s.losses) == 3
    assert s.loss == min(s.losses) and s.level == s.levels[int(np.argmin(s.losses))]
    assert len(set(s.losses)) == 3  # each level replays differently: the choice is made on the data
    again = load_objective.loss(s.x[None]).total[0]
    assert again == pytest.approx(s.loss, rel=1e-9)
    assert "of their box" in s.describe() and f"{s.level:g}" in s.describe()


def test_the_law_step_keeps_the_better_start_and_says_both(load_objective, tmp_path):
    from isaaclab_sysid.fit.run_folder import RunFolder
    from isaaclab_sysid.jobs.auto_model import _second_start
    from isaaclab_sysid.jobs.law_choice import LawChoice, LawScore
    from isaaclab_sysid.objective.result import FitResult

    space = load_objective.space
    corner = _corner(space)
    problem = SimpleNamespace(objective=lambda: load_objective)

    def result(x, loss, diverged=False):
        return FitResult.from_search(space, x, loss, run_names=["r"], weighted_loss=np.array([loss]),
                                     traj_weights=np.ones(1), best_diverged=diverged)

    def refit_with(loss, diverged=False):
        seen = []

        def refit(args, prob, folder, x0):
            seen.append((Path(folder), np.asarray(x0)))
            return "second search", result(x0, loss, diverged)
        return refit, seen

    first = ("first search", result(corner, 2e-6))
    for i, (second_loss, diverged, kept) in enumerate(((1e-6, False, "second search"), (3e-6, False, "first search"),
                                                       (1e-6, True, "first search"))):
        refit, seen = refit_with(second_loss, diverged)
        sc, lines = LawScore("load", list(GROUPS), 35), []
        folder = RunFolder(tmp_path / str(i))
        srch, res = _second_start(None, problem, folder, corner, first, sc, lines.append, refit)
        assert srch == kept
        assert len(seen) == 1 and seen[0][0] == folder.path / "law_load" / "split_start"
        other = folder.read_other_start("load", joint_names=list(space.joint_names))  # the interval stage's basin
        if diverged:
            assert other is None
        else:
            np.testing.assert_allclose(other.best_x, corner if kept == "second search" else seen[0][1])
            assert other.best_score == (2e-6 if kept == "second search" else second_loss)
        assert not np.allclose(seen[0][1], corner)  # the second refit starts inside the box
        assert sc.starts["coulomb corner"] == 2e-6
        split_key = next(k for k in sc.starts if k.startswith("split start"))
        assert sc.starts[split_key] == (None if diverged else second_loss)
        assert any("split start" in s and "cannot tell the motor-side coefficient" in s for s in lines)
        assert ("kept the split start's" if kept == "second search" else "kept the corner's") in lines[-1]
    sc.loss, sc.bic = 2e-6, -100.0
    line = LawChoice("coulomb", "load", 10, 5.0, scores=[sc]).line()
    assert "refitted from the coulomb corner: 2e-06, the split start" in line and "diverged" in line


def test_the_line_to_the_other_start_is_scored_and_held_where_it_is_within_the_noise(load_objective):
    """intervals/basins.score_lines: the line from the fit through the load law's other start, and the same line one
    joint at a time, scored point by point by the basin statistic (one batched rollout). Toward a point a hair from
    the optimum every step is within the noise and the union holds the whole stretch; toward the Coulomb corner the
    far steps are rejected, and each joint's own line is scanned."""
    import friction_laws as fl

    from isaaclab_sysid.intervals.basins import LINE_STEPS, basin_scale, joint_masks, score_lines, widen_for_line
    from isaaclab_sysid.intervals.common import Interval, IntervalSet
    from isaaclab_sysid.intervals.curvature import sensitivity
    from isaaclab_sysid.sim.friction import LAWS

    space = load_objective.space
    masks = joint_masks(space, LAWS["load"].fit_groups)
    assert [n for n, _ in masks] == list(space.joint_names) and all(m.sum() == 3 for _, m in masks)
    fc, coefs = fl.TRUTHS["load"]
    x = space.normalize({"armature": fl.ARMATURE, "friction": fc, "viscous": fl.VISCOUS, "delay": fl.DELAY, **coefs})
    sens = sensitivity(load_objective, x, 1e-3)
    near = x.copy()
    k = space.slice("load_friction_external").start  # joint 1's external coefficient, nudged by 0.1 % of its box
    near[k] += 1e-3
    scans = score_lines(load_objective, sens, near, "the other start", masks)
    assert len(scans) == 1  # only joint 1's entries move: its own line is the whole line
    scan = scans[0]
    assert scan.steps == list(LINE_STEPS) and len(scan.statistics) == len(scan.points) == len(LINE_STEPS)
    one = scan.steps.index(1.0)
    label = space.labels()[k]
    assert scan.points[one][label] == pytest.approx(space.decoded_vector(near)[k])
    loss = load_objective.loss(near[None]).total[0]
    assert scan.statistics[one] == pytest.approx((loss - sens.ssr) / basin_scale(sens), rel=1e-9)
    assert scan.accepted() == list(range(len(LINE_STEPS))) and not scan.better()
    v = space.decoded_vector(x)[k]
    sets = {m: IntervalSet(m, 0.95, [Interval(label, "load_friction_external", label[label.index("[") + 1:-1],
                                              v, v - 1e-5, v + 1e-5)]) for m in ("curvature", "bootstrap")}
    warns = widen_for_line(sets, scan)
    iv = sets["curvature"].intervals[0]
    ends = [p[label] for p in scan.points]
    assert (iv.lower, iv.upper) == (pytest.approx(min(ends)), pytest.approx(max(ends)))
    assert iv.reliable and "union with the line to the other start" in iv.note
    assert warns and warns[0].startswith("intervals: on the line from the fit (t 0) to the other start (t 1)")
    assert label in warns[0] and "fits better" not in warns[0]
    fars = score_lines(load_objective, sens, _corner(space), "the corner", masks)
    assert [f.origin for f in fars[1:]] == [f"the corner, {n}'s entries alone" for n in space.joint_names]
    far = fars[0]
    assert far.statistics[far.steps.index(1.0)] > 10 * far.threshold and 1.0 not in [far.steps[i] for i in far.accepted()]
    assert far.to_json()["accepted_steps"] == [far.steps[i] for i in far.accepted()]


def test_a_better_point_on_the_line_marks_the_intervals_it_moves_unreliable():
    from isaaclab_sysid.intervals.basins import LineScan, widen_for_line
    from isaaclab_sysid.intervals.common import Interval, IntervalSet

    def sets():
        return {m: IntervalSet(m, 0.95, [Interval("friction[j4]", "friction", "j4", 0.95, 0.92, 0.98),
                                         Interval("armature[j4]", "armature", "j4", 0.15, 0.10, 0.20)])
                for m in ("curvature", "bootstrap")}

    pts = [{"friction[j4]": f, "armature[j4]": 0.151} for f in (0.38, 0.76, 1.33)]
    s = sets()
    warns = widen_for_line(s, LineScan("the other start", [-1.5, -0.5, 1.0], [3.2, -9.0, 6.0], 3.84, pts))
    fr, ar = s["curvature"].by_label()["friction[j4]"], s["curvature"].by_label()["armature[j4]"]
    assert (fr.lower, fr.upper) == (0.38, 0.98) and not fr.reliable  # 1.33 lies beyond the noise: not held
    assert ar.reliable and (ar.lower, ar.upper) == (0.10, 0.20)  # a number the line does not move keeps its flag
    assert len(warns) == 1 and "fits better (statistic -9.0)" in warns[0] and "friction[j4]" in warns[0]
    assert "t -1.5, -0.5" in warns[0]
    s = sets()
    assert widen_for_line(s, LineScan("x", [1.0], [6.0], 3.84, pts[2:])) == []  # nothing within the noise
    assert s["curvature"].by_label()["friction[j4]"].upper == 0.98


def test_two_refits_on_one_slope_mark_the_numbers_they_disagree_on_unreliable():
    """LineScan.no_ridge: the other refit's end lies beyond the noise and nothing between scores above it (both
    refits stopped on one slope): every interval that does not hold that end is marked unreliable. With a ridge
    between (two basins, the data choose) nothing is marked; a line restricted to one joint never marks."""
    from isaaclab_sysid.intervals.basins import LineScan, widen_for_line
    from isaaclab_sysid.intervals.common import Interval, IntervalSet

    def sets():
        return {m: IntervalSet(m, 0.95, [Interval("friction[j4]", "friction", "j4", 0.92, 0.90, 0.94),
                                         Interval("armature[j4]", "armature", "j4", 0.15, 0.10, 0.20)])
                for m in ("curvature", "bootstrap")}

    pts = [{"friction[j4]": f, "armature[j4]": 0.151} for f in (0.80, 1.0, 1.1, 1.38)]
    slope = LineScan("the other start", [-0.5, 0.25, 0.5, 1.0], [-1.0, 2.5, 9.0, 22.0], 3.84, pts)
    assert slope.no_ridge() and slope.to_json()["no_ridge"]
    at_min = LineScan("the other start", slope.steps, [2.0, 2.5, 9.0, 22.0], 3.84, pts)
    assert not at_min.no_ridge()  # the fit is the line's minimum: nothing says the refit stopped on a slope
    s = sets()
    warns = widen_for_line(s, slope)
    fr, ar = s["curvature"].by_label()["friction[j4]"], s["curvature"].by_label()["armature[j4]"]
    assert not fr.reliable and "stopped at 1.38 on the same slope" in fr.note and (fr.lower, fr.upper) == (0.80, 1.0)
    assert ar.reliable  # the other end (0.151) lies inside its interval
    assert any("same slope" in w and "friction[j4]" in w and "armature" not in w for w in warns)
    ridge = LineScan("the other start", [-0.5, 0.25, 0.5, 1.0], [-1.0, 2.5, 30.0, 22.0], 3.84, pts)
    assert not ridge.no_ridge()
    s = sets()
    widen_for_line(s, ridge)
    assert s["curvature"].by_label()["friction[j4]"].reliable
    one_joint = LineScan("the other start, j4's entries alone", slope.steps, slope.statistics, 3.84, pts, whole=False)
    assert not one_joint.no_ridge()


def test_a_better_point_is_said_even_where_it_moves_no_interval_far():
    """A point better beyond the noise that moves no interval by half its half-width: the warning still says the fit
    stopped short; an interval moved only by a point within the noise is not marked."""
    from isaaclab_sysid.intervals.basins import LineScan, widen_for_line
    from isaaclab_sysid.intervals.common import Interval, IntervalSet

    s = {m: IntervalSet(m, 0.95, [Interval("friction[j4]", "friction", "j4", 0.92, 0.90, 0.94),
                                  Interval("viscous[j4]", "viscous", "j4", 0.70, 0.69, 0.71)])
         for m in ("curvature", "bootstrap")}
    pts = [{"friction[j4]": 0.921, "viscous[j4]": 0.80}, {"friction[j4]": 0.925, "viscous[j4]": 0.701}]
    warns = widen_for_line(s, LineScan("the other start", [-0.5, 1.0], [1.0, -5.0], 3.84, pts))
    fr, vi = s["curvature"].by_label()["friction[j4]"], s["curvature"].by_label()["viscous[j4]"]
    assert fr.reliable and (fr.lower, fr.upper) == (0.90, 0.94)  # the better point moves it by a quarter
    assert vi.reliable and vi.upper == 0.80  # moved far, but by the point within the noise only
    assert len(warns) == 1 and "fits better (statistic -5.0)" in warns[0] and "viscous[j4]" in warns[0]
    s = {m: IntervalSet(m, 0.95, [Interval("friction[j4]", "friction", "j4", 0.92, 0.90, 0.94)])
         for m in ("curvature", "bootstrap")}
    warns = widen_for_line(s, LineScan("the other start", [1.0], [-5.0], 3.84, pts[1:]))
    assert len(warns) == 1 and "fits better" in warns[0] and "these move" not in warns[0]
