"""The Isaac Lab replay backend (Newton on CPU or GPU; PhysX where Isaac Sim is installed).

Importing this package needs the ``[isaaclab]`` extra (torch, isaaclab, urdf-usd-converter);
``isaaclab_sysid.sim.factory.make_backend("isaaclab", ...)`` turns a missing extra
into a clear error. See docs/backends.md.
"""

from isaaclab_sysid.sim.isaaclab_backend.backend import IsaacLabBackend

__all__ = ["IsaacLabBackend"]
