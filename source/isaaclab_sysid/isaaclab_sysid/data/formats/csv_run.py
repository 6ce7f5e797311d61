"""Read and write one run as CSV + sidecar JSON (validated before anything uses it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from isaaclab_sysid.data.formats.csv_table import default_sidecar, read_csv_table, run_files
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.data.schema import torque_cols
from isaaclab_sysid.data.sidecar import meta_to_dict, parse_sidecar, sidecar_robot
from isaaclab_sysid.data.table import robot_limits, run_to_table, table_to_run
from isaaclab_sysid.data.validate import check_header, check_values
from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_json


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
        from isaaclab_sysid.data.formats.franka_v2 import read_franka_run  # the dispatch: schema 2 is its format

        return read_franka_run(csv_path, side, admit_abort=admit_abort)
    robot, _ = sidecar_robot(raw)
    n_dof, q_lo, q_hi = robot_limits(robot, str(side))
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
            from isaaclab_sysid.data.formats.franka_v2 import read_franka_pieces

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
