"""Throughput of the torque-driven multiple-shooting replay against the closed-loop replay, same run, same batch.

    python benchmarks/torque_replay_throughput.py [--population 32] [--window_s 0.5] [--repeats 3]

Both replay the bundled 1 kHz joint-PD twin run (data/real_runs/twin_joint_multisine_fit) for P candidates on
the MuJoCo CPU backend: the closed loop (the PD law every tick, one trajectory per candidate) and the torque
replay of its logged tau_J (P x W windows, each started from the measured state). Prints env-steps/s (physics
ticks simulated per second, all candidates) and the ratio torque / closed loop, measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from isaaclab_sysid.data import read_run
from isaaclab_sysid.importers.torque_runs import TorqueSource, torque_run
from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.timebase import TICK_HZ


def _best_rate(be: MujocoBackend, batch: CandidateBatch, run, repeats: int, ticks: int) -> float:
    be.rollout(batch.take(slice(0, 2)), [run])  # warm the worker threads and their models
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        be.rollout(batch, [run])
        best = min(best, time.perf_counter() - t0)
    return batch.size * ticks / best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--population", type=int, default=32)
    ap.add_argument("--window_s", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    robot = load_robot("franka_panda")
    run = read_run(REPO_ROOT / "data" / "real_runs" / "twin_joint_multisine_fit.csv")
    trun = torque_run(run, TorqueSource("tau_J", includes_gravity=False))
    n, p = robot.n_dof, a.population
    rng = np.random.default_rng(0)
    batch = CandidateBatch(armature=rng.uniform(0.05, 0.4, (p, n)), friction=rng.uniform(0.05, 0.8, (p, n)),
                           viscous=rng.uniform(0.05, 0.5, (p, n)), delay=rng.integers(0, 5, p))
    ticks = int(run.sample_ticks()[-1])
    closed = MujocoBackend(robot, ReplayOptions())
    torque = MujocoBackend(robot, ReplayOptions(window_ticks=int(round(a.window_s * TICK_HZ))))
    n_win = len(torque.windows_of([trun])[0])
    r_closed = _best_rate(closed, batch, run, a.repeats, ticks + closed.options.warmup_ticks)
    r_torque = _best_rate(torque, batch, trun, a.repeats, ticks)
    print(f"run {run.name}: {ticks / TICK_HZ:.1f} s at 1 kHz, population {p}, {closed.n_threads} threads")
    print(f"  closed-loop replay : {r_closed / 1e6:.3f} M env-steps/s ({p} trajectories)")
    print(f"  torque replay      : {r_torque / 1e6:.3f} M env-steps/s ({p} x {n_win} windows of {a.window_s:g} s)")
    print(f"  ratio torque / closed loop: {r_torque / r_closed:.2f}")
    closed.close()
    torque.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
