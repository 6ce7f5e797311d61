"""The servo twin and its excitation (issue 27): a hidden truth that is not the defaults, LeRobot's 30 fps
dataset written and read back through the importer, the multisine design and its pre-flight."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from isaaclab_sysid.importers import import_runs
from isaaclab_sysid.excitation.servo_design import ServoDesignSpec, ServoNominal, servo_multisine, servo_preflight
from isaaclab_sysid.objective.param_space import GROUPS
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.servo import (SO101_CAL_MIDS, SO101_TRUTH, STEP_RAD, record_servo_twin,
                                       write_twin_dataset)

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def robot():
    return load_robot("so101")


@pytest.fixture(scope="module")
def design(robot):
    return servo_multisine(robot, ServoDesignSpec(duration_s=8.0, f_min_hz=0.25, n_sines=4, step_hold_s=0.5,
                                                   speed_max_rad_s=1.0))


def test_truth_is_not_a_default():
    nominal = ServoNominal()
    for g in ("kp", "kd", "armature", "friction", "viscous"):
        truth = np.asarray(getattr(SO101_TRUTH, g))
        assert np.all(truth != GROUPS[g].nominal) and np.all(truth != getattr(nominal, g))
        assert np.unique(truth).size == truth.size  # every joint its own value
    assert SO101_TRUTH.delay not in (0, nominal.delay) and np.all(SO101_TRUTH.encoder_offset != 0)
    assert np.all(np.asarray(SO101_TRUTH.static_friction) > np.asarray(SO101_TRUTH.friction))  # stiction


def test_design_inside_limits_distinct_frequencies_at_rest(robot, design):
    q = design.q_des
    assert np.all(q >= robot.q_lower) and np.all(q <= robot.q_upper)
    centre = 0.5 * (robot.q_lower + robot.q_upper)
    np.testing.assert_allclose(q[0], centre, atol=1e-12)
    np.testing.assert_allclose(q[-1], centre, atol=1e-12)
    f = np.asarray(design.meta.excitation["frequencies_hz"])
    assert np.unique(f).size == f.size  # no two joints share a frequency
    assert design.meta.control_rate_hz == 30 and np.isnan(design.meta.kp).all()


def test_preflight_names_what_trades_off(robot, design):
    """The design with saturating steps separates kp from armature and friction; a slow design without them
    does not, and pre-flight says which pairs tie. The pan joint's encoder offset is invisible (gravity
    does not depend on the pan angle)."""
    pf = servo_preflight(robot, design)
    assert pf.safe, pf.format()
    assert max(pf.numbers["steps_saturated_ms"]) > 0
    tied = {(a, b) for a, b, _ in pf.tradeoffs}
    assert not any("kp[" in a + b and "armature[" in a + b for a, b in tied), pf.format()
    assert any("encoder_offset[shoulder_pan]" in x for x in pf.numbers["no_information"])
    slow = servo_multisine(robot, ServoDesignSpec(duration_s=12.0, f_min_hz=0.1, f_max_hz=1.5, n_sines=2,
                                                  speed_max_rad_s=0.6, step_rad=0.0))
    pf_slow = servo_preflight(robot, slow)
    pairs = {frozenset((a, b)) for a, b, _ in pf_slow.tradeoffs}
    assert frozenset(("kp[wrist_roll]", "armature[wrist_roll]")) in pairs, pf_slow.format()
    assert "trade-offs" in pf_slow.format() and "kp[wrist_roll]" in pf_slow.format()


def test_twin_records_what_lerobot_would_and_the_importer_reads_it_back(robot, design, tmp_path):
    run = record_servo_twin(robot, design, SO101_TRUTH, seed=3, name="ep0", mids=SO101_CAL_MIDS)
    assert np.isnan(run.meta.kp).all() and run.meta.state_age_ms == SO101_TRUTH.state_age_max_ms
    # encoder counts: whole counts about each range middle
    frac = np.asarray(SO101_CAL_MIDS) % 1.0
    counts = run.q / STEP_RAD + frac
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    # the servo drives its encoder to the command, so the offset shows in the log only through gravity, which
    # depends on the true pose: not at all for the pan joint, a fraction of a count for the loaded joints
    no_off = dataclasses.replace(SO101_TRUTH, encoder_offset=np.zeros(6))
    base = record_servo_twin(robot, design, no_off, seed=3, mids=SO101_CAL_MIDS)
    shift = np.mean(run.q - base.q, axis=0) / STEP_RAD  # [counts]
    assert abs(shift[0]) < 0.05 and np.abs(shift[1:3]).max() > 0.1
    # the arm followed its commands (a servo), within a few degrees
    sine = run.t <= design.meta.excitation["duration_s"]  # (the steps after it saturate on purpose)
    assert np.abs(run.q - run.q_des)[sine].max() < 0.1
    mapping = write_twin_dataset(tmp_path / "so101_twin", [run, base], robot.joint_names,
                                 state_age_ms=SO101_TRUTH.state_age_max_ms)
    runs, reps = import_runs(tmp_path / "so101_twin", "lerobot", mapping, None, log=lambda s: None)
    assert [r.n_samples for r in runs] == [run.n_samples, base.n_samples]
    np.testing.assert_allclose(runs[0].q, run.q, atol=2e-6)  # float32 of LeRobot's normalized range
    np.testing.assert_allclose(runs[0].q_des, run.q_des, atol=2e-6)
    np.testing.assert_array_equal(runs[0].sample_ticks(), run.sample_ticks())
    assert runs[0].meta.state_age_ms == SO101_TRUTH.state_age_max_ms and np.isnan(runs[0].meta.kp).all()


def test_gen_servo_traj_writes_a_readable_target_and_its_preflight(tmp_path):
    import json

    from conftest import load_script

    from isaaclab_sysid.data import read_run

    mod = load_script("gen_servo_traj")
    rc = mod.main(mod.Args(out=tmp_path, name="d", design=mod.ServoDesignSpec(
        duration_s=4.0, f_min_hz=0.25, n_sines=2, speed_max_rad_s=1.0, step_hold_s=0.3)))
    run = read_run(tmp_path / "d.csv")
    assert rc == 0 and run.meta.control_rate_hz == 30 and np.isnan(run.meta.kp).all()
    pf = json.loads((tmp_path / "d_preflight.json").read_text())
    assert pf["safe"] and len(pf["numbers"]["steps_saturated_ms"]) == 6
