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
import numpy as np

from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.intervals.common import Interval, IntervalSet, gaussian_intervals, order_intervals, z_of


def cma_intervals(result: FitResult, level: float = 0.95) -> IntervalSet:
    """Intervals from the result's CMA-ES search distribution, centred on its best parameters."""
    space = result.space
    value = space.decoded_vector(result.best_x)
    cont = space.continuous_index()
    if result.search is None:
        return IntervalSet("cma", level, [], ["cma: the fit result has no CMA-ES covariance"], {})
    C = result.search.covariance()
    W = space.widths()
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
    diag = {"sigma": float(result.search.sigma), "note": "search distribution (convergence diagnostic), not a statistical interval"}
    return IntervalSet("cma", level, order_intervals(space, ivs + ([delay_iv] if delay_iv else [])), warns, diag, cov,
                       [lab for lab in space.labels() if lab != "delay"])
