"""``scripts/import_runs.py``: recordings in other formats (ROS 2 bags, MCAP, LeRobot datasets, tables, BAM's servo logs)
into validated runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

from isaaclab_sysid.data import RunFormatError
from isaaclab_sysid.importers import ImportDependencyError, import_runs


@dataclass
class ImportOptions:
    """Import a table, a ROS 2 bag (sqlite3 / MCAP), a LeRobot dataset (v2.x, v3.0) or BAM's servo logs as validated runs."""

    src: tyro.conf.Positional[Path]
    """The source: a CSV/Parquet table, a bag folder / .db3 / .mcap file, a LeRobot dataset folder, or a BAM JSON log
    or a folder of them."""
    format: Literal["rosbag2", "mcap", "lerobot", "table", "bam"]
    """The source's format."""
    out: Path
    """Output folder (one CSV + sidecar per run) or an .h5 file (all runs in one HDF5)."""
    mapping: Path | None = None
    """Mapping file (YAML): robot, controller, gains, rate_hz, max_gap_s, on_gap and the source's names (every format
    but bam)."""
    rate_hz: float | None = None
    """bam only: the even grid [Hz] the logs are resampled onto (default 200: BAM's 5 ms); must divide 1000."""


def import_main(args: ImportOptions) -> int:
    try:
        runs, _ = import_runs(args.src, args.format, args.mapping, args.out, rate_hz=args.rate_hz)
    except (RunFormatError, ImportDependencyError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"imported {len(runs)} run(s) into {args.out}")
    return 0
