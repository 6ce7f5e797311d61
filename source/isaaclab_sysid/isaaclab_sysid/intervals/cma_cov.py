"""Intervals from the CMA-ES final search distribution (sysid_best_params.json ``cma``).

The search covariance sigma^2 C lives in the normalized space; in decoded units
it is ``diag(w) sigma^2 C diag(w)`` with w the bound widths. It describes where
the optimizer was still sampling when it stopped, which depends on the
generation budget and the step-size control, not on the measurement noise: it
is a diagnostic of convergence (an interval much wider than the curvature one
means the fit stopped early) and is never used for export. The integer delay
has no meaningful search interval here (its normalized entry is binned): it is
reported from the same formula, rounded outward to whole ticks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from isaaclab_sysid.fit.param_space import ParamSpace
from isaaclab_sysid.intervals.common import Interval, IntervalSet, continuous_index, decoded_vector, gaussian_intervals, widths, z_of
from isaaclab_sysid.intervals.curvature import _ordered


def cma_intervals(space: ParamSpace, result: Mapping, level: float = 0.95) -> IntervalSet:
    """Intervals from ``result["cma"]`` (mean, sigma, C) centred on ``result["best_params"]``."""
    cma = result.get("cma")
    x0 = np.asarray(result["best_params"], dtype=float)
    value = decoded_vector(space, x0)
    cont = continuous_index(space)
    if not cma or "C" not in cma:
        return IntervalSet("cma", level, [], ["cma: the fit result has no CMA-ES covariance"], {})
    C = np.asarray(cma["C"], dtype=float) * float(cma["sigma"]) ** 2
    W = widths(space)
    covd = C * np.outer(W, W)
    cov = covd[np.ix_(cont, cont)]
    ivs, warns = gaussian_intervals(space, value, cov, cont, level, "cma")
    delay_iv = None
    if "delay" in space.group_names:
        i = space.slice("delay").start
        g = space.group("delay")
        sd = math.sqrt(max(covd[i, i], 0.0))  # ticks: normalized std x width
        z = z_of(level)
        sd_ticks = sd * g.n_levels / (g.upper - g.lower)
        lo = max(g.lower, math.floor(value[i] - z * sd_ticks))
        hi = min(g.upper, math.ceil(value[i] + z * sd_ticks))
        delay_iv = Interval("delay", "delay", None, float(value[i]), float(lo), float(hi), sd_ticks, True,
                            "search distribution, rounded outward")
    diag = {"sigma": float(cma["sigma"]), "note": "search distribution (convergence diagnostic), not a statistical interval"}
    return IntervalSet("cma", level, _ordered(space, ivs, delay_iv), warns, diag, cov,
                       [lab for lab in space.labels() if lab != "delay"])
