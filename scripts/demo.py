#!/usr/bin/env python
"""The README's main job on the bundled example data (CPU default).

Validates the bundled runs and builds the robot models; the fit stage is wired in
by scripts/sysid_franka_osc.py once it exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.paths import REAL_RUNS_DIR
from isaaclab_sysid.robots import load_robot


def main() -> int:
    robot = load_robot("franka_panda")
    mj = robot.build_mujoco()
    print(f"robot {robot.name}: {robot.n_dof} joints, MuJoCo nv={mj.nv}, EE link {robot.config.ee_link}")
    runs = sorted(Path(REAL_RUNS_DIR).glob("*.csv"))
    if not runs:
        print(f"no bundled runs in {REAL_RUNS_DIR}")
        return 0
    for csv in runs:
        try:
            run = read_run(csv)
        except RunFormatError as exc:
            print(f"FAIL {exc}")
            return 1
        print(f"OK {csv.name}: {run.n_samples} rows, {run.meta.controller}, {run.duration:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
