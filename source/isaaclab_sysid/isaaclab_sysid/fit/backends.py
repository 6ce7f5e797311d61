"""Backend factory: ``make_backend(name, robot, options)``.

``mujoco`` (CPU, the default) is :class:`isaaclab_sysid.sim.mujoco_backend.MujocoBackend`.
``isaaclab`` (Newton / PhysX) is import-guarded: it raises a clear error until
that backend and Isaac Lab are installed.
"""

from __future__ import annotations

from typing import Any

from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import ReplayBackend, ReplayOptions

BACKENDS = ("mujoco", "isaaclab")


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot be built in this environment."""


def make_backend(name: str, robot: Robot, options: ReplayOptions | None = None, **kwargs: Any) -> ReplayBackend:
    """Build the replay backend ``name`` for ``robot`` (extra keyword arguments go to its constructor)."""
    options = options or ReplayOptions()
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

