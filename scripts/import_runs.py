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

from isaaclab_sysid.importers.cli import ImportOptions as Args
from isaaclab_sysid.importers.cli import import_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
