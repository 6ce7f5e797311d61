"""The run format: one recorded run (CSV + sidecar JSON, or a group in HDF5), validated."""

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import ImpedanceLaw, Run, RunMeta
from isaaclab_sysid.data.csv_io import read_run, read_run_pieces, write_run
from isaaclab_sysid.data.hdf5_io import read_runs_hdf5, write_runs_hdf5

__all__ = [
    "ImpedanceLaw",
    "Run",
    "RunFormatError",
    "RunMeta",
    "read_run",
    "read_run_pieces",
    "read_runs_hdf5",
    "write_run",
    "write_runs_hdf5",
]
