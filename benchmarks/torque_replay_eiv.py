"""Errors in variables of the torque replay (issue 28): the torque twin with offsets and a light wrist at torque noise
0.02, 0.05 and 0.1 N m; per level the delay, the truths inside their 95 % intervals, the errors in standard errors,
the interval half-widths, bound hits and the verdict.

    python benchmarks/torque_replay_eiv.py                 # 6 s fit run, population 16 x 14 + LM 6 (docs/replay.md)
    python benchmarks/torque_replay_eiv.py --noise 0.05    # one level
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from isaaclab_sysid.jobs.torque_twin_study import GROUPS, study
from isaaclab_sysid.twin.torque_twin import DELAY


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", type=float, nargs="*", default=[0.02, 0.05, 0.1], help="torque noise levels [N m]")
    ap.add_argument("--work", type=Path, default=None, help="keep the outputs here (default: a temporary folder)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="torque_eiv_"))
    print("| torque noise [N m] | delay | inside 95 % (armature / Coulomb / viscous / offset) | largest abs error [s.e.] "
          "| median half-width armature / Coulomb / viscous [%], offset [N m] | bound hits | verdict (residual / floor) |")
    print("|---|---|---|---|---|---|---|")
    for s in a.noise:
        t0 = time.perf_counter()
        c = study(s, work / f"noise_{s:g}")
        ins = " / ".join(f"{int(c.inside[g].sum())}/{c.inside[g].size}" for g in GROUPS)
        zmax = max(float(np.nanmax(np.abs(c.z[g]))) for g in GROUPS)
        med = [float(np.nanmedian(c.half_width_pct[g])) for g in GROUPS]
        hw = f"{med[0]:.1f} / {med[1]:.1f} / {med[2]:.1f}, {med[3] / 100:.3f}"
        print(f"| {s:g} | {c.delay} ({'exact' if c.delay == DELAY else 'WRONG'}) | {c.n_inside}/{c.n_total}: {ins} | "
              f"{zmax:.1f} | {hw} | {', '.join(c.bound_hits) or 'none'} | {c.verdict} ({c.residual_over_floor:.2f}x) | "
              f"<!-- {time.perf_counter() - t0:.0f} s -->")
    print(f"outputs in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
