"""Second-order jets: a signal with its exact first and second time derivatives.

Every excitation waveform here is built from products and sines of smooth
functions of time, so position, velocity and acceleration are carried together
and differentiated analytically (no finite differences on the design itself).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Jet:
    """Value ``v``, first derivative ``d`` and second derivative ``dd`` (same shapes)."""

    v: np.ndarray
    d: np.ndarray
    dd: np.ndarray

    @staticmethod
    def const(value: np.ndarray | float, like: np.ndarray) -> "Jet":
        v = np.broadcast_to(np.asarray(value, dtype=float), np.shape(like)).astype(float)
        return Jet(v, np.zeros_like(v), np.zeros_like(v))

    @staticmethod
    def time(t: np.ndarray) -> "Jet":
        t = np.asarray(t, dtype=float)
        return Jet(t.copy(), np.ones_like(t), np.zeros_like(t))

    def __add__(self, other: "Jet | float") -> "Jet":
        if isinstance(other, Jet):
            return Jet(self.v + other.v, self.d + other.d, self.dd + other.dd)
        return Jet(self.v + other, self.d, self.dd)

    __radd__ = __add__

    def __mul__(self, other: "Jet | float | np.ndarray") -> "Jet":
        if isinstance(other, Jet):
            return Jet(
                self.v * other.v,
                self.d * other.v + self.v * other.d,
                self.dd * other.v + 2.0 * self.d * other.d + self.v * other.dd,
            )
        return Jet(self.v * other, self.d * other, self.dd * other)

    __rmul__ = __mul__

    def sin(self) -> "Jet":
        s, c = np.sin(self.v), np.cos(self.v)
        return Jet(s, c * self.d, c * self.dd - s * self.d**2)

    def power(self, p: float) -> "Jet":
        """``self ** p`` for a positive signal."""
        v = self.v**p
        d1 = p * self.v ** (p - 1.0)
        d2 = p * (p - 1.0) * self.v ** (p - 2.0)
        return Jet(v, d1 * self.d, d2 * self.d**2 + d1 * self.dd)

    @staticmethod
    def stack(jets: list["Jet"], axis: int = -1) -> "Jet":
        return Jet(
            np.stack([j.v for j in jets], axis=axis),
            np.stack([j.d for j in jets], axis=axis),
            np.stack([j.dd for j in jets], axis=axis),
        )
