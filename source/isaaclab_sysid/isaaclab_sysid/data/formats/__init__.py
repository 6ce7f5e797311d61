"""Every file format a run is read from or written to, one module each.

* :mod:`.csv_run`: the project's run format (CSV + sidecar JSON, schema 1; docs/data_format.md), dispatching
  schema 2 to :mod:`.franka_v2`; :mod:`.csv_table`: the numeric CSV both build on;
* :mod:`.hdf5`: many runs in one HDF5 file;
* :mod:`.franka_v2`: the Franka tooling's logs (schema 2: 50 Hz logs and 1 kHz ring logs);
* :mod:`.ur10e`: the real UR10e logs in ``shared/data/ur10e`` (no header, 31 columns) and their authors' parameters.

Recordings in other formats (ROS 2 bags, LeRobot datasets, tables) are converted into runs by
:mod:`isaaclab_sysid.importers`; :func:`isaaclab_sysid.data.read_runs` is the one reader of a list of runs.
"""
