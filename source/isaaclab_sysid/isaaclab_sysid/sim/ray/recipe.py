"""What travels to a Ray worker: :class:`BackendRecipe` (how it builds its backend) and the installation's
:func:`environment_fingerprint` that must match on every machine for bit-identical rollouts; :func:`import_ray`."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.robots.config import RobotConfig
from isaaclab_sysid.robots.overrides import LinkInertial
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.interface import ReplayBackend, ReplayOptions
from isaaclab_sysid.sim.local_backend import local_backend

#: the package root (``isaaclab_sysid/``)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: the package folders whose sources decide a rollout's bits (hashed into every worker's fingerprint)
ROLLOUT_SOURCES = ("sim", "robots")


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
        backend: the backend name of :func:`isaaclab_sysid.sim.local_backend.local_backend`.
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
        be = local_backend(self.backend, self.robot(), self.options, **self.kwargs)
        return self.wrap(be) if self.wrap is not None else be

