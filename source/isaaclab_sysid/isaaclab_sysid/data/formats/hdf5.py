"""Many runs in one HDF5 file: ``/runs/<name>/<column>`` datasets + a ``sidecar`` JSON attribute."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.data.schema import torque_cols
from isaaclab_sysid.data.sidecar import meta_to_dict, parse_sidecar, sidecar_robot
from isaaclab_sysid.data.table import robot_limits, run_to_table, table_to_run
from isaaclab_sysid.data.validate import check_header, check_values
from isaaclab_sysid.utils.atomic import atomic_path


def write_runs_hdf5(runs: Sequence[Run], path: str | Path) -> Path:
    """Write runs to one HDF5 file atomically; run names must be unique."""
    path = Path(path)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate run names in {names}")
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as h5:
        grp = h5.create_group("runs", track_order=True)
        for run in runs:
            g = grp.create_group(run.name)
            run.meta.num_samples = run.n_samples
            g.attrs["sidecar"] = json.dumps(meta_to_dict(run.meta))
            table = run_to_table(run)
            g.attrs["columns"] = json.dumps(list(table))
            for col, values in table.items():
                g.create_dataset(col, data=values)
    return path


def read_runs_hdf5(path: str | Path) -> list[Run]:
    """Read and validate every run in an HDF5 file (rows in errors count from 1)."""
    path = Path(path)
    if not path.is_file():
        raise RunFormatError(str(path), None, "-", "HDF5 file not found")
    try:
        h5 = h5py.File(path, "r")
    except OSError as exc:
        raise RunFormatError(str(path), None, "-", f"not a readable HDF5 file ({exc})") from None
    runs = []
    with h5:
        if "runs" not in h5 or len(h5["runs"]) == 0:
            raise RunFormatError(str(path), None, "/runs", "no runs in the file")
        for name, g in h5["runs"].items():
            file = f"{path}:/runs/{name}"
            if "sidecar" not in g.attrs:
                raise RunFormatError(file, None, "sidecar", "missing sidecar attribute")
            try:
                raw = json.loads(g.attrs["sidecar"])
            except json.JSONDecodeError as exc:
                raise RunFormatError(file, None, "sidecar", f"invalid JSON: {exc.msg}") from None
            n_dof, q_lo, q_hi = robot_limits(sidecar_robot(raw)[0], file)
            meta = parse_sidecar(raw, file, n_dof, q_lo, q_hi)
            columns = json.loads(g.attrs.get("columns", "[]")) or list(g.keys())
            check_header(columns, meta, n_dof, file, None)
            lengths = {c: g[c].shape for c in columns}
            t_shape = lengths["t_s"]
            for c, shape in lengths.items():
                if shape != t_shape:
                    raise RunFormatError(file, None, c, f"dataset has shape {shape}, t_s has {t_shape}")
            table = {c: np.asarray(g[c][()], dtype=np.float64) for c in columns}
            check_values(table, meta, q_lo, q_hi, file, row_of=1, allow_nan=torque_cols(n_dof))
            runs.append(table_to_run(table, meta, n_dof, name, path))
    return runs
