"""Friction that drifts (e.g. a gearbox warming up): recursive least squares with forgetting over the joint-friction regressor.

``signal`` (a run's friction torque) -> ``rls`` (the tracker: one sample or one chunk per update,
forgetting, windup guards, the band) -> ``track`` (a session of runs, change flags); ``twin``
writes a session whose friction falls as the gearboxes warm up. See docs/online_friction.md.
"""

from isaaclab_sysid.online.rls import FRICTION_TERMS, FrictionRLS, FrictionState, RLSOptions, TrackerError
from isaaclab_sysid.online.signal import FrictionSamples, FrictionSignal, SignalOptions
from isaaclab_sysid.online.track import ChangeFlag, TrackOptions, TrackResult, track

__all__ = [
    "FRICTION_TERMS",
    "ChangeFlag",
    "FrictionRLS",
    "FrictionSamples",
    "FrictionSignal",
    "FrictionState",
    "RLSOptions",
    "SignalOptions",
    "TrackOptions",
    "TrackResult",
    "TrackerError",
    "track",
]
