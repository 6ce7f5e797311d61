"""Process noise: the torque disturbance a closed-loop replay cannot see, estimated and turned into interval widths.

A real arm (and the twin) is pushed every tick by torque the model does not know
(actuator ripple, cable forces, the controller acting on noisy states). A
closed-loop replay has none of it, so the measured trajectory drifts from the
simulated one by the loop's response to that disturbance: a smooth, long-memory
residual. Its effect on the fitted numbers is large where the loop is weak
(the self-motion of a redundant arm under task impedance has no stiffness),
and the curvature sandwich cannot measure it from the runs themselves: at the
optimum the scores sum to zero, so a long-memory component of them is invisible
to any kernel estimate (the fixed-bandwidth bias of Newey-West). On the study
twin (``jobs/twin_study.py``, task impedance, 0.01 N m actuator noise) the raw
curvature intervals covered 56 % of the truths; without the actuator noise, 93 %.

What this module does, at the optimum x0 of a fit, on its controller runs:

1. **Estimate** the disturbance per joint (:func:`estimate_process_noise`). The
   residual of each channel splits into a white part (measurement noise,
   variance from first differences: ``mean(diff(r)^2) / 2``) and a coloured part
   (the variance of a 25 ms moving average less the white part's share of it),
   after removing what a change of the fitted numbers explains
   (``r - J (J^T J)^+ J^T r``: an unconverged optimum's smooth error is no
   disturbance). One rollout per joint with a known white torque ``sigma_cal`` on
   that joint alone gives the coloured variance per channel (same projection) one
   unit of that joint's disturbance variance causes; non-negative least squares
   over the channels gives ``sigma_w^2`` per joint [N m], and one level for every joint ``sigma_common``.
   The split between joints is poorly determined where several joints' responses look alike (the self-motion
   of joints 1/3/5/7 under task impedance): non-negative least squares then puts one joint's share on another
   and can return 0 for a joint that is pushed as hard as the rest. Each joint is therefore propagated at
   ``max(sigma_w, sigma_common)`` (:attr:`Disturbance.propagated`): a joint the split leaves low keeps the
   common level, one it puts high keeps its own. On the matrix's Coulomb task-impedance twin (1 kHz, 0.02 N m
   on every joint, twelve noise seeds) the split returned at most 0.005 N m for some joint in 8 of 12 fits and the
   intervals held 93.3 % of the truths (z's standard deviation 1.13); propagated so, 96.4 % (0.99)
   (benchmarks/process_noise_coverage.py; docs/benchmarks.md, issue 46, eighth pass).
2. **Propagate** it (:func:`assess_process_noise`): ``K`` replicate rollouts of
   x0 with that disturbance (``propagated``) (plus white noise of the measured variance per
   channel), each turned into a Gauss-Newton estimate ``-(J^T J)^+ J^T r_k``; their
   second moment is the parameter covariance the disturbance and the noise cause.
   One step from x0 is exact only where the fit's answer is linear in the disturbance. It is not everywhere: on
   the Stribeck task-impedance twin (1 kHz; 16 replicates each refitted by Levenberg-Marquardt from x0) the refits
   spread joint 1's static friction 1.94x and its Stribeck shape 1.60x further than the one-step estimates,
   the numbers whose intervals missed their truths there (docs/benchmarks.md, issue 46, ninth pass). So the
   first :data:`N_RELINEARIZED` replicates are each solved once more (:func:`relinearized_estimate`): the
   Jacobian taken again at the one-step estimate, one Gauss-Newton step from there with a line search on that
   replicate's own loss. Per number, the ratio of their spread to the same replicates' one-step spread
   (``relinearized_factor``) scales the standard error where it is above 1 (never narrows it). On that twin's fit
   the factors are 3.4x (static friction), 2.8x (shape), 2.6x (dynamic ratio) and 1.9x (viscous) on joint 1 and
   at most 1.3x elsewhere: wider than the refits' ratios (forward differences at a sticking joint; erring wide).
   Coverage over noise seeds: docs/benchmarks.md, issue 46, ninth pass (benchmarks/process_noise_coverage.py).
3. The curvature and bootstrap intervals are widened (never narrowed) to it
   (:func:`widening_factors`, applied in ``intervals/combine.py``).

Torque runs (``--replay torque``) are skipped: their shooting windows restart
from measured states and the window-cluster sandwich already holds. A backend
that cannot inject a disturbance is skipped with a warning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights, run_weights
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.residuals import run_residuals, weighted_residuals
from isaaclab_sysid.intervals.curvature import IntervalError, Sensitivity, sensitivity
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.sim.interface import ReplayBackend, RunRollout
from isaaclab_sysid.sim.shooting import is_torque_run

#: calibration disturbance [N m] (small: the response stays linear)
SIGMA_CAL = 0.01
#: replicates of the propagation
N_REPLICATES = 48
#: length of the moving average that separates the smooth residual from the white noise [s]
AVERAGE_S = 0.025
#: replicates solved once more with a Jacobian at their one-step estimate (0: one step only, the rule before issue
#: 46's ninth pass); each costs one forward-difference sensitivity (p + 1 rollouts) and three more
N_RELINEARIZED = 8
#: the fractions of the re-linearized Gauss-Newton step tried (the lowest loss of that replicate's data wins)
RELIN_STEPS = (1.0, 0.5, 0.25)
#: the re-linearization holds a second Jacobian of the fit runs: above this size [MB] (about 45 s of two 1 kHz runs
#: with 42 numbers) it is skipped, and said, so a long recording's interval stage keeps its memory (issue 45)
RELIN_MAX_MB = 256.0


@dataclass
class Disturbance:
    """Step 1's estimate.

    Attributes:
        sigma_w: (N,) per joint [N m per 1 ms tick], non-negative least squares over the channels (it may put on
            one joint what several share: wide on one, narrow on another).
        sigma_common: one level for every joint [N m per tick], steadier than the split (the twin's 0.01 N m came
            out 0.008-0.011 at the CI size) and the floor of what each joint is propagated at (:attr:`propagated`).
        coloured_share: share of the residual energy that is smooth (not white measurement noise).
        base: per run, the rollout of x0; white: per run, (C,) white-noise variance of the residual channels.
    """

    sigma_w: np.ndarray
    sigma_common: float
    coloured_share: float
    base: list[RunRollout]
    white: list[np.ndarray]

    @property
    def propagated(self) -> np.ndarray:
        """(N,) the disturbance the replicates carry [N m per tick]: ``max(sigma_w, sigma_common)`` per joint (a
        joint the split leaves below the common level keeps the common level; see the module docstring)."""
        return np.maximum(self.sigma_w, self.sigma_common)


@dataclass
class ProcessNoise:
    """The estimated disturbance and what it does to the fitted numbers.

    Attributes:
        sigma_w: (N,) estimated white torque disturbance per joint [N m per 1 ms tick] (:class:`Disturbance`);
        sigma_common: the same as one level for every joint [N m].
        propagated: (N,) what the replicates carried [N m per tick], ``max(sigma_w, sigma_common)`` per joint
            (None where nothing was propagated at that rule: a skipped check, or a torque replay's input noise,
            whose ``sigma_w`` is the logged torque's noise and is propagated as it is).
        source: "disturbance", or "torque_input" (a torque replay's logged-torque noise).
        coloured_share: share of the residual energy that is coloured (not white measurement noise), 0-1.
        std: (p,) standard errors of the continuous numbers the disturbance and noise cause (decoded units).
        labels: the continuous numbers' labels.
        replicates: K; skipped: why nothing was estimated ("" when it was).
        relinearized: how many replicates were solved again at their one-step estimate (:data:`N_RELINEARIZED`, less
            any whose one-step estimate is not finite or whose replay diverges there);
        relinearized_factor: (p,) per number, their spread over the same replicates' one-step spread (``std``
            carries ``max(1, factor)``; None where none was). It holds the forward differences' error and the
            sampling noise of a ratio over a few replicates as well as the nonlinearity, so it errs wide; the
            re-linearized estimates are boxed and the one-step ones are not, so at a bound it errs low (and then
            leaves the one-step spread: it never narrows).
            relinearize_note: why none was, where it was asked.
    """

    sigma_w: np.ndarray
    coloured_share: float
    std: np.ndarray
    labels: list[str]
    replicates: int
    skipped: str = ""
    sigma_common: float = 0.0
    source: str = "disturbance"
    propagated: np.ndarray | None = None
    relinearized: int = 0
    relinearized_factor: np.ndarray | None = None
    relinearize_note: str = ""

    def to_json(self) -> dict:
        return {"sigma_w_nm": self.sigma_w.tolist(), "sigma_common_nm": self.sigma_common,
                "sigma_propagated_nm": (self.sigma_w if self.propagated is None else self.propagated).tolist(),
                "coloured_share": self.coloured_share,
                "std": dict(zip(self.labels, self.std.tolist())), "replicates": self.replicates,
                "skipped": self.skipped, "source": self.source, "relinearized": self.relinearized,
                "relinearized_factor": (None if self.relinearized_factor is None else
                                        dict(zip(self.labels, self.relinearized_factor.tolist()))),
                "relinearize_note": self.relinearize_note,
                "note": ("the logged torque's white noise per joint [N m per row], measured from the log's first "
                         "differences (a torque replay's input); std: what it and the start states' noise do to the "
                         "fitted numbers" if self.source == "torque_input" else
                         "white torque disturbance per joint the replay cannot see, estimated from the coloured "
                         "part of the residual; std: what it and the measurement noise do to the fitted numbers")}


def _stand_in(run: Run, ro: RunRollout, k: int) -> Run:
    """``run`` with the states of candidate ``k`` of ``ro`` as its measurement (a replicate's log)."""
    return dataclasses.replace(run, q=ro.q[k], dq=ro.dq[k], ee_pos=ro.ee_pos[k])


def disturbance_for(backend: ReplayBackend, run: Run, sigma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A white torque disturbance of ``sigma`` (N,) [N m] per tick, long enough for ``run`` on ``backend``."""
    ticks = int(backend.options.warmup_ticks) + int(run.sample_ticks()[-1]) + 2
    return sigma[None, :] * rng.standard_normal((ticks, sigma.size))


def split_variance(r: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(C,) white and coloured variance of one run's (T, C) residual channels; the coloured one is the variance of
    an ``m``-sample moving average less the white noise's share of it (1 / m): a smooth part passes the average,
    white noise does not, so the estimate is not the small difference of two large numbers."""
    white = 0.5 * np.mean(np.diff(r, axis=0) ** 2, axis=0)
    c = np.cumsum(np.vstack([np.zeros((1, r.shape[1])), r - r.mean(axis=0)]), axis=0)
    avg = (c[m:] - c[:-m]) / m
    return white, np.maximum(np.mean(avg**2, axis=0) - white / m, 0.0)


def _window(run: Run) -> int:
    """Samples in the moving average of :func:`split_variance`: about 25 ms, at least 3."""
    dt = float(np.median(np.diff(run.t))) if run.t.size > 1 else 1e-3
    return max(3, int(round(AVERAGE_S / max(dt, 1e-6))))


def _project_out(sens: Sensitivity, Hinv: np.ndarray, rs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per run, the (T, C) residuals less their least-squares fit by a change of the fitted numbers,
    ``r - J (J^T J)^+ J^T r`` over all runs (what the fit would absorb, or an unconverged optimum leaves)."""
    step = Hinv @ sens.score_sum(rs)
    return [r - np.einsum("tcp,p->tc", j, step) for j, r in zip(sens.finite_J(), rs)]


def _residuals(base: RunRollout, other: RunRollout, run: Run, weights: LossWeights, w_run: float) -> np.ndarray:
    """(T, C) weighted residual of ``base``'s candidate 0 against ``other``'s candidate 0 as the measurement."""
    return run_residuals(base, _stand_in(run, other, 0), weights, w_run).per_sample()[0]


def estimate_process_noise(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, runs: Sequence[Run],
                           sens: Sensitivity, weights: LossWeights, traj_weights: Sequence[float] | None,
                           sigma_cal: float = SIGMA_CAL, seed: int = 0) -> "Disturbance":
    """Step 1 (see module docstring): the disturbance per joint and as one level, and the base rollouts."""
    n = runs[0].q.shape[1]
    tw = run_weights(traj_weights, len(runs))
    batch = space.to_batch(np.asarray([x0]))
    Hinv = sens.gauss_newton_inverse()
    base = backend.rollout(batch, list(runs))
    ms = [_window(r) for r in runs]
    white = [split_variance(r, m)[0] for r, m in zip(sens.r, ms)]
    obs = np.concatenate([split_variance(r, m)[1] for r, m in zip(_project_out(sens, Hinv, sens.r), ms)])
    rng = np.random.default_rng(seed)
    A = np.empty((obs.size, n))
    for j in range(n):
        sig = np.zeros(n)
        sig[j] = sigma_cal
        dist = [disturbance_for(backend, r, sig, rng) for r in runs]
        pert = backend.rollout(batch, list(runs), disturbance=dist)
        resp = [_residuals(b, p, r, weights, w) for b, p, r, w in zip(base, pert, runs, tw)]
        A[:, j] = np.concatenate([split_variance(r, m)[1] for r, m in zip(_project_out(sens, Hinv, resp), ms)]) / sigma_cal**2
    var, _ = nnls(A, obs)
    a = A.sum(axis=1)
    common = float(np.sqrt(max(0.0, float(a @ obs) / max(float(a @ a), 1e-300))))
    share = float(obs.sum() / max(obs.sum() + np.concatenate(white).sum(), 1e-300))
    return Disturbance(np.sqrt(var), common, share, base, white)


def replicate_residuals(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, runs: Sequence[Run],
                        weights: LossWeights, traj_weights: Sequence[float] | None, sigma_w: np.ndarray,
                        base: list[RunRollout], white: list[np.ndarray], replicates: int = N_REPLICATES,
                        seed: int = 0):
    """Yield, per replicate, the per-run (T, C) weighted residuals of x0 against a replicate of itself pushed by
    the disturbance ``sigma_w`` [N m] and measured with white noise of the variances ``white`` (per run, (C,))."""
    tw = run_weights(traj_weights, len(runs))
    batch = space.to_batch(np.asarray([x0]))
    rng = np.random.default_rng(seed + 1)
    for _ in range(replicates):
        dist = [disturbance_for(backend, r, sigma_w, rng) for r in runs]
        reps = backend.rollout(batch, list(runs), disturbance=dist)
        out = []
        for b, rep, r, w, wv in zip(base, reps, runs, tw, white):
            res = _residuals(b, rep, r, weights, w)
            out.append(res + np.sqrt(wv)[None, :] * rng.standard_normal(res.shape))
        yield out


def relinearized_estimate(objective: ReplayObjective, sens: Sensitivity, rs: Sequence[np.ndarray],
                          one_step: np.ndarray) -> np.ndarray | None:
    """(p,) the estimate [decoded units, from x0] of one replicate solved once more: the sensitivity taken again at
    its one-step estimate ``one_step`` (boxed), one Gauss-Newton step from there, and the fraction of it
    (:data:`RELIN_STEPS`) that most lowers the replicate's loss (the boxed one-step estimate where none does).

    ``rs``: per run, the (T, C) weighted residuals of x0 against the replicate (:func:`replicate_residuals`). The
    residuals are linear in the measurement, so at any x they are ``rs + r(x) - r(x0)``, both against the runs.
    None where the replay diverges at the one-step estimate (no Jacobian there)."""
    space, runs = objective.space, objective.runs
    cont, W, x0 = sens.cont, space.widths()[sens.cont], sens.x0
    x1 = np.array(x0, dtype=float)
    x1[cont] = np.clip(x0[cont] + one_step / W, 0.0, 1.0)
    try:
        s1 = sensitivity(objective, x1, sens.step, profile_delay=False, scheme="forward")
    except IntervalError:
        return None
    r1 = [r + a - b for r, a, b in zip(rs, s1.r, sens.r)]
    best, best_x = _loss(r1), x1
    step = -s1.gauss_newton_inverse() @ s1.score_sum(r1)
    del s1
    X = np.repeat(x1[None], len(RELIN_STEPS), axis=0)
    for i, a in enumerate(RELIN_STEPS):
        X[i, cont] = np.clip(x1[cont] + a * step / W, 0.0, 1.0)
    res = [r.per_sample() for r in weighted_residuals(objective.states(X), runs, objective.weights,
                                                      objective.traj_weights)]
    for i in range(len(RELIN_STEPS)):
        loss = _loss([r + p[i] - b for r, p, b in zip(rs, res, sens.r)])
        if loss < best:
            best, best_x = loss, X[i]
    return (best_x[cont] - x0[cont]) * W


def _loss(rs: Sequence[np.ndarray]) -> float:
    """The summed squared residuals of per-run (T, C) arrays (inf where any is not finite)."""
    total = float(sum(np.sum(np.square(r)) for r in rs))
    return total if np.isfinite(total) else np.inf


def assess_process_noise(backend: ReplayBackend, space: ParamSpace, x0: np.ndarray, runs: Sequence[Run],
                         sens: Sensitivity, weights: LossWeights, traj_weights: Sequence[float] | None,
                         replicates: int = N_REPLICATES, seed: int = 0, common_floor: bool = True,
                         relinearized: int = N_RELINEARIZED) -> ProcessNoise:
    """Steps 1 and 2 on the fit's controller runs (see module docstring); skipped for torque runs.
    ``common_floor``: propagate :attr:`Disturbance.propagated` (False: the split ``sigma_w`` alone, the rule before
    issue 46's eighth pass, kept for benchmarks/process_noise_coverage.py's comparison). ``relinearized``: how
    many of the replicates are solved again at their one-step estimate (:func:`relinearized_estimate`; 0: one step
    only, the rule before issue 46's ninth pass)."""
    n = runs[0].q.shape[1]
    empty = ProcessNoise(np.zeros(n), 0.0, np.zeros(len(sens.cont)), list(sens.labels), 0)
    if any(is_torque_run(r) for r in runs):  # the logged torque's noise drives the replay: propagate it
        from isaaclab_sysid.intervals.torque_input_noise import input_noise_covariance

        inp = input_noise_covariance(backend, space, x0, runs, sens, weights, traj_weights, seed=seed)
        return ProcessNoise(inp.torque_std, 0.0, inp.std, inp.labels, inp.replicates,
                            sigma_common=float(np.sqrt(np.mean(inp.torque_std**2))), source="torque_input")
    try:
        est = estimate_process_noise(backend, space, x0, runs, sens, weights, traj_weights, seed=seed)
    except TypeError:
        empty.skipped = f"backend {backend.name} cannot inject a torque disturbance"
        return empty
    sigma = est.propagated if common_floor else est.sigma_w
    Hinv = sens.gauss_newton_inverse()
    mb = sum(J.nbytes for J in sens.J) / 2**20
    m = min(relinearized, replicates)
    note = (f"not re-linearized: a second Jacobian of the fit runs would take {mb:.0f} MB (> {RELIN_MAX_MB:.0f})"
            if m and mb > RELIN_MAX_MB else "")
    if note:
        m = 0
    objective = ReplayObjective(space, backend, list(runs), weights, traj_weights)
    S, pairs = [], []
    for k, rs in enumerate(replicate_residuals(backend, space, x0, runs, weights, traj_weights, sigma, est.base,
                                               est.white, replicates, seed)):
        S.append(-Hinv @ sens.score_sum(rs))
        if k < m and np.all(np.isfinite(S[-1])):  # a replicate the replay cannot follow has no estimate to refine
            again = relinearized_estimate(objective, sens, rs, S[-1])
            if again is not None:
                pairs.append((S[-1], again))
    S = np.asarray(S)
    std = np.sqrt(np.clip(np.einsum("kp,kp->p", S, S) / len(S), 0.0, None))
    factor = None
    if pairs:
        one, two = (np.asarray(v) for v in zip(*pairs))
        num, den = np.sum(two**2, axis=0), np.sum(one**2, axis=0)
        factor = np.where(den > 0, np.sqrt(num / np.where(den > 0, den, 1.0)), np.nan)
        std = std * np.where(np.isfinite(factor), np.maximum(factor, 1.0), 1.0)
    return ProcessNoise(est.sigma_w, est.coloured_share, std, list(sens.labels), replicates,
                        sigma_common=est.sigma_common, propagated=sigma, relinearized=len(pairs),
                        relinearized_factor=factor, relinearize_note=note)


def widening_factors(pn: ProcessNoise, std: dict[str, float | None]) -> dict[str, float]:
    """Per label, how much wider the interval must be to hold the process-noise standard error (>= 1)."""
    out = {}
    for lab, s in zip(pn.labels, pn.std):
        cur = std.get(lab)
        if cur and cur > 0 and np.isfinite(s):
            out[lab] = max(1.0, float(s / cur))
    return out
