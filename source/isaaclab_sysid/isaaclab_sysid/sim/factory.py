"""Backend factory: ``make_backend(name, robot, options, ray=...)``.

``mujoco`` (CPU, the default) is :class:`isaaclab_sysid.sim.mujoco_backend.MujocoBackend`.
``isaaclab`` (Newton / PhysX) is import-guarded: it raises a clear error until
that backend and Isaac Lab are installed. With :class:`RayOptions` (the fit's ``--cluster ray``,
translated in ``fit/problem.py``) the same backend is built once on every Ray worker and
:class:`isaaclab_sysid.sim.ray.RayBackend` spreads each batch of candidates over them (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import ReplayBackend, ReplayOptions
from isaaclab_sysid.sim.local_backend import BACKENDS, BackendUnavailableError, local_backend

__all__ = ["BACKENDS", "BackendUnavailableError", "RayOptions", "Wrap", "make_backend"]

#: a function applied to the built backend (on each worker with Ray), e.g. the state-age model
Wrap = Callable[[ReplayBackend], ReplayBackend]


@dataclass(frozen=True)
class RayOptions:
    """Where and how the Ray workers run (the fit's ``--ray_*`` flags, docs/cluster.md).

    Attributes:
        address: Ray cluster to join (``host:port`` of ``ray start --head``, or ``auto``); None: a private
            Ray instance on this machine, loopback only.
        workers: number of workers (None: the cluster's CPUs // ``worker_cpus``).
        worker_cpus: CPUs each worker reserves (the MuJoCo backend's threads there).
        timeout_s: limit for a worker to start or to answer one slice [s].
    """

    address: str | None = None
    workers: int | None = None
    worker_cpus: int = 1
    timeout_s: float = 600.0


def make_backend(name: str, robot: Robot, options: ReplayOptions | None = None, *,
                 ray: RayOptions | None = None, wrap: Wrap | None = None,
                 log: Callable[[str], None] = print, **kwargs: Any) -> ReplayBackend:
    """Build the replay backend ``name`` for ``robot`` (extra keyword arguments go to its constructor).

    Args:
        ray: None: in this process; else a :class:`~isaaclab_sysid.sim.ray.RayBackend` whose workers each build it.
        wrap: applied to the built backend (on every worker with ``ray``).
        log: where a Ray backend reports its workers and faults.
    """
    options = options or ReplayOptions()
    if ray is not None:
        return _ray_backend(name, robot, options, ray, wrap, log, kwargs)
    backend = local_backend(name, robot, options, **kwargs)
    return wrap(backend) if wrap is not None else backend


def _ray_backend(name: str, robot: Robot, options: ReplayOptions, ray: RayOptions, wrap: Wrap | None,
                 log: Callable[[str], None], kwargs: dict[str, Any]) -> ReplayBackend:
    if name not in BACKENDS:
        raise BackendUnavailableError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")
    try:
        from isaaclab_sysid.sim.ray import BackendRecipe, RayBackend, import_ray

        import_ray(private=ray.address is None)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"--cluster ray needs Ray: install the [ray] extra (pip install -e '.[ray]') ({exc}); "
            "or use --cluster local"
        ) from exc
    kw = dict(kwargs)
    if name == "mujoco":
        kw.setdefault("n_threads", ray.worker_cpus)  # one thread per CPU the worker reserves
    recipe = BackendRecipe.of(name, robot, options, wrap, **kw)
    return RayBackend(recipe, address=ray.address, workers=ray.workers, worker_cpus=ray.worker_cpus,
                      timeout_s=ray.timeout_s, log=log)
