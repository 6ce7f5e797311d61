"""The one reader of a list of runs: CSV files (each with its sidecar) and HDF5 files, validated, names unique.

Every stage that takes runs from the user reads them here (the fit's ``--runs``/``--heldout``, the
rigid-body identification, CLIE, payload, online friction), so a file is accepted or refused the same way
everywhere. The formats themselves are read by :func:`~isaaclab_sysid.data.formats.csv_run.read_run` (the project's
schema 1 and the Franka tooling's schema 2) and :func:`~isaaclab_sysid.data.formats.hdf5.read_runs_hdf5`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from isaaclab_sysid.data.formats.csv_run import read_run
from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.formats.hdf5 import read_runs_hdf5
from isaaclab_sysid.data.run import Run

#: file suffixes read as HDF5 (every run inside); anything else is a run CSV
HDF5_SUFFIXES = (".h5", ".hdf5")


def read_runs(paths: Sequence[str | Path], sidecars: Sequence[str | Path | None] = (), *, admit_abort: bool = False,
              what: str = "runs", reader: Callable[[str, str | None], Run] | None = None) -> list[Run]:
    """Read and validate runs, in the order given.

    Args:
        paths: run CSVs, or HDF5 files (``.h5``/``.hdf5``: every run in the file).
        sidecars: sidecar JSONs paired with ``paths`` in order (a missing one, or None: ``<csv>.json``).
        admit_abort: read an aborted Franka-tooling run truncated at the abort (refused by default).
        what: how the caller names these files in messages (e.g. ``--runs``).
        reader: reads one (CSV, sidecar) instead of :func:`~isaaclab_sysid.data.formats.csv_run.read_run` (the torque
            replay's readers).

    Raises:
        RunFormatError: a file fails validation (one line naming file, row and column), a sidecar is paired with
            an HDF5 file, more sidecars than files are given, or two runs share a name.
    """
    if len(sidecars) > len(paths):
        raise RunFormatError(str(sidecars[len(paths)]), None, "sidecar",
                             f"{len(sidecars)} sidecars given for {len(paths)} {what} files (they pair in order)")
    runs: list[Run] = []
    for i, p in enumerate(paths):
        side = sidecars[i] if i < len(sidecars) else None
        if Path(p).suffix.lower() in HDF5_SUFFIXES:
            if side is not None:
                raise RunFormatError(str(side), None, "sidecar", f"{p} is an HDF5 file: its runs carry their sidecars")
            runs.extend(read_runs_hdf5(p))
        elif reader is not None:
            runs.append(reader(str(p), None if side is None else str(side)))
        else:
            runs.append(read_run(p, side, admit_abort=admit_abort))
    seen: dict[str, str] = {}
    for r in runs:
        if r.name in seen:
            raise RunFormatError(str(r.source), None, "name", f"two {what} runs share the name {r.name!r} (the other: "
                                 f"{seen[r.name]}); rename one file")
        seen[r.name] = str(r.source)
    return runs
