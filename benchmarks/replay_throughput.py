"""Replay throughput of the MuJoCo backend against raw ``mujoco.rollout``.

Prints env-steps/s (1 ms physics ticks, warm-up included, summed over candidates)
for populations 1, 16, 64, 256 with ``joint_pd`` and ``task_impedance`` (with a
2-tick torque delay), and the ratio to raw ``mujoco.rollout`` of the same model
(same joint parameters) with built-in position actuators and an open-loop
zero-order-held control sequence, measured in the same process on the same threads.

    python benchmarks/replay_throughput.py [--duration 2.0] [--populations 1 16 64 256]
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import mujoco
import numpy as np
import tyro
from mujoco import rollout as mj_rollout

from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.twin.demo import gains
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets

ARM = np.array([0.3, 0.25, 0.2, 0.15, 0.07, 0.06, 0.03])
FRIC = np.array([0.6, 0.5, 0.45, 0.4, 0.2, 0.18, 0.1])
VISC = np.array([0.4, 0.35, 0.3, 0.25, 0.1, 0.08, 0.05])
KPJ = np.array([600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0])
KDJ = np.array([50.0, 50.0, 50.0, 50.0, 20.0, 15.0, 5.0])


@dataclass
class Args:
    duration: float = 2.0
    """run length [s] (50 Hz setpoints)"""
    populations: list[int] = field(default_factory=lambda: [1, 16, 64, 256])
    threads: int = 0
    """worker threads (0 = all cores)"""
    repeats: int = 1


def runs(robot, duration):
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets("multiband", duration, 50.0, seed=1)
    x, qd = task_targets(pos, quat, off)
    kp, kd = gains(200.0, 20.0)
    task = skeleton_run(robot, "task_impedance", t, np.hstack([x, qd]), kp, kd, name="task")
    qt = Q_READY + 0.2 * np.sin(2 * np.pi * 0.5 * t)[:, None] * np.ones(7)
    joint = skeleton_run(robot, "joint_pd", t, qt, KPJ, KDJ, name="joint")
    return {"joint_pd": joint, "task_impedance": task}


def batch(pop: int, delay: int = 2) -> CandidateBatch:
    """``pop`` copies of the benchmark candidate (ARM, FRIC, VISC, ``delay`` ticks)."""
    return CandidateBatch(armature=np.tile(ARM, (pop, 1)), friction=np.tile(FRIC, (pop, 1)),
                          viscous=np.tile(VISC, (pop, 1)), delay=np.full(pop, delay))


def raw_rollout_rate(robot, run, pop, nthread, warmup):
    spec = robot.build_mjspec(JointOverrides(ARM, FRIC, VISC))
    for i, j in enumerate(robot.joint_names):
        a = spec.add_actuator(name=j, target=j, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        a.set_to_position(kp=float(KPJ[i]), kv=float(KDJ[i]))
    m = spec.compile()
    ticks, vals = run.setpoints()
    nstep = warmup + int(run.sample_ticks()[-1])
    k = np.arange(nstep) - warmup
    idx = np.maximum(np.searchsorted(ticks, np.maximum(k, 0), side="right") - 1, 0)
    ctrl = np.ascontiguousarray(vals[idx][None])  # (1, nstep, nu), tiled over the batch
    nstate = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    datas = [mujoco.MjData(m) for _ in range(nthread)]
    chunk = 64
    with mj_rollout.Rollout(nthread=nthread) as ro:
        t0 = time.perf_counter()
        for s in range(0, pop, chunk):
            b = min(chunk, pop - s)
            st0 = np.zeros((b, nstate))
            st0[:, 1 : 1 + m.nq] = run.meta.q_init
            ro.rollout([m] * b, datas, st0, np.repeat(ctrl, b, axis=0))
        dt = time.perf_counter() - t0
    return pop * nstep / dt


def main(args: Args) -> None:
    robot = load_robot("franka_panda")
    nthread = args.threads or os.cpu_count() or 1
    opts = ReplayOptions()
    be = MujocoBackend(robot, opts, n_threads=nthread)
    print(f"mujoco {mujoco.__version__}, {nthread} threads, {args.duration:.1f} s runs at 50 Hz "
          f"(+{opts.warmup_ticks} warm-up ticks), Panda 7 DOF, friction/armature/damping set")
    print(f"{'controller':<16}{'P':>5}{'backend steps/s':>18}{'raw rollout steps/s':>22}{'ratio':>8}")
    for ctrl, run in runs(robot, args.duration).items():
        nstep = opts.warmup_ticks + int(run.sample_ticks()[-1])
        delay = 0 if ctrl == "joint_pd" else 2
        for pop in args.populations:
            b = batch(pop, delay)
            best_be, best_raw = 0.0, 0.0
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                out = be.rollout(b, [run])[0]
                rate = pop * nstep / (time.perf_counter() - t0)
                assert not out.diverged.any()
                best_be = max(best_be, rate)
                best_raw = max(best_raw, raw_rollout_rate(robot, run, pop, nthread, opts.warmup_ticks))
            print(f"{ctrl:<16}{pop:>5}{best_be:>18,.0f}{best_raw:>22,.0f}{best_be / best_raw:>8.2f}")
    be.close()


if __name__ == "__main__":
    main(tyro.cli(Args))
