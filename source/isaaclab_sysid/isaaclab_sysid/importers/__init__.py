"""Importers: other recordings (ROS 2 bags / MCAP, LeRobot datasets v2.x / v3.0, plain tables, BAM's servo
test-bench logs) into the project's schema 1.

``scripts/import_runs.py SRC --format F --mapping MAP.yaml --out DIR`` (docs/data_format.md, "Importers").
Each importer reads its source into :class:`~isaaclab_sysid.importers.common.Streams`; the shared
:func:`~isaaclab_sysid.importers.common.assemble_runs` repairs and validates them, and
:func:`~isaaclab_sysid.importers.common.write_imported` writes all or nothing. The ROS 2 and
LeRobot readers need the ``[import]`` extra (rosbags, pyarrow). BAM's logs (:mod:`.bam`) need no mapping file:
their header states the bench and the gain.
"""

from isaaclab_sysid.importers.common import (
    FORMATS,
    ImportDependencyError,
    ImportReport,
    ImportSpec,
    Streams,
    assemble_runs,
    load_import_spec,
    write_imported,
)
from isaaclab_sysid.importers.run_import import import_runs

__all__ = [
    "FORMATS",
    "ImportDependencyError",
    "ImportReport",
    "ImportSpec",
    "Streams",
    "assemble_runs",
    "import_runs",
    "load_import_spec",
    "write_imported",
]
