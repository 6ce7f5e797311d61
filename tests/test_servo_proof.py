"""The servo arm's proof at CI size (issue 27; full size: benchmarks/servo_twin.py).

The SO-101 twin goes in as LeRobot writes it (30 fps, normalized range, calibration file), through the importer,
and is fitted by scripts/sysid_franka_osc.py as a user runs it. With the gains unknown the fit finds the delay
exactly and the gains inside their intervals; with the gains stated wrong by 2x (a user reading servo units) it
ends in a misfit verdict that names the gains, not a confident fit.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.twin.servo import SO101_TRUTH
from isaaclab_sysid.jobs.servo_proof import delay_case, fit_flags, judge, make_servo_dataset

pytest.importorskip("pyarrow")

FIT = str(REPO_ROOT / "scripts" / "sysid_franka_osc.py")


def _fit(flags):
    subprocess.run([sys.executable, FIT, *flags], check=True, cwd=REPO_ROOT, capture_output=True, text=True)


def test_gains_stated_wrong_by_2x_end_in_a_misfit_naming_the_gains(tmp_path):
    data = make_servo_dataset(tmp_path, duration_s=4.0, n_fit=1, step_hold_s=0.3,
                              stated_gains=(2 * SO101_TRUTH.kp, 2 * SO101_TRUTH.kd))
    _fit(fit_flags(data, tmp_path / "fit", "armature,friction,viscous,delay", ("--refine_iter", "6")))
    fit_dir = next((tmp_path / "fit").iterdir())
    adequacy = json.loads((fit_dir / "sysid_best_params.json").read_text())["adequacy"]
    assert adequacy["verdict"] == "misfit", adequacy["messages"]
    gains = [m for m in adequacy["messages"] if "state their joint-PD gains" in m]
    assert gains and "kp [29, 42" in gains[0] and "gains: unknown" in gains[0], adequacy["messages"]
    assert adequacy["residual_over_floor"] > 2.0  # far above the noise: not a confident fit


def test_frictionless_servo_twin_from_lerobot_dataset_recovers_delay_gains_offsets(tmp_path):
    """CI size: the twin without friction (the full truth: benchmarks/servo_twin.py), 8 s of multisine + one
    saturating step per joint, fitted for kp, kd, armature, delay and encoder offset through the importer.

    Asserted: the delay exact, the held-out error within 1.5x the noise floor, every kp, kd and armature of the
    joints gravity loads or the pan (whose link inertia gives the scale) in its interval or flagged, the pan's
    offset flagged unidentifiable. Not asserted, a known gap (docs/servo_arms.md): ``wrist_roll`` has neither
    gravity nor link inertia to fix the scale of (kp, kd, armature) and its 0.3 rad step barely saturates; at this
    size the fit lands on the scaled solution (kp 2.3 vs 7.2) with intervals that miss. At 4 s the fit can settle on a
    wrong delay: test_short_episode_wrong_delay_is_carried_into_the_intervals.
    """
    truth = dataclasses.replace(SO101_TRUTH, friction=np.zeros(6), static_friction=np.zeros(6))
    data = make_servo_dataset(tmp_path, duration_s=8.0, n_fit=1, step_hold_s=0.5, truth=truth)
    _fit(fit_flags(data, tmp_path / "fit", "kp,kd,armature,delay,encoder_offset", ("--refine_iter", "15")))
    fit_dir = next((tmp_path / "fit").iterdir())
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "compute_intervals.py"), "--fit_dir", str(fit_dir)],
                   check=True, cwd=REPO_ROOT, capture_output=True, text=True)
    v = judge(fit_dir, truth)
    print(v.format())
    assert v.delay_fit == v.delay_true == 7
    assert v.heldout_rmse_rad <= 1.5 * v.noise_floor_rad
    checked = [r for r in v.rows if r.label.startswith(("kp[", "kd[", "armature[")) and "wrist_roll" not in r.label]
    assert len(checked) == 15 and all(r.covered or r.unidentified for r in checked), v.format()
    assert sum(r.covered for r in checked) >= 14, v.format()
    offsets = {r.label: r for r in v.rows if r.label.startswith("encoder_offset[")}
    assert offsets["encoder_offset[shoulder_pan]"].unidentified  # gravity does not depend on the pan angle
    assert all(r.covered or r.unidentified for r in offsets.values()), v.format()
    # the left-out viscous friction (intervals/omitted.py): the data see it apart from kd at the torque limit, and
    # the linearized refit finds the most saturated joint's (shoulder_lift, true 0.041 N m s/rad)
    ivs = json.loads((fit_dir / "intervals.json").read_text())
    om = ivs["structure"]["omitted"]["viscous"]
    assert om["gain"] > 0.01 and 0.5 * truth.viscous[1] < om["step"][1] < 1.5 * truth.viscous[1], om
    assert all(w >= 1.0 for w in om["widen"].values())
    assert any(w.startswith("intervals: viscous is not fitted") for w in ivs["warnings"])


def test_short_episode_wrong_delay_is_carried_into_the_intervals(tmp_path):
    """docs/servo_arms.md section 6: on a 4 s episode kp, kd and armature fitted at delay 5 (true 7) absorb the
    difference. Conditional on the fitted delay (the intervals before intervals/delay_union.py) most of their 18
    intervals miss the truth with nothing flagged; with the delay's uncertainty carried in, the delay interval
    holds 7, the profile accepts 7 and rejects 5 (said in a warning), and every kp, kd and armature interval
    covers the truth or is flagged with that reason. The fitted point is the conditional optimum at delay 5 (the
    truth refined there; the fit script itself takes minutes at this size: benchmarks/servo_delay_union.py)."""
    case = delay_case(tmp_path, duration_s=4.0, fit_delay=5, refine_iter=4)
    print(case.conditional.format(), case.union.format(), case.seconds, sep="\n")

    def gains(v):
        return [r for r in v.rows if r.label.startswith(("kp[", "kd[", "armature["))]

    before, after = gains(case.conditional), gains(case.union)
    assert len(before) == len(after) == 18
    assert sum(not r.covered and r.unidentified is None for r in before) >= 8  # confident and wrong
    assert 7 in case.delay["accepted"] and 5 not in case.delay["accepted"]
    lo, hi = case.delay["interval"]
    assert lo <= 7 <= hi
    assert all(r.covered or r.unidentified for r in after), case.union.format()
    assert sum(r.covered for r in after) >= 12
    assert any("fitted delay 5 is rejected" in n for n in case.union.notes)
    assert set(case.delay["depends_on_delay"]) <= {r.label for r in after}


def test_the_twin_truth_takes_field_settings_and_refuses_unknown_fields():
    from isaaclab_sysid.jobs.servo_proof import with_truth

    t = with_truth(SO101_TRUTH, ["viscous=0", "actuator_tau_std=0", "delay=5"])
    assert np.all(t.viscous == 0.0) and t.actuator_tau_std == 0.0 and t.delay == 5
    assert np.array_equal(t.kp, SO101_TRUTH.kp)
    with pytest.raises(ValueError, match="'visc=0': expected FIELD=VALUE"):
        with_truth(SO101_TRUTH, ["visc=0"])
