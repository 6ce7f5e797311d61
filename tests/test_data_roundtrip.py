"""Round trips of the run format: CSV + sidecar (50 Hz, 1 kHz) and HDF5, bit-identical."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_run

from isaaclab_sysid.data import read_run, read_runs_hdf5, write_run, write_runs_hdf5

ARRAYS = ("t", "q", "dq", "ee_pos", "ee_quat", "tau", "tau_J", "q_des", "x_des", "quat_des", "tick", "setpoint_tick")


def assert_same(a, b):
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        if x is None:
            assert y is None, name
            continue
        assert x.dtype == y.dtype or name in ("tick", "setpoint_tick"), name
        np.testing.assert_array_equal(x, y, err_msg=name)  # bit-identical
    for key in ("q_init", "anchor_pos", "anchor_quat", "kp", "kd"):
        np.testing.assert_array_equal(getattr(a.meta, key), getattr(b.meta, key))
    assert a.meta.controller == b.meta.controller
    assert a.meta.log_rate_hz == b.meta.log_rate_hz
    assert a.meta.impedance.orientation_error == b.meta.impedance.orientation_error
    assert a.meta.excitation == b.meta.excitation


@pytest.mark.parametrize("controller", ["task_impedance", "joint_pd"])
@pytest.mark.parametrize("rate", [50.0, 1000.0])
def test_csv_round_trip(tmp_path, controller, rate):
    run = make_run(controller, rate)
    csv, side = write_run(run, tmp_path / "run.csv")
    assert side == tmp_path / "run.json"
    back = read_run(csv)
    assert_same(run, back)


def test_hdf5_round_trip(tmp_path):
    runs = [make_run("task_impedance", 50.0), make_run("joint_pd", 1000.0, seed=3)]
    write_runs_hdf5(runs, tmp_path / "runs.h5")
    back = read_runs_hdf5(tmp_path / "runs.h5")
    assert [r.name for r in back] == [r.name for r in runs]
    for a, b in zip(runs, back):
        assert_same(a, b)


def test_1khz_setpoint_schedule_and_ticks():
    run = make_run("task_impedance", 1000.0, n=60)
    ticks, values = run.setpoints()
    # rows start at tick 1000 whose setpoint took effect at 1000; changes every 20 ticks
    np.testing.assert_array_equal(ticks, [0, 20, 40])
    assert values.shape == (3, 7)
    np.testing.assert_array_equal(run.sample_ticks(), np.arange(60))


def test_50hz_sample_ticks():
    run = make_run("joint_pd", 50.0, n=5)
    np.testing.assert_array_equal(run.sample_ticks(), [0, 20, 40, 60, 80])
    assert run.ticks_per_setpoint == 20
