"""Curvature intervals on a linear stand-in backend with autocorrelated noise (exact answers known).

The stand-in's rollout is linear in the parameters (fixed smooth basis signals), and
the "recorded" runs are the true parameters' rollout plus AR(1) noise, so the least-
squares optimum is one Gauss-Newton step away and the true sampling distribution is
known. The HAC sandwich must cover at about its nominal rate; the white-noise form
must not (it is over-confident on autocorrelated residuals), which is why it is not used.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from conftest import make_run

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.refine import refine_point
from isaaclab_sysid.intervals import curvature_intervals, sensitivity
from isaaclab_sysid.intervals.bootstrap import block_bootstrap_intervals, per_run_intervals
from isaaclab_sysid.objective.result import FitResult, SearchDistribution
from isaaclab_sysid.intervals.cma_cov import cma_intervals
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, ReplayOptions, RunRollout, check_supported

TRUE = {
    "armature": np.array([0.30, 0.25, 0.20, 0.15, 0.05, 0.08, 0.02]),
    "friction": np.array([1.0, 2.0, 0.5, 1.5, 0.3, 0.4, 0.2]),
    "viscous": np.array([0.5, 1.0, 0.8, 0.6, 0.2, 0.3, 0.1]),
    "delay": 2,
}
GROUPS = ("armature", "friction", "viscous")


class LinearBackend(ReplayBackend):
    """q = q_base + sum_params (theta - theta_ref) basis; the delay shifts a fixed signal (quadratic loss in d).

    ``dead`` names (group, joint) pairs with a zero basis: unidentifiable.
    """

    name = "linear"
    supported_groups = frozenset({"armature", "friction", "viscous", "delay"})
    options = ReplayOptions()

    def __init__(self, T: int, n_runs: int, dead=(("viscous", 6),), seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        t = np.arange(T) / T
        self.basis = {}
        for r in range(n_runs):
            for g in GROUPS:
                B = np.zeros((T, 7, 7))  # (T, joint output, param joint)
                for j in range(7):
                    f = rng.uniform(1, 6, 3)
                    ph = rng.uniform(0, 2 * np.pi, 3)
                    B[:, j, j] = np.sum(np.sin(2 * np.pi * f[None] * t[:, None] + ph[None]), axis=1) * 0.01
                    B[:, (j + 1) % 7, j] = 0.3 * B[:, j, j]
                for gg, jj in dead:
                    if gg == g:
                        B[:, :, jj] = 0.0
                self.basis[(r, g)] = B
        self.delay_sig = 0.003 * np.cos(3 * np.pi * t)

    def clean(self, r: int, base: np.ndarray, P: int, batch: CandidateBatch) -> np.ndarray:
        q = np.repeat(base[None], P, 0).astype(float)
        for g in GROUPS:
            v = getattr(batch, g)
            q += np.einsum("tjk,pk->ptj", self.basis[(r, g)], v - TRUE[g][None])
        d = np.asarray(batch.delay, float) - TRUE["delay"]
        q += (d**2)[:, None, None] * self.delay_sig[None, :, None]
        return q

    def rollout(self, batch, runs):
        check_supported(batch, self.supported_groups, self.name)
        out = []
        for r, run in enumerate(runs):
            P = batch.size
            q = self.clean(r, run.extra_base, P, batch)
            T = q.shape[1]
            out.append(RunRollout(q=q, dq=np.repeat(run.dq[None], P, 0), ee_pos=np.repeat(run.ee_pos[None], P, 0),
                                  ee_quat=np.repeat(run.ee_quat[None], P, 0), tau=np.zeros((P, T, 7)),
                                  diverged=np.zeros(P, bool)))
        return out


class _Run:
    """A run-like object: what the loss and the stand-in read."""

    def __init__(self, base_run, q, base):
        self.name = base_run.name
        self.q = q
        self.dq = base_run.dq
        self.ee_pos = base_run.ee_pos
        self.ee_quat = base_run.ee_quat
        self.extra_base = base


def _runs(be: LinearBackend, T: int, n_runs: int, seed: int, phi: float = 0.9, sd: float = 2e-4):
    rng = np.random.default_rng(seed)
    runs = []
    for r in range(n_runs):
        base_run = make_run(n=T, seed=r)
        base_run = dataclasses.replace(base_run, name=f"run{r}")
        e = np.zeros((T, 7))
        w = rng.standard_normal((T, 7)) * sd * math.sqrt(1 - phi**2)
        e[0] = rng.standard_normal(7) * sd
        for k in range(1, T):
            e[k] = phi * e[k - 1] + w[k]
        runs.append(_Run(base_run, base_run.q + e, base_run.q))
    return runs


def _space():
    return ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)


def _fit(be, space, runs):
    x = refine_point(ReplayObjective(space, be, runs), space.normalize(TRUE), max_iter=1)
    return x


def test_residual_sum_of_squares_is_the_fit_loss():
    from isaaclab_sysid.objective.loss import total_loss

    T = 120
    be = LinearBackend(T, 2)
    runs = _runs(be, T, 2, seed=0)
    space = _space()
    x = space.normalize(TRUE)
    sens = sensitivity(ReplayObjective(space, be, runs), x)
    lb = total_loss(be.rollout(space.to_batch(x[None]), runs), runs)
    assert sens.ssr == pytest.approx(lb.total[0], rel=1e-12)
    assert sens.n_candidates == 1 + 2 * 21 + 4  # optimum, central differences, 4 other delays


def test_unidentifiable_parameter_is_unbounded_with_warning_and_delay_profile():
    T = 200
    be = LinearBackend(T, 2)
    runs = _runs(be, T, 2, seed=1)
    space = _space()
    x = _fit(be, space, runs)
    s = curvature_intervals(sensitivity(ReplayObjective(space, be, runs), x))
    iv = s.by_label()["viscous[j7]"]
    assert iv.lower is None and iv.upper is None and not iv.identifiable
    assert any("viscous[j7]" in w and "not identifiable" in w for w in s.warnings)
    assert all(v.bounded for k, v in s.by_label().items() if k not in ("viscous[j7]",))
    d = s.by_label()["delay"]
    assert d.lower <= TRUE["delay"] <= d.upper and d.value == TRUE["delay"]
    # the exported JSON carries None, never a number, for the unbounded one
    js = s.to_dict()
    row = next(r for r in js["intervals"] if r["label"] == "viscous[j7]")
    assert row["lower"] is None and row["upper"] is None


def test_hac_covers_at_nominal_rate_naive_does_not():
    T, R, S = 300, 2, 60
    be = LinearBackend(T, R)
    space = _space()
    cont = space.continuous_index()
    truth = space.decoded_vector(space.normalize(TRUE))
    hits = {"hac": [], "naive": [], "bootstrap": []}
    for seed in range(S):
        runs = _runs(be, T, R, seed=100 + seed)
        x = _fit(be, space, runs)
        sens = sensitivity(ReplayObjective(space, be, runs), x, profile_delay=False)
        for mode in ("hac", "naive"):
            s = curvature_intervals(sens, mode=mode)
            hits[mode].append([s.by_label()[lab].contains(truth[i]) for lab, i in zip(sens.labels, cont)
                               if s.by_label()[lab].bounded])
        b = block_bootstrap_intervals(sens, n_boot=300, seed=seed)
        hits["bootstrap"].append([b.by_label()[lab].contains(truth[i]) for lab, i in zip(sens.labels, cont)
                                  if b.by_label()[lab].bounded])
    rate = {k: float(np.mean(np.concatenate(v))) for k, v in hits.items()}
    print("coverage (nominal 0.95):", rate)
    assert 0.85 <= rate["hac"] <= 0.99
    assert 0.80 <= rate["bootstrap"] <= 0.99
    assert rate["naive"] < 0.6  # white-noise form is over-confident on AR(1) residuals


def test_other_methods_run_and_cma_from_result():
    T = 150
    be = LinearBackend(T, 3)
    runs = _runs(be, T, 3, seed=3)
    space = _space()
    x = _fit(be, space, runs)
    sens = sensitivity(ReplayObjective(space, be, runs), x)
    pr = per_run_intervals(sens)
    assert pr.diagnostics["n_runs"] == 3 and len(pr.intervals) == 21
    res = FitResult.from_search(space, x, 0.0, run_names=[], weighted_loss=np.zeros(0), traj_weights=np.zeros(0),
                                search=SearchDistribution(x.copy(), 0.01, np.eye(space.dim)))
    c = cma_intervals(res)
    iv = c.by_label()["armature[j1]"]
    assert iv.upper - iv.lower == pytest.approx(2 * 1.959964 * 0.01 * 0.5, rel=1e-4)
    assert c.by_label()["delay"].lower <= TRUE["delay"] <= c.by_label()["delay"].upper


@pytest.mark.parametrize("T, p, bandwidth", [(2500, 12, 600), (400, 5, 40), (40, 3, 17), (30, 4, 3), (5, 2, 50)])
def test_hac_meat_by_fft_is_the_lag_sum(T, p, bandwidth):
    from isaaclab_sysid.intervals.curvature import hac_meat, hac_meat_lags

    rng = np.random.default_rng(T)
    scores = [np.cumsum(rng.normal(size=(T, p)), axis=0), rng.normal(size=(T + 3, p))]  # correlated and white
    fast, ref = hac_meat(scores, bandwidth), hac_meat_lags(scores, bandwidth)
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(fast, fast.T)
