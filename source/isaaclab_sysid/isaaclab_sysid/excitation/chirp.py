"""Chirp excitation: a linear frequency sweep on six task-space axes, pi/3 phase-staggered.

Two bands (as the Franka tooling's runs): ``low`` sweeps 0.1 -> 0.7 Hz at constant amplitude under a
2 s up / 3 s down linear envelope (the fit run at kp 200/20); ``high`` sweeps
0.7 -> 3 Hz with the amplitude tapered as (0.7/f)^p (p = 0.5 by default) and a
2 s up / 1 s down envelope (an optional held-out run). The single constant-
amplitude 0.1 -> 3 Hz sweep exceeds the Panda wrist's 12 N m; hence the split.
Axes are x, y, z [m] and a world-frame rotation vector rx, ry, rz [rad].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from isaaclab_sysid.excitation.envelope import linear_rounded
from isaaclab_sysid.excitation.jet import Jet
from isaaclab_sysid.utils.json_io import jsonable
from isaaclab_sysid.excitation.taskspace import TaskDesign, time_grid

CHIRP_AXES = ("x", "y", "z", "rx", "ry", "rz")
BAND_DEFAULTS = {
    # f_start, f_end [Hz], taper exponent, ramp up, ramp down [s]
    "low": (0.1, 0.7, 0.0, 2.0, 3.0),
    "high": (0.7, 3.0, 0.5, 2.0, 1.0),
}


@dataclass(frozen=True)
class ChirpSpec:
    """Parameters of a chirp design (units in the names).

    Attributes:
        band: ``"low"`` or ``"high"``; fills the fields left None.
        f_start_hz, f_end_hz: sweep start and end frequency [Hz].
        duration_s: sweep length [s].
        amplitude: per axis x, y, z [m], rx, ry, rz [rad] (at ``taper_ref_hz``).
        amp_taper_exp: p in (taper_ref_hz / f)^p (0 = constant amplitude).
        taper_ref_hz: frequency at which the taper is 1 [Hz].
        ramp_up_s, ramp_down_s: linear envelope up / down [s].
        corner_s: rounding of the envelope's corners (zero velocity at both ends) [s].
        phase_step_rad: phase stagger between consecutive axes [rad].
        axes: the active axes (others stay at the anchor).
    """

    band: str = "low"
    f_start_hz: float | None = None
    f_end_hz: float | None = None
    duration_s: float = 8.0
    amplitude: tuple[float, float, float, float, float, float] = (0.10, 0.10, 0.15, 0.50, 0.25, 0.50)
    amp_taper_exp: float | None = None
    taper_ref_hz: float = 0.7
    ramp_up_s: float | None = None
    ramp_down_s: float | None = None
    corner_s: float = 0.2
    phase_step_rad: float = float(np.pi / 3)
    axes: tuple[str, ...] = CHIRP_AXES

    def resolved(self) -> "ChirpSpec":
        """The spec with every None filled from the band's defaults."""
        if self.band not in BAND_DEFAULTS:
            raise ValueError(f"band must be one of {', '.join(BAND_DEFAULTS)}, got {self.band!r}")
        f0, f1, p, up, dn = BAND_DEFAULTS[self.band]
        return ChirpSpec(
            band=self.band,
            f_start_hz=f0 if self.f_start_hz is None else self.f_start_hz,
            f_end_hz=f1 if self.f_end_hz is None else self.f_end_hz,
            duration_s=self.duration_s,
            amplitude=self.amplitude,
            amp_taper_exp=p if self.amp_taper_exp is None else self.amp_taper_exp,
            taper_ref_hz=self.taper_ref_hz,
            ramp_up_s=up if self.ramp_up_s is None else self.ramp_up_s,
            ramp_down_s=dn if self.ramp_down_s is None else self.ramp_down_s,
            corner_s=self.corner_s,
            phase_step_rad=self.phase_step_rad,
            axes=self.axes,
        )


def chirp(spec: ChirpSpec, anchor_pos: np.ndarray, anchor_quat: np.ndarray) -> TaskDesign:
    """Build the chirp :class:`TaskDesign` around the anchor pose."""
    s = spec.resolved()
    assert s.f_start_hz is not None and s.f_end_hz is not None and s.amp_taper_exp is not None
    unknown = [a for a in s.axes if a not in CHIRP_AXES]
    if unknown:
        raise ValueError(f"unknown chirp axes {unknown} (known: {', '.join(CHIRP_AXES)})")
    if not 0 < s.f_start_hz < s.f_end_hz:
        raise ValueError(f"sweep {s.f_start_hz} -> {s.f_end_hz} Hz must be positive and increasing")
    if len(s.amplitude) != 6 or any(a < 0 for a in s.amplitude):
        raise ValueError("amplitude needs 6 non-negative values (x, y, z [m], rx, ry, rz [rad])")
    t = time_grid(s.duration_s)
    env = linear_rounded(t, s.duration_s, s.ramp_up_s, s.ramp_down_s, s.corner_s)  # type: ignore[arg-type]
    k = (s.f_end_hz - s.f_start_hz) / s.duration_s  # sweep rate [Hz/s]
    tj = Jet.time(t)
    freq = tj * k + s.f_start_hz  # f(t)
    taper = (Jet(s.taper_ref_hz / freq.v, -s.taper_ref_hz * freq.d / freq.v**2,
                 2 * s.taper_ref_hz * freq.d**2 / freq.v**3)).power(s.amp_taper_exp)
    phase0 = 2 * np.pi * (tj * s.f_start_hz + (tj * tj) * (0.5 * k))
    axes = []
    for i, name in enumerate(CHIRP_AXES):
        a = s.amplitude[i] if name in s.axes else 0.0
        axes.append(env * taper * (phase0 + i * s.phase_step_rad).sin() * a)
    desc = {
        "generator": f"chirp_{s.band}",
        "spec": jsonable(asdict(s)),
        "axes": list(CHIRP_AXES),
        "rotation": "rotvec",
        "envelope": {"type": "linear_rounded", "up_s": s.ramp_up_s, "down_s": s.ramp_down_s, "corner_s": s.corner_s},
    }
    return TaskDesign(
        kind=f"chirp_{s.band}",
        t=t,
        offsets=Jet.stack(axes),
        rotation="rotvec",
        anchor_pos=np.asarray(anchor_pos, dtype=float),
        anchor_quat=np.asarray(anchor_quat, dtype=float),
        description=desc,
    )
