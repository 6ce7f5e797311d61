"""Payload after a grasp: a twin with a hidden payload recovered within its intervals, the
Monte Carlo check, the wrong-part flag, the pose design, the cautious-end export, bad input."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import load_script
from isaaclab_sysid.cautious import PolicyError, parse_policy
from isaaclab_sysid.data import write_run
from isaaclab_sysid.payload import (DesignOptions, HoldOptions, PayloadInputError, PayloadOptions, design_poses,
                                    identify_payload, poses_condition)
from isaaclab_sysid.payload.export import REQUIRED, build_export, isaaclab_module
from isaaclab_sysid.payload.identify import PayloadEstimate, derived
from isaaclab_sysid.payload.model import PayloadModel
from isaaclab_sysid.payload.twin import PayloadTwin, hold_trajectory, record_payload_runs, wrist_motion
from isaaclab_sysid.robots import LinkInertial, load_robot

ROBOT = load_robot("franka_panda")
PAYLOAD = LinkInertial(0.8, np.array([0.01, -0.02, 0.15]), np.diag([2e-3, 2e-3, 1e-3]))
TRUTH = derived(PAYLOAD.to_pi())
POSES = design_poses(ROBOT, DesignOptions(n_poses=4, mass_scale=0.8)).poses
FAST = PayloadOptions(mc_samples=2000)


def holds_pair(seed: int, payload: LinkInertial = PAYLOAD, **twin):
    tw = PayloadTwin(payload, rate_hz=100.0, **twin)
    return record_payload_runs(ROBOT, hold_trajectory(POSES, 1.0, 1.0, 100.0), tw, seed)


def test_static_holds_cover_the_hidden_payload_over_seeds():
    """30 seeds, 95 % intervals: mass and every centre coordinate covered in >= 25 of 30 (binomial 3 sd)."""
    hits = np.zeros(4)
    for seed in range(30):
        loaded, ref = holds_pair(seed)
        est = identify_payload(ROBOT, [loaded], [ref], FAST)
        hits += [iv.contains(v) for iv, v in zip(est.intervals, TRUTH[:4])]
        assert est.reference == "measured" and est.mode == "static"
    assert np.all(hits >= 25), hits
    # the estimate is useful, not just honest: mass within 2 % and centre within 1 cm
    assert abs(est.mass - 0.8) < 0.016 and np.all(np.abs(est.com - PAYLOAD.com) < 0.01)


def test_motion_adds_the_inertia_within_its_intervals():
    hits, total = 0, 0
    for seed in range(10):
        tw = PayloadTwin(PAYLOAD, rate_hz=100.0, hold_bias_std=0.0)
        loaded, ref = record_payload_runs(ROBOT, wrist_motion(POSES[0], 10.0, 100.0, seed), tw, seed)
        est = identify_payload(ROBOT, [loaded], [ref], PayloadOptions(motion=True, mc_samples=2000))
        assert [iv.label for iv in est.intervals][4:] == [f"payload_inertia_{a}" for a in ("xx", "xy", "yy", "xz", "yz", "zz")]
        hits += sum(iv.contains(v) for iv, v in zip(est.intervals, TRUTH))
        total += len(TRUTH)
    assert hits / total >= 0.88, (hits, total)


def test_reference_cancels_the_arm_model_error_and_a_model_reference_says_it_does_not():
    loaded, ref = holds_pair(3)
    measured = identify_payload(ROBOT, [loaded], [ref], FAST)
    modelled = identify_payload(ROBOT, [loaded], None, FAST)
    assert modelled.reference == "model"
    assert any("NOT in the error bars" in w for w in modelled.warnings)
    err = lambda e: abs(e.mass - 0.8)  # noqa: E731
    assert err(modelled) > 3 * err(measured)  # the twin's true arm differs from the model


def test_monte_carlo_check_agrees_on_a_good_fit_and_takes_over_on_a_ratio_with_a_wide_spread():
    loaded, ref = holds_pair(1)
    est = identify_payload(ROBOT, [loaded], [ref], FAST)
    for c in est.checks:
        assert c.used == "linear" and abs(c.mc_std / c.linear_std - 1) < 0.1
    tiny = LinkInertial(0.03, np.array([0.0, 0.0, 0.1]), np.eye(3) * 1e-6)
    loaded, ref = holds_pair(1, tiny, tau_std=0.3, hold_bias_std=0.2)
    est = identify_payload(ROBOT, [loaded], [ref], FAST)
    com = [c for c in est.checks if c.label.startswith("payload_com")]
    assert any(c.used == "monte carlo" for c in com)
    mc = next(c for c in com if c.used == "monte carlo")
    assert est.interval(mc.label).lower == pytest.approx(mc.monte_carlo[0])


def test_wrong_part_is_flagged_and_the_cli_does_not_export(tmp_path):
    loaded, ref = holds_pair(2, LinkInertial(1.6, PAYLOAD.com, PAYLOAD.inertia))
    est = identify_payload(ROBOT, [loaded], [ref], PayloadOptions(mc_samples=2000, expected_mass=0.8, mass_tolerance=0.1))
    assert est.flag is not None and "wrong part, two parts or slipping grasp" in est.flag
    lp = write_run(loaded, tmp_path / "l.csv")[0]
    rp = write_run(ref, tmp_path / "r.csv")[0]
    cli = load_script("identify_payload")
    rc = cli.main(["fit", "--loaded", str(lp), "--reference", str(rp), "--expected-mass", "0.8", "--mass-tolerance", "0.1",
                   "--policy", "payload_mass:upper", "--mc-samples", "2000", "--out", str(tmp_path / "out")])
    assert rc == 3
    assert (tmp_path / "out" / "payload.json").exists() and not (tmp_path / "out" / "payload_isaaclab.py").exists()
    back = PayloadEstimate.from_json(json.loads((tmp_path / "out" / "payload.json").read_text()))
    assert back.flag == est.flag and np.allclose(back.theta, est.theta)


def test_pose_design_separates_mass_and_centre():
    model = PayloadModel(ROBOT)
    d = design_poses(ROBOT, DesignOptions(n_poses=4, mass_scale=0.8, seed=1))
    assert not np.isfinite(d.cond_by_count[0])  # one pose: the centre along gravity is invisible
    assert np.isfinite(d.cond) and d.cond < 20
    rng = np.random.default_rng(5)
    lo, hi = ROBOT.q_lower + 0.3, ROBOT.q_upper - 0.3
    random_conds = [poses_condition(model, rng.uniform(lo, hi, (4, 7)), 0.8) for _ in range(20)]
    assert d.cond < np.median(random_conds)
    assert np.all(d.poses >= lo - 1e-12) and np.all(d.poses <= hi + 1e-12) and np.all(d.ee_z >= 0.25)
    with pytest.raises(PayloadInputError, match="--n_poses"):
        design_poses(ROBOT, DesignOptions(n_poses=1))


def test_cautious_end_export_and_isaaclab_module(tmp_path):
    loaded, ref = holds_pair(4)
    est = identify_payload(ROBOT, [loaded], [ref], FAST)
    labels = [iv.label for iv in est.intervals]
    with pytest.raises(PolicyError, match="--policy: state the end to act on for payload_mass"):
        parse_policy([], labels, REQUIRED)
    with pytest.raises(PolicyError, match="unknown number 'payload_weight'"):
        parse_policy(["payload_weight:upper"], labels, REQUIRED)
    with pytest.raises(PolicyError, match="end must be one of"):
        parse_policy(["payload_mass:max"], labels, REQUIRED)
    pol = parse_policy(["payload_mass:upper", "payload_com:lower"], labels, REQUIRED, use="lift check")
    model = PayloadModel(ROBOT)
    exp = build_export(est, pol, "panda_link7", model.link_inertial(), mc_samples=4000)
    assert exp.override["payload_mass"] == est.interval("payload_mass").upper
    assert exp.override["payload_com_y"] == est.interval("payload_com_y").lower
    for iv in est.intervals:  # every exported number carries both ends
        assert iv.lower < iv.value < iv.upper
    r = {r.label: r for r in exp.ranges}["payload_mass"]
    assert r.lower <= est.interval("payload_mass").lower and r.upper >= est.interval("payload_mass").upper
    lo, ov, hi = exp.com_shift["z"]
    assert lo < ov < hi
    src = isaaclab_module(exp, "robot")
    tree = ast.parse(src)
    lit = {t.targets[0].id: ast.literal_eval(t.value) for t in tree.body
           if isinstance(t, ast.Assign) and t.targets[0].id in ("OVERRIDE", "PAYLOAD", "RANGES", "COM_SHIFT")}
    assert lit["OVERRIDE"]["payload_mass"] == pytest.approx(exp.override["payload_mass"])
    assert lit["PAYLOAD"]["payload_mass"][2] == pytest.approx(est.interval("payload_mass").upper)
    if importlib.util.find_spec("isaaclab") is None:
        pytest.skip("isaaclab not installed: the generated module's import is not checked")
    mod = tmp_path / "payload_isaaclab.py"
    mod.write_text(src)
    code = ("import importlib.util as u; s = u.spec_from_file_location('m', %r); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); o = m.PayloadOverrideEventsCfg(); r = m.PayloadRandomizationEventsCfg(); "
            "print(o.payload_mass.params['mass_distribution_params'], r.payload_com.params['com_range']['z'], "
            "m.object_mass_cfg().mass)" % str(mod))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    ov_m = exp.override["payload_mass"]
    assert f"({ov_m!r}, {ov_m!r})" in out.stdout


def test_bad_input_is_refused_in_one_line(tmp_path):
    loaded, ref = holds_pair(0)
    moving = record_payload_runs(ROBOT, wrist_motion(POSES[0], 3.0, 100.0, 0), PayloadTwin(PAYLOAD, rate_hz=100.0), 0)[0]
    moving.source = Path("moving.csv")
    with pytest.raises(PayloadInputError, match=r"^moving.csv: no static hold in this loaded run") as e:
        identify_payload(ROBOT, [moving], [ref], FAST)
    assert "\n" not in str(e.value)
    far = record_payload_runs(ROBOT, hold_trajectory(POSES[:2] + 0.1, 1.0, 1.0, 100.0), PayloadTwin(PAYLOAD, rate_hz=100.0), 0)[1]
    with pytest.raises(PayloadInputError, match="no reference hold within 0.02 rad"):
        identify_payload(ROBOT, [loaded], [far], FAST)
    one = record_payload_runs(ROBOT, hold_trajectory(POSES[:1], 2.0, 1.0, 100.0), PayloadTwin(PAYLOAD, rate_hz=100.0), 0)
    with pytest.raises(PayloadInputError, match="cannot separate the payload"):
        identify_payload(ROBOT, [one[0]], [one[1]], FAST)
    with pytest.raises(PayloadInputError, match="--expected_mass and --mass_tolerance together"):
        identify_payload(ROBOT, [loaded], [ref], PayloadOptions(expected_mass=0.8))
    with pytest.raises(PayloadInputError, match="--v_max"):
        identify_payload(ROBOT, [loaded], [ref], PayloadOptions(holds=HoldOptions(v_max=0.0)))
    cli = load_script("identify_payload")
    rc = cli.main(["fit", "--loaded", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")])
    assert rc == 2
