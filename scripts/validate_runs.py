#!/usr/bin/env python
"""Validate recorded runs before any compute: prints ``OK <file>`` or the one-line error.

Usage:
    python scripts/validate_runs.py data/real_runs/*.csv logs/runs.h5
    python scripts/validate_runs.py franka_logs/chirp_low.csv      # the Franka tooling's schema 2
    python scripts/validate_runs.py ring.csv --split_at_gaps --out pieces/   # a ring log with gaps

A CSV pairs with the sidecar of the same name (``.json``); an ``.h5``/``.hdf5``
file is checked run by run. The project's schema 1 and the Franka tooling's
schema 2 (50 Hz log or 1 kHz ring log with ``<stem>_targets.csv``) are both read;
for a run that does not record the control law, the EE point or the torque
limits, the line names the fit flags that must state them. Exits 1 when any
file fails, 0 otherwise.
"""

from __future__ import annotations

from isaaclab_sysid.jobs.validate_runs import ValidateOptions as Args
from isaaclab_sysid.jobs.validate_runs import validate_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args, None, renames={"--split_out": "--out"}, positional=("--runs",))))
