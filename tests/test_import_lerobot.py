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
from isaaclab_sysid.data.importers import import_runs  # noqa: E402

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
