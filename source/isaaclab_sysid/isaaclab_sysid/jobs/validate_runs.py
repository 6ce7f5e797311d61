"""``scripts/validate_runs.py``: recorded runs checked before any compute, ``OK <file>`` or ``FAIL <one-line error>``
per file (exit 1 when any fails); schema 2 ring logs split at their gaps on request."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from typing import Annotated

import tyro

from isaaclab_sysid.data import RunFormatError, read_runs_hdf5
from isaaclab_sysid.data.formats.csv_run import read_run_pieces
from isaaclab_sysid.importers.common import write_imported
from isaaclab_sysid.data.run import Run


@dataclass
class ValidateOptions:
    """Validate run files (CSV + sidecar JSON, or HDF5) against the run format."""

    files: tyro.conf.Positional[tuple[Path, ...]]
    """Run CSVs (sidecar = same name with .json) and/or HDF5 files (or after --runs, the shared spelling)."""
    admit_aborted: bool = False
    """Schema 2: accept runs recorded as aborted (sidecar abort.code != 0), truncated at the abort time."""
    split_at_gaps: bool = False
    """Schema 2 ring logs: accept gaps and resets by splitting the log at them (reports the pieces)."""
    split_out: Annotated[Path | None, tyro.conf.arg(name="out")] = None
    """With --split_at_gaps (--out, the shared spelling; --split_out still works): write the pieces there as schema-1
    runs (validated, all or nothing); what the log does not record (law, EE point, limits) stays unrecorded, so the
    fit still needs their flags."""


def describe(run: Run) -> str:
    """``rows, controller, rate`` and, for a run that does not record them, the facts the fit must be told."""
    text = f"{run.n_samples} rows, {run.meta.controller}, {run.meta.log_rate_hz:g} Hz"
    if run.meta.schema_version == 2:
        text += ", schema 2 (Franka tooling)"
    if run.meta.unrecorded:
        text += f"; does not record {', '.join(run.meta.unrecorded)}: the fit needs " + ", ".join(
            f"--{f}" for f in run.meta.unrecorded)
    return text


def validate_main(args: ValidateOptions) -> int:
    if not args.files:
        print("error: give at least one run file (see --help)", file=sys.stderr)
        return 2
    failed = 0
    for path in args.files:
        try:
            if path.suffix in (".h5", ".hdf5"):
                runs = read_runs_hdf5(path)
                print(f"OK {path} ({len(runs)} runs)")
            else:
                pieces = read_run_pieces(path, admit_abort=args.admit_aborted, split_at_gaps=args.split_at_gaps)
                if len(pieces) == 1:
                    print(f"OK {path} ({describe(pieces[0])})")
                else:
                    print(f"OK {path} ({len(pieces)} pieces split at gaps: "
                          + "; ".join(f"{p.name}: {describe(p)}" for p in pieces) + ")")
                if args.split_out is not None and len(pieces) > 1:
                    for p in write_imported(pieces, args.split_out):
                        print(f"wrote {p}")
        except (RunFormatError, FileExistsError) as exc:
            failed += 1
            print(f"FAIL {exc}")
    return 1 if failed else 0
