"""A friction law's other basin in the intervals (intervals/basins.py): the restart on the other side of the law's
shape is scored by the likelihood-ratio statistic, a basin within the noise is held in every interval (and named),
one the data reject changes nothing, and the step runs inside compute_all on a real fit."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.intervals.basins import BasinSearch, other_side, widen_for_basin
from isaaclab_sysid.intervals.common import Interval, IntervalSet

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _sets():
    def one():
        return IntervalSet("curvature", 0.95, [
            Interval("sigmoid_slope[j1]", "sigmoid_slope", "j1", 10.0, 9.0, 11.0),
            Interval("sigmoid_amplitude[j1]", "sigmoid_amplitude", "j1", 0.5, 0.45, 0.55),
            Interval("delay", "delay", None, 2.0, 2.0, 2.0)])
    return {"curvature": one(), "bootstrap": one()}


def _basin(stat, thr=3.84):
    return BasinSearch(["sigmoid_slope"], 2.0, 1.0, stat, thr, stat <= thr, stat < -thr,
                       {"sigmoid_slope[j1]": 40.0, "sigmoid_amplitude[j1]": 0.52, "delay": 2.0})


def test_a_basin_within_the_noise_is_held_in_every_interval_and_named():
    sets = _sets()
    warns = widen_for_basin(sets, _basin(1.0))
    for m in ("curvature", "bootstrap"):
        iv = sets[m].by_label()
        assert iv["sigmoid_slope[j1]"].upper == 40.0 and iv["sigmoid_slope[j1]"].lower == 9.0
        assert (iv["sigmoid_amplitude[j1]"].lower, iv["sigmoid_amplitude[j1]"].upper) == (0.45, 0.55)
    assert len(warns) == 1 and "sigmoid_slope[j1]" in warns[0] and "within the noise" in warns[0]
    assert "other basin" in sets["curvature"].by_label()["sigmoid_slope[j1]"].note


def test_a_rejected_basin_changes_nothing_and_a_better_one_says_refit():
    sets = _sets()
    assert widen_for_basin(sets, _basin(50.0)) == []
    unfinished = _basin(50.0)
    unfinished.converged, unfinished.stop = False, "it ran out of its budget"
    warns = widen_for_basin(sets, unfinished)  # rejected only because the restart stopped early: said, not excluded
    assert len(warns) == 1 and "not excluded" in warns[0] and "ran out of its budget" in warns[0]
    assert sets["curvature"].by_label()["sigmoid_slope[j1]"].upper == 11.0
    warns = widen_for_basin(sets, _basin(-10.0))
    assert warns and "fits better" in warns[0] and "refit" in warns[0]


def test_basin_search_runs_in_compute_all_on_a_sigmoid_fit():
    """A short sigmoid fit of the sigmoid twin (benchmarks/friction_laws.py's CI size): compute_all records the
    search, its restart starts on the other side of every slope, and every interval still holds the fitted value."""
    import friction_laws as fl

    from isaaclab_sysid.fit import LossWeights
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.intervals.combine import compute_all
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.friction import expand_law_aliases
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
    from isaaclab_sysid.twin.recorder import record_twin

    robot = load_robot("franka_panda")
    tp = fl.twin("sigmoid")
    runs = [record_twin(robot, fl.task(robot, "multiband", 1.5, 200, 20, 5), tp, seed=2, log_rate_hz=1000.0)]
    groups = expand_law_aliases(["armature", "sigmoid", "viscous", "delay"])
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in groups}, 7, robot.joint_names)
    be = MujocoBackend(robot, ReplayOptions())
    refiner, state = fl.fit(space, be, runs, 4)
    best = state.best()
    res = FitResult.from_search(space, best.x, best.loss, run_names=[r.name for r in runs], weighted_loss=best.contrib,
                                traj_weights=np.ones(1), loss_weights=LossWeights(), backend="mujoco")
    x_alt = other_side(best.x, refiner.objective, ["sigmoid_slope", "sigmoid_offset"])
    sl = space.slice("sigmoid_slope")
    assert np.all((x_alt[sl] == 0.8) == (np.clip(best.x[sl], 0, 1) < 0.5))
    rep = compute_all(be, res, runs, delay_max=0, omitted_groups=())
    # compute_all releases the sensitivity's Jacobian before the restart (its last reader; issue 45's memory): the
    # search is the same with and without the release, and the released Jacobian is not read again silently
    from isaaclab_sysid.intervals.basins import search_basin
    from isaaclab_sysid.intervals.curvature import sensitivity
    from isaaclab_sysid.objective.replay_objective import ReplayObjective

    obj = ReplayObjective(space, be, runs, LossWeights())
    sens = sensitivity(obj, best.x, profile_delay=False)
    kept = search_basin(obj, sens)
    released = search_basin(obj, sens, release_jacobian=True)
    assert sens.J is None and released == kept
    with pytest.raises(TypeError):
        sens.hessian()
    be.close()
    b = rep.structure["basins"]
    assert b["groups"] == ["sigmoid_slope", "sigmoid_offset"] and b["iterations"] >= 1
    assert np.isfinite(b["statistic"]) and b["accepted"] == (b["statistic"] <= b["threshold"])
    for iv in rep.sets["curvature"].intervals:
        assert iv.contains(iv.value), iv
