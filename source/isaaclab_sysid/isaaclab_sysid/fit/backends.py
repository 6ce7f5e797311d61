"""Backend factory: ``make_backend(name, robot, options, cluster=...)``.

``mujoco`` (CPU, the default) is :class:`isaaclab_sysid.sim.mujoco_backend.MujocoBackend`.
``isaaclab`` (Newton / PhysX) is import-guarded: it raises a clear error until
that backend and Isaac Lab are installed. With ``--cluster ray``
(:class:`~isaaclab_sysid.fit.config.ClusterConfig`) the same backend is built once
on every Ray worker and :class:`isaaclab_sysid.fit.cluster.RayBackend` spreads each
batch of candidates over them (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from isaaclab_sysid.fit.config import ClusterConfig
from isaaclab_sysid.fit.errors import FitError
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import ReplayBackend, ReplayOptions

BACKENDS = ("mujoco", "isaaclab")

#: a function applied to the built backend (on each worker with --cluster ray), e.g. the state-age model
Wrap = Callable[[ReplayBackend], ReplayBackend]


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot be built in this environment."""


def make_backend(name: str, robot: Robot, options: ReplayOptions | None = None, *,
                 cluster: ClusterConfig | None = None, wrap: Wrap | None = None,
                 log: Callable[[str], None] = print, **kwargs: Any) -> ReplayBackend:
    """Build the replay backend ``name`` for ``robot`` (extra keyword arguments go to its constructor).

    Args:
        cluster: where it runs (None or ``local``: this process; ``ray``: a
            :class:`~isaaclab_sysid.fit.cluster.RayBackend` whose workers each build it).
        wrap: applied to the built backend (on every worker with ``ray``).
        log: where a Ray backend reports its workers and faults.
    """
    options = options or ReplayOptions()
    if cluster is not None and cluster.cluster == "ray":
        return _ray_backend(name, robot, options, cluster, wrap, log, kwargs)
    if cluster is not None:
        flags = (("--ray_address", cluster.ray_address), ("--ray_workers", cluster.ray_workers))
        given = [f for f, v in flags if v is not None]
        if given:
            raise FitError(f"{', '.join(given)} given but --cluster is {cluster.cluster}; add --cluster ray")
    backend = _local_backend(name, robot, options, kwargs)
    return wrap(backend) if wrap is not None else backend


def _local_backend(name: str, robot: Robot, options: ReplayOptions, kwargs: dict[str, Any]) -> ReplayBackend:
    if name == "mujoco":
        try:
            from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
        except ImportError as exc:  # pragma: no cover - depends on the checkout
            raise BackendUnavailableError(f"the MuJoCo backend is not available: {exc}") from exc
        return MujocoBackend(robot, options, **kwargs)
    if name == "isaaclab":
        try:
            from isaaclab_sysid.sim.isaaclab_backend import IsaacLabBackend  # type: ignore[import-not-found]
        except ImportError as exc:
            raise BackendUnavailableError(
                "backend 'isaaclab' is not available: it needs the [isaaclab] extra "
                "(pip install -e '.[isaaclab]') and isaaclab_sysid.sim.isaaclab_backend "
                f"({exc}); use --backend mujoco"
            ) from exc
        return IsaacLabBackend(robot, options, **kwargs)
    raise BackendUnavailableError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")


def _ray_backend(name: str, robot: Robot, options: ReplayOptions, cluster: ClusterConfig, wrap: Wrap | None,
                 log: Callable[[str], None], kwargs: dict[str, Any]) -> ReplayBackend:
    if name not in BACKENDS:
        raise BackendUnavailableError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")
    try:
        from isaaclab_sysid.fit.cluster import BackendRecipe, RayBackend, import_ray

        import_ray(private=cluster.ray_address is None)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"--cluster ray needs Ray: install the [ray] extra (pip install -e '.[ray]') ({exc}); "
            "or use --cluster local"
        ) from exc
    kw = dict(kwargs)
    if name == "mujoco":
        kw.setdefault("n_threads", cluster.ray_worker_cpus)  # one thread per CPU the worker reserves
    recipe = BackendRecipe.of(name, robot, options, wrap, **kw)
    return RayBackend(recipe, address=cluster.ray_address, workers=cluster.ray_workers,
                      worker_cpus=cluster.ray_worker_cpus, timeout_s=cluster.ray_timeout_s, log=log)
