"""Do the runs agree? The Birge ratio of the per-run optima, and the widening it asks for.

Each run r (fit runs and held-out runs alike) gives its own one-step optimum
theta_r = theta_hat - H_r^+ g_r and its own HAC standard error sigma_r (the
curvature method on that run alone). If the model is right, the theta_r scatter
within their sigma_r; model-structure error the noise does not explain (an
integrator, a friction law, a timing the model lacks) biases each run differently
and they disagree. Per number k,

    chi2_k = sum_r (theta_rk - mean_w)^2 / sigma_rk^2,   ratio_k = sqrt(chi2_k / (n_k - 1)),

over the runs that pin k down (n_k >= 2; mean_w is the inverse-variance mean), and
the global ratio is sqrt(sum chi2 / sum dof). An interval is widened by
max(global, ratio_k) when that exceeds 1 (the global ratio also covers numbers
only one run pins down). A held-out run is the most telling: other gains, another
waveform.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from isaaclab_sysid.intervals.curvature import Sensitivity, curvature_intervals, pinv_normalized


@dataclass
class Consistency:
    """The runs' agreement.

    Attributes:
        ratio: the global Birge ratio (None when no number is pinned down by two runs).
        per_entry: (p,) ratio_k per continuous entry (NaN where fewer than two runs pin it down).
        runs: run names, in the order of ``theta``; theta: (R, p) per-run optima (NaN: not pinned down).
    """

    ratio: float | None
    per_entry: np.ndarray
    runs: list[str]
    theta: np.ndarray

    def factors(self, labels: Sequence[str]) -> dict[str, float]:
        """label -> widening factor max(global, own) (1 where nothing asks for more)."""
        if self.ratio is None:
            return {}
        return {lab: max(self.ratio, float(e) if np.isfinite(e) else self.ratio, 1.0) for lab, e in zip(labels, self.per_entry)}

    def to_json(self) -> dict:
        return {"birge_ratio": self.ratio, "per_entry": [None if not np.isfinite(v) else float(v) for v in self.per_entry],
                "runs": self.runs, "per_run_values": [[None if not np.isfinite(v) else float(v) for v in row] for row in self.theta],
                "note": "sqrt(chi2 / dof) of the per-run one-step optima against their own HAC errors (intervals/consistency.py)"}


def run_alone(sens: Sensitivity, r: int) -> Sensitivity:
    """The sensitivity of run ``r`` alone (same optimum, its residuals and Jacobian only)."""
    return replace(sens, r=[sens.r[r]], J=[sens.J[r]], run_names=[sens.run_names[r]], r_delay={}, delays=[])


def per_run_optima(sens: Sensitivity, rtol: float = 1e-9) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, (R, p) theta_r, (R, p) sigma_r): each run's one-step optimum and HAC error (NaN where it cannot pin it)."""
    W = sens.space.widths()[sens.cont]
    names, th, sd = [], [], []
    for r in range(len(sens.r)):
        one = run_alone(sens, r)
        H = one.hessian()
        pi = pinv_normalized(H, W, rtol)
        g = np.einsum("tcp,tc->p", one.J[0], one.r[0])
        t = sens.value[sens.cont] - pi.Hinv @ g
        s = np.array([math.nan if iv.std is None or not iv.bounded else iv.std for iv in
                      curvature_intervals(one).intervals if iv.group != "delay"], dtype=float)
        t[pi.null_entries] = np.nan
        s[pi.null_entries] = np.nan
        names.append(sens.run_names[r])
        th.append(t)
        sd.append(s)
    return names, np.asarray(th), np.asarray(sd)


def consistency(sensitivities: Sequence[Sensitivity]) -> Consistency:
    """The Birge ratio over every run of the given sensitivities (fit runs, held-out runs; see module docstring)."""
    names, th, sd = [], [], []
    for s in sensitivities:
        n, t, d = per_run_optima(s)
        names += n
        th.append(t)
        sd.append(d)
    T, S = np.vstack(th), np.vstack(sd)
    ok = np.isfinite(T) & np.isfinite(S) & (S > 0)
    p = T.shape[1]
    per = np.full(p, np.nan)
    chi_tot, dof_tot = 0.0, 0
    for k in range(p):
        m = ok[:, k]
        if m.sum() < 2:
            continue
        w = 1.0 / S[m, k] ** 2
        mean = float(np.sum(w * T[m, k]) / np.sum(w))
        chi = float(np.sum(w * (T[m, k] - mean) ** 2))
        per[k] = math.sqrt(chi / (m.sum() - 1))
        chi_tot += chi
        dof_tot += int(m.sum() - 1)
    ratio = math.sqrt(chi_tot / dof_tot) if dof_tot else None
    return Consistency(ratio, per, names, T)
