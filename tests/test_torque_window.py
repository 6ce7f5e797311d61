"""The torque replay's default shooting window, chosen from the data (issue 28, item 3; objective/shooting_floor.py).

``--window_s`` unset: the longest candidate window at which the start model's residual is within 2x the drift
floor of the measured start states. A right start model stays near the floor at every length (the longest is
chosen); a poor one exceeds it everywhere (the shortest is chosen, and the log says why).
"""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.jobs.fit_args import resolve_problem
from isaaclab_sysid.objective.shooting_floor import WINDOW_CANDIDATES_S, choose_window
from isaaclab_sysid.importers.torque_runs import TorqueSource, torque_run
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.twin.demo import joint_target
from isaaclab_sysid.twin.torque_twin import DELAY, TRUTH, torque_logged, write_twin


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


def test_the_window_follows_the_start_model(robot):
    run = torque_run(torque_logged(robot, joint_target(robot, 4.0, seed=11, name="fit"), 1, 0.02),
                     TorqueSource("tau", includes_gravity=False))

    def backend_for(ticks):
        return MujocoBackend(robot, ReplayOptions(window_ticks=ticks), n_threads=2)

    def start(scale):
        return CandidateBatch(armature=scale * TRUTH.armature[None], friction=scale * TRUTH.friction[None],
                              viscous=scale * TRUTH.viscous[None], delay=np.array([DELAY]))

    right = choose_window(backend_for, start(1.0), [run])
    print("\n" + "\n".join(right.lines()))
    assert [o.window_s for o in right.options] == list(WINDOW_CANDIDATES_S)
    assert right.window_s == max(WINDOW_CANDIDATES_S) and all(o.ratio < 2.0 for o in right.options)
    poor = choose_window(backend_for, start(0.5), [run])  # half the true friction and armature
    print("\n".join(poor.lines()))
    assert poor.window_s == min(WINDOW_CANDIDATES_S) and "shortest candidate" in poor.reason
    ratios = [o.ratio for o in poor.options]
    assert ratios[0] > 2.0 and ratios[-1] > ratios[0]  # the model error outgrows the floor with the window
    # a start model that is right up to a moderate error: the longest window still within 2x
    mid = choose_window(backend_for, start(0.9), [run])
    print("\n".join(mid.lines()))
    chosen = next(o for o in mid.options if o.window_s == mid.window_s)
    assert chosen.ratio <= 2.0 and all(o.ratio > 2.0 for o in mid.options if o.window_s > mid.window_s)
    with pytest.raises(ValueError, match="shorter than every candidate"):
        choose_window(backend_for, start(1.0), [run], candidates_s=(5.0,))


def test_an_unset_window_is_chosen_logged_and_kept(robot, tmp_path):
    fit_csv, held_csv = write_twin(robot, tmp_path, 0.02, fit_s=3.0)
    base = dict(real_csv=[str(fit_csv)], heldout_csv=[str(held_csv)], replay="torque", torque_signal="tau",
                torque_includes_gravity=False, log_dir=str(tmp_path / "out"), quiet=True, plots=False)
    lines: list[str] = []
    args = FitArgs.build(**base)
    assert args.replay.window_s is None
    problem = resolve_problem(args, log=lines.append)
    assert args.replay.window_s in WINDOW_CANDIDATES_S  # resolved in args: config.json, --resume and the export keep it
    assert problem.backend.options.window_ticks == int(round(args.replay.window_s * 1000))
    assert any(line.startswith(f"shooting window chosen from the data: {args.replay.window_s:g} s") for line in lines)
    given = FitArgs.build(**base, window_s=0.4)
    lines.clear()
    resolve_problem(given, log=lines.append)
    assert given.replay.window_s == 0.4 and not any("chosen from the data" in line for line in lines)


def test_eval_params_takes_the_evaluated_fits_window(robot, tmp_path):
    """--eval_params with --window_s unset scores on the evaluated fit's own window (its config.json), and without
    one chooses at the evaluated parameters, not at --x0 (issue 28)."""
    import json

    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.fit.run_folder import RunFolder

    fit_csv, held_csv = write_twin(robot, tmp_path, 0.02, fit_s=3.0)
    base = dict(real_csv=[str(held_csv)], replay="torque", torque_signal="tau", torque_includes_gravity=False,
                log_dir=str(tmp_path / "out"), quiet=True, plots=False)
    space = resolve_problem(FitArgs.build(**base, window_s=0.4), log=lambda s: None).space
    truth = space.normalize({"armature": TRUTH.armature, "friction": TRUTH.friction, "viscous": TRUTH.viscous,
                             "delay": DELAY})
    fit_dir = tmp_path / "fit"
    fit_dir.mkdir()
    RunFolder(fit_dir).write_result(
        FitResult.from_search(space, truth, 0.0, run_names=["x"], weighted_loss=np.zeros(1), traj_weights=np.ones(1)))
    (fit_dir / "config.json").write_text(json.dumps({"args": {"replay": {"window_s": 0.2}}}))
    lines: list[str] = []
    args = FitArgs.build(**base, eval_params=str(fit_dir))
    resolve_problem(args, log=lines.append)
    assert args.replay.window_s == 0.2 and any("the evaluated fit's window" in line for line in lines)
    assert not any("chosen from the data" in line for line in lines)
    # no config.json: chosen at the evaluated (true) parameters (a right model stays near the floor: a long window),
    # where the default --x0 low would have chosen a shorter one
    (fit_dir / "config.json").unlink()
    lines.clear()
    args = FitArgs.build(**base, eval_params=str(fit_dir))
    resolve_problem(args, log=lines.append)
    assert args.replay.window_s >= 0.5 and any("chosen from the data" in line for line in lines), lines
    low = FitArgs.build(**base)
    resolve_problem(low, log=lambda s: None)
    assert low.replay.window_s < args.replay.window_s
