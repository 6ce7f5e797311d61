"""Multiband excitation: three stationary tones per task-space axis under a half-cosine fade.

One tone per band (default 0.15-0.30, 0.55-1.1, 1.25-2.0 Hz) on each of the six
axes x, y, z, tilt about world x, tilt about world y, base yaw; every one of the
18 frequencies is different (drawn from a 0.01 Hz grid with a seeded RNG, at
least ``min_separation_hz`` apart). A tone at f has amplitude
A * min(1, corner_hz / f): constant peak reference velocity above the corner.
All tones share a 2 s half-cosine fade in and out, so the target starts and
ends at the anchor pose at rest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from isaaclab_sysid.excitation.envelope import half_cosine
from isaaclab_sysid.excitation.jet import Jet
from isaaclab_sysid.excitation.taskspace import TaskDesign, time_grid
from isaaclab_sysid.utils.json_io import jsonable

MULTIBAND_AXES = ("x", "y", "z", "tilt_x", "tilt_y", "yaw")


@dataclass(frozen=True)
class MultibandSpec:
    """Parameters of a multiband design (units in the names).

    Attributes:
        duration_s: total length including fades [s].
        fade_s: half-cosine fade in and out [s].
        bands_hz: one (low, high) band per tone [Hz].
        corner_hz: above it a tone's amplitude falls as corner/f [Hz].
        amplitude: base amplitude per axis x, y, z [m], tilt_x, tilt_y, yaw [rad].
        axes: the active axes (others stay at the anchor), e.g. ("x", "y", "z") for translation only.
        seed: RNG seed of the frequencies and phases.
        frequencies_hz: explicit (6, n_bands) frequencies instead of random ones.
        min_separation_hz: smallest gap between any two of the drawn frequencies.
    """

    duration_s: float = 12.0
    fade_s: float = 2.0
    bands_hz: tuple[tuple[float, float], ...] = ((0.15, 0.30), (0.55, 1.1), (1.25, 2.0))
    corner_hz: float = 0.35
    amplitude: tuple[float, float, float, float, float, float] = (0.06, 0.06, 0.06, 0.20, 0.15, 0.25)
    axes: tuple[str, ...] = MULTIBAND_AXES
    seed: int = 0
    frequencies_hz: tuple[tuple[float, ...], ...] | None = None
    min_separation_hz: float = 0.02


def draw_frequencies(spec: MultibandSpec) -> np.ndarray:
    """(6, n_bands) frequencies [Hz]: one per band per axis, all distinct."""
    if spec.frequencies_hz is not None:
        f = np.asarray(spec.frequencies_hz, dtype=float)
        if f.shape != (6, len(spec.bands_hz)):
            raise ValueError(f"frequencies_hz must be 6 x {len(spec.bands_hz)}, got {f.shape}")
        return f
    rng = np.random.default_rng(spec.seed)
    out = np.zeros((6, len(spec.bands_hz)))
    for b, (lo, hi) in enumerate(spec.bands_hz):
        if not 0 < lo < hi:
            raise ValueError(f"band {b}: ({lo}, {hi}) Hz is not an increasing positive band")
        grid = np.round(np.arange(np.ceil(lo * 100), np.floor(hi * 100) + 1) / 100, 2)
        for _ in range(1000):
            pick = np.sort(rng.choice(grid, size=6, replace=False))
            if np.all(np.diff(pick) >= spec.min_separation_hz - 1e-9):
                break
        else:
            raise ValueError(
                f"band {lo}-{hi} Hz cannot hold 6 frequencies {spec.min_separation_hz} Hz apart on a 0.01 Hz grid"
            )
        out[:, b] = rng.permutation(pick)
    return out


def tone_amplitudes(spec: MultibandSpec, freqs: np.ndarray) -> np.ndarray:
    """(6, n_bands) tone amplitudes: A_axis * min(1, corner/f); zero on inactive axes."""
    amp = np.asarray(spec.amplitude, dtype=float)[:, None] * np.minimum(1.0, spec.corner_hz / freqs)
    for i, name in enumerate(MULTIBAND_AXES):
        if name not in spec.axes:
            amp[i] = 0.0
    return amp


def multiband(spec: MultibandSpec, anchor_pos: np.ndarray, anchor_quat: np.ndarray) -> TaskDesign:
    """Build the multiband :class:`TaskDesign` around the anchor pose."""
    unknown = [a for a in spec.axes if a not in MULTIBAND_AXES]
    if unknown:
        raise ValueError(f"unknown multiband axes {unknown} (known: {', '.join(MULTIBAND_AXES)})")
    if len(spec.amplitude) != 6 or any(a < 0 for a in spec.amplitude):
        raise ValueError("amplitude needs 6 non-negative values (x, y, z [m], tilt_x, tilt_y, yaw [rad])")
    freqs = draw_frequencies(spec)
    if len(np.unique(freqs)) != freqs.size:
        raise ValueError("multiband frequencies must all be different")
    amps = tone_amplitudes(spec, freqs)
    rng = np.random.default_rng(spec.seed + 1_000_003)
    phases = rng.uniform(0.0, 2 * np.pi, size=freqs.shape)
    t = time_grid(spec.duration_s)
    env = half_cosine(t, spec.duration_s, spec.fade_s, spec.fade_s)
    tj = Jet.time(t)
    axes = []
    for i in range(6):
        s = Jet.const(0.0, t)
        for b in range(freqs.shape[1]):
            s = s + amps[i, b] * (tj * (2 * np.pi * freqs[i, b]) + phases[i, b]).sin()
        axes.append(env * s)
    desc = {
        "generator": "multiband",
        "spec": jsonable(asdict(spec)),
        "axes": list(MULTIBAND_AXES),
        "rotation": "tilt_yaw",
        "frequencies_hz": freqs.tolist(),
        "tone_amplitudes": amps.tolist(),
        "phases_rad": phases.tolist(),
        "envelope": {"type": "half_cosine", "fade_in_s": spec.fade_s, "fade_out_s": spec.fade_s},
    }
    return TaskDesign(
        kind="multiband",
        t=t,
        offsets=Jet.stack(axes),
        rotation="tilt_yaw",
        anchor_pos=np.asarray(anchor_pos, dtype=float),
        anchor_quat=np.asarray(anchor_quat, dtype=float),
        description=desc,
    )
