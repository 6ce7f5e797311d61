"""A task-space design: six offset signals around an anchor pose, sampled at 1 kHz.

Offsets are ``(x, y, z, r1, r2, r3)``: translation [m] in the world (base)
frame and three rotation coordinates [rad] whose meaning is ``rotation``:

* ``"tilt_yaw"`` (multiband): R(t) = Rz(r3) Exp([r1, r2, 0]) R_anchor — tilt
  about world x and y by the world-frame axis-angle vector (r1, r2, 0), then
  base yaw r3 about world z, both applied to the anchor orientation.
* ``"rotvec"`` (chirp): R(t) = Exp([r1, r2, r3]) R_anchor — a world-frame
  rotation vector applied to the anchor orientation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from isaaclab_sysid.excitation.jet import Jet

#: Rate every design is sampled at [Hz] (one row per controller tick).
DESIGN_RATE_HZ = 1000.0
AXES = ("x", "y", "z", "r1", "r2", "r3")
ROTATIONS = ("tilt_yaw", "rotvec")


def time_grid(duration_s: float, rate_hz: float = DESIGN_RATE_HZ) -> np.ndarray:
    """(T,) sample instants 0, 1/rate, ..., duration [s] (both ends included)."""
    n = int(round(duration_s * rate_hz))
    if n < 2:
        raise ValueError(f"design duration {duration_s} s is too short")
    return np.arange(n + 1) / rate_hz


@dataclass
class TaskDesign:
    """A task-space excitation, ready to be turned into a target run.

    Attributes:
        kind: generator name (``"multiband"``, ``"chirp_low"`` ...).
        t: (T,) sample instants [s] at 1 kHz, starting at 0.
        offsets: (T, 6) jet of the offsets (value, d/dt, d2/dt2).
        rotation: ``"tilt_yaw"`` or ``"rotvec"`` (see module doc).
        anchor_pos: (3,) [m]; anchor_quat: (4,) xyzw.
        description: JSON-able description of the design (goes to the sidecar).
    """

    kind: str
    t: np.ndarray
    offsets: Jet
    rotation: str
    anchor_pos: np.ndarray
    anchor_quat: np.ndarray
    description: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rotation not in ROTATIONS:
            raise ValueError(f"rotation must be one of {ROTATIONS}, got {self.rotation!r}")

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    def rotations(self, r: np.ndarray | None = None) -> Rotation:
        """Target orientations for offsets ``r`` (T, 3) (default: the design's)."""
        r = self.offsets.v[:, 3:] if r is None else r
        r0 = Rotation.from_quat(self.anchor_quat)
        if self.rotation == "rotvec":
            return Rotation.from_rotvec(r) * r0
        tilt = np.column_stack([r[:, 0], r[:, 1], np.zeros(len(r))])
        yaw = np.column_stack([np.zeros(len(r)), np.zeros(len(r)), r[:, 2]])
        return Rotation.from_rotvec(yaw) * Rotation.from_rotvec(tilt) * r0

    def position(self) -> np.ndarray:
        """(T, 3) target EE position [m]."""
        return self.anchor_pos[None, :] + self.offsets.v[:, :3]

    def quat(self) -> np.ndarray:
        """(T, 4) target EE orientation, xyzw, sign-continuous (no flips between rows)."""
        qs = self.rotations().as_quat()
        # keep the hemisphere of the anchor and of the previous row
        if np.dot(qs[0], self.anchor_quat) < 0:
            qs[0] = -qs[0]
        flips = np.cumsum(np.r_[0, np.sum(qs[1:] * qs[:-1], axis=1) < 0]) % 2 == 1
        qs[flips] = -qs[flips]
        return qs

    def linear_velocity(self) -> np.ndarray:
        """(T, 3) [m/s] (exact)."""
        return self.offsets.d[:, :3]

    def linear_acceleration(self) -> np.ndarray:
        """(T, 3) [m/s^2] (exact)."""
        return self.offsets.dd[:, :3]

    def angular_velocity(self) -> np.ndarray:
        """(T, 3) world-frame angular velocity [rad/s] (central differences of the rotations, O(dt^2))."""
        return _angular_rate(self.rotations(), self.t)

    def angular_acceleration(self) -> np.ndarray:
        """(T, 3) [rad/s^2] (central differences of the angular velocity)."""
        return np.gradient(self.angular_velocity(), self.t, axis=0)

    def peaks(self) -> dict[str, float]:
        """Peak EE speed and acceleration of the reference, linear and angular."""
        return {
            "ee_speed_m_s": float(np.max(np.linalg.norm(self.linear_velocity(), axis=1))),
            "ee_acc_m_s2": float(np.max(np.linalg.norm(self.linear_acceleration(), axis=1))),
            "ee_ang_speed_rad_s": float(np.max(np.linalg.norm(self.angular_velocity(), axis=1))),
            "ee_ang_acc_rad_s2": float(np.max(np.linalg.norm(self.angular_acceleration(), axis=1))),
            "max_translation_m": float(np.max(np.linalg.norm(self.offsets.v[:, :3], axis=1))),
            "max_rotation_rad": float(
                np.max((self.rotations() * Rotation.from_quat(self.anchor_quat).inv()).magnitude())
            ),
        }


def _angular_rate(rot: Rotation, t: np.ndarray) -> np.ndarray:
    n = len(rot)
    w = np.zeros((n, 3))
    if n < 3:
        return w
    # world-frame: R_{k+1} R_{k-1}^T = Exp(w 2dt)
    w[1:-1] = (rot[2:] * rot[:-2].inv()).as_rotvec() / (t[2:] - t[:-2])[:, None]
    w[0] = (rot[1] * rot[0].inv()).as_rotvec() / (t[1] - t[0])
    w[-1] = (rot[-1] * rot[-2].inv()).as_rotvec() / (t[-1] - t[-2])
    return w
