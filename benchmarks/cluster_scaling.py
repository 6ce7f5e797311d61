"""Per-generation time of a population on Ray workers (1 and 2) against the in-process MuJoCo backend.

One "generation" is one ``rollout`` of a population of random candidates on the
runs (what a CMA-ES generation costs the backend). Measured in one process, on
this machine, all on loopback (a private Ray instance, 1 CPU per worker):

- ``local`` with 1 and 2 threads (the reference: the same cores, no Ray);
- ``ray`` with 1 and 2 workers; every result is checked bit-identical to local;
- the Ray overhead per generation [ms]: wall time minus the slowest worker's own
  rollout time (scheduling, serialization of the slices and of the returned
  states, the gather), and the bytes each generation brings back.

From those figures it prints the scaling model of docs/cluster.md,
``t(W) = c R ceil(P / W) + o + b P R / B`` (c: one candidate-run's rollout [s] on
one core, o: the overhead, b: bytes of one candidate-run's states, B: the driver's
link [B/s]), checked against the 2-worker measurement, and projects it to more
workers and a PACE-sized population.

    python benchmarks/cluster_scaling.py [--duration 2.0] [--population 16] [--generations 4] [--ci]
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the private Ray instance: loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_worker_niceness", "0")  # Ray nices its workers to 15; the local reference runs at 0

import numpy as np  # noqa: E402
import tyro  # noqa: E402

from isaaclab_sysid.objective.loss import LossWeights, WeightedLoss, total_loss  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.sim.factory import RayOptions, make_backend  # noqa: E402
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions  # noqa: E402
from isaaclab_sysid.sim.ray import shutdown  # noqa: E402
from isaaclab_sysid.twin.demo import gains  # noqa: E402
from isaaclab_sysid.twin.recorder import dense_run  # noqa: E402
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets  # noqa: E402

N = 7


@dataclass
class Args:
    duration: float = 2.0
    """length of each of the two runs [s] (task impedance, a chirp and a multiband)"""
    log_rate: float = 1000.0
    """rows per second of the runs [Hz]: 1000 (a 1 kHz log, the heavy transfer case) or 50"""
    population: int = 16
    """candidates per generation"""
    generations: int = 4
    """generations timed per configuration (after one untimed call that sends the runs)"""
    link_mbps: float = 117.0
    """the driver's network link for the projection [MB/s] (117 = 1 Gbit/s Ethernet)"""
    project_workers: list[int] = field(default_factory=lambda: [8, 32, 128, 512])
    """worker counts of the projection table"""
    ci: bool = False
    """a short run (1 s runs, 8 candidates, 2 generations)"""


def make_runs(duration: float, log_rate: float):
    robot = load_robot("franka_panda")
    pos, quat = robot.ee_pose(Q_READY)
    out = []
    for kind, seed, kp in (("chirp", 0, 200.0), ("multiband", 3, 500.0)):
        t, off = pose_offsets(kind, duration, 50.0, seed=seed)
        x, qu = task_targets(pos, quat, off)
        k, d = gains(kp, kp / 10)
        run = skeleton_run(robot, "task_impedance", t, np.hstack([x, qu]), k, d, name=kind)
        out.append(dense_run(run) if log_rate == 1000.0 else run)
    return robot, out


def population(p: int, gen: int) -> CandidateBatch:
    rng = np.random.default_rng(1000 + gen)
    return CandidateBatch(armature=rng.uniform(0.02, 0.4, (p, N)), friction=rng.uniform(0.0, 1.0, (p, N)),
                          viscous=rng.uniform(0.0, 1.0, (p, N)), delay=rng.integers(0, 4, p))


@dataclass
class Measured:
    label: str
    gen_s: float
    overhead_ms: float | None = None
    back_mb: float | None = None
    first_s: float | None = None


def time_backend(label: str, be, runs, args: Args, ref: list | None, losses: bool) -> tuple[Measured, list]:
    """Median wall time per generation (``losses``: the CMA-ES path, states scored where they are computed;
    else every state comes back, the refinement's and the intervals' path); for Ray the overhead and bytes back."""

    def call(g: int):
        b = population(args.population, g)
        if losses:
            return be.loss(b, runs, WeightedLoss(LossWeights())) if be.scores_loss else total_loss(be.rollout(b, runs), runs)
        return be.rollout(b, runs)

    t0 = time.perf_counter()
    call(-1)  # untimed: sends the runs to every worker once
    first = time.perf_counter() - t0
    walls, over, outs = [], [], []
    for g in range(args.generations):
        t0 = time.perf_counter()
        outs.append(call(g))
        walls.append(time.perf_counter() - t0)
        if hasattr(be, "stats"):
            over.append(be.stats.last_wall_s - max(be.stats.last_compute_s))
    if ref is not None:  # bit-identical to local, generation by generation
        for a, b in zip(outs, ref):
            same = (np.array_equal(a.total, b.total) if losses else
                    all(np.array_equal(ra.q, rb.q) and np.array_equal(ra.tau, rb.tau) for ra, rb in zip(a, b)))
            assert same, f"{label} differs from local"
    m = Measured(label, statistics.median(walls))
    if hasattr(be, "stats"):
        m.overhead_ms = 1e3 * statistics.median(over)
        m.back_mb = be.stats.last_result_bytes / 1e6
        m.first_s = first
    return m, outs


def main(args: Args) -> None:
    if args.ci:
        args.duration, args.population, args.generations = 1.0, 8, 2
    robot, runs = make_runs(args.duration, args.log_rate)
    R, P = len(runs), args.population
    opts = ReplayOptions()
    print(f"cluster scaling: {R} runs x {args.duration:g} s ({runs[0].n_samples} rows each, {args.log_rate:g} Hz), "
          f"population {P}, {args.generations} generations, {os.cpu_count()} cores, Ray on loopback")

    local = {k: make_backend("mujoco", robot, opts, n_threads=k) for k in (1, 2)}
    rows: dict[tuple[str, int, bool], Measured] = {}
    refs = {}
    for losses in (True, False):
        for k in (1, 2):
            what = "losses" if losses else "states"
            rows[("local", k, losses)], out = time_backend(f"local {k} thread{'s' * (k > 1)}, {what}", local[k], runs,
                                                           args, refs.get(losses), losses)
            refs.setdefault(losses, out)
    for w in (1, 2):
        be = make_backend("mujoco", robot, opts, ray=RayOptions(workers=w), log=lambda s: None)
        for losses in (True, False):
            what = "losses back" if losses else "states back"
            rows[("ray", w, losses)], _ = time_backend(f"ray {w} worker{'s' * (w > 1)}, {what}", be, runs, args,
                                                       refs[losses], losses)
    shutdown()

    base = rows[("local", 1, True)].gen_s
    print(f"\n{'configuration':<28} {'s/generation':>13} {'vs local 1 thread':>18} {'Ray overhead [ms]':>18} "
          f"{'back [MB]':>10} {'1st call [s]':>13}")
    for m in rows.values():
        extra = "" if m.overhead_ms is None else f" {m.overhead_ms:18.1f} {m.back_mb:10.4f} {m.first_s:13.2f}"
        print(f"{m.label:<28} {m.gen_s:13.3f} {base / m.gen_s:17.2f}x{extra}")
    for losses, path in ((True, "CMA-ES (losses back)"), (False, "refinement/intervals (states back)")):
        d1 = rows[("ray", 1, losses)].gen_s - rows[("local", 1, losses)].gen_s
        d2 = rows[("ray", 2, losses)].gen_s - rows[("local", 2, losses)].gen_s
        print(f"{path}: ray 1 worker vs local 1 thread {1e3 * d1:+.1f} ms per generation, "
              f"ray 2 workers vs local 2 threads {1e3 * d2:+.1f} ms")

    # the scaling model from the 1-thread cost, the 1-worker overhead and the bytes per candidate-run
    c = rows[("local", 1, False)].gen_s / (P * R)
    print(f"\nmodel t(W) = c R ceil(P/W) + o + b P R / B, c = {1e3 * c:.2f} ms per candidate-run (one core)")
    B = args.link_mbps * 1e6
    for losses, path in ((True, "CMA-ES generation (losses back)"), (False, "refinement batch (states back)")):
        o = rows[("ray", 1, losses)].overhead_ms / 1e3
        b = rows[("ray", 1, losses)].back_mb * 1e6 / (P * R)
        pred2 = c * R * math.ceil(P / 2) + o
        meas2 = rows[("ray", 2, losses)].gen_s
        w_star = c * B / b
        print(f"{path}: o = {1e3 * o:.1f} ms, b = {b:.0f} B per candidate-run; t(2) predicted {pred2:.3f} s, "
              f"measured {meas2:.3f} s ({meas2 / pred2:.2f}x); over a {args.link_mbps:g} MB/s link the transfer "
              f"equals the compute at W = c B / b = {w_star:.0f} workers")
        print(f"  {'population':>10} {'workers':>8} {'s/generation':>13} {'speed-up vs 1 core':>19} {'link share':>11}")
        for pop in (P, 2048):
            for w in args.project_workers:
                comp, link = c * R * math.ceil(pop / w), b * pop * R / B
                t = comp + o + link
                print(f"  {pop:>10} {w:>8} {t:13.3f} {c * R * pop / t:18.1f}x {link / t:10.0%}")


if __name__ == "__main__":
    main(tyro.cli(Args))
