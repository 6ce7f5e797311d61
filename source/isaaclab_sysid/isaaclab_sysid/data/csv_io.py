"""Read and write one run as CSV + sidecar JSON (validated before anything uses it)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.data.schema import torque_cols
from isaaclab_sysid.data.sidecar import load_sidecar_json, meta_to_dict, parse_sidecar
from isaaclab_sysid.data.table import robot_limits, run_to_table, table_to_run
from isaaclab_sysid.data.validate import check_header, check_values
from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_json


def default_sidecar(csv_path: str | Path) -> Path:
    """The sidecar a CSV pairs with by default: same path, ``.json`` suffix."""
    return Path(csv_path).with_suffix(".json")


def _locate_bad_field(lines: list[str], columns: list[str], file: str) -> RunFormatError:
    for i, line in enumerate(lines[1:], start=2):
        for c, field in zip(columns, line.split(",")):
            try:
                float(field)
            except ValueError:
                return RunFormatError(file, i, c, f"not a number: {field.strip()!r}")
    return RunFormatError(file, None, "-", "unparseable CSV")


def run_files(csv_path: str | Path, sidecar_path: str | Path | None) -> tuple[Path, Path, Any]:
    """(CSV path, sidecar path, decoded sidecar) of a run; a missing CSV or sidecar is a one-line error."""
    csv_path = Path(csv_path)
    side = Path(sidecar_path) if sidecar_path is not None else default_sidecar(csv_path)
    if not csv_path.is_file():
        raise RunFormatError(str(csv_path), None, "-", "CSV file not found")
    return csv_path, side, load_sidecar_json(side)


def read_csv_table(
    csv_path: Path, check_columns: Callable[[list[str]], None]
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Parse a numeric CSV with a header line into column name -> (T,) float64.

    Args:
        csv_path: the file.
        check_columns: called with the header's column names before the rows are parsed
            (raises :class:`RunFormatError` for a wrong header).
    Raises:
        RunFormatError: empty file, no rows, a row with the wrong field count (a truncated
            last line says so), a field that is not a number (NaN and inf parse; the value
            checks refuse them where they are not allowed).
    """
    file = str(csv_path)
    if not csv_path.is_file():
        raise RunFormatError(file, None, "-", "CSV file not found")
    text = csv_path.read_text(encoding="utf-8")
    if not text.strip():
        raise RunFormatError(file, 1, "-", "file is empty (expected a header line and data rows)")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    columns = [c.strip() for c in lines[0].split(",")]
    check_columns(columns)
    if len(lines) < 2:
        raise RunFormatError(file, 2, columns[0], "no data rows after the header")
    n_col = len(columns)
    for i, line in enumerate(lines[1:], start=2):
        n_fields = line.count(",") + 1
        if n_fields != n_col:
            last = i == len(lines)
            col = columns[n_fields] if n_fields < n_col else "-"
            what = "truncated last line" if last and n_fields < n_col else "wrong number of fields"
            raise RunFormatError(file, i, col, f"{what}: {n_fields} fields, expected {n_col}")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=np.float64, skipinitialspace=True)
    except ValueError:
        raise _locate_bad_field(lines, columns, file) from None
    frame.columns = columns
    return columns, {c: frame[c].to_numpy(dtype=np.float64, copy=True) for c in columns}


def read_run(csv_path: str | Path, sidecar_path: str | Path | None = None, *, admit_abort: bool = False) -> Run:
    """Read and validate one run: the project's schema 1, or the Franka tooling's schema 2.

    Args:
        csv_path: the run's CSV (one row per logged sample, header line first).
        sidecar_path: its sidecar JSON (default: the CSV path with ``.json``).
        admit_abort: schema 2 only: read a run the tooling recorded as aborted, truncated at
            the abort time (refused by default).
    Returns:
        The validated :class:`Run` (arrays in SI units). A schema-2 run's ``meta.unrecorded``
        lists the replay facts its log does not record (``meta.impedance`` is None).
    Raises:
        RunFormatError: one line naming the file, row and column of the first problem.
    """
    csv_path, side, raw = run_files(csv_path, sidecar_path)
    file = str(csv_path)
    if isinstance(raw, dict) and raw.get("schema_version") == 2:
        from isaaclab_sysid.data.franka_v2 import read_franka_run

        return read_franka_run(csv_path, side, admit_abort=admit_abort)
    robot = raw.get("robot", "franka_panda") if isinstance(raw, dict) else "franka_panda"
    n_dof, q_lo, q_hi = robot_limits(str(robot), str(side))
    meta = parse_sidecar(raw, str(side), n_dof, q_lo, q_hi)
    _, table = read_csv_table(csv_path, lambda cols: check_header(cols, meta, n_dof, file, 1))
    check_values(table, meta, q_lo, q_hi, file, row_of=2, allow_nan=torque_cols(n_dof))
    return table_to_run(table, meta, n_dof, csv_path.stem, csv_path)


def read_run_pieces(
    csv_path: str | Path, sidecar_path: str | Path | None = None, *, admit_abort: bool = False,
    split_at_gaps: bool = False,
) -> list[Run]:
    """:func:`read_run`, but a schema-2 ring log with gaps or resets is split at them when ``split_at_gaps``
    (pieces ``<stem>_part<i>``); any other run comes back as a list of one."""
    if split_at_gaps:
        csv_path, side, raw = run_files(csv_path, sidecar_path)
        if isinstance(raw, dict) and raw.get("schema_version") == 2:
            from isaaclab_sysid.data.franka_v2 import read_franka_pieces

            return read_franka_pieces(csv_path, side, admit_abort=admit_abort, split_at_gaps=True)
    return [read_run(csv_path, sidecar_path, admit_abort=admit_abort)]


def write_run(run: Run, csv_path: str | Path, sidecar_path: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``run`` as CSV (17 significant digits: exact round trip) + sidecar, atomically.

    Returns:
        (csv path, sidecar path).
    """
    csv_path = Path(csv_path)
    side = Path(sidecar_path) if sidecar_path is not None else default_sidecar(csv_path)
    table = run_to_table(run)
    run.meta.num_samples = run.n_samples
    data = np.stack(list(table.values()), axis=1)
    with atomic_path(csv_path) as tmp:
        np.savetxt(tmp, data, fmt="%.17g", delimiter=",", header=",".join(table), comments="")
    atomic_write_json(side, meta_to_dict(run.meta))
    return csv_path, side
