"""Amplitude envelopes that start and end at zero with zero slope.

* :func:`half_cosine` — the multiband's fade: 0.5 (1 - cos(pi t / T_fade)) in,
  the mirror image out, 1 in between (C1; zero value and slope at both ends).
* :func:`linear_rounded` — the chirp's linear up/down ramps. A pure linear ramp
  starts with a slope, which would make the target's velocity jump at t = 0 on
  every axis whose phase is not zero; each corner is therefore rounded by a
  quadratic blend of width ``corner_s`` (a moving average of the ramp), so the
  envelope is exactly 0 with zero slope at both ends, exactly 1 on the plateau,
  and exactly linear in between.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.excitation.jet import Jet


def half_cosine(t: np.ndarray, duration: float, fade_in_s: float, fade_out_s: float) -> Jet:
    """Half-cosine fade in over ``fade_in_s`` and out over ``fade_out_s`` [s]; 0 outside [0, duration]."""
    t = np.asarray(t, dtype=float)
    if fade_in_s <= 0 or fade_out_s <= 0 or fade_in_s + fade_out_s > duration + 1e-12:
        raise ValueError(
            f"fades ({fade_in_s} s in, {fade_out_s} s out) must be positive and fit in the {duration} s design"
        )
    v = np.ones_like(t)
    d = np.zeros_like(t)
    dd = np.zeros_like(t)
    for start, length, sign in ((0.0, fade_in_s, 1.0), (duration - fade_out_s, fade_out_s, -1.0)):
        m = (t >= start) & (t <= start + length)
        u = (t[m] - start) / length  # 0..1
        w = np.pi / length
        # fade-in: 0.5(1 - cos(pi u)); fade-out: 0.5(1 + cos(pi u))
        v[m] = 0.5 * (1.0 - sign * np.cos(np.pi * u))
        d[m] = 0.5 * sign * w * np.sin(np.pi * u)
        dd[m] = 0.5 * sign * w * w * np.cos(np.pi * u)
    out = (t < 0) | (t > duration)
    v[out] = d[out] = dd[out] = 0.0
    return Jet(v, d, dd)


def _rounded_ramp(u: np.ndarray, w: float) -> Jet:
    """max(u, 0) averaged over a window of width w: quadratic on |u| <= w/2."""
    v = np.where(u > w / 2, u, 0.0)
    d = np.where(u > w / 2, 1.0, 0.0)
    dd = np.zeros_like(u)
    m = np.abs(u) <= w / 2
    v[m] = (u[m] + w / 2) ** 2 / (2 * w)
    d[m] = (u[m] + w / 2) / w
    dd[m] = 1.0 / w
    return Jet(v, d, dd)


def linear_rounded(t: np.ndarray, duration: float, up_s: float, down_s: float, corner_s: float = 0.2) -> Jet:
    """Linear ramp 0 -> 1 over ``up_s``, plateau, 1 -> 0 over ``down_s`` [s], corners rounded over ``corner_s``.

    The envelope is 0 at t = 0 and t = duration with zero slope, and 1 from
    ``up_s`` to ``duration - down_s``.
    """
    t = np.asarray(t, dtype=float)
    w = float(corner_s)
    if w <= 0 or up_s <= w or down_s <= w or up_s + down_s > duration + 1e-12:
        raise ValueError(
            f"envelope ramps ({up_s} s up, {down_s} s down, corners {corner_s} s) must be longer than the "
            f"corner rounding and fit in the {duration} s design"
        )
    # corners at w/2 and up_s - w/2 (slope 1/(up_s - w)); mirrored for the fade-out
    s_up = 1.0 / (up_s - w)
    s_dn = 1.0 / (down_s - w)
    corners = ((w / 2, s_up), (up_s - w / 2, -s_up), (duration - down_s + w / 2, -s_dn), (duration - w / 2, s_dn))
    v = np.zeros_like(t)
    d = np.zeros_like(t)
    dd = np.zeros_like(t)
    for c, ds in corners:
        r = _rounded_ramp(t - c, w)
        v += ds * r.v
        d += ds * r.d
        dd += ds * r.dd
    out = (t < 0) | (t > duration)
    v[out] = d[out] = dd[out] = 0.0
    v = np.clip(v, 0.0, 1.0)  # remove round-off around the exact 0 / 1
    return Jet(v, d, dd)
