"""Issue 45: the interval stage's long-recording forms give the dense forms' numbers.

* :func:`~isaaclab_sysid.intervals.curvature.sensitivity` forms the Jacobian's columns as the chunks of its rollout
  arrive instead of holding every candidate's (K, T, C) residuals: the same bits as ``Stencil.jacobian`` on the full
  residuals, with diverged neighbours (one-sided and NaN columns) and with chunks that split a column's two rows;
* :func:`~isaaclab_sysid.intervals.curvature.integrated_autocorr_time` sums the lags up to the first non-positive one
  only: the same bits as summing every lag to T / 2 first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from test_intervals_curvature import TRUE, LinearBackend, _runs, _space

from isaaclab_sysid.intervals import curvature
from isaaclab_sysid.intervals.curvature import central_stencil, integrated_autocorr_time, sensitivity
from isaaclab_sysid.objective.replay_objective import ReplayObjective


class DivergingBackend(LinearBackend):
    """The stand-in, with a candidate marked diverged where armature[j2] is above its fitted value (its plus side:
    a one-sided column) or friction[j3] is off its fitted value (both sides: a NaN column)."""

    def __init__(self, T, n_runs, space, x0, h):
        super().__init__(T, n_runs)
        v, w = space.decode(x0), space.widths()
        labels = space.labels()
        self.a2, self.f3 = v["armature"][1], v["friction"][2]
        self.tol_a2 = 0.5 * h * w[labels.index("armature[j2]")]
        self.tol_f3 = 0.5 * h * w[labels.index("friction[j3]")]

    def rollout(self, batch, runs):
        out = super().rollout(batch, runs)
        bad = (np.asarray(batch.armature)[:, 1] > self.a2 + self.tol_a2) | \
              (np.abs(np.asarray(batch.friction)[:, 2] - self.f3) > self.tol_f3)
        for ro in out:
            ro.diverged[:] = bad
        return out


def _dense(objective, x0, step=1e-3):
    """The sensitivity's Jacobian, residuals and notes the way it was formed first: every row held."""
    space = objective.space
    x0, cont, st = central_stencil(space, x0, step)
    X = list(st.X)
    d0 = space.delay_of(x0)
    idx = {}
    g = space.group("delay")
    for d in range(int(g.lower), int(g.upper) + 1):
        idx[d] = 0 if d == d0 else len(X)
        if d != d0:
            X.append(space.with_delay(x0, d))
    R, div = curvature._per_sample_residuals(objective, np.asarray(X))
    Js, notes = [], dict(st.notes)
    for r in R:
        J, n = st.jacobian(r, div, scale=space.widths()[cont], on_diverged="one_sided")
        Js.append(J)
        notes.update(n)
    return Js, [r[0] for r in R], {d: [r[j] for r in R] for d, j in idx.items() if not div[j]}, notes


@pytest.mark.parametrize("chunk", [1, 2, 5, 16, 200])
def test_streamed_sensitivity_is_the_dense_one(monkeypatch, chunk):
    T = 60
    space = _space()
    x0 = space.normalize(TRUE)
    be = DivergingBackend(T, 2, space, x0, 1e-3)
    runs = _runs(be, T, 2, seed=0)
    obj = ReplayObjective(space, be, runs)
    monkeypatch.setattr(curvature, "SENSITIVITY_CHUNK", chunk)
    monkeypatch.setattr(curvature._streamed_jacobian, "__defaults__", (chunk,))
    Js, r0, rd, notes = _dense(obj, x0)
    sens = sensitivity(obj, x0)
    assert sens.fd_notes == notes
    k2, k3 = list(sens.labels).index("armature[j2]"), list(sens.labels).index("friction[j3]")
    assert "one-sided" in notes[int(sens.cont[k2])] and "diverged" in notes[int(sens.cont[k3])]
    for a, b in zip(sens.J, Js):
        assert np.all(np.isnan(a[..., k3])) and np.all(np.isfinite(np.delete(a, k3, axis=2)))
        np.testing.assert_array_equal(a, b)
    for a, b in zip(sens.r, r0):
        np.testing.assert_array_equal(a, b)
    assert sorted(sens.r_delay) == sorted(rd) and len(rd) == 5  # the fitted delay and 4 others
    for d in rd:
        for a, b in zip(sens.r_delay[d], rd[d]):
            np.testing.assert_array_equal(a, b)


def integrated_autocorr_time_all_lags(rs: Sequence[np.ndarray], max_lag: int | None = None) -> float:
    """``integrated_autocorr_time`` as it was written first: every lag up to ``max_lag`` (default T / 2) summed,
    then the initial positive sequence (O(T^2); the reference the lazy form is held to)."""
    num = None
    for r in rs:
        T = r.shape[0]
        L = min(T - 1, max_lag or T // 2)
        x = r - r.mean(axis=0, keepdims=True)
        acov = np.array([np.sum(x[: T - k] * x[k:]) for k in range(L + 1)])
        num = acov if num is None else num[: len(acov)] + acov[: len(num)]
    if num is None or num[0] <= 0:
        return 1.0
    rho = num / num[0]
    tau = 1.0
    for k in range(1, len(rho)):
        if rho[k] <= 0:
            break
        tau += 2.0 * rho[k]
    return float(tau)


@pytest.mark.parametrize("seed", range(4))
def test_autocorrelation_time_summed_lazily_is_the_full_sum(seed):
    rng = np.random.default_rng(seed)
    T = [400, 1000, 30, 7][seed]
    smooth = np.cumsum(rng.standard_normal((T, 5)), axis=0) * 0.05 + rng.standard_normal((T, 5))
    rs = [smooth, rng.standard_normal((T + 13, 5)), np.sin(np.arange(T // 2 + 3) / 9.0)[:, None] * np.ones((1, 5))]
    for sub in (rs[:1], rs[1:2], rs, rs[::-1]):
        for max_lag in (None, 3, 50):
            assert integrated_autocorr_time(sub, max_lag) == integrated_autocorr_time_all_lags(sub, max_lag)
    assert integrated_autocorr_time([np.zeros((10, 3))]) == integrated_autocorr_time_all_lags([np.zeros((10, 3))]) == 1.0


def test_bootstrap_gathered_in_parts_and_score_sums_without_copies_are_the_same(monkeypatch):
    from isaaclab_sysid.intervals import bootstrap
    from isaaclab_sysid.intervals.process_noise import _project_out

    T = 80
    space = _space()
    x0 = space.normalize(TRUE)
    be = DivergingBackend(T, 2, space, x0, 1e-3)  # friction[j3]'s column is NaN: the copy path of finite_J
    runs = _runs(be, T, 2, seed=2)
    sens = sensitivity(ReplayObjective(space, be, runs), x0)
    whole = bootstrap.block_bootstrap_intervals(sens, n_boot=50, seed=3)
    monkeypatch.setattr(bootstrap, "BOOT_GATHER", 1)  # one resample at a time
    parts = bootstrap.block_bootstrap_intervals(sens, n_boot=50, seed=3)
    np.testing.assert_array_equal(whole.cov, parts.cov)
    assert [(i.lower, i.upper) for i in whole.intervals] == [(i.lower, i.upper) for i in parts.intervals]
    rs = [np.random.default_rng(k).standard_normal(r.shape) for k, r in enumerate(sens.r)]
    ref = sum(np.einsum("tcp,tc->p", np.nan_to_num(J), r) for J, r in zip(sens.J, rs))
    np.testing.assert_array_equal(sens.score_sum(rs), ref)
    assert np.isnan(sens.J[0]).any() and not any(np.isnan(J).any() for J in sens.finite_J())
    clean = sensitivity(ReplayObjective(space, LinearBackend(T, 2), runs), x0)
    assert all(a is b for a, b in zip(clean.finite_J(), clean.J))  # finite: no copy
    Hinv = clean.gauss_newton_inverse()
    step = Hinv @ clean.score_sum(rs)
    ref = [r - np.einsum("tcp,p->tc", np.nan_to_num(J), step) for J, r in zip(clean.J, rs)]
    for a, b in zip(_project_out(clean, Hinv, rs), ref):
        np.testing.assert_array_equal(a, b)


def _delay_scale_augmented(sens):
    """intervals/delay_union.delay_scale as it was written first: the augmented Jacobian [J, r(nb) - r(d0)] formed."""
    from isaaclab_sysid.intervals.curvature import cluster_meat, hac_bandwidth, hac_meat, pinv_normalized

    n, p = sens.n_obs, len(sens.cont)
    s2 = sens.ssr / max(n - p, 1)
    L = hac_bandwidth(sens.r, integrated_autocorr_time(sens.r))
    J0 = [np.nan_to_num(J) for J in sens.J]
    scale = np.append(sens.space.widths()[sens.cont], 1.0)
    out = []
    for nb in (sens.delay0 - 1, sens.delay0 + 1):
        rn = sens.r_delay.get(nb)
        if rn is None:
            continue
        Ja = [np.concatenate([J, (a - b)[..., None]], axis=2) for J, a, b in zip(J0, rn, sens.r)]
        H = sum(np.einsum("tcp,tcq->pq", J, J) for J in Ja)
        pi = pinv_normalized(H, scale)
        M = np.zeros((p + 1, p + 1))
        for J, r, w in zip(Ja, sens.r, sens.windows or [None] * len(sens.r)):
            g = np.einsum("tcp,tc->tp", J, r)
            g[:, -1] -= g[:, -1].mean()
            M += cluster_meat(g, w) if w is not None and len(w) > 1 else hac_meat([g], L)
        out.append((H, M, s2 * pi.Hinv[-1, -1], (pi.Hinv @ M @ pi.Hinv)[-1, -1]))
    return out


@pytest.mark.parametrize("T, diverging", [(90, True), (700, False)])
def test_delay_scale_without_the_augmented_jacobian_is_the_same(monkeypatch, T, diverging):
    from isaaclab_sysid.intervals import delay_union

    space = _space()
    x0 = space.normalize(TRUE)
    be = DivergingBackend(T, 2, space, x0, 1e-3) if diverging else LinearBackend(T, 2)
    runs = _runs(be, T, 2, seed=4)
    sens = sensitivity(ReplayObjective(space, be, runs), x0)
    ref = _delay_scale_augmented(sens)
    seen = []
    real = delay_union.pinv_normalized

    def spy(H, scale, *a, **k):  # the augmented curvature each neighbour's test inverts
        seen.append(np.array(H))
        return real(H, scale, *a, **k)

    monkeypatch.setattr(delay_union, "pinv_normalized", spy)
    s2, kappa, note = delay_union.delay_scale(sens)
    assert len(seen) == len(ref) == 2
    for H, (Hr, _, vn, vh) in zip(seen, ref):
        np.testing.assert_array_equal(H, Hr)
    assert kappa == max(1.0, *(float(vh / vn) for *_, vn, vh in ref))


def test_hessian_is_computed_once_and_handed_out_as_copies():
    T = 50
    space = _space()
    be = LinearBackend(T, 2)
    runs = _runs(be, T, 2, seed=5)
    sens = sensitivity(ReplayObjective(space, be, runs), space.normalize(TRUE))
    ref = sum(np.einsum("tcp,tcq->pq", J, J) for J in sens.J)
    H = sens.hessian()
    np.testing.assert_array_equal(H, ref)
    H[:] = 0.0  # a caller's change does not reach the next caller
    np.testing.assert_array_equal(sens.hessian(), ref)
    sens.J = sens.J[:1]  # other Jacobians: computed anew
    np.testing.assert_array_equal(sens.hessian(), 0 + np.einsum("tcp,tcq->pq", sens.J[0], sens.J[0]))


def test_a_long_run_is_rolled_out_in_fewer_candidates_per_call():
    """Issue 45: one backend call of the sensitivity holds at most SENSITIVITY_CHUNK_MB of per-sample residuals: 16
    candidates on a 12 s 1 kHz run of the 7-joint arm, 4 on 96 s (13 MB each), never fewer than 1."""
    from types import SimpleNamespace

    def runs(seconds: float, n: int = 1):
        return [SimpleNamespace(q=np.empty((int(seconds * 1000), 7)))] * n

    assert curvature.candidates_per_call(runs(12.0)) == 16
    assert curvature.candidates_per_call(runs(96.0)) == 4
    assert curvature.candidates_per_call(runs(48.0, 2)) == 4  # the samples of every run count
    assert curvature.candidates_per_call(runs(96.0), chunk=2) == 2
    assert curvature.candidates_per_call(runs(3600.0)) == 1
