"""The run format: one recorded run (CSV + sidecar JSON, or a group in HDF5), validated."""

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import ImpedanceLaw, Run, RunMeta
from isaaclab_sysid.data.formats.csv_run import read_run, read_run_pieces, write_run
from isaaclab_sysid.data.formats.hdf5 import read_runs_hdf5, write_runs_hdf5
from isaaclab_sysid.data.reading import read_runs
from isaaclab_sysid.data.sidecar import DEFAULT_ROBOT, unstated_robot_note

__all__ = [
    "DEFAULT_ROBOT",
    "ImpedanceLaw",
    "Run",
    "RunFormatError",
    "RunMeta",
    "read_run",
    "read_run_pieces",
    "read_runs",
    "read_runs_hdf5",
    "unstated_robot_note",
    "write_run",
    "write_runs_hdf5",
]
