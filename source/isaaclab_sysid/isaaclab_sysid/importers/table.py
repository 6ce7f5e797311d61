"""Plain tables (CSV or Parquet) with a column map: the usual q / dq / torque identification log.

The mapping file's ``columns`` section names the source's columns (docs/data_format.md)::

    columns:
      time: stamp          # required; time_unit: s (default), ms, us or ns
      time_unit: ms
      q: [pos0, pos1, ...]     # N each, in the robot's joint order
      dq: [vel0, ...]
      tau: [cmd0, ...]         # commanded torque (tau_J: the measured one, optional)
      q_des: [tgt0, ...]       # joint_pd targets; task_impedance: x_des: [3], quat_des: [4] (xyzw)

Other columns are ignored. CSV rows count from 2 (line 1 is the header); Parquet records from 0. A CSV is read as
other tools export it (:mod:`isaaclab_sysid.data.formats.text`): UTF-8 with or without a byte-order mark, UTF-16
with one; comma-, semicolon- or tab-separated (decimal commas in the latter two).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.formats.text import read_text, to_comma_csv
from isaaclab_sysid.importers.common import TIME_UNITS, ImportSpec, Streams, require
from isaaclab_sysid.utils.errors import plain


def _names(spec: ImportSpec, key: str, n: int, required: bool = True) -> list[str] | None:
    v = spec.columns.get(key)
    if v is None:
        if required:
            raise RunFormatError(spec.file, None, f"columns.{key}", f"missing: the source's {n} column name(s)")
        return None
    if isinstance(v, str) and n == 1:
        v = [v]
    if not isinstance(v, list) or len(v) != n or not all(isinstance(c, str) for c in v):
        raise RunFormatError(spec.file, None, f"columns.{key}", f"expected {n} column name(s), got {v!r}")
    return v


def read_table(path: str | Path, spec: ImportSpec, n_dof: int) -> Streams:
    """Read a CSV or Parquet table into :class:`Streams` by the mapping's column names.

    Raises:
        RunFormatError: a mapped column missing (header row), a value that is not a number (its row).
    """
    path = Path(path)
    file = str(path)
    if not path.is_file():
        raise RunFormatError(file, None, "-", "table file not found")
    unknown = set(spec.columns) - {"time", "time_unit", "q", "dq", "tau", "tau_J", "q_des", "x_des", "quat_des"}
    if unknown:
        raise RunFormatError(spec.file, None, f"columns.{sorted(unknown)[0]}", "unknown key")
    unit = spec.columns.get("time_unit", "s")
    if unit not in TIME_UNITS:
        raise RunFormatError(spec.file, None, "columns.time_unit", f"expected one of {', '.join(TIME_UNITS)}, got {unit!r}")
    task = spec.controller == "task_impedance"
    cols = {"time": _names(spec, "time", 1), "q": _names(spec, "q", n_dof), "dq": _names(spec, "dq", n_dof),
            "tau": _names(spec, "tau", n_dof), "tau_J": _names(spec, "tau_J", n_dof, required=False)}
    if task:
        cols["targets"] = _names(spec, "x_des", 3) + _names(spec, "quat_des", 4)  # type: ignore[operator]
    else:
        cols["targets"] = _names(spec, "q_des", n_dof)
    parquet = path.suffix.lower() in (".parquet", ".pq")
    if parquet:
        require("pyarrow", "table")
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # noqa: BLE001 - any pyarrow failure is an unreadable file
            raise RunFormatError(file, None, "-", f"not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        label, first, header = "record", 0, None
    else:
        text, _ = to_comma_csv(read_text(path, "table file"), file)  # a byte-order mark, UTF-16, ';' or tab
        try:
            frame = pd.read_csv(io.StringIO(text), skipinitialspace=True)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise RunFormatError(file, 1, "-", f"not a readable CSV table ({exc})".replace("\n", " ")) from None
        label, first, header = "row", 2, 1
    frame.columns = [str(c).strip() for c in frame.columns]
    arrays: dict[str, np.ndarray] = {}
    for sig, names in cols.items():
        if names is None:
            continue
        for c in names:
            if c not in frame.columns:
                raise RunFormatError(file, header, c, f"missing column (the mapping's columns.{sig} names it)",
                                     row_label=label)
        block = np.empty((len(frame), len(names)))
        for j, c in enumerate(names):
            vals = pd.to_numeric(frame[c], errors="coerce")
            bad = np.flatnonzero(vals.isna().to_numpy() & frame[c].notna().to_numpy()
                                 & ~frame[c].astype(str).str.strip().str.lower().isin(["nan", "inf", "-inf"]).to_numpy())
            if bad.size:
                i = int(bad[0])
                raise RunFormatError(file, i + first, c, f"not a number: {plain(frame[c].iloc[i])}", row_label=label)
            block[:, j] = vals.to_numpy(dtype=float)
        arrays[sig] = block
    t = arrays["time"][:, 0] * TIME_UNITS[unit]
    return Streams(
        name=path.stem, file=file, row_label=label, rows=np.arange(len(t)) + first, t=t,
        q=arrays["q"], dq=arrays["dq"], tau=arrays["tau"], tau_J=arrays.get("tau_J"), targets=arrays["targets"],
        names={k: v for k, v in cols.items() if v is not None},
    )
