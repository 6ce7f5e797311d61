#!/usr/bin/env python
"""Validate recorded runs before any compute: prints ``OK <file>`` or the one-line error.

Usage:
    python scripts/validate_runs.py data/real_runs/*.csv logs/runs.h5

A CSV pairs with the sidecar of the same name (``.json``); an ``.h5``/``.hdf5``
file is checked run by run. Exits 1 when any file fails, 0 otherwise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from isaaclab_sysid.data import RunFormatError, read_run, read_runs_hdf5


@dataclass
class Args:
    """Validate run files (CSV + sidecar JSON, or HDF5) against the run format."""

    files: tyro.conf.Positional[tuple[Path, ...]]
    """Run CSVs (sidecar = same name with .json) and/or HDF5 files."""


def main(args: Args) -> int:
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
                run = read_run(path)
                print(f"OK {path} ({run.n_samples} rows, {run.meta.controller}, {run.meta.log_rate_hz:g} Hz)")
        except RunFormatError as exc:
            failed += 1
            print(f"FAIL {exc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
