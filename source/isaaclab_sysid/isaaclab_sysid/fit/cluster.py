"""Populations across machines on Ray: :class:`RayBackend`, a replay backend whose rollouts run on Ray workers.

Each Ray worker (an actor, one process) builds the replay backend once from a
:class:`BackendRecipe` (the backend's name, the robot config with its URDF bytes and
inertial overrides, the replay options, an optional wrapper such as the state-age
model) and keeps the run sets it was sent. :meth:`RayBackend.rollout` splits the
:class:`~isaaclab_sysid.sim.interface.CandidateBatch` into contiguous slices, one per
worker, replays them in parallel and concatenates the
:class:`~isaaclab_sysid.sim.interface.RunRollout` of every run in candidate order;
:meth:`RayBackend.loss` (CMA-ES's call, through ``ReplayObjective.loss``) scores each
slice on its worker and brings back only the losses. A candidate's rollout does not
depend on its batch-mates, the thread or the process it runs in
(``tests/test_replay_engine.py``), so the fit is the same bit for bit with 1, 2 or N
workers and with ``--cluster local``; the refinement, the intervals and the
evaluation get the cluster by calling ``rollout`` as they always do.

Faults (docs/cluster.md): a worker that dies while it holds a slice has that slice
re-run on another worker (a counted :class:`ClusterEvent`, logged) and a replacement
started; a worker that does not answer within ``timeout_s`` is killed and treated
the same way. A slice that fails on :data:`MAX_ATTEMPTS` workers stops the fit with a
:class:`ClusterError`, a cluster with no worker left and none that can start with a
:class:`ClusterLostError` (exit status :data:`CLUSTER_EXIT_CODE`; the newest
checkpoint resumes the fit, ``--resume``).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import pickle
import platform
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.errors import FitError
from isaaclab_sysid.fit.loss import LossBreakdown, LossWeights, run_weights, total_loss
from isaaclab_sysid.robots.config import RobotConfig
from isaaclab_sysid.robots.overrides import LinkInertial
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, ReplayOptions, RunRollout, check_supported

#: workers a slice may fail on (death or timeout) before the fit stops
MAX_ATTEMPTS = 3
#: run sets each worker (and the driver's object store) keeps
RUN_CACHE = 8
#: exit status of a fit stopped by the cluster
CLUSTER_EXIT_CODE = 4
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: the package folders whose sources decide a rollout's bits (hashed into every worker's fingerprint)
ROLLOUT_SOURCES = ("sim", "robots")


class ClusterError(FitError):
    """The cluster cannot evaluate a batch: workers fail to start or differ from this machine, a slice keeps failing."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=CLUSTER_EXIT_CODE)


class ClusterLostError(ClusterError):
    """No worker is left and none can be started: the fit stops; its newest checkpoint resumes it."""


def import_ray(private: bool = False):
    """The ``ray`` module; ``private``: first make a Ray instance started here bind loopback only.

    Raises:
        ImportError: ray is not installed (the ``[ray]`` extra).
    """
    import sys

    if private and "ray" not in sys.modules:
        # Ray's single-machine mode keeps every server on 127.0.0.1 (read once, at import)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    return ray


# ------------------------------------------------------------------ what travels to a worker
def environment_fingerprint() -> dict[str, str]:
    """What must match on every machine for bit-identical rollouts: Python, numpy, mujoco and the sources
    that compute a rollout (this package's ``sim/`` and ``robots/``: replay semantics, the C loop, the model)."""
    import mujoco

    h = hashlib.sha1()
    for sub in ROLLOUT_SOURCES:
        for p in sorted((PACKAGE_ROOT / sub).rglob("*")):
            if p.suffix in (".py", ".c", ".h") and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(PACKAGE_ROOT)).encode())
                h.update(p.read_bytes())
    return {"python": platform.python_version(), "machine": platform.machine(), "numpy": np.__version__,
            "mujoco": mujoco.__version__, "rollout sources (sim/, robots/)": h.hexdigest()[:16]}


@dataclass(frozen=True)
class BackendRecipe:
    """Everything a worker needs to build its backend (pickled to every worker once).

    Attributes:
        backend: the backend name of :func:`isaaclab_sysid.fit.backends.make_backend`.
        config: the robot config; ``urdf``: its URDF file's bytes (a worker whose
            machine lacks that file, or holds another, writes these to a private file).
        link_inertials: the robot's inertial overrides (``--nominal``).
        options: the replay options.
        kwargs: the backend constructor's keyword arguments.
        wrap: applied to the built backend on the worker (e.g. the state-age model), or None.
    """

    backend: str
    config: RobotConfig
    urdf: bytes
    link_inertials: dict[str, LinkInertial]
    options: ReplayOptions
    kwargs: dict[str, Any] = field(default_factory=dict)
    wrap: Callable[[ReplayBackend], ReplayBackend] | None = None

    @classmethod
    def of(cls, backend: str, robot: Robot, options: ReplayOptions, wrap: Callable | None = None,
           **kwargs: Any) -> "BackendRecipe":
        return cls(backend, robot.config, Path(robot.config.urdf_path).read_bytes(), dict(robot.link_inertials),
                   options, dict(kwargs), wrap)

    def robot(self) -> Robot:
        """The robot on this machine (its URDF written to a private folder if the local file is missing or differs)."""
        cfg = self.config
        path = Path(cfg.urdf_path)
        if not (path.is_file() and path.read_bytes() == self.urdf):
            local = Path(tempfile.mkdtemp(prefix="sysid_ray_worker_")) / path.name
            local.write_bytes(self.urdf)
            cfg = dataclasses.replace(cfg, urdf_path=local)
        return Robot(cfg, dict(self.link_inertials))

    def build(self) -> ReplayBackend:
        """The backend (on a worker)."""
        from isaaclab_sysid.fit.backends import make_backend

        be = make_backend(self.backend, self.robot(), self.options, **self.kwargs)
        return self.wrap(be) if self.wrap is not None else be


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as it reported itself when it started."""

    pid: int
    host: str
    node_id: str
    backend: str
    supported_groups: frozenset[str]
    fingerprint: dict[str, str]

    @property
    def label(self) -> str:
        return f"{self.pid}@{self.host}"


class ReplicaWorker:
    """The Ray actor: one backend, built once, and the run sets it was sent (keyed by content digest)."""

    def __init__(self, recipe: BackendRecipe) -> None:
        import ray

        self.backend = recipe.build()
        self._runs: collections.OrderedDict[str, list[Run]] = collections.OrderedDict()
        self.info = WorkerInfo(os.getpid(), socket.gethostname(), ray.get_runtime_context().get_node_id(),
                               self.backend.name,
                               frozenset(self.backend.supported_groups), environment_fingerprint())

    def describe(self) -> WorkerInfo:
        return self.info

    def rollout(self, key: str, runs_box: list, batch: CandidateBatch,
                disturbance: list | None = None) -> tuple[list[RunRollout], float]:
        """Roll ``batch`` out on the run set ``key`` (fetched once from ``runs_box[0]``); the rollouts and [s].
        ``disturbance``: per run, a torque added every tick (the MuJoCo backend's; intervals/process_noise.py)."""
        runs = self._run_set(key, runs_box)
        t0 = time.perf_counter()
        kw = {} if disturbance is None else {"disturbance": disturbance}
        out = list(self.backend.rollout(batch, runs, **kw))
        return out, time.perf_counter() - t0

    def loss(self, key: str, runs_box: list, batch: CandidateBatch, weights: LossWeights,
             traj_weights: np.ndarray) -> tuple[LossBreakdown, float]:
        """The loss of ``batch`` on the run set ``key``, scored here; and the rollout's time [s]."""
        runs = self._run_set(key, runs_box)
        t0 = time.perf_counter()
        out = list(self.backend.rollout(batch, runs))
        secs = time.perf_counter() - t0
        return total_loss(out, runs, weights, traj_weights), secs

    def _run_set(self, key: str, runs_box: list) -> list[Run]:
        import ray

        runs = self._runs.get(key)
        if runs is None:
            runs = ray.get(runs_box[0])
            self._runs[key] = runs
            while len(self._runs) > RUN_CACHE:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        return runs


# ------------------------------------------------------------------ driver side
@dataclass(frozen=True)
class ClusterEvent:
    """A fault the cluster recovered from (or stopped on).

    Attributes:
        kind: ``died`` (the worker process went away), ``timeout`` (no answer within the
            limit: killed) or ``start_failed`` (a replacement did not come up).
        worker: ``pid@host`` of the worker.
        candidates: (first, stop) candidate range of the slice it held (None for start_failed).
        batch_size: candidates in that batch.
        detail: what Ray said.
    """

    kind: str
    worker: str
    candidates: tuple[int, int] | None
    batch_size: int
    detail: str

    def line(self) -> str:
        c = self.candidates
        what = "" if c is None else f" running candidates {c[0]}..{c[1] - 1} of {self.batch_size}"
        return f"worker {self.worker} {self.kind.replace('_', ' ')}{what} ({self.detail})"


@dataclass
class ClusterStats:
    """Counters over the backend's life, and the timing of the last call.

    Attributes:
        batches, slices: ``rollout``/``loss`` calls and slices completed.
        reruns: slices re-run after their worker died or timed out.
        deaths, timeouts, workers_started: counted events.
        run_bytes: bytes of run data put into the object store (once per run set).
        result_bytes: bytes gathered from the workers (states, or losses).
        last_wall_s: wall time of the last call [s]; last_compute_s: its slices'
            in-worker rollout times [s]; last_result_bytes: its gathered bytes.
    """

    batches: int = 0
    slices: int = 0
    reruns: int = 0
    deaths: int = 0
    timeouts: int = 0
    workers_started: int = 0
    run_bytes: int = 0
    result_bytes: int = 0
    last_wall_s: float = 0.0
    last_compute_s: list[float] = field(default_factory=list)
    last_result_bytes: int = 0


@dataclass
class _Worker:
    actor: Any
    started: float
    info: WorkerInfo | None = None
    ready_ref: Any = None
    #: (first, stop) candidates it is replaying now, or None
    slice: tuple[int, int] | None = None


def runs_digest(runs: Sequence[Run]) -> str:
    """A content digest of a run set (every field and array byte): the key the workers cache it under."""
    h = hashlib.sha1()
    for r in runs:
        bufs: list[pickle.PickleBuffer] = []
        h.update(pickle.dumps(r, protocol=5, buffer_callback=bufs.append))
        for b in bufs:
            h.update(b.raw())
    return h.hexdigest()


def slice_edges(p_count: int, n_slices: int) -> list[tuple[int, int]]:
    """``n_slices`` contiguous, near-equal candidate ranges (first, stop) covering ``0..p_count``."""
    n = max(1, min(p_count, n_slices))
    edges = [(i * p_count) // n for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n)]


def concat_rollouts(parts: Sequence[Sequence[RunRollout]]) -> list[RunRollout]:
    """Per run, the slices' rollouts concatenated in candidate order (fresh, writable arrays)."""
    out = []
    for per_run in zip(*parts):
        cat = lambda name: np.concatenate([getattr(r, name) for r in per_run], axis=0)  # noqa: E731
        extra = {k: np.concatenate([r.extra[k] for r in per_run], axis=0) for k in per_run[0].extra}
        out.append(RunRollout(q=cat("q"), dq=cat("dq"), ee_pos=cat("ee_pos"), ee_quat=cat("ee_quat"), tau=cat("tau"),
                              diverged=cat("diverged"), extra=extra))
    return out


def concat_losses(parts: Sequence[LossBreakdown]) -> LossBreakdown:
    """The slices' loss breakdowns joined in candidate order."""
    return LossBreakdown(total=np.concatenate([p.total for p in parts]),
                         contrib=np.concatenate([p.contrib for p in parts], axis=1),
                         per_run=np.concatenate([p.per_run for p in parts], axis=1),
                         diverged=np.concatenate([p.diverged for p in parts]))


def _nbytes(rollouts: Sequence[RunRollout]) -> int:
    n = 0
    for r in rollouts:
        n += r.q.nbytes + r.dq.nbytes + r.ee_pos.nbytes + r.ee_quat.nbytes + r.tau.nbytes + r.diverged.nbytes
        n += sum(v.nbytes for v in r.extra.values())
    return n


class WorkerPool:
    """The Ray workers of one recipe in this process, and the run sets put into the object store for them.

    A process keeps at most one pool (:func:`current_pool`): a backend with the same
    recipe reuses its workers (no start-up cost), one with another recipe replaces it.
    """

    def __init__(self, ray: Any, recipe: BackendRecipe, key: str, worker_cpus: int) -> None:
        self.ray = ray
        self.recipe = recipe
        self.key = key
        self.worker_cpus = worker_cpus
        self.workers: list[_Worker] = []
        self.runs_cache: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.fingerprint = environment_fingerprint()
        self._actor_cls = ray.remote(ReplicaWorker).options(num_cpus=worker_cpus, max_restarts=0, max_task_retries=0,
                                                           scheduling_strategy="SPREAD")

    @property
    def ready(self) -> list[_Worker]:
        return [w for w in self.workers if w.info is not None]

    def busy(self) -> list[tuple[WorkerInfo, tuple[int, int]]]:
        """The workers replaying a slice now, with its (first, stop) candidate range."""
        return [(w.info, w.slice) for w in list(self.workers) if w.info is not None and w.slice is not None]

    def spawn(self) -> _Worker:
        """Start one worker (it builds its backend; ``ready_ref`` answers when it is up)."""
        w = _Worker(self._actor_cls.remote(self.recipe), time.monotonic())
        w.ready_ref = w.actor.describe.remote()
        self.workers.append(w)
        return w

    def drop(self, w: _Worker, kill: bool = True) -> None:
        if w in self.workers:
            self.workers.remove(w)
        if kill:
            try:
                self.ray.kill(w.actor, no_restart=True)
            except (self.ray.exceptions.RayError, ValueError):  # already gone: nothing left to kill
                pass

    def check(self, info: WorkerInfo) -> None:
        """Refuse a worker whose installation differs from this machine's (see :func:`environment_fingerprint`)."""
        diff = [f"{k} {info.fingerprint.get(k)} (here {v})" for k, v in self.fingerprint.items()
                if info.fingerprint.get(k) != v]
        if diff:
            raise ClusterError(f"Ray worker {info.label} differs from this machine in {', '.join(diff)}: bit-identical "
                               "results need the same installation on every machine (docs/cluster.md)")

    def kill_all(self) -> None:
        for w in list(self.workers):
            self.drop(w)
        self.runs_cache.clear()

    def put_runs(self, runs: Sequence[Run]) -> tuple[str, list, int]:
        """The run set's key and a box holding its object reference (put once); the bytes put now (0 if cached)."""
        key = runs_digest(runs)
        ref = self.runs_cache.get(key)
        added = 0
        if ref is None:
            ref = self.ray.put(list(runs))
            self.runs_cache[key] = ref
            added = sum(v.nbytes for r in runs for v in vars(r).values() if isinstance(v, np.ndarray))
            while len(self.runs_cache) > RUN_CACHE:
                self.runs_cache.popitem(last=False)
        else:
            self.runs_cache.move_to_end(key)
        return key, [ref], added


_POOL: WorkerPool | None = None
_OWNS_RAY = False


def current_pool() -> WorkerPool | None:
    """The worker pool this process holds (None when it holds none)."""
    return _POOL


def shutdown() -> None:
    """Kill this process's Ray workers and stop the private Ray instance it started (if any)."""
    global _POOL, _OWNS_RAY
    if _POOL is not None:
        _POOL.kill_all()
        _POOL = None
    if _OWNS_RAY:
        import ray

        ray.shutdown()
        _OWNS_RAY = False


def connect(address: str | None, cpus: int | None = None) -> Any:
    """The ``ray`` module, connected: a process that called ``ray.init`` keeps its connection; else join
    ``address`` or start a private single-machine instance with ``cpus`` CPUs (default: all), loopback only.

    Raises:
        ClusterError: the cluster at ``address`` cannot be joined.
    """
    global _OWNS_RAY
    ray = import_ray(private=address is None)
    if ray.is_initialized():
        return ray
    try:
        if address is None:
            ray.init(address="local", num_cpus=max(cpus or 0, os.cpu_count() or 1), include_dashboard=False,
                     _node_ip_address="127.0.0.1", configure_logging=False)
        else:
            ray.init(address=address, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"--ray_address {address}: cannot join the Ray cluster ({_short(exc)}); start it with "
                           "`ray start --head` (docs/cluster.md)") from None
    _OWNS_RAY = True
    return ray


class RayBackend(ReplayBackend):
    """A :class:`~isaaclab_sysid.sim.interface.ReplayBackend` whose rollouts run on Ray workers.

    Args:
        recipe: how each worker builds its backend.
        address: Ray cluster to join (``host:port`` of ``ray start --head``, or ``auto``);
            None starts a private Ray instance on this machine, loopback only (see :func:`connect`).
        workers: number of workers (default: the cluster's CPUs // ``worker_cpus``).
        worker_cpus: CPUs each worker reserves (the MuJoCo backend's threads there).
        timeout_s: limit for a worker to start or to answer one slice [s].
        log: where the start-up line and every fault go.

    Attributes:
        name, supported_groups: the workers' backend's (a result names the physics backend, not the cluster).
        options: the recipe's replay options (the workers' backends replay with them).
        scores_loss: True: :meth:`loss` scores on the workers.
        events: every fault, in order; stats: counters and the last call's timing.

    Raises:
        ClusterError: workers that fail to start within ``timeout_s``, or that differ from
            this machine in what bit-identical results need (:func:`environment_fingerprint`).
    """

    cluster = "ray"
    scores_loss = True

    def __init__(self, recipe: BackendRecipe, *, address: str | None = None, workers: int | None = None,
                 worker_cpus: int = 1, timeout_s: float = 600.0, log: Callable[[str], None] = print) -> None:
        if workers is not None and workers < 1:
            raise ClusterError(f"--ray_workers must be at least 1, got {workers}")
        if worker_cpus < 1:
            raise ClusterError(f"--ray_worker_cpus must be at least 1, got {worker_cpus}")
        if not timeout_s > 0:
            raise ClusterError(f"--ray_timeout_s must be > 0 [s], got {timeout_s}")
        self.recipe = recipe
        self.options = recipe.options
        self.worker_cpus = int(worker_cpus)
        self.timeout_s = float(timeout_s)
        self.log = log
        self.events: list[ClusterEvent] = []
        self.stats = ClusterStats()
        self._ray = connect(address, None if workers is None else workers * self.worker_cpus)
        cpus = int(self._ray.cluster_resources().get("CPU", 0))
        self.target = int(workers) if workers is not None else max(1, cpus // self.worker_cpus)
        self._key = hashlib.sha1(pickle.dumps((recipe, self.worker_cpus))).hexdigest()
        pool = self._pool(fresh=True)
        self._await_start(pool, cpus)
        first = pool.ready[0].info
        self.name = first.backend
        self.supported_groups = first.supported_groups
        hosts = sorted({w.info.host for w in pool.ready})
        self.log(f"cluster: {len(pool.ready)} Ray workers ready on {len(hosts)} machine(s) ({', '.join(hosts)}), "
                 f"{self.worker_cpus} CPU each, backend '{self.name}'; a worker that does not answer a slice "
                 f"within {self.timeout_s:g} s (--ray_timeout_s) is killed and the slice re-run")

    # ---------------------------------------------------------------- workers
    def _pool(self, fresh: bool = False) -> WorkerPool:
        """This backend's pool (reused, or replacing another recipe's), topped up or trimmed to ``target`` workers;
        ``fresh``: also replace a pool whose workers started from sources that have changed since."""
        global _POOL
        if _POOL is None or _POOL.key != self._key or (fresh and _POOL.fingerprint != environment_fingerprint()):
            if _POOL is not None:
                _POOL.kill_all()
            _POOL = WorkerPool(self._ray, self.recipe, self._key, self.worker_cpus)
        pool = _POOL
        while len(pool.workers) < self.target:
            pool.spawn()
            self.stats.workers_started += 1
        for w in sorted(pool.workers, key=lambda w: w.info is not None)[: max(0, len(pool.workers) - self.target)]:
            pool.drop(w)  # the surplus of a bigger earlier pool (starting ones first)
        return pool

    def _await_start(self, pool: WorkerPool, cpus: int) -> None:
        ray = self._ray
        deadline = time.monotonic() + self.timeout_s
        pending = {w.ready_ref: w for w in pool.workers if w.info is None}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            for ref in ready:
                w = pending.pop(ref)
                try:
                    w.info = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    if not getattr(exc, "actor_init_failed", True):  # its process or machine went away: another
                        pool.drop(w, kill=False)
                        self._record(ClusterEvent("start_failed", "(new)", None, 0, _short(exc)), "starting another")
                        new = pool.spawn()
                        self.stats.workers_started += 1
                        pending[new.ready_ref] = new
                        continue
                    pool.kill_all()
                    raise ClusterError(f"a Ray worker failed to build the '{self.recipe.backend}' backend: "
                                       f"{_short(exc)}") from None
                w.ready_ref = None
                pool.check(w.info)
        if pending:
            n_ok = len(pool.workers) - len(pending)
            pool.kill_all()
            raise ClusterError(f"only {n_ok} of {self.target} Ray workers started within --ray_timeout_s "
                               f"{self.timeout_s:g} s (the cluster has {cpus} CPUs, each worker takes "
                               f"--ray_worker_cpus {self.worker_cpus}); lower --ray_workers or add machines")

    @property
    def workers(self) -> list[WorkerInfo]:
        """The workers that are up now."""
        pool = current_pool()
        return [] if pool is None or pool.key != self._key else [w.info for w in pool.ready]

    def _record(self, ev: ClusterEvent, note: str) -> None:
        self.events.append(ev)
        self.log(f"cluster: {ev.line()}; {note}")

    # --------------------------------------------------------------- rollout
    def rollout(self, batch: CandidateBatch, runs: Sequence[Run], *,
                disturbance: Sequence[np.ndarray | None] | None = None) -> list[RunRollout]:
        """Replay every run for every candidate on the workers (see :class:`ReplayBackend`), in candidate order;
        ``disturbance`` as :meth:`~isaaclab_sysid.sim.mujoco_backend.MujocoBackend.rollout` (MuJoCo workers only).

        Raises:
            UnsupportedParameterError: a group the workers' backend cannot represent.
            TypeError: a disturbance for workers whose backend cannot take one.
            ClusterLostError: no worker left and none can be started; ClusterError: a slice
                failed on :data:`MAX_ATTEMPTS` workers.
        """
        if disturbance is not None and self.recipe.backend != "mujoco":
            raise TypeError(f"the '{self.recipe.backend}' backend on the workers takes no torque disturbance")
        args = () if disturbance is None else (list(disturbance),)
        gathered = concat_rollouts(self._scatter(batch, runs, "rollout", *args))
        self._account(_nbytes(gathered))
        return gathered

    def loss(self, batch: CandidateBatch, runs: Sequence[Run], weights: LossWeights = LossWeights(),
             traj_weights: Sequence[float] | None = None) -> LossBreakdown:
        """:func:`~isaaclab_sysid.fit.loss.total_loss` of every candidate, scored on the workers: only the
        losses travel back (P x R numbers instead of every state), the same bits as scoring here.

        Raises:
            the same as :meth:`rollout`.
        """
        tw = run_weights(traj_weights, len(runs))
        gathered = concat_losses(self._scatter(batch, runs, "loss", weights, tw))
        self._account(sum(a.nbytes for a in (gathered.total, gathered.contrib, gathered.per_run, gathered.diverged)))
        return gathered

    def _account(self, nbytes: int) -> None:
        st = self.stats
        st.last_result_bytes = nbytes
        st.result_bytes += nbytes

    def _scatter(self, batch: CandidateBatch, runs: Sequence[Run], method: str, *args: Any) -> list:
        """The worker method ``method`` on every slice of ``batch`` (re-run where a worker fails); results in order."""
        check_supported(batch, self.supported_groups, self.name)
        ray = self._ray
        t0 = time.perf_counter()
        p_count = batch.size
        running: dict[Any, tuple[int, _Worker, float]] = {}
        try:
            pool = self._pool()
            key, box, added = pool.put_runs(runs)
            self.stats.run_bytes += added
            parts = slice_edges(p_count, len(pool.ready) or self.target)
            todo = collections.deque(range(len(parts)))
            attempts = [0] * len(parts)
            results: list[Any] = [None] * len(parts)
            compute = [0.0] * len(parts)
            while todo or running:
                busy = {id(r[1]) for r in running.values()}
                idle = [w for w in pool.ready if id(w) not in busy]
                while todo and idle:
                    i, w = todo.popleft(), idle.pop(0)
                    a, b = parts[i]
                    ref = getattr(w.actor, method).remote(key, box, batch.take(slice(a, b)), *args)
                    running[ref] = (i, w, time.monotonic() + self.timeout_s)
                    w.slice = parts[i]
                starting = {w.ready_ref: w for w in pool.workers if w.info is None}
                if not running and not starting:
                    self._lost(p_count, "no worker is left and none is starting")
                waits = [d for *_, d in running.values()] + [w.started + self.timeout_s for w in starting.values()]
                wait_s = max(0.0, min(waits) - time.monotonic())
                if not running:
                    wait_s = min(wait_s, 1.0)  # no live worker: re-check the cluster's capacity every second
                ready, _ = ray.wait(list(running) + list(starting), num_returns=1, timeout=wait_s)
                for ref in ready:
                    if ref in starting:
                        self._started(pool, starting[ref], p_count)
                        continue
                    i, w, _ = running.pop(ref)
                    w.slice = None
                    try:
                        out, secs = ray.get(ref)
                    except ray.exceptions.RayTaskError:
                        raise  # the backend itself refused the batch: the same on every worker, not retried
                    except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                            ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                            ray.exceptions.OutOfMemoryError) as exc:
                        self._lose(pool, w, "died", parts[i], p_count, _short(exc), attempts, i, todo)
                        continue
                    results[i], compute[i] = out, secs
                    self.stats.slices += 1
                now = time.monotonic()
                for ref, (i, w, deadline) in list(running.items()):
                    if now >= deadline:
                        running.pop(ref)
                        w.slice = None
                        self._lose(pool, w, "timeout", parts[i], p_count,
                                   f"no answer within --ray_timeout_s {self.timeout_s:g} s; killed", attempts, i, todo)
                for w in [w for w in pool.workers if w.info is None and now >= w.started + self.timeout_s]:
                    pool.drop(w)
                    self._record(ClusterEvent("start_failed", "(new)", None, p_count,
                                              f"not up within --ray_timeout_s {self.timeout_s:g} s"),
                                 f"{len(pool.ready)} worker(s) up")
                if todo and not running and not pool.ready:
                    self._check_capacity(p_count)
        except ClusterError:
            self._settle(running)
            raise
        except ray.exceptions.RayTaskError:
            self._settle(running)
            raise
        except ray.exceptions.RayError as exc:  # the connection to the cluster itself
            raise ClusterLostError(self._lost_message(p_count, _short(exc))) from None
        st = self.stats
        st.batches += 1
        st.last_wall_s = time.perf_counter() - t0
        st.last_compute_s = compute
        return results

    def _started(self, pool: WorkerPool, w: _Worker, p_count: int) -> None:
        try:
            w.info = self._ray.get(w.ready_ref)
        except self._ray.exceptions.RayError as exc:
            if getattr(exc, "actor_init_failed", False):
                raise ClusterError(f"a Ray worker failed to build the '{self.recipe.backend}' backend: "
                                   f"{_short(exc)}") from None
            pool.drop(w)
            self._record(ClusterEvent("start_failed", "(new)", None, p_count, _short(exc)),
                         f"{len(pool.ready)} worker(s) up")
            return
        w.ready_ref = None
        pool.check(w.info)
        self.log(f"cluster: replacement worker {w.info.label} ready ({len(pool.ready)} of {self.target} up)")

    def _lose(self, pool: WorkerPool, w: _Worker, kind: str, part: tuple[int, int], p_count: int, detail: str,
              attempts: list[int], i: int, todo: collections.deque) -> None:
        """A worker died or timed out holding slice ``i``: drop it, re-queue the slice, start a replacement."""
        label = w.info.label if w.info is not None else "?"
        pool.drop(w, kill=kind == "timeout")
        if kind == "died":
            self.stats.deaths += 1
        else:
            self.stats.timeouts += 1
        attempts[i] += 1
        ev = ClusterEvent(kind, label, part, p_count, detail)
        if attempts[i] >= MAX_ATTEMPTS:
            self.events.append(ev)
            raise ClusterError(f"candidates {part[0]}..{part[1] - 1} failed on {MAX_ATTEMPTS} Ray workers "
                               f"(last: {ev.line()}); the fit stops, its newest checkpoint resumes it (--resume)")
        self.stats.reruns += 1
        todo.appendleft(i)
        try:
            pool.spawn()
            self.stats.workers_started += 1
            note = "starting a replacement"
        except self._ray.exceptions.RayError as exc:
            note = f"no replacement ({_short(exc)})"
        self._record(ev, f"re-running the slice on another worker (re-run {self.stats.reruns}); {note}")

    def _check_capacity(self, p_count: int) -> None:
        cpus = self._ray.cluster_resources().get("CPU", 0)
        if cpus < self.worker_cpus:
            self._lost(p_count, f"the cluster has {cpus:g} CPUs left and a worker needs {self.worker_cpus}")

    def _lost_message(self, p_count: int, why: str) -> str:
        last = f"; last event: {self.events[-1].line()}" if self.events else ""
        return (f"the Ray cluster is lost while evaluating {p_count} candidates: {why}{last}. The fit stops; its "
                "newest checkpoint_<iter>.json is complete: restart the cluster (or use --cluster local) and rerun "
                "with --resume <the fit folder> for the same result (docs/cluster.md)")

    def _lost(self, p_count: int, why: str) -> None:
        raise ClusterLostError(self._lost_message(p_count, why))

    def _settle(self, running: dict) -> None:
        """Let the other slices of a refused batch finish, so the next call starts on idle workers."""
        if running:
            try:
                self._ray.wait(list(running), num_returns=len(running), timeout=self.timeout_s)
            except self._ray.exceptions.RayError:
                pass
        for _, w, _ in running.values():
            w.slice = None

    def close(self) -> None:
        """Kill this backend's workers (the Ray instance stays up; :func:`shutdown` stops a private one)."""
        global _POOL
        if _POOL is not None and _POOL.key == self._key:
            _POOL.kill_all()
            _POOL = None


def _short(exc: BaseException) -> str:
    """The first line of a Ray error (they carry whole remote tracebacks)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


__all__ = [
    "MAX_ATTEMPTS",
    "BackendRecipe",
    "ClusterError",
    "ClusterEvent",
    "ClusterLostError",
    "ClusterStats",
    "RayBackend",
    "WorkerInfo",
    "concat_losses",
    "concat_rollouts",
    "environment_fingerprint",
    "WorkerPool",
    "connect",
    "current_pool",
    "shutdown",
    "runs_digest",
    "slice_edges",
]
