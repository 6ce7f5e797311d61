"""Replay throughput of the Isaac Lab backend (Newton) beside the MuJoCo backend, in one process.

Prints env-steps/s (1 ms physics ticks, warm-up included, summed over envs =
candidates x runs) of ``IsaacLabBackend`` (tick loop only; scene build reported
separately) and of ``MujocoBackend`` on the same runs and candidates, for each
population, with ``joint_pd`` (native delayed PD, position targets) and
``task_impedance`` (torch/Pinocchio impedance law, effort targets), both with a
2-tick delay and non-zero armature/friction/viscous.

    python benchmarks/isaaclab_throughput.py [--duration 1.0] [--populations 4 64 256] [--device cpu]

On a GPU machine (the MuJoCo figures stay CPU):

    python benchmarks/isaaclab_throughput.py --device cuda:0 --populations 64 1024 4096
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import tyro

from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

# the same runs and candidate as the MuJoCo benchmark beside this file
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_throughput import batch  # noqa: E402
from replay_throughput import runs as make_runs  # noqa: E402


@dataclass
class Args:
    duration: float = 1.0
    """run length [s] (50 Hz setpoints)"""
    populations: list[int] = field(default_factory=lambda: [4, 64, 256])
    """candidates per call (envs = population x 1 run)"""
    device: str = "cpu"
    """Isaac Lab device: cpu or cuda:0"""
    controllers: list[str] = field(default_factory=lambda: ["joint_pd", "task_impedance"])
    mujoco: bool = True
    """also measure the MuJoCo backend (CPU, all cores)"""


def main(args: Args) -> None:
    from isaaclab_sysid.sim.isaaclab_backend import IsaacLabBackend

    robot = load_robot("franka_panda")
    runs = make_runs(robot, args.duration)
    print(f"# cores {os.cpu_count()}, device {args.device}, run {args.duration} s (+50 warm-up ticks), delay 2 ticks")
    print(f"{'controller':15s} {'pop':>5s} {'isaaclab env-steps/s':>21s} {'build s':>8s} {'mujoco env-steps/s':>19s} {'ratio':>7s}")
    il = IsaacLabBackend(robot, device=args.device)
    mj = MujocoBackend(robot) if args.mujoco else None
    for p in args.populations:
        for c in args.controllers:
            run = runs[c]
            t0 = time.perf_counter()
            il.rollout(batch(p), [run])
            first = time.perf_counter() - t0
            build = first - il.last_timing["wall_s"]
            rate_il = il.last_timing["env_steps"] / il.last_timing["wall_s"]
            rate_mj = float("nan")
            if mj is not None:
                ticks = (il.options.warmup_ticks + int(run.sample_ticks()[-1]) + 1) * p
                t0 = time.perf_counter()
                mj.rollout(batch(p), [run])
                rate_mj = ticks / (time.perf_counter() - t0)
            print(f"{c:15s} {p:5d} {rate_il:21.0f} {build:8.1f} {rate_mj:19.0f} {rate_il / rate_mj:7.3f}", flush=True)
    il.close()
    if mj is not None:
        mj.close()
    print("# GPU: python benchmarks/isaaclab_throughput.py --device cuda:0 --populations 64 1024 4096", file=sys.stdout)


if __name__ == "__main__":
    main(tyro.cli(Args))
