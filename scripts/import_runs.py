#!/usr/bin/env python
"""Import other recordings into the project's run format (validated, all or nothing).

Usage:
    python scripts/import_runs.py log.csv --format table --mapping map.yaml --out my_runs/
    python scripts/import_runs.py bag_dir/ --format rosbag2 --mapping map.yaml --out my_runs/
    python scripts/import_runs.py rec.mcap --format mcap --mapping map.yaml --out my_runs/
    python scripts/import_runs.py lerobot_ds/ --format lerobot --mapping map.yaml --out my_runs/runs.h5
    python scripts/import_runs.py bam_logs/ --format bam --out my_runs/

BAM's servo test-bench logs (``--format bam``: a JSON log or a folder of them) need no mapping file: each header
states the bench and the firmware gain; the rows are resampled onto ``--rate_hz`` (default 200 Hz) as BAM's own
``bam.process`` does. The mapping file (YAML) of the other formats states what the source does not (controller, gains, grid rate, gap
policy) and the names that differ (columns, topics, features): docs/data_format.md,
"Importers". Prints, per source recording, the rows read, the rows dropped and why, the rate
and the runs written. Bad input is one line naming file, row (topic / episode index) and
column, and nothing is written. rosbag2, mcap and lerobot need the [import] extra.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

from isaaclab_sysid.data import RunFormatError
from isaaclab_sysid.importers import ImportDependencyError, import_runs
from isaaclab_sysid.utils.cli import parse, run_cli


@dataclass
class Args:
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


def main(args: Args) -> int:
    try:
        runs, _ = import_runs(args.src, args.format, args.mapping, args.out, rate_hz=args.rate_hz)
    except (RunFormatError, ImportDependencyError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"imported {len(runs)} run(s) into {args.out}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
