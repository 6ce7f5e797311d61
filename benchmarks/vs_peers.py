#!/usr/bin/env python
"""Peers side by side on the same twin runs: mujoco.sysid, a PACE-style CMA-ES fit, and ours (docs/benchmarks.md).

Two run sets (joint PD, task impedance; 1 kHz; hidden Stribeck truth, noise) with two fit runs and a held-out run of
another waveform at other gains. Contenders: mujoco.sysid (Gauss-Newton; needs the [peers] extra, else skipped with
the reason), PACE's choices on our replay (CMA-ES only, q-MSE loss), ours (default strategy), ours stopped at each
peer's wall time, and --strategy fast from three starts. See isaaclab_sysid/benchmarking/peers.py.

    python benchmarks/vs_peers.py            # full size (about 15 min on 2 cores)
    python benchmarks/vs_peers.py --quick    # the test suite's size (tests/test_vs_peers.py)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from isaaclab_sysid.benchmarking.peers import FULL, QUICK, run_all, table, time_to_table
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.utils.atomic import atomic_write_text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CI size (1.2 s runs, tiny budgets)")
    ap.add_argument("--controllers", default="joint_pd,task_impedance", help="run sets, comma-separated")
    ap.add_argument("--json", default=None, help="also write every figure to this JSON file")
    a = ap.parse_args(argv)
    ctrls = [c.strip() for c in a.controllers.split(",") if c.strip()]
    bad = [c for c in ctrls if c not in ("joint_pd", "task_impedance")]
    if bad:
        print(f"--controllers: unknown run set(s) {', '.join(bad)} (joint_pd, task_impedance)", file=sys.stderr)
        return 2
    size = QUICK if a.quick else FULL
    t0 = time.perf_counter()
    scores, skipped = run_all(load_robot("franka_panda"), size, ctrls)
    print()
    print(table(scores))
    print()
    print(time_to_table(scores))
    for s in skipped:
        print(s)
    print(f"\nsize {size}; wall time {time.perf_counter() - t0:.0f} s")
    if a.json:
        atomic_write_text(Path(a.json), json.dumps({"size": size.__dict__, "skipped": skipped,
                                                     "scores": [s.to_dict() for s in scores]}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
