"""The servo motor model's twin at CI size (issue 42; full size: benchmarks/servo_motor_twin.py, docs/servo_arms.md).

An XL330 on BAM's bench with hidden truth (kt, R, armature, load-dependent friction, viscous, delay, encoder offset),
logged as BAM's recorder logs it, imported with scripts/import_runs.py --format bam, fitted with --fit_groups auto
and judged: every fitted number inside its 95 % interval or flagged with its reason. The twin's realism (the
encoder's and the speed register's quantization, torque-off phases, the irregular loop, the sagging supply) and its
stated delay (the delay the fit's replay sees) are checked on their own.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from isaaclab_sysid.jobs.servo_motor_proof import CI_FIT, CI_HELDOUT, run_proof
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.servo_motor import (
    SPEED_UNIT_RAD_S, STEP_RAD, XL330_TRUTH, MotorTruth, record_bench_log,
)


@pytest.fixture(scope="module")
def bench():
    return load_robot("bam_pendulum_xl330")


def test_the_twins_logs_are_quantized_irregular_and_have_torque_off_phases(bench):
    log, truth, loop = record_bench_log(bench, "lift_and_drop", 200, seed=3)
    e = log["entries"]
    assert set(log) == {"mass", "length", "kp", "vin", "motor", "trajectory", "entries"} and log["motor"] == "xl330"
    pos = np.array([x["position"] for x in e])
    spd = np.array([x["speed"] for x in e])
    stamps = np.array([x["timestamp"] for x in e])
    counts = pos / STEP_RAD
    assert np.allclose(counts, np.round(counts), atol=1e-9)  # on the encoder's 4096-count grid
    assert np.mean(np.diff(pos) == 0) > 0.1  # repeated readings, as the real logs have
    units = spd / SPEED_UNIT_RAD_S
    assert np.allclose(units, np.round(units), atol=1e-9)  # the 0.229 rpm register unit
    off = np.array([not x["torque_enable"] for x in e])
    assert off[-100:].all() and not off[:100].any()  # lift, then the drop with the torque off
    gaps = np.diff(stamps)
    on_gap, off_gap = np.median(gaps[~off[1:]]), np.median(gaps[off[1:]])
    assert 0.0050 < on_gap < 0.0056 and 0.0033 < off_gap < 0.0038  # BAM's 5.3 ms / 3.5 ms loop
    assert gaps.std() > 1e-4  # irregular stamps
    volts = np.array([x["input_volts"] for x in e])
    assert np.allclose(volts * 10, np.round(volts * 10)) and volts.max() - volts.min() >= 0.3  # 0.1 V, sag
    assert all(0 <= x["load"] < 65536 and isinstance(x["load"], int) for x in e)  # the raw PWM register
    # the truth fell freely with the torque off: no motor torque after the release acts
    assert np.all(truth.tau[~truth.enable] == 0.0) and (~truth.enable).sum() > 3000


def test_the_stated_delay_is_the_delay_the_fits_replay_sees(bench, tmp_path):
    """The truth replayed by the fit's own replay on the imported runs (no noise in the numbers, the sensors' as
    recorded) follows the logged positions best at the truth's stated delay (4 ticks)."""
    from isaaclab_sysid.importers.bam import import_bam
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    for i, (kp, tr) in enumerate([(100, "sin_time_square"), (200, "up_and_down")]):
        log, _, _ = record_bench_log(bench, tr, kp, seed=20 + i)
        (tmp_path / f"kp{kp}_{tr}.json").write_text(json.dumps(log))
    runs, _ = import_bam(tmp_path, None, log=lambda s: None)
    be = MujocoBackend(bench, ReplayOptions(warmup_ticks=0, gravity=True), n_threads=1)
    rms = {}
    for d in range(2, 7):
        b = XL330_TRUTH.batch()
        b.delay = np.array([d])
        rolls = be.rollout(b, runs)
        rms[d] = float(np.mean([np.sqrt(np.mean((ro.q[0] - r.q) ** 2)) for ro, r in zip(rolls, runs)]))
    be.close()
    assert min(rms, key=rms.get) == XL330_TRUTH.delay, rms
    assert rms[XL330_TRUTH.delay] < 2e-3, rms  # within a couple of encoder counts


def test_the_truth_refuses_a_delay_shorter_than_the_recorders_lag():
    with pytest.raises(ValueError, match="shorter than the recorder's own lag"):
        MotorTruth(0.4, 3.5, 0.002, 0.01, 0.1, 0.1, 0.004, delay=0, encoder_offset=0.0, sleep_ms=-2.0)
    assert XL330_TRUTH.firmware_latency_ms() == pytest.approx(4 + 1.1 + 0.35 - 0.5)


def test_servo_motor_twin_ci_every_number_inside_its_interval_or_flagged(tmp_path):
    """CI size: sin_time_square at kp 100 and lift_and_drop at kp 200 fitted (--fit_groups auto), sin_sin at kp 400
    held out, through import_runs.py --format bam, sysid_franka_osc.py and compute_intervals.py."""
    v = run_proof(tmp_path, CI_FIT, CI_HELDOUT, log=lambda s: None)
    print(v.format())
    labels = {r.group for r in v.rows}
    assert {"motor_kt", "motor_r", "armature", "viscous", "delay", "encoder_offset", "friction"} <= labels
    assert not v.failures, v.format()
    assert v.law == "load", v.format()  # the truth's law, chosen on evidence
    inside = [r for r in v.rows if r.verdict == "inside"]
    assert len(inside) >= 5, v.format()
    assert v.heldout_mae_mrad and all(np.isfinite(x) for x in v.heldout_mae_mrad.values())
    runs = json.loads((tmp_path / "runs" / "kp200_lift_and_drop.json").read_text())
    assert runs["summary"]["import"]["torque_off_rows"] > 500  # the torque-off phase survived the import
