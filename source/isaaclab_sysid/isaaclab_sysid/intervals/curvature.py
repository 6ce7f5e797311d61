"""Intervals from the local curvature of the loss at the optimum (Gauss-Newton).

One batched rollout (:func:`sensitivity`) replays, on every run, the fitted
candidate, its finite-difference neighbours (x +- h e_i for every continuous
entry, one-sided at a bound) and every integer delay within the bounds. From it:

* the weighted residual vector r, arranged per run as (T, C) with C = 2N + 3
  channels (q, dq, EE position), scaled so that ``sum r^2`` is exactly the fit's
  loss (``sqrt(w_run w_q / (T N))`` etc.);
* the Jacobian J = dr/dtheta in decoded units, (T, C, p);
* the residuals at every other delay (the delay's loss profile).

:func:`curvature_intervals` then gives, for the continuous numbers,

* ``naive``: s^2 (J^T J)^+ with s^2 = SSR / (n - p) (white-noise assumption);
* ``hac`` (used): the sandwich (J^T J)^+ M (J^T J)^+, where M is the Newey-West
  (Bartlett kernel) long-run covariance of the per-sample score contributions
  g_t = sum_c J_tc r_tc of each run, with a bandwidth from the residuals'
  integrated autocorrelation time. A closed-loop replay's residuals are strongly
  autocorrelated (the process noise and any model error drive the state for
  many samples), so the naive form is over-confident by about that time; the
  sandwich also absorbs the unequal noise of q, dq and x that the loss weights
  do not undo, and the correlation between channels at one instant;
* ``neff``: the naive one inflated by the integrated autocorrelation time
  (reported for comparison).

For a torque run replayed in shooting windows (``--replay torque``) the meat of that
run is the cluster-robust one instead: the sum over windows of (sum of g_t in the
window)(...)^T, times W / (W - 1). Each window starts from a measured state whose
noise offsets the whole window, so its residuals are correlated over the window's
length and independent between windows (a Bartlett kernel at the autocorrelation
time under-counts that correlation).

The pseudo-inverse uses a rank tolerance on the eigenvalues of J^T J in the
normalized space; an entry with weight in the null space gets an unbounded
interval and a warning. The delay's interval is the set of integer delays
whose profile loss (continuous numbers re-optimized by one Gauss-Newton step)
is within chi^2_1(level) of the minimum, in units of the autocorrelation-
inflated noise variance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.signal import fftconvolve

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.jacobian import Stencil, stencil
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.residuals import stacked_size, weighted_residuals
from isaaclab_sysid.sim.shooting import backend_windows
from isaaclab_sysid.intervals.common import Interval, IntervalSet, chi2_1, gaussian_intervals, order_intervals
from isaaclab_sysid.utils.errors import UserError


class IntervalError(UserError, RuntimeError):
    """The intervals cannot be computed (e.g. the fitted candidate diverges)."""


@dataclass
class Sensitivity:
    """Everything one batched finite-difference rollout gives (see module docstring).

    Attributes:
        x0: (D,) the fitted normalized vector; value: (D,) decoded.
        cont: indices of the continuous entries; labels: their labels.
        r: per run, (T, C) residuals at the optimum.
        J: per run, (T, C, p) Jacobian of r w.r.t. the continuous entries (decoded units).
        delays: the integer delays profiled; r_delay: per delay, per run, (T, C) residuals
            (continuous entries at the optimum). Empty when the delay is not fitted.
        delay0: the fitted delay (None when not fitted).
        run_names; n_candidates: candidates in the batch; fd_notes: per entry, one-sided/diverged notes.
        windows: per run, the (W, 2) [start, stop) sample ranges of its shooting windows (torque runs),
            or None (a controller run: one trajectory).
    """

    space: ParamSpace
    x0: np.ndarray
    value: np.ndarray
    cont: np.ndarray
    labels: list[str]
    r: list[np.ndarray]
    J: list[np.ndarray]
    run_names: list[str]
    delays: list[int] = field(default_factory=list)
    r_delay: dict[int, list[np.ndarray]] = field(default_factory=dict)
    delay0: int | None = None
    n_candidates: int = 0
    fd_notes: dict[int, str] = field(default_factory=dict)
    step: float = 1e-3
    windows: list[np.ndarray | None] = field(default_factory=list)

    @property
    def ssr(self) -> float:
        return float(sum(np.sum(r**2) for r in self.r))

    @property
    def n_obs(self) -> int:
        return int(sum(r.size for r in self.r))

    def hessian(self) -> np.ndarray:
        """(p, p) J^T J summed over runs (a copy of the one computed first: the interval methods ask for it about ten
        times, and on a long run each is seconds; issue 45)."""
        key = [id(J) for J in self.J]
        cache = self.__dict__.get("_hessian")
        if cache is None or cache[0] != key:
            cache = (key, list(self.J), sum(np.einsum("tcp,tcq->pq", J, J) for J in self.J))
            self.__dict__["_hessian"] = cache
        return np.array(cache[2], copy=True)

    def score_sum(self, rs: Sequence[np.ndarray]) -> np.ndarray:
        """(p,) sum over runs and samples of J^T r for other residuals ``rs`` of the same runs (per run, (T, C));
        non-finite Jacobian entries count as 0."""
        return sum(np.einsum("tcp,tc->p", J, r) for J, r in zip(self.finite_J(), rs))

    def finite_J(self) -> list[np.ndarray]:
        """Per run, ``np.nan_to_num(J)``: the Jacobian itself where every entry is finite (the same values, no copy:
        issue 45, a long run's Jacobian is hundreds of MB and the process noise reads it 50 times), a copy with
        0 for the non-finite entries otherwise (a column whose neighbours diverged)."""
        key = [id(J) for J in self.J]
        cache = self.__dict__.get("_finite")
        if cache is None or cache[0] != key:
            flags = [bool(np.isfinite(J).all()) for J in self.J]
            cache = (key, list(self.J), flags)  # the list holds the arrays: their ids stay theirs
            self.__dict__["_finite"] = cache
        return [J if ok else np.nan_to_num(J) for J, ok in zip(cache[1], cache[2])]

    def release_jacobian(self) -> None:
        """Drop the Jacobian and the caches that hold it (its hundreds of MB on a long run; issue 45): for a caller
        whose last reader of it is done. A later read of ``J`` (:meth:`hessian`, :meth:`scores`, ...) raises."""
        self.J = None
        self.__dict__.pop("_hessian", None)
        self.__dict__.pop("_finite", None)

    def gauss_newton_inverse(self) -> np.ndarray:
        """(p, p) (J^T J)^+ in decoded units (the rank tolerance of :func:`pinv_normalized`)."""
        return pinv_normalized(self.hessian(), self.space.widths()[self.cont]).Hinv

    def scores(self) -> list[np.ndarray]:
        """Per run, (T, p) score contributions g_t = sum_c J_tc r_tc (the gradient of the loss is 2 sum g_t)."""
        return [np.einsum("tcp,tc->tp", J, r) for J, r in zip(self.J, self.r)]


#: candidates rolled out per backend call by :func:`sensitivity` (issue 45: the rollouts of one chunk are held at a
#: time, not of every stencil candidate; a deterministic backend gives the same numbers either way)
SENSITIVITY_CHUNK = 16
#: the most one such call's per-sample residuals may take [MB]: a long run's calls take fewer candidates (a 96 s 1 kHz
#: run holds 13 MB of residuals a candidate, and 16 of them, with their states and the weighted copies beside them,
#: set a 96 s fit's peak; the same numbers either way)
SENSITIVITY_CHUNK_MB = 64.0


def candidates_per_call(runs: Sequence[Run], chunk: int = SENSITIVITY_CHUNK, mb: float = SENSITIVITY_CHUNK_MB) -> int:
    """At most ``chunk`` candidates per backend call, fewer where their (K, M) per-sample residuals on ``runs`` would
    exceed ``mb`` [MB]; at least 1."""
    return int(max(1, min(chunk, mb * 1e6 // (8 * max(stacked_size(runs), 1)))))


def _chunk_residuals(objective: ReplayObjective, X: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Per run the (k, T, C) weighted residuals of the k candidates ``X`` (one backend call) and their divergence."""
    res = weighted_residuals(objective.states(X), objective.runs, objective.weights, objective.traj_weights)
    out = []
    for r in res:
        n_q, n_dq = r.q.shape[2], r.dq.shape[2]
        Rr = np.empty((r.q.shape[0], r.q.shape[1], n_q + n_dq + r.x.shape[2]))
        Rr[:, :, :n_q] = r.q
        Rr[:, :, n_q: n_q + n_dq] = r.dq
        Rr[:, :, n_q + n_dq:] = r.x
        out.append(Rr)
    div = np.any(np.stack([r.diverged for r in res]), axis=0)
    return out, div


def _per_sample_residuals(objective: ReplayObjective, Xa: np.ndarray,
                          chunk: int = SENSITIVITY_CHUNK) -> tuple[list[np.ndarray], np.ndarray]:
    """Per run the (K, T, C) weighted residuals of the K candidates ``Xa``, and their divergence (K,), rolled out
    ``chunk`` candidates at a time into one array per run (:func:`sensitivity` no longer holds them: it forms the
    Jacobian's columns as the chunks arrive)."""
    runs = objective.runs
    chunk = candidates_per_call(runs, chunk)
    K = len(Xa)
    R = [np.empty((K, run.q.shape[0], 2 * run.q.shape[1] + 3)) for run in runs]
    div = np.zeros(K, dtype=bool)
    for a in range(0, K, chunk):
        Rc, dc = _chunk_residuals(objective, Xa[a: a + chunk])
        for Rr, r in zip(R, Rc):
            Rr[a: a + r.shape[0]] = r
        div[a: a + chunk] = dc
        del Rc
    return R, div


def _streamed_jacobian(objective: ReplayObjective, Xa: np.ndarray, st: Stencil, scale: np.ndarray, keep: Sequence[int],
                       chunk: int = SENSITIVITY_CHUNK):
    """The stencil's Jacobian (central or forward) formed column by column as the rollouts of ``chunk`` candidates arrive
    (issue 45): per run the (T, C, p) Jacobian in decoded units (``scale``: the entries' widths), the same numbers as
    ``st.jacobian(R, div, scale=scale, on_diverged="one_sided")`` on the full (K, T, C) residuals, which are never
    held; only a chunk's residuals, the rows a pending column still needs and the rows ``keep`` (row 0 always).

    Returns (per run J, notes, divergence (K,), row -> per run (T, C) residuals of the ``keep`` rows and row 0).
    """
    runs = objective.runs
    chunk = candidates_per_call(runs, chunk)
    K, p = len(Xa), len(st.index)
    Js = [np.empty((run.q.shape[0], 2 * run.q.shape[1] + 3, p)) for run in runs]
    div = np.zeros(K, dtype=bool)
    keep = set(int(k) for k in keep) | {0}
    held: dict[int, list[np.ndarray]] = {}
    notes = dict(st.notes)
    need = [(int(st.plus[k]), int(st.minus[k])) for k in range(p)]
    last = [max(pm) for pm in need]  # a column's rows are all rolled out once this row is
    done = np.zeros(p, dtype=bool)
    for a in range(0, K, chunk):
        Rc, dc = _chunk_residuals(objective, Xa[a: a + chunk])
        b = a + len(dc)
        div[a:b] = dc
        if div[0]:
            raise IntervalError("the fitted candidate diverges on at least one run: no interval can be computed there")

        def row(j: int, i: int) -> np.ndarray:  # run i's (T, C) residuals of candidate j (this chunk or held)
            return Rc[i][j - a] if a <= j < b else held[j][i]

        for k in range(p):
            if done[k] or last[k] >= b:
                continue
            pk, mk, h, note = st.one_sided_rows(k, div, scale[k])
            if note is not None:
                notes[int(st.index[k])] = note
            for i, J in enumerate(Js):
                J[..., k] = np.nan if pk is None else (row(pk, i) - row(mk, i)) / h
            done[k] = True
        pending = {j for k in range(p) if not done[k] for j in need[k]}
        for j in [j for j in held if j not in keep and j not in pending]:
            del held[j]
        for j in range(a, b):  # copies, not views: a view would keep the chunk's residuals alive
            if j in keep or j in pending:
                held[j] = [r[j - a].copy() for r in Rc]
        Rc = None  # the chunk's residuals go before the next chunk's arrive
    return Js, notes, div, held


def central_stencil(space: ParamSpace, x0: np.ndarray, step: float = 1e-3) -> tuple[np.ndarray, np.ndarray, Stencil]:
    """(``x0`` clipped to [0, 1] (D,), the continuous entries' indices (p,), their central finite-difference stencil of
    ``step`` in the normalized space); a vector of the wrong size is refused (:class:`IntervalError`)."""
    x0 = np.clip(np.asarray(x0, dtype=float), 0.0, 1.0)
    if x0.shape != (space.dim,):
        raise IntervalError(f"x0 has {x0.size} entries, the parameter space {space.dim}")
    cont = space.continuous_index()
    return x0, cont, stencil(x0, cont, step, "central")


def sensitivity(objective: ReplayObjective, x0: np.ndarray, step: float = 1e-3, profile_delay: bool = True,
                scheme: str = "central") -> Sensitivity:
    """Roll out the optimum, its finite-difference neighbours and the delay profile in one backend call.

    Args:
        objective: the fit's space, backend, runs and weights.
        x0: the fitted normalized vector (``best_params`` of sysid_best_params.json).
        step: finite-difference step in the normalized space (fraction of each bound width).
        scheme: "central" (2 p + 1 rollouts) or "forward" (p + 1; the process noise's re-linearized replicates).
    """
    space, runs = objective.space, objective.runs
    if scheme not in ("central", "forward"):
        raise ValueError(f"sensitivity: unknown finite-difference scheme {scheme!r} (central or forward)")
    x0, cont, st = central_stencil(space, x0, step)
    if scheme == "forward":
        st = stencil(x0, cont, step, scheme)
    X = list(st.X)
    delays: list[int] = []
    delay_idx: dict[int, int] = {}
    delay0 = space.delay_of(x0)
    if delay0 is not None and profile_delay:
        g = space.group("delay")
        for d in range(int(g.lower), int(g.upper) + 1):
            delays.append(d)
            if d == delay0:
                delay_idx[d] = 0
                continue
            delay_idx[d] = len(X)
            X.append(space.with_delay(x0, d))
    Xa = np.asarray(X)
    W = space.widths()[cont]
    # the columns are formed as the chunks arrive: no (K, T, C) residuals of every candidate are held (issue 45)
    Js, notes, div, held = _streamed_jacobian(objective, Xa, st, W, delay_idx.values())
    r_delay = {d: held[j] for d, j in delay_idx.items() if not div[j]}
    labels = space.labels()
    windows = backend_windows(objective.backend, runs) or [None] * len(runs)  # a torque run's windows: clusters
    return Sensitivity(
        space=space, x0=x0, value=space.decoded_vector(x0), cont=cont, labels=[labels[i] for i in cont],
        r=held[0], J=Js, run_names=[r.name for r in runs], delays=[d for d in delays if d in r_delay],
        r_delay=r_delay, delay0=delay0, n_candidates=len(Xa), fd_notes=notes, step=step, windows=windows,
    )


# ------------------------------------------------------------------ statistics
def integrated_autocorr_time(rs: Sequence[np.ndarray], max_lag: int | None = None) -> float:
    """Energy-weighted integrated autocorrelation time of the residual channels.

    tau = 1 + 2 sum_k rho_k, summed over the initial positive sequence (stops at the
    first non-positive lag), rho averaged over runs and channels weighted by energy.

    The lags are summed one at a time up to the first non-positive one only (issue 45: computing every lag up to
    T / 2 first cost O(T^2), minutes on a 96 s recording at 1 kHz); each lag's sum is the same expression, added over
    runs in the same order, so tau is the same to the last bit (tests/test_intervals_streamed.py holds it to the
    full sum).
    """
    xs, n_lags = [], None
    for r in rs:
        T = r.shape[0]
        L = min(T - 1, max_lag or T // 2)
        xs.append(r - r.mean(axis=0, keepdims=True))
        n_lags = L + 1 if n_lags is None else min(n_lags, L + 1)  # the lags every run has

    def acov(k: int):
        num = None
        for x in xs:
            T = x.shape[0]
            a = np.sum(x[: T - k] * x[k:])
            num = a if num is None else num + a
        return num

    if not xs or n_lags < 1:
        return 1.0
    num0 = acov(0)
    if num0 <= 0:
        return 1.0
    tau = 1.0
    for k in range(1, n_lags):
        rho = acov(k) / num0
        if rho <= 0:
            break
        tau += 2.0 * rho
    return float(tau)


def hac_bandwidth(rs: Sequence[np.ndarray], tau: float | None = None) -> int:
    """The Newey-West bandwidth [samples] of the residuals ``rs`` (per run, (T, C)): ceil(2 tau), at least 1, at
    most T / 4 of the shortest run (tau: their integrated autocorrelation time, computed when not given)."""
    tau = integrated_autocorr_time(rs) if tau is None else tau
    t_min = min(r.shape[0] for r in rs)
    return min(max(1, math.ceil(2 * tau)), max(1, t_min // 4))


#: above this many lags :func:`hac_meat` convolves by FFT (the lag loop's cost grows with the bandwidth)
FFT_MIN_BANDWIDTH = 16


def hac_meat(scores: Sequence[np.ndarray], bandwidth: int) -> np.ndarray:
    """Newey-West long-run covariance of the per-run score sums (Bartlett kernel), summed over runs.

    ``sum_lag w(lag) (G_lag + G_lag^T)`` (``G_lag = sum_t g[t + lag] g[t]^T``, ``w(0) = 1``) is ``g^T (K g)`` with
    ``K`` the banded Toeplitz matrix of the kernel; ``K g`` is one FFT convolution per score column, so a run of T
    samples costs O(p T log T + p^2 T) instead of O(bandwidth p^2 T) (:func:`hac_meat_lags` is the lag loop, used
    up to :data:`FFT_MIN_BANDWIDTH` lags). The two agree to ~1e-15 relative.
    """
    p = scores[0].shape[1]
    M = np.zeros((p, p))
    for g in scores:
        T = g.shape[0]
        L = min(bandwidth, T - 1)
        if L <= FFT_MIN_BANDWIDTH:  # a few lags: the loop is as fast and exact to the last bit
            M += hac_meat_lags([g], bandwidth)
            continue
        lags = np.arange(-L, L + 1)
        kernel = 1.0 - np.abs(lags) / (bandwidth + 1.0)
        Kg = fftconvolve(g, kernel[:, None], mode="same", axes=0)
        X = g.T @ Kg
        M += 0.5 * (X + X.T)  # symmetric in exact arithmetic; the mean makes it so in floating point
    return M


def hac_meat_lags(scores: Sequence[np.ndarray], bandwidth: int) -> np.ndarray:
    """:func:`hac_meat` by its definition, one lag at a time (the reference the tests hold the FFT form to)."""
    p = scores[0].shape[1]
    M = np.zeros((p, p))
    for g in scores:
        T = g.shape[0]
        M += g.T @ g
        for lag in range(1, min(bandwidth, T - 1) + 1):
            w = 1.0 - lag / (bandwidth + 1.0)
            G = g[lag:].T @ g[:-lag]
            M += w * (G + G.T)
    return M


def cluster_meat(g: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Cluster-robust meat of one run's (T, p) score contributions over its (W, 2) windows (W / (W - 1) corrected)."""
    S = np.stack([g[a:b].sum(axis=0) for a, b in windows])
    w = S.shape[0]
    return (w / max(w - 1, 1)) * (S.T @ S)


def run_meats(sens: "Sensitivity", bandwidth: int) -> np.ndarray:
    """The sandwich's meat summed over runs: window clusters for a torque run, Newey-West otherwise."""
    wins = sens.windows or [None] * len(sens.r)
    M = np.zeros((len(sens.cont), len(sens.cont)))
    for g, w in zip(sens.scores(), wins):
        M += cluster_meat(g, w) if w is not None and len(w) > 1 else hac_meat([g], bandwidth)
    return M


@dataclass
class PseudoInverse:
    """(J^T J)^+ with a rank tolerance in the normalized space, and which entries touch the null space."""

    Hinv: np.ndarray
    rank: int
    eigvals: np.ndarray
    null_entries: list[int]
    cond: float


def pinv_normalized(H: np.ndarray, scale: np.ndarray, rtol: float = 1e-9, null_weight: float = 0.01) -> PseudoInverse:
    """Pseudo-inverse of H (decoded units) computed in the normalized space x = theta / scale.

    Eigen-directions with eigenvalue < rtol * max are dropped (treated as unobservable);
    an entry whose squared loading on the dropped directions exceeds ``null_weight`` is reported.
    """
    Hn = H * np.outer(scale, scale)
    good = np.all(np.isfinite(Hn))
    if not good:
        bad = ~np.all(np.isfinite(Hn), axis=0)
        Hn = np.where(np.isfinite(Hn), Hn, 0.0)
        Hn[bad, :] = 0.0
        Hn[:, bad] = 0.0
    lam, V = np.linalg.eigh(0.5 * (Hn + Hn.T))
    lmax = float(max(lam.max(), 0.0))
    keep = lam > rtol * lmax if lmax > 0 else np.zeros_like(lam, dtype=bool)
    inv = (V[:, keep] / lam[keep]) @ V[:, keep].T
    null_load = np.sum(V[:, ~keep] ** 2, axis=1)
    nulls = [int(i) for i in np.where(null_load > null_weight)[0]]
    Hinv = inv * np.outer(scale, scale)  # H = S^-1 Hn S^-1  =>  H^+ = S Hn^+ S
    cond = float(lmax / lam[keep].min()) if keep.any() else math.inf
    return PseudoInverse(Hinv, int(keep.sum()), lam, nulls, cond)


def curvature_intervals(
    sens: Sensitivity,
    level: float = 0.95,
    mode: str = "hac",
    bandwidth: int | None = None,
    rtol: float = 1e-9,
) -> IntervalSet:
    """Intervals of every fitted number from one :class:`Sensitivity` (see module docstring).

    Args:
        mode: ``hac`` (sandwich with Newey-West scores; the default), ``neff`` (naive x tau)
            or ``naive`` (white noise).
        bandwidth: HAC bandwidth in samples (default: ceil(2 tau), at least 1, at most T/4).
    """
    space = sens.space
    W = space.widths()[sens.cont]
    H = sens.hessian()
    pi = pinv_normalized(H, W, rtol)
    n, p = sens.n_obs, len(sens.cont)
    s2 = sens.ssr / max(n - p, 1)
    tau = integrated_autocorr_time(sens.r)
    L = int(bandwidth if bandwidth is not None else hac_bandwidth(sens.r, tau))
    cov_naive = s2 * pi.Hinv
    cov_neff = tau * cov_naive
    meat = run_meats(sens, L)
    cov_hac = pi.Hinv @ meat @ pi.Hinv
    covs = {"naive": cov_naive, "neff": cov_neff, "hac": cov_hac}
    if mode not in covs:
        raise ValueError(f"unknown curvature mode '{mode}' (hac, neff, naive)")
    cov = 0.5 * (covs[mode] + covs[mode].T)
    unid = [int(sens.cont[k]) for k in pi.null_entries]
    nan_cols = [int(sens.cont[k]) for k in range(p) if not np.all(np.isfinite(H[:, k]))]
    ivs, warns = gaussian_intervals(space, sens.value, cov, sens.cont, level, "curvature", unid + nan_cols, sens.fd_notes)
    # distance of the optimum from the Gauss-Newton minimum (convergence check), in standard errors
    g = sum(s.sum(axis=0) for s in sens.scores())
    gn_step = -pi.Hinv @ g
    sd = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    at_bound = np.array([("bound" in sens.fd_notes.get(int(i), "")) for i in sens.cont])
    z_step = np.where(at_bound, 0.0, np.abs(gn_step) / sd)
    if np.nanmax(z_step, initial=0.0) > 1.0:
        worst = int(np.nanargmax(z_step))
        warns.append(f"curvature: the optimum looks unconverged: a Gauss-Newton step moves {sens.labels[worst]} by "
                     f"{z_step[worst]:.1f} standard errors (intervals are centred on the fitted value)")
    delay_iv, delay_diag, delay_warn = delay_profile(sens, pi.Hinv, s2 * tau, level)
    warns += delay_warn
    intervals = order_intervals(space, ivs + ([delay_iv] if delay_iv is not None else []))
    diag = {
        "mode": mode,
        "n_residuals": n,
        "n_continuous": p,
        "ssr": sens.ssr,
        "s2": s2,
        "autocorr_time_samples": tau,
        "hac_bandwidth_samples": L,
        "rank": pi.rank,
        "condition_number_normalized": pi.cond,
        "eigenvalues_normalized": pi.eigvals.tolist(),
        "fd_step_normalized": sens.step,
        "candidates_in_batch": sens.n_candidates,
        "std_naive": np.sqrt(np.clip(np.diag(cov_naive), 0, None)).tolist(),
        "std_neff": np.sqrt(np.clip(np.diag(cov_neff), 0, None)).tolist(),
        "std_hac": np.sqrt(np.clip(np.diag(cov_hac), 0, None)).tolist(),
        "gauss_newton_step": gn_step.tolist(),
        "gauss_newton_step_in_std": z_step.tolist(),
        "delay_profile": delay_diag,
    }
    return IntervalSet("curvature", level, intervals, warns, diag, cov, list(sens.labels))


def delay_profile(sens: Sensitivity, Hinv: np.ndarray, noise_var: float, level: float):
    """The integer delay's interval from its profile loss (see module docstring)."""
    if sens.delay0 is None:
        return None, {}, []
    d0 = sens.delay0
    if not sens.r_delay:
        iv = Interval("delay", "delay", None, float(d0), None, None, None, False, "delay profile not computed")
        return iv, {}, ["curvature: delay profile not computed; delay interval unbounded"]
    prof = {}
    for d, rs in sens.r_delay.items():
        ssr = float(sum(np.sum(r**2) for r in rs))
        g = sum(np.einsum("tcp,tc->p", J, r) for J, r in zip(sens.J, rs))
        g = np.where(np.isfinite(g), g, 0.0)
        prof[d] = max(ssr - float(g @ Hinv @ g), 0.0)
    best = min(prof, key=prof.get)
    thr = chi2_1(level)
    stat = {d: (v - prof[best]) / noise_var if noise_var > 0 else math.inf for d, v in prof.items()}
    inside = sorted(d for d, s in stat.items() if s <= thr)
    warns = []
    # contiguous set around the fitted delay
    lo = hi = d0
    while lo - 1 in inside:
        lo -= 1
    while hi + 1 in inside:
        hi += 1
    if d0 not in inside:
        warns.append(f"curvature: delay {best} explains the runs better than the fitted {d0} (profile); interval includes both")
        lo, hi = min(lo, best), max(hi, best)
    g = sens.space.group("delay")
    diag = {"profile_ssr": {str(k): v for k, v in prof.items()}, "statistic": {str(k): v for k, v in stat.items()},
            "threshold_chi2_1": thr, "noise_var": noise_var}
    if lo <= g.lower and hi >= g.upper and len(sens.delays) > 1:
        warns.append("curvature: every delay within the bounds fits equally well; delay interval unbounded")
        return Interval("delay", "delay", None, float(d0), None, None, None, False,
                        "loss profile flat over all delays in the bounds"), diag, warns
    return Interval("delay", "delay", None, float(d0), float(lo), float(hi), None, True, "integer: loss profile"), diag, warns

