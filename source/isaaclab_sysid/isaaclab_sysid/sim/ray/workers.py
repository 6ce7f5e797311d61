"""The worker side of the Ray backend and this process's pool of workers.

:class:`ReplicaWorker` is the Ray actor (one backend built once from a :class:`~.recipe.BackendRecipe`, the run
sets it was sent); :class:`WorkerPool` the workers of one recipe in this process (at most one pool per process:
:func:`pool_for`, :func:`current_pool`, :func:`release_pool`, :func:`shutdown`); :func:`connect` joins or starts Ray.
"""

from __future__ import annotations

import collections
import hashlib
import os
import pickle
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import CandidateBatch, LossScore, RunRollout
from isaaclab_sysid.sim.ray.errors import ClusterError
from isaaclab_sysid.sim.ray.recipe import BackendRecipe, environment_fingerprint, import_ray

#: run sets each worker (and the driver's object store) keeps
RUN_CACHE = 8


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

    def loss(self, key: str, runs_box: list, batch: CandidateBatch, score: LossScore) -> tuple[Any, float]:
        """The loss of ``batch`` on the run set ``key``, scored here; and the rollout's time [s]."""
        runs = self._run_set(key, runs_box)
        t0 = time.perf_counter()
        out = list(self.backend.rollout(batch, runs))
        secs = time.perf_counter() - t0
        return score(out, runs), secs

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
        raise ClusterError(f"--ray_address {address}: cannot join the Ray cluster ({short_error(exc)}); start it with "
                           "`ray start --head` (docs/cluster.md)") from None
    _OWNS_RAY = True
    return ray



def pool_for(ray: Any, recipe: BackendRecipe, key: str, worker_cpus: int, fresh: bool = False) -> WorkerPool:
    """This process's pool of ``recipe`` (reused, or replacing another recipe's); ``fresh``: also replace a pool
    whose workers started from sources that have changed since."""
    global _POOL
    if _POOL is None or _POOL.key != key or (fresh and _POOL.fingerprint != environment_fingerprint()):
        if _POOL is not None:
            _POOL.kill_all()
        _POOL = WorkerPool(ray, recipe, key, worker_cpus)
    return _POOL


def release_pool(key: str) -> None:
    """Kill the pool of recipe ``key`` if it is this process's (the Ray instance stays up)."""
    global _POOL
    if _POOL is not None and _POOL.key == key:
        _POOL.kill_all()
        _POOL = None


def short_error(exc: BaseException) -> str:
    """The first line of a Ray error (they carry whole remote tracebacks)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
