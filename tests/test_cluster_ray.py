"""--cluster ray on a local two-process Ray cluster (loopback only): the same fit bit for bit as --cluster local,
a worker killed mid-generation or hung, and a lost cluster that stops the fit with a checkpoint --resume finishes."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

# before Ray is imported: a Ray started here keeps every server on 127.0.0.1, and reports nothing
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from isaaclab_sysid.data import read_run, write_run  # noqa: E402
from isaaclab_sysid.jobs.fit_args import FitArgs  # noqa: E402
from isaaclab_sysid.objective.errors import FitError  # noqa: E402
from isaaclab_sysid.objective.loss import LossWeights, WeightedLoss, total_loss  # noqa: E402
from isaaclab_sysid.jobs.fit_job import run_fit  # noqa: E402
from isaaclab_sysid.fit.problem import build_backend  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.sim.interface import CandidateBatch  # noqa: E402
from isaaclab_sysid.twin.params import TwinNoise, TwinParams  # noqa: E402
from isaaclab_sysid.twin.recorder import record_twin  # noqa: E402
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets  # noqa: E402

try:
    import ray
    from ray.cluster_utils import Cluster

    from isaaclab_sysid.sim import ray as fc
except ImportError as exc:  # the [ray] extra is optional
    ray = None
    RAY_MISSING = f"ray is not importable ({exc}); install the [ray] extra: pip install -e '.[ray]'"
needs_ray = pytest.mark.skipif(ray is None, reason=RAY_MISSING if ray is None else "")

N = 7


@pytest.fixture(scope="module")
def twin_csvs(tmp_path_factory) -> list[str]:
    """Two short 1 kHz twin runs (a chirp to fit, a multiband held out) as CSV + sidecar."""
    d = tmp_path_factory.mktemp("twin")
    robot = load_robot("franka_panda")
    pos, quat = robot.ee_pose(Q_READY)
    tp = TwinParams(robot="franka_panda", armature=np.full(N, 0.1), friction=np.full(N, 0.5), viscous=np.full(N, 0.3),
                    delay=1, torque_clamp=False, slew_limit=False, noise=TwinNoise(q_std=1e-4, dq_std=1e-3))
    paths = []
    for kind, kp, seed, name in (("chirp", 200, 0, "c200"), ("multiband", 500, 3, "mb")):
        t, off = pose_offsets(kind, 1.0, 50.0, seed=seed)
        x, qu = task_targets(pos, quat, off)
        k = np.array([kp] * 3 + [kp / 10] * 3, dtype=float)
        tgt = skeleton_run(robot, "task_impedance", t, np.hstack([x, qu]), k, 2 * np.sqrt(k), name=name)
        csv, _ = write_run(record_twin(robot, tgt, tp, seed=seed + 1, log_rate_hz=1000.0), d / f"{name}.csv")
        paths.append(str(csv))
    return paths


def _args(twin_csvs, log_dir, **kw) -> FitArgs:
    # CMA-ES generations are what a cluster spreads (and what a killed worker interrupts): the cmaes strategy
    return FitArgs.build(real_csv=[twin_csvs[0]], heldout_csv=[twin_csvs[1]], num_envs=8, max_iter=4, refine_iter=1,
                         seed=3, save_interval=1, log_dir=str(log_dir), plots=False, quiet=True, strategy="cmaes", **kw)


def _outputs(run_dir: Path) -> tuple[dict, list[str]]:
    """The result file and progress.csv without its wall-time column."""
    res = json.loads((run_dir / "sysid_best_params.json").read_text())
    rows = (run_dir / "progress.csv").read_text().splitlines()
    col = rows[0].split(",").index("wall_s")
    return res, [",".join(x for i, x in enumerate(r.split(",")) if i != col) for r in rows]


@pytest.fixture(scope="module")
def reference(twin_csvs, tmp_path_factory):
    """The --cluster local fit every Ray fit must reproduce exactly."""
    return _outputs(run_fit(_args(twin_csvs, tmp_path_factory.mktemp("local")), log=lambda s: None))


@pytest.fixture(scope="module")
def cluster():
    """A head node without CPUs (the driver's) and one worker node with 2 CPUs: 2 worker processes, all on loopback."""
    if ray is None:
        pytest.skip(RAY_MISSING)
    # a machine that vanishes is declared dead after 2 missed 0.5 s health checks (Ray's default: 5 x 3 s)
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 2, "health_check_initial_delay_ms": 0}
    c = Cluster(initialize_head=True,
                head_node_args={"num_cpus": 0, "include_dashboard": False, "_system_config": fast})
    c.add_node(num_cpus=2)
    ray.init(address=c.address, configure_logging=False)
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    yield c
    fc.shutdown()
    ray.shutdown()
    c.shutdown()


def _pool_pids() -> list[int]:
    pool = fc.current_pool()
    return [w.info.pid for w in pool.ready] if pool is not None else []


def _kill_when_busy(sig: int, after: tuple[Path, str] | None = None, timeout_s: float = 60.0) -> dict:
    """A thread that sends ``sig`` to a worker while it replays a slice (once a file matches ``after``: folder,
    pattern); the dict it returns gets the worker's ``pid`` and its ``slice``."""
    done: dict = {}

    def go() -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and "pid" not in done:
            pool = fc.current_pool()
            ready = after is None or any(after[0].glob(after[1]))
            busy = pool.busy() if (pool is not None and ready) else []
            if busy:
                info, part = busy[-1]
                os.kill(info.pid, sig)
                done.update(pid=info.pid, slice=part)
            time.sleep(0.002)

    done["thread"] = threading.Thread(target=go, daemon=True)
    done["thread"].start()
    return done


def test_cluster_flags_without_cluster_ray_are_refused(twin_csvs, tmp_path):
    with pytest.raises(FitError, match="--ray_address given but --cluster is local; add --cluster ray"):
        run_fit(_args(twin_csvs, tmp_path, ray_address="127.0.0.1:6379"), log=lambda s: None)
    assert not any(tmp_path.iterdir())  # refused before anything was written


@needs_ray
def test_rollouts_split_over_workers_equal_local_bit_for_bit(cluster, twin_csvs):
    """1 and 2 workers: every candidate's states equal the in-process backend's exactly, in candidate order."""
    run = read_run(twin_csvs[0])
    robot = load_robot("franka_panda")
    rng = np.random.default_rng(0)
    P = 7  # slices of 3 and 4 candidates
    batch = CandidateBatch(armature=rng.uniform(0.02, 0.4, (P, N)), friction=rng.uniform(0, 1.5, (P, N)),
                           viscous=rng.uniform(0, 1, (P, N)), delay=rng.integers(0, 4, P))
    local = build_backend(FitArgs.build().problem, robot).rollout(batch, [run])[0]
    put = []
    for workers in (1, 2):
        be = build_backend(FitArgs.build(cluster="ray", ray_workers=workers).problem, robot, log=lambda s: None)
        assert be.name == "mujoco" and len(be.workers) == workers
        (out,) = be.rollout(batch, [run])
        assert len(be.stats.last_compute_s) == workers
        for f in ("q", "dq", "ee_pos", "ee_quat", "tau", "diverged"):
            np.testing.assert_array_equal(getattr(out, f), getattr(local, f), err_msg=f"{f} with {workers} worker(s)")
        assert out.q.flags.writeable and be.events == []
        put.append(be.stats.run_bytes)
        # CMA-ES's path: scored on the workers, only the losses come back, the same bits
        lb, ref = be.loss(batch, [run], WeightedLoss(LossWeights(), [1.5])), total_loss([local], [run], LossWeights(), [1.5])
        for f in ("total", "contrib", "per_run", "diverged"):
            np.testing.assert_array_equal(getattr(lb, f), getattr(ref, f), err_msg=f"loss {f} with {workers} worker(s)")
        assert be.stats.last_result_bytes < 200 < out.q.nbytes
    assert put[0] > run.q.nbytes and put[1] == 0  # the run travelled once: the second backend reused the workers


@needs_ray
def test_fit_on_ray_is_bit_identical_to_local(cluster, twin_csvs, reference, tmp_path):
    for workers in (2, 1):
        got = _outputs(run_fit(_args(twin_csvs, tmp_path / str(workers), cluster="ray", ray_workers=workers),
                               log=lambda s: None))
        assert got[0] == reference[0], f"sysid_best_params.json differs with {workers} worker(s)"
        assert got[1] == reference[1], f"progress.csv differs with {workers} worker(s)"


@needs_ray
def test_worker_killed_mid_generation_is_rerun_and_the_fit_matches(cluster, twin_csvs, reference, tmp_path, capsys):
    killer = _kill_when_busy(signal.SIGKILL, after=(tmp_path, "*/checkpoint_1.json"))
    run_dir = run_fit(_args(twin_csvs, tmp_path, cluster="ray", ray_workers=2), log=lambda s: None)
    killer["thread"].join(5)
    assert "pid" in killer, "no worker was busy to kill"
    assert _outputs(run_dir) == reference
    out = capsys.readouterr().out
    # the death is seen with the slice it held, or (killed as it handed a result back) with the next one sent to it
    assert re.search(rf"cluster: worker {killer['pid']}@\S+ died running candidates \d+\.\.\d+ of \d+ ", out), out
    assert "re-running the slice on another worker (re-run 1)" in out
    assert killer["pid"] not in _pool_pids()


@needs_ray
def test_hung_worker_is_timed_out_and_its_slice_rerun(cluster, twin_csvs):
    run = read_run(twin_csvs[0])
    robot = load_robot("franka_panda")
    batch = CandidateBatch(armature=np.full((4, N), 0.1), friction=np.linspace(0, 1, 4 * N).reshape(4, N),
                           viscous=np.full((4, N), 0.3), delay=np.arange(4))
    local = build_backend(FitArgs.build().problem, robot).rollout(batch, [run])[0]
    lines: list[str] = []
    # start the pool under a generous limit first (a loaded 2-core machine takes more than 3 s to start a worker);
    # the 3 s backend below reuses its workers, so its limit times out the hung slice, not the start
    build_backend(FitArgs.build(cluster="ray", ray_workers=2, ray_timeout_s=120.0).problem, robot)
    be = build_backend(FitArgs.build(cluster="ray", ray_workers=2, ray_timeout_s=3.0).problem, robot, log=lines.append)
    hung = be.workers[0].pid
    os.kill(hung, signal.SIGSTOP)  # alive, holds its CPU, never answers
    try:
        t0 = time.monotonic()
        (out,) = be.rollout(batch, [run])
        waited = time.monotonic() - t0
    finally:
        os.kill(hung, signal.SIGKILL)
    assert waited >= 3.0
    np.testing.assert_array_equal(out.q, local.q)
    np.testing.assert_array_equal(out.tau, local.tau)
    (ev,) = be.events
    assert ev.kind == "timeout" and ev.worker.startswith(f"{hung}@") and "--ray_timeout_s 3 s" in ev.detail
    assert be.stats.timeouts == 1 and be.stats.reruns == 1 and hung not in _pool_pids()
    assert any("timeout" in ln and "re-running the slice" in ln for ln in lines)


@needs_ray
def test_lost_cluster_stops_with_a_checkpoint_that_resumes_to_the_same_result(cluster, twin_csvs, reference, tmp_path):
    (node,) = cluster.worker_nodes

    def remove_node() -> None:  # every worker machine goes away after generation 2
        end = time.monotonic() + 60
        while time.monotonic() < end and not any(tmp_path.glob("*/checkpoint_2.json")):
            time.sleep(0.005)
        cluster.remove_node(node, allow_graceful=False)

    t = threading.Thread(target=remove_node, daemon=True)
    t.start()
    with pytest.raises(FitError) as err:
        run_fit(_args(twin_csvs, tmp_path, cluster="ray", ray_workers=2, ray_timeout_s=20.0), log=lambda s: None)
    t.join(5)
    msg = str(err.value)
    assert err.value.code == fc.CLUSTER_EXIT_CODE and "Ray cluster is lost" in msg and "--resume" in msg
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "checkpoint_2.json").is_file() and not (run_dir / "sysid_best_params.json").exists()

    cluster.add_node(num_cpus=2)  # the machines are back
    resumed = FitArgs.build(resume=str(run_dir), cluster="ray", ray_workers=2, quiet=True)
    assert run_fit(resumed, log=lambda s: None) == run_dir
    assert _outputs(run_dir) == reference


@needs_ray
def test_every_friction_law_runs_on_the_workers_bit_for_bit(cluster, twin_csvs):
    """The friction laws (sim/friction.py) travel in the batch: each law's candidates replay on the workers with the
    same bits as in process."""
    run = read_run(twin_csvs[0])
    robot = load_robot("franka_panda")
    one = np.ones((2, N))
    laws = [dict(mu_static=0.6 * one, dynamic_ratio=0.5 * one, stribeck_shape=1.4 * one),
            dict(sigmoid_amplitude=0.5 * one, sigmoid_slope=8.0 * one, sigmoid_offset=0.02 * one),
            dict(friction=0.3 * one, load_friction_motor=0.05 * one, load_friction_external=0.03 * one),
            dict(friction=0.3 * one, presliding_stiffness=200.0 * one)]
    local_be = build_backend(FitArgs.build().problem, robot)
    be = build_backend(FitArgs.build(cluster="ray", ray_workers=2).problem, robot, log=lambda s: None)
    for kw in laws:
        batch = CandidateBatch(armature=0.1 * one, viscous=0.3 * one, delay=np.array([1, 2]), **kw)
        (out,), (local,) = be.rollout(batch, [run]), local_be.rollout(batch, [run])
        np.testing.assert_array_equal(out.q, local.q, err_msg=str(sorted(kw)))


@needs_ray
def test_servo_motor_model_runs_on_the_workers_bit_for_bit(cluster):
    """A servo run (issue 42: the firmware duty, the DC motor, a torque-off phase, the load law) replays on the
    workers with the same bits as in process; the workers build the bench robot from its config name."""
    from test_servo_motor import batch as servo_batch, servo_run

    robot = load_robot("bam_pendulum_xl330")
    local_be = build_backend(FitArgs.build().problem, robot)
    be = build_backend(FitArgs.build(cluster="ray", ray_workers=2).problem, robot, log=lambda s: None)
    b = servo_batch()
    b = CandidateBatch(**{g: np.concatenate([getattr(b, g), 1.1 * getattr(b, g)]) for g in b.groups()})
    b.delay = np.array([3, 2])
    run = servo_run()
    (out,), (local,) = be.rollout(b, [run]), local_be.rollout(b, [run])
    np.testing.assert_array_equal(out.q, local.q)
    assert not np.allclose(out.q[0], out.q[1])


@needs_ray
def test_state_age_model_runs_on_the_workers_and_matches_local(cluster):
    """A 50 Hz run scored at its state age (--state_age_ms): the model wraps each worker's backend, same bits."""
    pytest.importorskip("isaaclab_sysid.sim.state_age", reason="no state-age model (--state_age_ms) in this checkout")
    robot = load_robot("franka_panda")
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets("chirp", 1.0, 50.0, seed=1)
    x, qu = task_targets(pos, quat, off)
    k = np.array([300.0] * 3 + [30.0] * 3)
    run = skeleton_run(robot, "task_impedance", t, np.hstack([x, qu]), k, 2 * np.sqrt(k), name="slow")
    assert not run.is_1khz
    batch = CandidateBatch(armature=np.full((3, N), 0.1), friction=np.full((3, N), 0.2), viscous=np.full((3, N), 0.3),
                           delay=np.array([0, 1, 2]))
    local = build_backend(FitArgs.build(state_age_ms=10).problem, robot).rollout(batch, [run])[0]
    be = build_backend(FitArgs.build(cluster="ray", ray_workers=2, state_age_ms=10).problem, robot, log=lambda s: None)
    (out,) = be.rollout(batch, [run])
    assert out.q.shape == local.q.shape == (3, run.n_samples, N)
    np.testing.assert_array_equal(out.q, local.q)
    np.testing.assert_array_equal(out.ee_quat, local.ee_quat)
    # the workers collapsed the dense rollout: only the 50 Hz rows came back
    assert be.stats.last_result_bytes == sum(a.nbytes for a in (out.q, out.dq, out.ee_pos, out.ee_quat, out.tau,
                                                                out.diverged))


@needs_ray
def test_a_torque_disturbance_runs_on_the_workers_and_matches_local(cluster, twin_csvs):
    """The process-noise check of the intervals (intervals/process_noise.py) pushes replicates with a torque
    disturbance: on Ray workers it must give the local bits, so a cluster fit's intervals are widened alike."""
    run = read_run(twin_csvs[0])
    robot = load_robot("franka_panda")
    batch = CandidateBatch(armature=np.full((3, N), 0.1), friction=np.full((3, N), 0.2), viscous=np.full((3, N), 0.3),
                           delay=np.array([0, 1, 2]))
    local_be = build_backend(FitArgs.build().problem, robot)
    ticks = local_be.options.warmup_ticks + int(run.sample_ticks()[-1]) + 2
    dist = [0.05 * np.random.default_rng(3).standard_normal((ticks, N))]
    local = local_be.rollout(batch, [run], disturbance=dist)[0]
    be = build_backend(FitArgs.build(cluster="ray", ray_workers=2).problem, robot, log=lambda s: None)
    (out,) = be.rollout(batch, [run], disturbance=dist)
    np.testing.assert_array_equal(out.q, local.q)
    assert np.abs(out.q - be.rollout(batch, [run])[0].q).max() > 1e-6  # the disturbance acted
