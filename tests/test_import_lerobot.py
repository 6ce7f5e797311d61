"""LeRobot datasets, written here with pyarrow: one run per episode, equal to the source arrays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from isaaclab_sysid.data import RunFormatError, read_run  # noqa: E402
from isaaclab_sysid.importers import import_runs  # noqa: E402

N = 7
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
MOTORS = [f"motor_{i}" for i in range(N)]
FPS = 50


def write_dataset(root: Path, episodes=(40, 30), effort: bool = True, drop_column: str | None = None):
    """meta/info.json + data/chunk-000/episode_<i>.parquet; state = q ++ dq (names motor_i.pos / .vel)."""
    state_names = [f"{m}.pos" for m in MOTORS] + [f"{m}.vel" for m in MOTORS]
    feats = {"observation.state": {"dtype": "float32", "shape": [2 * N], "names": state_names},
             "action": {"dtype": "float32", "shape": [N], "names": [f"{m}.pos" for m in MOTORS]},
             "timestamp": {"dtype": "float32", "shape": [1], "names": None}}
    if effort:
        feats["observation.effort"] = {"dtype": "float32", "shape": [N], "names": {"motors": MOTORS}}
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps({"codebase_version": "v2.1", "fps": FPS, "features": feats,
                                                         "total_episodes": len(episodes)}))
    (root / "data" / "chunk-000").mkdir(parents=True)
    rng = np.random.default_rng(0)
    truth = []
    index = 0
    for e, n in enumerate(episodes):
        q = (Q0 + 0.1 * np.sin(np.arange(n)[:, None] * 0.1 + e + np.arange(N))).astype(np.float32)
        dq = rng.standard_normal((n, N)).astype(np.float32)
        tau = rng.standard_normal((n, N)).astype(np.float32)
        act = (q + 0.01).astype(np.float32)
        cols = {"observation.state": pa.array(list(np.concatenate([q, dq], axis=1)), type=pa.list_(pa.float32())),
                "action": pa.array(list(act), type=pa.list_(pa.float32())),
                "timestamp": pa.array((np.arange(n) / FPS).astype(np.float32)),
                "frame_index": pa.array(np.arange(n)), "episode_index": pa.array(np.full(n, e)),
                "index": pa.array(np.arange(index, index + n))}
        if effort:
            cols["observation.effort"] = pa.array(list(tau), type=pa.list_(pa.float32()))
        if drop_column:
            cols.pop(drop_column)
        pq.write_table(pa.table(cols), root / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
        index += n
        truth.append((q, dq, tau, act))
    return truth


def mapping(tmp: Path, **features) -> Path:
    feats = {"q": {"feature": "observation.state", "names": [f"{m}.pos" for m in MOTORS]},
             "dq": {"feature": "observation.state", "names": [f"{m}.vel" for m in MOTORS]},
             "tau": {"feature": "observation.effort", "names": MOTORS},
             "targets": {"feature": "action", "names": [f"{m}.pos" for m in MOTORS]}}
    feats.update(features)
    m = {"controller": "joint_pd", "gains": {"kp": 40.0, "kd": 4.0}, "features": feats}
    p = tmp / "map.yaml"
    p.write_text(yaml.safe_dump(m))
    return p


def test_one_run_per_episode_equal_to_the_source(tmp_path):
    truth = write_dataset(tmp_path / "ds")
    runs, reps = import_runs(tmp_path / "ds", "lerobot", mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    assert [r.name for r in runs] == ["ds_episode_000000", "ds_episode_000001"]
    for (q, dq, tau, act), r in zip(truth, runs):
        run = read_run(tmp_path / "out" / f"{r.name}.csv")
        np.testing.assert_array_equal(run.q, q.astype(float))
        np.testing.assert_array_equal(run.dq, dq.astype(float))
        np.testing.assert_array_equal(run.tau, tau.astype(float))
        np.testing.assert_array_equal(run.q_des, act.astype(float))
        assert run.meta.control_rate_hz == FPS and run.n_samples == len(q)
    assert not reps[0].resampled and reps[0].notes["episode_index"] == 0


def test_differentiate_and_no_torque(tmp_path):
    truth = write_dataset(tmp_path / "ds", effort=False)
    runs, _ = import_runs(tmp_path / "ds", "lerobot", mapping(tmp_path, dq="differentiate", tau="none"),
                          tmp_path / "out", log=lambda s: None)
    run = read_run(tmp_path / "out" / f"{runs[0].name}.csv")
    q = truth[0][0].astype(float)
    t = (np.arange(len(q)) / FPS).astype(np.float32).astype(float)  # the dataset's float32 stamps
    np.testing.assert_allclose(run.dq, np.gradient(q, t, axis=0), atol=1e-9)
    assert np.isnan(run.tau).all() and np.isnan(run.tau_J).all()
    assert "central differences" in run.meta.summary["import"]["dq"] and "NaN" in run.meta.summary["import"]["tau"]


def test_bad_datasets(tmp_path):
    write_dataset(tmp_path / "a", drop_column="action")
    f = tmp_path / "a" / "data" / "chunk-000" / "episode_000000.parquet"
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "a", "lerobot", mapping(tmp_path), None, log=lambda s: None)
    assert (exc.value.file, exc.value.column) == (str(f), "action") and "missing column" in str(exc.value)
    write_dataset(tmp_path / "b")
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "b", "lerobot", mapping(tmp_path, q={"feature": "observation.state",
                                                                  "names": ["j1"] * 7}), None, log=lambda s: None)
    assert exc.value.column == "features.observation.state.names" and "j1" in str(exc.value)
    with pytest.raises(RunFormatError, match="no such feature"):
        import_runs(tmp_path / "b", "lerobot", mapping(tmp_path, tau={"feature": "observation.torque", "names": MOTORS}),
                    None, log=lambda s: None)
    g = tmp_path / "b" / "data" / "chunk-000" / "episode_000001.parquet"
    g.write_bytes(g.read_bytes()[:200])  # truncated
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "b", "lerobot", mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    assert exc.value.file == str(g) and "not a readable parquet file" in str(exc.value)
    assert not (tmp_path / "out").exists()
    write_dataset(tmp_path / "c")
    t = pq.read_table(tmp_path / "c" / "data" / "chunk-000" / "episode_000000.parquet").to_pydict()
    t["observation.state"][12] = [float("nan")] * 14
    pq.write_table(pa.table(t), tmp_path / "c" / "data" / "chunk-000" / "episode_000000.parquet")
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "c", "lerobot", mapping(tmp_path), None, log=lambda s: None)
    assert str(exc.value).split(": ", 1)[1].startswith("episode 0 frame 12, column observation.state[motor_0.pos]")


# ------------------------------------------------------------------ SO-101 (servo arm) datasets
SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
SO_UNITS = ["range_m100_100"] * 5 + ["range_0_100"]  # LeRobot's defaults (use_degrees=False)


def write_so101(root: Path, tmp: Path, units=SO_UNITS, episodes=(90, 60), drive=(0, 1, 0, 0, 1, 0)):
    """An SO-101 dataset in LeRobot's units with its calibration file; returns the true angles [rad] per episode."""
    from isaaclab_sysid.importers.lerobot_dataset import (Episode, json_calibration, write_calibration,
                                                               write_lerobot_dataset)
    from isaaclab_sysid.importers.lerobot_units import MotorCalibration, from_radians

    cal = json_calibration(SO101, [2047, 2100, 1990, 2050, 2048, 2300], [1300, 1150, 1100, 1080, 1800, 700], drive)
    write_calibration(tmp / "so101_follower.json", cal)
    mc = {m: MotorCalibration(c["drive_mode"], 0, c["range_min"], c["range_max"]) for m, c in cal.items()}
    truth, eps = [], []
    for e, n in enumerate(episodes):
        t = np.arange(n) / 30.0
        q = 0.4 * np.sin(2 * np.pi * 0.3 * t[:, None] + np.arange(6) + e) + np.array([0, 0, 0, 0, 0, 0.6])
        act = q + 0.02
        conv = lambda a: np.stack([from_radians(a[:, j], units[j], mc[SO101[j]]) for j in range(6)], axis=1)  # noqa
        eps.append(Episode(state=conv(q), action=conv(act)))
        truth.append((q, act))
    write_lerobot_dataset(root, eps, SO101, 30)
    return truth


def so_mapping(tmp: Path, **features) -> Path:
    feats = {"q": {"feature": "observation.state"}, "dq": "differentiate", "tau": "none",
             "targets": {"feature": "action"}, "units": SO_UNITS, "calibration": "so101_follower.json",
             "state_age_ms": 5}
    feats.update(features)
    feats = {k: v for k, v in feats.items() if v is not None}
    p = tmp / "so101.yaml"
    p.write_text(yaml.safe_dump({"robot": "so101", "controller": "joint_pd", "gains": "unknown",
                                 "gravity_compensated": False, "features": feats}))
    return p


def test_so101_normalized_range_with_calibration(tmp_path):
    """LeRobot's normalized range (arm -100..100, gripper 0..100, drive modes) -> radians about the range's
    middle, within float32 of the truth; 30 Hz rows, the action as the setpoints, gains unstated, state age kept."""
    truth = write_so101(tmp_path / "ds", tmp_path)
    runs, reps = import_runs(tmp_path / "ds", "lerobot", so_mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    assert len(runs) == 2 and not reps[0].resampled
    for (q, act), r in zip(truth, runs):
        run = read_run(tmp_path / "out" / f"{r.name}.csv")
        np.testing.assert_allclose(run.q, q, atol=2e-6)
        np.testing.assert_allclose(run.q_des, act, atol=2e-6)
        assert run.meta.control_rate_hz == 30 and run.meta.state_age_ms == 5
        assert np.isnan(run.meta.kp).all() and np.isnan(run.meta.kd).all()
        assert run.meta.gravity_compensated is False
        np.testing.assert_array_equal(run.sample_ticks()[:4], [0, 33, 67, 100])


def test_servo_degrees_undo_lerobots_4095(tmp_path):
    """LeRobot's degrees are (raw - mid) 360 / 4095 while a turn is 4096 counts: 90 deg is 0.99976 x pi/2."""
    from isaaclab_sysid.importers.lerobot_units import from_radians, to_radians

    assert to_radians(np.array(90.0), "servo_deg") == pytest.approx(np.pi / 2 * 4095 / 4096, rel=1e-15)
    x = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(to_radians(from_radians(x, "servo_deg"), "servo_deg"), x, rtol=1e-14)
    truth = write_so101(tmp_path / "ds", tmp_path, units=["servo_deg"] * 5 + ["range_0_100"])
    runs, _ = import_runs(tmp_path / "ds", "lerobot", so_mapping(tmp_path, units=["servo_deg"] * 5 + ["range_0_100"]),
                          None, log=lambda s: None)
    np.testing.assert_allclose(runs[0].q, truth[0][0], atol=2e-6)


def test_bad_so101_datasets_refused_in_one_line(tmp_path):
    write_so101(tmp_path / "ds", tmp_path)
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "ds", "lerobot", so_mapping(tmp_path, calibration=None), None, log=lambda s: None)
    assert exc.value.column == "features.calibration" and "\n" not in str(exc.value)
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "ds", "lerobot", so_mapping(tmp_path, units="furlongs"), None, log=lambda s: None)
    assert exc.value.column == "features.units"
    cal = json.loads((tmp_path / "so101_follower.json").read_text())
    cal.pop("wrist_roll")
    (tmp_path / "so101_follower.json").write_text(json.dumps(cal))
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "ds", "lerobot", so_mapping(tmp_path), None, log=lambda s: None)
    assert exc.value.file.endswith("so101_follower.json") and exc.value.column == "wrist_roll"
    write_so101(tmp_path / "ds2", tmp_path)
    f = tmp_path / "ds2" / "data" / "chunk-000" / "episode_000001.parquet"
    t = pq.read_table(f).to_pydict()
    t["action"][17][5] = float("nan")
    pq.write_table(pa.table(t), f)
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "ds2", "lerobot", so_mapping(tmp_path), None, log=lambda s: None)
    msg = str(exc.value)
    assert exc.value.file == str(f) and "\n" not in msg
    assert msg.split(": ", 1)[1].startswith("episode 1 frame 17, column action[gripper.pos]"), msg
