#!/usr/bin/env python
"""Contact stiffness and damping on the MuJoCo table twin (fuller than tests/test_contact.py).

    python benchmarks/contact_coverage.py --seeds 50

Prints (presses at 1 and 0.5 mm/s, a quasi-static speed) the coverage of the 95 % intervals of k_c (two presses) and b_c (three impacts) and their
mean relative half-widths (the damping's is the wider), then the mapping check:
the same tests run with MuJoCo's own soft contact and the solref/solimp of contact.mapping, and
the numbers identified back from it, against the explicit law measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from isaaclab_sysid.contact import identify_contact
from isaaclab_sysid.contact.twin import ContactTwin, record_contact_run
from isaaclab_sysid.robots import load_robot


def session(robot, twin, seed, press=(0.001, 0.0005)):
    runs = [record_contact_run(robot, twin, "press", v, seed * 100 + i, above=0.002) for i, v in enumerate(press)]
    runs += [record_contact_run(robot, twin, "impact", v, seed * 100 + 50 + i, above=0.015, depth=0.005, hold_s=0.2)
             for i, v in enumerate((0.05, 0.1, 0.2))]
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=50, help="noise seeds")
    ap.add_argument("--k", type=float, default=2.0e4, help="true stiffness [N/m]")
    ap.add_argument("--b", type=float, default=30.0, help="true damping [N s/m]")
    ap.add_argument("--press", type=float, nargs=2, default=(0.001, 0.0005), help="press speeds [m/s] (seed: 0.5 mm/s)")
    a = ap.parse_args()
    robot = load_robot("franka_panda")
    t0 = time.perf_counter()
    rows = {}
    for law in ("explicit", "mujoco"):
        twin = ContactTwin(stiffness=a.k, damping=a.b, law=law)
        res = [identify_contact(robot, session(robot, twin, s, tuple(a.press))) for s in range(a.seeds if law == "explicit" else max(5, a.seeds // 10))]
        for name, truth, get in (("k_c [N/m]", a.k, lambda e: e.stiffness), ("b_c [N s/m]", a.b, lambda e: e.damping)):
            ivs = [get(e) for e in res]
            rows[(law, name)] = (np.mean([iv.contains(truth) for iv in ivs]),
                                 np.mean([(iv.upper - iv.lower) / (2 * iv.value) for iv in ivs]),
                                 np.mean([iv.value / truth - 1 for iv in ivs]), len(ivs))
    print(f"{'law':>9s}{'number':>13s}{'coverage':>10s}{'rel half-width':>16s}{'mean error':>12s}{'seeds':>7s}")
    for (law, name), (c, w, err, n) in rows.items():
        print(f"{law:>9s}{name:>13s}{c:>10.3f}{100 * w:>15.2f}%{100 * err:>11.2f}%{n:>7d}")
    print(f"explicit: the hidden law; mujoco: MuJoCo's soft contact with the mapped solref/solimp; nominal 0.95; "
          f"wall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
