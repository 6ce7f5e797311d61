#!/usr/bin/env python
"""Joint-space Fourier excitation (Swevers), optimized for cond(W_b) of the base regressor.

Writes <out>/<name>.csv + .json (a 1 kHz joint_pd target run, setpoints at --control-rate-hz),
<name>.png and, with --preflight, the pre-flight report. See docs/excitation.md.
"""

from __future__ import annotations

from isaaclab_sysid.excitation.fourier_cli import FourierOptions as Args
from isaaclab_sysid.excitation.fourier_cli import fourier_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args, None, renames={"--out_dir": "--out"})))
