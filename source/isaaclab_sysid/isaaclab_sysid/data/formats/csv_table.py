"""The numeric CSV underneath every run CSV: the run's files, the header check hook, one-line errors.

Shared by the project's schema (:mod:`.csv_run`) and the Franka tooling's (:mod:`.franka_v2`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.formats.text import DELIMITERS, read_text, to_comma_csv
from isaaclab_sysid.data.sidecar import load_sidecar_json


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

    The file is read as other tools export it (:mod:`.text`): UTF-8 with or without a byte-order mark, UTF-16/32
    with one; comma-, semicolon- or tab-separated (decimal commas in the latter two); header names may be quoted.

    Args:
        csv_path: the file.
        check_columns: called with the header's column names before the rows are parsed
            (raises :class:`RunFormatError` for a wrong header).
    Raises:
        RunFormatError: not text in an encoding read here, empty file, a header of one column (another
            delimiter), no rows, a row with the wrong field count (a truncated last line says so), a field
            that is not a number (NaN and inf parse; the value checks refuse them where they are not allowed).
    """
    file = str(csv_path)
    text = read_text(csv_path, "CSV file")
    if not text.strip():
        raise RunFormatError(file, 1, "-", "file is empty (expected a header line and data rows)")
    text, _ = to_comma_csv(text, file)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    columns = [c.strip().strip('"').strip() for c in lines[0].split(",")]
    if len(columns) == 1:
        seps = ", ".join(f"{n}s" for n in DELIMITERS.values())
        raise RunFormatError(file, 1, "-", f"the header line is one column ({lines[0][:60]!r}): expected column "
                             f"names separated by {seps}")
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
    # a long run's text is parsed from UTF-8 bytes, held once (a StringIO holds it at 4 bytes a character: a 96 s
    # 1 kHz run's 82 MB text took 0.33 GB there, the largest allocation of a long fit)
    del lines
    data = text.encode("utf-8")
    del text
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=np.float64, skipinitialspace=True, encoding="utf-8")
    except ValueError:
        raise _locate_bad_field(data.decode("utf-8").split("\n"), columns, file) from None
    frame.columns = columns
    return columns, {c: frame[c].to_numpy(dtype=np.float64, copy=True) for c in columns}
