"""LeRobot's joint units for servo arms (Feetech STS3215, SO-100 / SO-101) and back, exactly.

LeRobot's motor bus reads the servo's raw position (0..4095, one turn = 4096 counts, after the
servo's own homing offset) and writes it to ``observation.state`` / ``action`` in one of its
normalization modes, from the arm's calibration file (``<id>.json``: per motor ``id``,
``drive_mode``, ``homing_offset``, ``range_min``, ``range_max`` in counts):

* ``servo_deg`` (LeRobot ``DEGREES``, ``use_degrees=True``): ``(raw - mid) * 360 / 4095``, with
  ``mid = (range_min + range_max) / 2``. LeRobot divides by 4095 while a turn is 4096 counts, so
  the true angle is ``deg * 4095/4096 * pi/180`` [rad]; this module undoes that exactly.
* ``range_m100_100`` (LeRobot's default for the arm joints): ``((raw - min) / (max - min)) * 200 - 100``,
  negated when ``drive_mode`` is 1; needs the calibration file.
* ``range_0_100`` (LeRobot's gripper, in either mode): ``((raw - min) / (max - min)) * 100``,
  ``100 - x`` when ``drive_mode`` is 1; needs the calibration file.
* ``deg`` / ``rad``: plain angles (a dataset converted by other tools).

Every mode maps to the angle ``(raw - mid) * 2 pi / 4096`` [rad] about the middle of the calibrated
range (the joint zero of ``configs/robots/so101.toml``'s URDF); a residual homing error is the fit's
``encoder_offset`` group.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError

#: Counts per turn of the STS3215's magnetic encoder.
COUNTS_PER_TURN = 4096
UNITS = ("rad", "deg", "servo_deg", "range_m100_100", "range_0_100")
NEEDS_CALIBRATION = ("range_m100_100", "range_0_100")


@dataclass(frozen=True)
class MotorCalibration:
    """One motor of a LeRobot calibration file (counts of the servo's raw position).

    Attributes:
        drive_mode: 1 inverts the direction of the normalized value.
        homing_offset: the servo's homing offset register [counts] (already applied to raw).
        range_min, range_max: the calibrated range [counts].
    """

    drive_mode: int
    homing_offset: int
    range_min: float
    range_max: float

    @property
    def mid(self) -> float:
        return 0.5 * (self.range_min + self.range_max)


def read_calibration(path: str | Path, joints: list[str]) -> dict[str, MotorCalibration]:
    """A LeRobot calibration JSON (``{motor: {id, drive_mode, homing_offset, range_min, range_max}}``) for ``joints``.

    Raises:
        RunFormatError: a missing file, motor or key, a range that is empty (file and key named).
    """
    file = str(path)
    p = Path(path)
    if not p.is_file():
        raise RunFormatError(file, None, "-", "calibration file not found (LeRobot writes it to "
                             "~/.cache/huggingface/lerobot/calibration/robots/<robot>/<id>.json)")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(file, exc.lineno, f"char {exc.colno}", f"invalid JSON: {exc.msg}") from None
    out = {}
    for j in joints:
        m = raw.get(j) if isinstance(raw, dict) else None
        if not isinstance(m, dict):
            raise RunFormatError(file, None, j, f"no motor '{j}' (the file has {', '.join(raw) if isinstance(raw, dict) else '-'})")
        vals = {}
        for key in ("drive_mode", "homing_offset", "range_min", "range_max"):
            v = m.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise RunFormatError(file, None, f"{j}.{key}", f"expected a number, got {v!r}")
            vals[key] = v
        if not vals["range_max"] > vals["range_min"]:
            raise RunFormatError(file, None, f"{j}.range_max", f"range [{vals['range_min']}, {vals['range_max']}] is empty")
        out[j] = MotorCalibration(int(vals["drive_mode"]), int(vals["homing_offset"]), float(vals["range_min"]),
                                  float(vals["range_max"]))
    return out


def _rad_per_count() -> float:
    return 2.0 * math.pi / COUNTS_PER_TURN


def to_radians(values: np.ndarray, unit: str, cal: MotorCalibration | None = None) -> np.ndarray:
    """LeRobot values of one joint (any shape) in ``unit`` -> the joint angle [rad] about the range's middle."""
    v = np.asarray(values, dtype=float)
    if unit == "rad":
        return v.copy()
    if unit == "deg":
        return np.deg2rad(v)
    if unit == "servo_deg":
        return v * (COUNTS_PER_TURN - 1) / 360.0 * _rad_per_count()
    if cal is None:
        raise ValueError(f"unit {unit} needs the calibration file")
    span = cal.range_max - cal.range_min
    if unit == "range_m100_100":
        norm = -v if cal.drive_mode else v
        raw = (norm + 100.0) / 200.0 * span + cal.range_min
    elif unit == "range_0_100":
        norm = 100.0 - v if cal.drive_mode else v
        raw = norm / 100.0 * span + cal.range_min
    else:
        raise ValueError(f"unknown unit {unit!r} (expected one of {', '.join(UNITS)})")
    return (raw - cal.mid) * _rad_per_count()


def from_radians(q: np.ndarray, unit: str, cal: MotorCalibration | None = None) -> np.ndarray:
    """The inverse of :func:`to_radians`: a joint angle [rad] as LeRobot writes it in ``unit``."""
    q = np.asarray(q, dtype=float)
    if unit == "rad":
        return q.copy()
    if unit == "deg":
        return np.rad2deg(q)
    if unit == "servo_deg":
        return q / _rad_per_count() * 360.0 / (COUNTS_PER_TURN - 1)
    if cal is None:
        raise ValueError(f"unit {unit} needs the calibration file")
    raw = q / _rad_per_count() + cal.mid
    span = cal.range_max - cal.range_min
    if unit == "range_m100_100":
        norm = (raw - cal.range_min) / span * 200.0 - 100.0
        return -norm if cal.drive_mode else norm
    if unit == "range_0_100":
        norm = (raw - cal.range_min) / span * 100.0
        return 100.0 - norm if cal.drive_mode else norm
    raise ValueError(f"unknown unit {unit!r} (expected one of {', '.join(UNITS)})")
