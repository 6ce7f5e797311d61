#!/usr/bin/env python
"""Interval coverage on the MuJoCo twin (fuller than tests/test_intervals_coverage.py).

    python benchmarks/interval_coverage.py --seeds 20 --runs 2 --duration 4

Prints, per parameter group, the rate at which the curvature (HAC) intervals and
the export's ranges (rho = --rho, linear) contain the twin's true parameters,
the number of unbounded (unidentifiable) intervals, and the wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_intervals_coverage import coverage_study  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20, help="noise seeds (one twin data set each)")
    ap.add_argument("--runs", type=int, default=2, help="runs per data set (multiband, chirp, ...)")
    ap.add_argument("--duration", type=float, default=4.0, help="run length [s]")
    ap.add_argument("--polish", type=int, default=3, help="Gauss-Newton iterations to the loss minimum")
    ap.add_argument("--rho", type=float, default=1.5, help="held-out/fit loss ratio used for the ranges")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rate, rrate, unb = coverage_study(range(a.seeds), a.duration, a.runs, a.polish, a.rho)
    print(f"{'group':10s}{'interval':>10s}{'range':>10s}{'n':>6s}{'unbounded':>11s}")
    for g in rate:
        print(f"{g:10s}{rate[g][0]:10.3f}{rrate[g][0]:10.3f}{rate[g][1]:6d}{unb[g]:11d}")
    print(f"nominal 0.95; wall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
