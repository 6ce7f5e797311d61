"""LeRobot datasets of codebase v3.0 (many episodes per file, the episode table ``meta/episodes/``) beside v2.x.

A v3.0 dataset written here in LeRobot's layout imports with the same runs (names, arrays) as its v2.1 twin, with
the same mapping file; a v3.0 dataset whose episode table disagrees with its data is refused in one line naming the
file and the episode, and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from isaaclab_sysid.data import RunFormatError  # noqa: E402
from isaaclab_sysid.importers import import_runs  # noqa: E402
from isaaclab_sysid.importers.lerobot_dataset import Episode, write_lerobot_dataset  # noqa: E402

SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
LENGTHS = (40, 25, 33)
EPISODES_TABLE = Path("meta") / "episodes" / "chunk-000" / "file-000.parquet"


def episodes() -> list[Episode]:
    """Three SO-101 episodes in radians (inside the URDF's limits), the action a little ahead of the state."""
    out = []
    for e, n in enumerate(LENGTHS):
        t = np.arange(n) / 30.0
        q = 0.3 * np.sin(2 * np.pi * 0.4 * t[:, None] + np.arange(6) + e) + np.array([0, 0, 0, 0, 0, 0.6])
        out.append(Episode(state=q, action=q + 0.02))
    return out


def mapping(tmp: Path) -> Path:
    p = tmp / "so101.yaml"
    p.write_text(yaml.safe_dump({"robot": "so101", "controller": "joint_pd", "gains": "unknown",
                                 "gravity_compensated": False,
                                 "features": {"q": {"feature": "observation.state"}, "dq": "differentiate",
                                              "tau": "none", "targets": {"feature": "action"}, "units": "rad"}}))
    return p


def write(root: Path, version: str, per_file: int | None = None) -> Path:
    return write_lerobot_dataset(root, episodes(), SO101, 30, codebase_version=version, episodes_per_file=per_file)


def quiet(_: str) -> None:
    pass


def test_v3_layout_is_lerobots(tmp_path):
    """What the writer puts down is LeRobot v3.0's layout: one data file for every episode, the episode table."""
    root = write(tmp_path / "ds", "v3.0")
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert sorted(p.name for p in (root / "data" / "chunk-000").iterdir()) == ["file-000.parquet"]
    data = pq.read_table(root / "data" / "chunk-000" / "file-000.parquet")
    assert data.num_rows == sum(LENGTHS)
    np.testing.assert_array_equal(np.unique(data.column("episode_index").to_numpy()), [0, 1, 2])
    table = pq.read_table(root / EPISODES_TABLE).to_pydict()
    assert table["length"] == list(LENGTHS)
    assert table["dataset_from_index"] == [0, 40, 65] and table["dataset_to_index"] == [40, 65, 98]
    assert table["data/file_index"] == [0, 0, 0] and table["data/chunk_index"] == [0, 0, 0]
    assert (root / "meta" / "tasks.parquet").is_file()


@pytest.mark.parametrize("per_file", [None, 2])
def test_v3_imports_the_same_runs_as_its_v2_twin(tmp_path, per_file):
    """Same names, same arrays, same sidecar facts; the v3.0 dataset in one data file or spread over two."""
    write(tmp_path / "v2" / "ds", "v2.1")
    write(tmp_path / "v3" / "ds", "v3.0", per_file)
    if per_file:
        assert (tmp_path / "v3" / "ds" / "data" / "chunk-000" / "file-001.parquet").is_file()
    m = mapping(tmp_path)
    runs2, _ = import_runs(tmp_path / "v2" / "ds", "lerobot", m, tmp_path / "out2", log=quiet)
    runs3, reps3 = import_runs(tmp_path / "v3" / "ds", "lerobot", m, tmp_path / "out3", log=quiet)
    assert [r.name for r in runs3] == [r.name for r in runs2] == [f"ds_episode_{e:06d}" for e in range(3)]
    for a, b in zip(runs2, runs3):
        assert a.n_samples == b.n_samples
        for field in ("t", "q", "dq", "q_des", "ee_pos", "ee_quat"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        assert np.isnan(b.tau).all()
        assert a.meta.control_rate_hz == b.meta.control_rate_hz == 30
    assert runs3[1].meta.summary["import"]["codebase_version"] == "v3.0"
    assert runs2[1].meta.summary["import"]["codebase_version"] == "v2.1"
    assert len(list((tmp_path / "out3").glob("*.csv"))) == 3


def _edit_table(root: Path, edit) -> None:
    """Rewrite the episode table with ``edit(rows)`` applied to its rows (a list of dicts)."""
    path = root / EPISODES_TABLE
    rows = pq.read_table(path).to_pylist()
    rows = edit(rows)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _shift(rows):
    rows[1]["dataset_from_index"] += 1
    rows[1]["dataset_to_index"] += 1
    return rows


def _longer(rows):
    rows[2]["length"] += 1
    rows[2]["dataset_to_index"] += 1
    return rows


def _inconsistent_length(rows):
    rows[0]["length"] -= 1
    return rows


def _extra_episode(rows):
    return rows + [{**rows[-1], "episode_index": 3, "dataset_from_index": 98, "dataset_to_index": 108, "length": 10}]


def _wrong_file(rows):
    rows[0]["data/file_index"] = 1
    return rows


def _missing_file(rows):
    rows[0]["data/file_index"] = 7
    return rows


def _twice(rows):
    rows[2]["episode_index"] = 1
    return rows


@pytest.mark.parametrize("edit, per_file, where, episode, words", [
    (_shift, None, "data", 1, "places it at 41 .. 65"),
    (_longer, None, "data", 2, "says length 34"),
    (_inconsistent_length, None, "table", 0, "spans 40"),
    (lambda rows: rows[:2], None, "data", 2, "not in the episode table"),
    (_extra_episode, None, "data", 3, "0 rows in the data"),
    (_wrong_file, 2, "data", 0, "places it in data/chunk-000/file-001.parquet"),
    (_missing_file, None, "table", 0, "which is not there"),
    (_twice, None, "table", 1, "listed twice"),
])
def test_v3_episode_table_disagreeing_with_data_is_refused_in_one_line(tmp_path, edit, per_file, where, episode, words):
    root = write(tmp_path / "ds", "v3.0", per_file)
    _edit_table(root, edit)
    out = tmp_path / "out"
    with pytest.raises(RunFormatError) as exc:
        import_runs(root, "lerobot", mapping(tmp_path), out, log=quiet)
    msg = str(exc.value)
    assert "\n" not in msg and words in msg, msg
    assert f"episode {episode}," in msg, msg
    if where == "table":
        assert exc.value.file.endswith(str(EPISODES_TABLE)), msg
    else:
        assert "/data/chunk-000/file-" in exc.value.file, msg
    assert not out.exists()


def test_v3_without_episode_table_or_column_is_refused(tmp_path):
    root = write(tmp_path / "ds", "v3.0")
    _edit_table(root, lambda rows: [{k: v for k, v in r.items() if k != "dataset_from_index"} for r in rows])
    with pytest.raises(RunFormatError) as exc:
        import_runs(root, "lerobot", mapping(tmp_path), tmp_path / "out", log=quiet)
    assert exc.value.column == "dataset_from_index" and "\n" not in str(exc.value)
    (root / EPISODES_TABLE).unlink()
    with pytest.raises(RunFormatError) as exc:
        import_runs(root, "lerobot", mapping(tmp_path), tmp_path / "out", log=quiet)
    assert "episode table" in str(exc.value)
    assert not (tmp_path / "out").exists()


def test_v3_files_under_a_v2_version_say_so(tmp_path):
    """A v3.0 layout whose info.json says v2.1 is refused with the reason (was: no episode_*.parquet files)."""
    root = write(tmp_path / "ds", "v3.0")
    info = json.loads((root / "meta" / "info.json").read_text())
    info["codebase_version"] = "v2.1"
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(RunFormatError) as exc:
        import_runs(root, "lerobot", mapping(tmp_path), None, log=quiet)
    assert "v3.0 layout" in str(exc.value)
