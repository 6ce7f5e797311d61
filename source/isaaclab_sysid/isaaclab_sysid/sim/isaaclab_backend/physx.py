"""PhysX physics for the Isaac Lab backend (GPU workstations with Isaac Sim only).

``IsaacLabBackend(robot, physics="physx", device="cuda:0")`` selects Isaac Lab's
PhysX manager instead of Newton. PhysX needs Isaac Sim (the ``[isaacsim]`` extra,
``isaacsim[all,extscache]``) and a running Kit app; neither installs on the CI
machines, so this path is import-guarded and untested here (docs/backends.md):

* PhysX maps the groups differently: ``friction`` is the joint's static friction
  coefficient, ``dynamic_ratio`` its dynamic/static ratio (PhysX's friction model
  is not MuJoCo's absolute Coulomb torque, so a PhysX fit is not numerically
  interchangeable with a Newton or MuJoCo one); the backend still refuses
  ``dynamic_ratio`` until that mapping is validated on a PhysX machine.
* Per-env delays use the same ``DelayedPDActuator`` ``delay_steps`` parameter.
"""

from __future__ import annotations

import importlib.util
from isaaclab_sysid.utils.errors import UserError


class PhysxUnavailableError(UserError, RuntimeError):
    """Isaac Sim (PhysX) is not importable in this environment."""


def isaacsim_available() -> bool:
    """True when ``isaacsim`` and Isaac Lab's PhysX manager are importable."""
    return importlib.util.find_spec("isaacsim") is not None and importlib.util.find_spec("isaaclab_physx") is not None


def require_isaacsim() -> None:
    """Raise :class:`PhysxUnavailableError` unless PhysX can be used."""
    if not isaacsim_available():
        raise PhysxUnavailableError(
            "physics='physx' needs Isaac Sim (pip install -e '.[isaacsim]' on a GPU workstation) "
            "and Isaac Lab's PhysX manager (isaaclab_physx); use physics='newton', which runs kit-less on CPU or GPU"
        )


def launch_app(headless: bool = True):
    """Start Isaac Sim's Kit app (PhysX needs it; Newton does not)."""
    require_isaacsim()
    from isaaclab.app import AppLauncher

    return AppLauncher(headless=headless).app


def physx_cfg():
    """Isaac Lab's PhysX physics config for replay: contacts are irrelevant (no geometry)."""
    require_isaacsim()
    from isaaclab_physx.physics import PhysxCfg  # type: ignore[import-not-found]

    return PhysxCfg()
