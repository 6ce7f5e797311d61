"""The one finite-difference Jacobian of the replay residuals (refinement and intervals).

A :class:`Stencil` lists the candidates to roll out around a point x0 of the
normalized space (row 0 is x0 itself) and, per differentiated entry, the two rows
whose difference gives its column. Two schemes:

* ``forward``: x0 + h e_i, taken backwards (x0 - h e_i) where x0 + h passes the
  upper bound 1 (the Levenberg-Marquardt refinement: one candidate per entry);
* ``central``: x0 + h e_i and x0 - h e_i, one-sided where a side leaves [0, 1]
  (the intervals: second-order accurate at the optimum).

Both run in one batched backend call together with whatever else the caller
needs; :meth:`Stencil.jacobian` turns the rolled-out residuals into dr/dx.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class Stencil:
    """Finite-difference candidates around one point.

    Attributes:
        X: (K, D) candidates in the normalized space; row 0 is the point itself.
        index: (p,) the differentiated entries.
        plus, minus: (p,) rows whose difference ``R[plus] - R[minus]`` gives each column (0 = the point).
        h: (p,) normalized distance between the two rows.
        step: the nominal step h in the normalized space.
        notes: entry -> why its difference is one-sided.
    """

    X: np.ndarray
    index: np.ndarray
    plus: np.ndarray
    minus: np.ndarray
    h: np.ndarray
    step: float
    notes: dict[int, str] = field(default_factory=dict)

    def jacobian(
        self,
        R: np.ndarray,
        diverged: np.ndarray,
        scale: np.ndarray | None = None,
        on_diverged: Literal["zero", "one_sided"] = "zero",
        offset: int = 0,
    ) -> tuple[np.ndarray, dict[int, str]]:
        """The Jacobian (..., p) of residuals ``R`` (K', ...) whose rows ``offset .. offset + K`` are this stencil's.

        Args:
            diverged: (K',) rows whose rollout diverged.
            scale: (p,) decoded width of each entry: the derivative is per decoded unit
                (None: per normalized unit).
            on_diverged: ``zero``: a column whose difference diverged is 0 (unobservable: the
                refinement does not move it); ``one_sided``: fall back to the side that did
                not diverge, NaN if neither (the intervals then report the entry unbounded).

        Returns:
            J with the differentiated entries on the last axis, and notes per entry.
        """
        notes = dict(self.notes)
        sc = np.ones(len(self.index)) if scale is None else np.asarray(scale, dtype=float)
        if on_diverged == "zero":
            p, m = self.plus + offset, self.minus + offset
            J = np.moveaxis((R[p] - R[m]), 0, -1) / (self.h * sc)
            bad = diverged[p] | diverged[m]
            J[..., bad] = 0.0
            return J, notes
        J = np.empty(R.shape[1:] + (len(self.index),))
        for k, i in enumerate(self.index):
            p, m, h, note = self.one_sided_rows(k, diverged, sc[k], offset)
            if note is not None:
                notes[int(i)] = note
            if p is None:
                J[..., k] = np.nan
                continue
            J[..., k] = (R[p + offset] - R[m + offset]) / h
        return J, notes

    def one_sided_rows(self, k: int, diverged: np.ndarray, scale: float = 1.0,
                       offset: int = 0) -> tuple[int | None, int | None, float, str | None]:
        """Column ``k`` of :meth:`jacobian` with ``on_diverged="one_sided"``: the rows ``(plus, minus)`` (this
        stencil's numbering, before ``offset``) whose difference over ``h`` it is, and the note it adds (None: none);
        ``(None, None, nan, note)`` when both sides diverged (the column is NaN). ``scale``: the entry's decoded width.
        Lets a caller form the columns as the rows arrive (intervals/curvature.py) with the same arithmetic."""
        p, m, h = int(self.plus[k]), int(self.minus[k]), self.h[k] * scale
        if diverged[p + offset] or diverged[m + offset]:
            if diverged[p + offset] and not diverged[m + offset] and m != 0:
                p, h = 0, self.step * scale
            elif diverged[m + offset] and not diverged[p + offset] and p != 0:
                m, h = 0, self.step * scale
            else:
                return None, None, float("nan"), "finite-difference neighbours diverged"
            return p, m, h, "a finite-difference neighbour diverged: one-sided difference"
        return p, m, h, None


def stencil(x0: np.ndarray, index: np.ndarray, step: float, scheme: Literal["forward", "central"]) -> Stencil:
    """The candidates of a finite-difference Jacobian at ``x0`` (D,) over the entries ``index`` (see module docstring)."""
    x0 = np.asarray(x0, dtype=float)
    index = np.asarray(index, dtype=int)
    X = [x0]
    plus, minus, hs = [], [], []
    notes: dict[int, str] = {}
    for i in index:
        if scheme == "forward":
            xi = x0.copy()
            if x0[i] + step <= 1.0:
                xi[i] += step
                plus.append(len(X))
                minus.append(0)
            else:
                xi[i] -= step
                plus.append(0)
                minus.append(len(X))
            X.append(xi)
            hs.append(step)
            continue
        up, dn = x0[i] + step <= 1.0, x0[i] - step >= 0.0
        for ok, sign, rows in ((up, 1.0, plus), (dn, -1.0, minus)):
            if ok:
                xi = x0.copy()
                xi[i] += sign * step
                rows.append(len(X))
                X.append(xi)
            else:
                rows.append(0)
        if not (up and dn):
            notes[int(i)] = "at a bound: one-sided difference"
        hs.append((step if up else 0.0) + (step if dn else 0.0))
    return Stencil(np.asarray(X), index, np.asarray(plus, dtype=int), np.asarray(minus, dtype=int),
                   np.asarray(hs, dtype=float), float(step), notes)
