#!/usr/bin/env python
"""The fit on twins it must work for: every cell of the recovery matrix (docs/fit.md, "Where the fit holds and fails").

Cells: {1 kHz, 50 Hz with the state-age model} x {Coulomb truth, Stribeck truth fitted with the static group, Stribeck
truth fitted Coulomb-only} x {joint PD, task impedance}, plus a stale 50 Hz log fitted without the state-age model.
Each cell reports delay exactness, parameter errors, the 95 % curvature intervals' coverage of the truth over the
seeds (identifiable numbers), how many numbers were reported unidentifiable, the held-out q RMS over its noise floor
(RMS between the held-out run and a repeat with other noise) and the adequacy verdict. See
isaaclab_sysid/jobs/twin_study.py for the twins and the fit.

    python benchmarks/fit_matrix.py            # full size: 6 s fit runs, 5 s held out, 3 noise seeds per cell
    python benchmarks/fit_matrix.py --ci       # the test suite's size (tests/test_fit_matrix.py)
"""

from __future__ import annotations

import argparse
import sys
import time

from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.jobs.twin_study import CI, FULL, matrix, run_cell, table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ci", action="store_true", help="CI size (2.5 s fit runs, one seed)")
    a = ap.parse_args(argv)
    size = CI if a.ci else FULL
    robot = load_robot("franka_panda")
    scores = []
    t0 = time.perf_counter()
    for cell in matrix():
        for seed in size.seeds:
            t = time.perf_counter()
            s = run_cell(cell, seed, size, robot)
            scores.append(s)
            print(f"{cell.name} seed {seed}: delay {s.delay}, coverage {s.covered}/{s.checked}, unidentified {s.unbounded}, "
                  f"held-out/floor {s.heldout_over_floor:.2f}, {s.verdict} ({time.perf_counter() - t:.0f} s)"
                  + (f"; static-friction score z {', '.join(f'{z:.1f}' for z in s.static_z)}" if s.static_z else ""),
                  flush=True)
    print()
    print(table(scores))
    print(f"\nsize {size}; wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
