#!/usr/bin/env python
"""Pre-flight report of a target run before any arm moves.

Prints reference peaks, joint-space peaks, predicted joint torques at the run's gains
(replay + gravity) vs torque limits, the torque step per setpoint vs the slew limit,
cond(W_b) of the base regressor and the identifiability table, then the verdict: PASS / WARN /
FAIL per check and one line `safe to run: yes|no` with what to change on a FAIL (thresholds:
docs/excitation.md); writes <run>_preflight.json (verdict included) and <run>_preflight.png
beside the run (or to --out-dir).
Exit status: 0 safe to run; 3 a check FAILed (not safe to run as it is); 2 a WARN with --strict
(or the run's facts missing); 1 the run cannot be read.
"""

from __future__ import annotations

from isaaclab_sysid.excitation.preflight_cli import PreflightOptions as Args
from isaaclab_sysid.excitation.preflight_cli import preflight_main as main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: main(parse(Args, None, renames={"--out_dir": "--out"}, positional=("--runs",))))
