#!/usr/bin/env python
"""Multiband task-space excitation: three stationary tones per axis under a half-cosine fade.

Writes <out>/<name>.csv + .json (a 1 kHz target run in the run format, setpoints
held at 50 Hz), <name>.png (the design) and, with --preflight, the pre-flight report.
See docs/excitation.md.
"""

from __future__ import annotations

from isaaclab_sysid.excitation.multiband_cli import MultibandOptions as Args
from isaaclab_sysid.excitation.multiband_cli import multiband_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args, None, renames={"--out_dir": "--out"})))
