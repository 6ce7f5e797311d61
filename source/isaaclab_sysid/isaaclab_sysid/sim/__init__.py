"""Replay: roll out recorded runs in simulated copies of the arm, one candidate per copy.

``MujocoBackend`` (CPU) implements the contract in :mod:`isaaclab_sysid.sim.interface`;
docs/replay.md states the semantics every backend follows.
"""

from isaaclab_sysid.sim.interface import (
    PARAM_GROUPS,
    CandidateBatch,
    ReplayBackend,
    ReplayOptions,
    RunRollout,
    UnsupportedParameterError,
    check_supported,
)

__all__ = [
    "PARAM_GROUPS",
    "CandidateBatch",
    "MujocoBackend",
    "ReplayBackend",
    "ReplayOptions",
    "RunRollout",
    "StribeckFriction",
    "UnsupportedParameterError",
    "check_supported",
]


def __getattr__(name: str):
    # lazy: importing the contract must not build the native library
    if name in ("MujocoBackend", "StribeckFriction"):
        from isaaclab_sysid.sim import mujoco_backend

        return getattr(mujoco_backend, name)
    raise AttributeError(name)
