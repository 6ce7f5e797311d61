"""Write a LeRobot dataset (v2.1 layout: ``meta/info.json`` + ``data/chunk-000/episode_<i>.parquet``).

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


def write_lerobot_dataset(root: str | Path, episodes: Sequence[Episode], motors: Sequence[str], fps: float,
                          robot_type: str = "so101_follower") -> Path:
    """Write ``episodes`` as a LeRobot dataset folder ``root`` (files written atomically); returns ``root``.

    Stamps are ``frame / fps`` in float32, as LeRobot writes them.
    """
    require("pyarrow", "lerobot")
    import pyarrow as pa
    import pyarrow.parquet as pq

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
    index = 0
    for e, ep in enumerate(episodes):
        t = len(ep.state)
        if ep.state.shape != (t, n) or ep.action.shape != (t, n):
            raise ValueError(f"episode {e}: state and action must be ({t}, {n})")
        table = pa.table({
            "action": pa.array(list(np.asarray(ep.action, dtype=np.float32)), type=pa.list_(pa.float32())),
            "observation.state": pa.array(list(np.asarray(ep.state, dtype=np.float32)), type=pa.list_(pa.float32())),
            "timestamp": pa.array((np.arange(t) / fps).astype(np.float32)),
            "frame_index": pa.array(np.arange(t, dtype=np.int64)),
            "episode_index": pa.array(np.full(t, e, dtype=np.int64)),
            "index": pa.array(np.arange(index, index + t, dtype=np.int64)),
            "task_index": pa.array(np.zeros(t, dtype=np.int64)),
        })
        with atomic_path(root / "data" / "chunk-000" / f"episode_{e:06d}.parquet") as tmp:
            pq.write_table(table, tmp)
        index += t
    info = {"codebase_version": "v2.1", "robot_type": robot_type, "fps": fps, "features": feats,
            "total_episodes": len(episodes), "total_frames": index, "chunks_size": 1000,
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"}
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

