"""The backends that simulate in this process, by name: :func:`local_backend` (``mujoco``, ``isaaclab``).

Below both :mod:`isaaclab_sysid.sim.factory` (which also builds the Ray backend) and :mod:`isaaclab_sysid.sim.ray`
(whose workers build one of these each), so neither imports the other to build a local backend.
"""

from __future__ import annotations

from typing import Any

from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import ReplayBackend, ReplayOptions
from isaaclab_sysid.utils.errors import UserError

BACKENDS = ("mujoco", "isaaclab")


class BackendUnavailableError(UserError, RuntimeError):
    """The requested backend cannot be built in this environment."""


def local_backend(name: str, robot: Robot, options: ReplayOptions, **kwargs: Any) -> ReplayBackend:
    """Build the backend ``name`` in this process (keyword arguments go to its constructor).

    Raises:
        BackendUnavailableError: an unknown name, or a backend this installation cannot build.
    """
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
