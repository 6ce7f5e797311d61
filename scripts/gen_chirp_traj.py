#!/usr/bin/env python
"""Chirp task-space excitation: a linear sweep on six axes, pi/3 phase-staggered, low or high band.

--band low: 0.1 -> 0.7 Hz, constant amplitude, 2 s up / 3 s down (the fit run, kp 200/20).
--band high: 0.7 -> 3 Hz, amplitude x (0.7/f)^p, 2 s up / 1 s down (optional held-out run).
Writes <out>/<name>.csv + .json (1 kHz target run), <name>.png and, with
--preflight, the pre-flight report. See docs/excitation.md.
"""

from __future__ import annotations

from isaaclab_sysid.excitation.chirp_cli import ChirpOptions as Args
from isaaclab_sysid.excitation.chirp_cli import chirp_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args, None, renames={"--out_dir": "--out"})))
