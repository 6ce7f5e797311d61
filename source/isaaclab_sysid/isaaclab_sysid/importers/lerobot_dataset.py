"""Write a LeRobot dataset: the v2.1 layout (``meta/info.json`` + ``data/chunk-000/episode_<i>.parquet``) or the v3.0
layout (``data/chunk-000/file-<j>.parquet`` holding many episodes, the episode table
``meta/episodes/chunk-000/file-000.parquet`` and ``meta/tasks.parquet``).

What LeRobot's recorder writes for an arm without cameras: per frame ``observation.state`` and
``action`` (one float32 per motor, names ``<motor>.pos``), ``timestamp`` [s], ``frame_index``,
``episode_index``, ``index`` and ``task_index``. The servo twin (``twin/servo.py``) writes its runs
with this, and the tests write their datasets with it; :mod:`.lerobot` reads them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.importers.common import require
from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_json


@dataclass(frozen=True)
class Episode:
    """One episode as LeRobot stores it.

    Attributes:
        state: (T, N) ``observation.state`` in the dataset's units.
        action: (T, N) ``action`` (the commanded positions) in the same units.
    """

    state: np.ndarray
    action: np.ndarray


#: The layouts :func:`write_lerobot_dataset` writes (``info.json``'s ``codebase_version``).
CODEBASE_VERSIONS = ("v2.1", "v3.0")
_TASK = "system identification"


def write_lerobot_dataset(root: str | Path, episodes: Sequence[Episode], motors: Sequence[str], fps: float,
                          robot_type: str = "so101_follower", codebase_version: str = "v2.1",
                          episodes_per_file: int | None = None) -> Path:
    """Write ``episodes`` as a LeRobot dataset folder ``root`` (files written atomically); returns ``root``.

    Stamps are ``frame / fps`` in float32, as LeRobot writes them.

    Args:
        codebase_version: ``"v2.1"`` (one parquet file per episode) or ``"v3.0"`` (episodes packed into
            ``data/chunk-000/file-<j>.parquet`` with the episode table ``meta/episodes/``).
        episodes_per_file: v3.0 only: episodes per data file (default: all in one, as LeRobot writes a small dataset).
    """
    require("pyarrow", "lerobot")
    import pyarrow as pa
    import pyarrow.parquet as pq

    if codebase_version not in CODEBASE_VERSIONS:
        raise ValueError(f"codebase_version {codebase_version!r}: expected one of {', '.join(CODEBASE_VERSIONS)}")
    v3 = codebase_version == "v3.0"
    root = Path(root)
    names = [f"{m}.pos" for m in motors]
    n = len(motors)
    feats = {
        "action": {"dtype": "float32", "shape": [n], "names": names},
        "observation.state": {"dtype": "float32", "shape": [n], "names": names},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }
    (root / "data" / "chunk-000").mkdir(parents=True, exist_ok=True)
    (root / "meta").mkdir(parents=True, exist_ok=True)
    tables = []
    index = 0
    for e, ep in enumerate(episodes):
        t = len(ep.state)
        if ep.state.shape != (t, n) or ep.action.shape != (t, n):
            raise ValueError(f"episode {e}: state and action must be ({t}, {n})")
        tables.append(pa.table({
            "action": pa.array(list(np.asarray(ep.action, dtype=np.float32)), type=pa.list_(pa.float32())),
            "observation.state": pa.array(list(np.asarray(ep.state, dtype=np.float32)), type=pa.list_(pa.float32())),
            "timestamp": pa.array((np.arange(t) / fps).astype(np.float32)),
            "frame_index": pa.array(np.arange(t, dtype=np.int64)),
            "episode_index": pa.array(np.full(t, e, dtype=np.int64)),
            "index": pa.array(np.arange(index, index + t, dtype=np.int64)),
            "task_index": pa.array(np.zeros(t, dtype=np.int64)),
        }))
        index += t
    info = {"codebase_version": codebase_version, "robot_type": robot_type, "fps": fps, "features": feats,
            "total_episodes": len(episodes), "total_frames": index, "total_tasks": 1, "chunks_size": 1000}
    if not v3:
        for e, table in enumerate(tables):
            with atomic_path(root / "data" / "chunk-000" / f"episode_{e:06d}.parquet") as tmp:
                pq.write_table(table, tmp)
        info["data_path"] = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
        atomic_write_json(root / "meta" / "info.json", info)
        return root
    per = max(1, len(episodes) if episodes_per_file is None else int(episodes_per_file))
    rows: dict[str, list] = {k: [] for k in ("episode_index", "tasks", "length", "data/chunk_index", "data/file_index",
                                             "dataset_from_index", "dataset_to_index", "meta/episodes/chunk_index",
                                             "meta/episodes/file_index")}
    start = 0
    for j, first in enumerate(range(0, len(tables), per)):
        group = tables[first:first + per]
        with atomic_path(root / "data" / "chunk-000" / f"file-{j:03d}.parquet") as tmp:
            pq.write_table(pa.concat_tables(group), tmp)
        for k, table in enumerate(group):
            for key, val in (("episode_index", first + k), ("tasks", [_TASK]), ("length", table.num_rows),
                             ("data/chunk_index", 0), ("data/file_index", j), ("dataset_from_index", start),
                             ("dataset_to_index", start + table.num_rows), ("meta/episodes/chunk_index", 0),
                             ("meta/episodes/file_index", 0)):
                rows[key].append(val)
            start += table.num_rows
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
    with atomic_path(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet") as tmp:
        pq.write_table(pa.table(rows), tmp)
    with atomic_path(root / "meta" / "tasks.parquet") as tmp:
        pq.write_table(pa.table({"task_index": [0], "task": [_TASK]}), tmp)
    info.update({"data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
                 "data_files_size_in_mb": 100, "splits": {"train": f"0:{len(episodes)}"}})
    atomic_write_json(root / "meta" / "info.json", info)
    return root


def write_calibration(path: str | Path, cal: dict) -> Path:
    """A LeRobot calibration JSON (``{motor: {id, drive_mode, homing_offset, range_min, range_max}}``), atomically."""
    return atomic_write_json(path, {k: dict(v) for k, v in cal.items()})


def json_calibration(motors: Sequence[str], mids: Sequence[int], half_spans: Sequence[int],
                     drive_modes: Sequence[int] | None = None) -> dict:
    """A calibration record (LeRobot's layout) from each motor's range middle and half span [counts]."""
    drive = drive_modes or [0] * len(motors)
    return {m: {"id": i + 1, "drive_mode": int(drive[i]), "homing_offset": 0, "range_min": int(mids[i] - half_spans[i]),
                "range_max": int(mids[i] + half_spans[i])} for i, m in enumerate(motors)}

