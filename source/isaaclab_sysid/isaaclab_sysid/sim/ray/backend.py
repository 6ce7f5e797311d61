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
import hashlib
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import CandidateBatch, LossScore, ReplayBackend, RunRollout, check_supported
from isaaclab_sysid.sim.ray.errors import ClusterError, ClusterLostError
from isaaclab_sysid.sim.ray.recipe import BackendRecipe
from isaaclab_sysid.sim.ray.workers import (
    WorkerInfo,
    WorkerPool,
    _Worker,
    connect,
    current_pool,
    pool_for,
    release_pool,
)
from isaaclab_sysid.sim.ray.workers import short_error as _short

#: workers a slice may fail on (death or timeout) before the fit stops
MAX_ATTEMPTS = 3


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


def _nbytes(rollouts: Sequence[RunRollout]) -> int:
    n = 0
    for r in rollouts:
        n += r.q.nbytes + r.dq.nbytes + r.ee_pos.nbytes + r.ee_quat.nbytes + r.tau.nbytes + r.diverged.nbytes
        n += sum(v.nbytes for v in r.extra.values())
    return n


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
        pool = pool_for(self._ray, self.recipe, self._key, self.worker_cpus, fresh)
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

    def loss(self, batch: CandidateBatch, runs: Sequence[Run], score: LossScore) -> Any:
        """:func:`~isaaclab_sysid.objective.loss.total_loss` of every candidate, scored on the workers: only the
        losses travel back (P x R numbers instead of every state), the same bits as scoring here.

        Raises:
            the same as :meth:`rollout`.
        """
        gathered = score.join(self._scatter(batch, runs, "loss", score))
        self._account(sum(a.nbytes for a in vars(gathered).values() if isinstance(a, np.ndarray)))
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
        release_pool(self._key)


