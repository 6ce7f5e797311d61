"""``--fit_groups auto``, second step: the friction law (sim/friction.py) the fit runs ask for, chosen on evidence.

After the Coulomb / static choice (jobs/model_choice.py) the answer so far is the *base* model. Each candidate law
of ``--auto_laws`` (default: stribeck, sigmoid, load, dahl) is then weighed against it with a criterion that has no threshold
tuned on our own twins: the **Bayesian information criterion on the fit runs' weighted residual**,

    BIC = sum_c n_eff_c log(SSR_c / n_c) + k log(sum_c n_eff_c),

over the residual's channels c (joint positions, joint velocities, end-effector positions: a Gaussian likelihood with
a variance of its own per channel, since their noise levels differ by orders of magnitude), with SSR_c a channel's sum
of squared weighted residuals over its n_c entries, k the model's continuous numbers and n_eff_c the channel's
effective count of independent residuals: n_c over its integrated autocorrelation
(:func:`isaaclab_sysid.residual_stats.geyer_inflation`, Geyer's initial positive sequence, measured once on the base
model's residual, the same for every candidate), because 1 kHz residuals are far from independent and a BIC on n
would buy any number. (Until issue 46's fourth pass the sum stopped at the first lag below 2/sqrt(T), which read a
slow correlation of a few per cent at each of hundreds of lags as white and let the load law win on a Coulomb twin.)

A law is refitted only where it could win. Its start is the base fit's Coulomb level written in the law's
coordinates (the load law with no load term is exactly Coulomb; the Dahl law at its stiffest bristle and the
sigmoid at its steepest slope approach it). At that start one batched finite-difference rollout gives the bounded
Gauss-Newton forecast of the loss a refit reaches, per channel (:func:`isaaclab_sysid.evaluate.friction_score.bounded_step`).
The law is refitted (the refinement alone, from that start) only when the forecast's BIC is below the base's; before
the first such refit the base itself is refined from its optimum with the same budget (a law refit continues the
refinement of every shared number too, and must not win on convergence the base fit did not finish); the answer is
the lowest BIC among the base and the refitted laws that **cross-validated prediction** confirms
(:func:`leave_one_block_out`, :func:`confirm`: each fit run's halves left out in turn, the model refitted without
the half by a Gauss-Newton step from its optimum, the half replayed and scored by the BIC's likelihood term with no
penalty; the law must predict better summed over the halves and on more than half of them). The log, report.md and
``friction_law_auto.json`` give every candidate's loss, k, forecast, BIC and cross-validation scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from isaaclab_sysid.evaluate.friction_score import (DENSE_LIMIT_MB, bounded_step, bounded_step_normal,
                                                     dense_sensitivity_mb, streamed_sensitivity)
from isaaclab_sysid.jobs.fit_args import ParamsConfig
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import GROUPS, GroupSpec, ParamSpace
from isaaclab_sysid.objective.residuals import weighted_residuals
from isaaclab_sysid.intervals.curvature import IntervalError, sensitivity
from isaaclab_sysid.residual_stats import autocorr_inflation, geyer_inflation
from isaaclab_sysid.sim.friction import LAWS, law_of_groups

#: the laws ``--fit_groups auto`` weighs against the Coulomb / static answer by default
AUTO_LAWS = ("stribeck", "sigmoid", "load", "dahl")
#: Gauss-Newton re-linearizations a law's forecast may take (each one batched finite-difference rollout)
FORECAST_STEPS = 3
#: the groups that are a model's dry friction (replaced by a candidate law's)
DRY_GROUPS = ("friction", "mu_static", "dynamic_ratio", "stribeck_velocity", "stribeck_shape")


@dataclass
class LawScore:
    """One model's evidence.

    Attributes:
        law: the law's name; groups: the fitted groups; k: its continuous numbers.
        loss: the fit loss (SSR) at its optimum (None: not refitted); bic: its BIC (None: not refitted).
        forecast_loss: the Gauss-Newton forecast of a refit's loss from the law's start (None for the base).
        forecast_bic: the BIC of that forecast; refit: whether the law was refitted; note: why not, or what failed.
        loro: per left-out block, the model's cross-validated predictive score (:class:`Loro`; None: not
        computed); loro_delta: per block, that score minus the base's (a law only); confirmed: whether cross-validated
        prediction confirmed the law (None: not asked); loro_in: per block, the same score of the model's residual at
        its all-runs optimum (in sample; ``loro`` minus it is what the block cost out of sample); starts: the loss
        its refit reached from each start it took (None: one start; a value None: that refit diverged; the load law
        takes two, fit/law_starts.py).
    """

    law: str
    groups: list[str]
    k: int
    loss: float | None = None
    bic: float | None = None
    forecast_loss: float | None = None
    forecast_bic: float | None = None
    refit: bool = False
    note: str = ""
    loro: list[float] | None = None
    loro_delta: list[float] | None = None
    confirmed: bool | None = None
    loro_in: list[float] | None = None
    starts: dict[str, float | None] | None = None


@dataclass
class LawChoice:
    """What the law step chose and why: the base model's score first, then each candidate's."""

    base: str
    chosen: str
    n: int
    n_eff: float
    scores: list[LawScore] = field(default_factory=list)
    reason: str = ""
    #: armature entries at a bound under the base model -> the refitted laws that free them
    freed: dict[str, list[str]] = field(default_factory=dict)
    #: the left-out blocks of the cross-validation (empty: not run), and what the check did or why it did not run
    loro_runs: list[str] = field(default_factory=list)
    loro_note: str = ""

    def line(self) -> str:
        """The log line: the choice, then each model's k, loss and BIC (or forecast)."""
        parts = []
        for s in self.scores:
            if s.bic is not None:
                note = f" ({s.note})" if s.note and s.note != "the base model" else ""
                loro = ""
                if s.loro is not None:
                    loro = " CV " + "/".join(f"{v:.1f}" for v in s.loro)
                if s.loro_delta is not None:
                    loro += (" (vs base " + "/".join(f"{v:+.1f}" for v in s.loro_delta) + ": "
                             + ("confirmed" if s.confirmed else "not confirmed") + ")")
                starts = ""
                if s.starts and len(s.starts) > 1:
                    starts = " (refitted from " + ", ".join(
                        f"the {k}: {'diverged' if v is None else f'{v:.4g}'}" for k, v in s.starts.items()) + ")"
                parts.append(f"{s.law} k={s.k} loss {s.loss:.4g}{starts} BIC {s.bic:.1f}{loro}{note}")
            elif s.forecast_bic is not None:
                parts.append(f"{s.law} k={s.k} forecast loss {s.forecast_loss:.4g} BIC {s.forecast_bic:.1f} "
                             f"({s.note or 'not refitted'})")
            else:
                parts.append(f"{s.law}: {s.note}")
        loro = f"; {self.loro_note}" if self.loro_note else ""
        return (f"--fit_groups auto, friction law -> {self.chosen}: {self.reason} (n_eff {self.n_eff:.0f} of "
                f"{self.n} residuals{loro}; " + "; ".join(parts) + ")")

    def freed_lines(self) -> list[str]:
        """One line per armature entry the base model left at a bound and a refitted law frees."""
        out = []
        for label, laws in self.freed.items():
            if self.chosen in laws:
                out.append(f"{label} sat at its bound under {self.base}; the {self.chosen} law (chosen) frees it")
            else:
                out.append(f"{label} sits at its bound under {self.chosen}; the {' and '.join(laws)} law"
                           f"{'s' if len(laws) > 1 else ''} free{'' if len(laws) > 1 else 's'} it (refitted, not "
                           "chosen on the BIC): the bound may stand in for a friction the model lacks")
        return out

    def to_json(self) -> dict:
        return asdict(self)


def armature_at_bound(result) -> set[str]:
    """The labels of a fit's armature entries at a search bound."""
    return {h.label for h in result.at_bounds() if h.group == "armature"}


def freed_by(base_hits: set[str], refits: dict[str, set[str]]) -> dict[str, list[str]]:
    """Base model's armature entries at a bound -> the laws (``refits``: law -> its own at-bound labels) whose refit
    leaves them inside their box."""
    return {lab: sorted(law for law, hits in refits.items() if lab not in hits) for lab in sorted(base_hits)
            if any(lab not in hits for hits in refits.values())}


def parse_laws(text: str) -> list[str]:
    """The laws of ``--auto_laws`` (comma-separated; "" or "none": no law step); a ValueError names an unknown one."""
    if text.strip() in ("", "none"):
        return []
    out = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in out if s not in LAWS or s == "coulomb"]
    if bad:
        raise ValueError(f"--auto_laws: unknown or base law(s) {', '.join(bad)} (candidates: "
                         f"{', '.join(k for k in LAWS if k != 'coulomb')}; none)")
    return out


def law_space(base: ParamSpace, law: str, params: ParamsConfig) -> ParamSpace:
    """``base`` with its dry-friction groups replaced, where the first stood, by ``law``'s groups (bounds from their
    ``--<group>_bounds`` flags); every other group kept as it is."""
    groups: list[GroupSpec] = []
    placed = False
    for g in base.groups:
        if g.name in DRY_GROUPS:
            if not placed:
                for name in LAWS[law].fit_groups:
                    lo, hi = params.bounds_of(name) or GROUPS[name].default_bounds
                    groups.append(GroupSpec(name, float(lo), float(hi)))
                placed = True
            continue
        groups.append(g)
    return ParamSpace(groups, base.n_dof, base.joint_names)


def law_start(coulomb: ParamSpace, x: np.ndarray, space: ParamSpace, law: str,
              base: tuple[ParamSpace, np.ndarray] | None = None, stribeck_velocity: float = 0.05) -> np.ndarray:
    """(D,) the start of ``law`` in ``space`` from the Coulomb fit's vector ``x``: every shared group as fitted, the
    law at its Coulomb limit (load: no load term, exact; Dahl: the stiffest bristle; sigmoid: amplitude = twice the
    Coulomb level, the level it tends to at speed, the steepest slope, no offset).

    ``stribeck`` (the Stribeck law with its velocity and shape fitted): from ``base`` (space, (D,) vector) where that
    is the static-friction answer (``mu_static``, ``dynamic_ratio``), its two levels at the velocity it was fitted at
    (``stribeck_velocity`` [rad/s], ``--stribeck_velocity``) and shape 2, which is that answer exactly; else from the
    Coulomb fit, both levels at Fc (Coulomb exactly), the velocity and shape as above."""
    if law == "stribeck" and base is not None and "mu_static" in base[0].group_names:
        coulomb, x = base
    dec = coulomb.decode(np.asarray(x, dtype=float))
    vals = {k: v for k, v in dec.items() if k in space.group_names}
    n = coulomb.n_dof
    if law == "stribeck":
        if "mu_static" not in dec:
            vals.update(mu_static=np.asarray(dec["friction"], dtype=float), dynamic_ratio=np.ones(n))
        lo, hi = space.group("stribeck_velocity").lower, space.group("stribeck_velocity").upper
        vals.update(stribeck_velocity=np.full(n, float(np.clip(stribeck_velocity, lo, hi))),
                    stribeck_shape=np.full(n, 2.0))
        return space.normalize(vals)
    fc = np.asarray(dec["friction"], dtype=float)
    if law == "load":
        vals.update(friction=fc, load_friction_motor=np.zeros(n), load_friction_external=np.zeros(n))
    elif law == "dahl":
        vals.update(friction=fc, presliding_stiffness=np.full(n, space.group("presliding_stiffness").upper))
    elif law == "sigmoid":
        # a (sigma(s qd) - 1/2) at offset 0 tends to a / 2 at speed: the Coulomb level is half the amplitude
        vals.update(sigmoid_amplitude=2.0 * fc, sigmoid_slope=np.full(n, space.group("sigmoid_slope").upper),
                    sigmoid_offset=np.zeros(n))
    else:
        raise ValueError(f"no Coulomb start for the {law} law")
    return space.normalize(vals)


#: the step lengths of a leave-one-run-out fold's line search (1: the full Gauss-Newton step; 0: the all-runs optimum,
#: kept only where no step lowers the fold's own loss)
LORO_SCALES = (1.0, 0.5, 0.25, 0.0)
#: the cross-validation's blocks per fit run: each run's halves are left out in turn. Not whole runs: two runs of
#: different waveforms each leave numbers the other fixes poorly determined, and a fold fitted on one run then predicts
#: the other by those numbers, whatever the law (measured: docs/benchmarks.md, "Issue 46, third pass")
CV_BLOCKS_PER_RUN = 2
#: the residual's channels, each with a variance of its own in the likelihood
CHANNELS = ("q", "dq", "x")
#: how a channel's n_eff is measured: ``geyer`` (:func:`~isaaclab_sysid.residual_stats.geyer_inflation`: Geyer's
#: initial positive sequence) or ``cutoff`` (:func:`~isaaclab_sysid.residual_stats.autocorr_inflation`: lags summed
#: while rho > 2 / sqrt(T), before issue 46's fourth pass); benchmarks/friction_laws.py --n-eff compares them
#: (docs/benchmarks.md, "Issue 46, fourth pass")
N_EFF_METHOD = "geyer"
_INFLATION = {"cutoff": autocorr_inflation, "geyer": geyer_inflation}


@dataclass
class ChannelStats:
    """Per channel (``q``, ``dq``, ``x``): the residual entries n, their effective independent count n_eff (from the
    base model's residual) and the base model's SSR."""

    n: dict[str, int]
    n_eff: dict[str, float]
    ssr: dict[str, float]

    @property
    def n_total(self) -> int:
        return int(sum(self.n.values()))

    @property
    def n_eff_total(self) -> float:
        return float(sum(self.n_eff.values()))


def _split(a: np.ndarray, n_dof: int) -> dict[str, np.ndarray]:
    """(T, 2N + 3) per-sample residuals -> per channel (T, width)."""
    return {"q": a[:, :n_dof], "dq": a[:, n_dof: 2 * n_dof], "x": a[:, 2 * n_dof:]}


def _channel_blocks(objective: ReplayObjective, x: np.ndarray):
    """(channel, (T, width) weighted residuals) of every fit run at ``x``, from one rollout."""
    ro = objective.states(np.atleast_2d(x))
    for r in weighted_residuals(ro, objective.runs, objective.weights, objective.traj_weights):
        yield from _split(np.asarray(r.per_sample()[0], dtype=float), objective.space.n_dof).items()


def channel_ssr(objective: ReplayObjective, x: np.ndarray) -> dict[str, float]:
    """Per channel, the sum of squared weighted residuals of the fit runs at ``x`` (one rollout)."""
    out = dict.fromkeys(CHANNELS, 0.0)
    for c, a in _channel_blocks(objective, x):
        out[c] += float(np.sum(a * a))
    return out


def run_channel_stats(objective: ReplayObjective, x: np.ndarray) -> list[ChannelStats]:
    """Per fit run, the :class:`ChannelStats` of its residual at the base model's ``x`` (one rollout)."""
    ro = objective.states(np.atleast_2d(x))
    return [_block_stats(np.asarray(r.per_sample()[0], dtype=float), objective.space.n_dof)
            for r in weighted_residuals(ro, objective.runs, objective.weights, objective.traj_weights)]


def pooled(stats: Sequence[ChannelStats]) -> ChannelStats:
    """The runs' :class:`ChannelStats` summed channel by channel."""
    return ChannelStats({c: int(sum(s.n[c] for s in stats)) for c in CHANNELS},
                        {c: float(sum(s.n_eff[c] for s in stats)) for c in CHANNELS},
                        {c: float(sum(s.ssr[c] for s in stats)) for c in CHANNELS})


def channel_stats(objective: ReplayObjective, x: np.ndarray) -> ChannelStats:
    """The :class:`ChannelStats` of the fit runs at the base model's ``x`` (one rollout; the runs pooled)."""
    return pooled(run_channel_stats(objective, x))


def bic_of(ssr: dict[str, float], stats: ChannelStats, k: int) -> float:
    """sum_c n_eff_c log(SSR_c / n_c) + k log(sum_c n_eff_c) over the channels with residuals (lower is better)."""
    total = 0.0
    for c in CHANNELS:
        if stats.n[c] > 0 and stats.n_eff[c] > 0:
            total += stats.n_eff[c] * np.log(max(ssr[c], 1e-300) / stats.n[c])
    return float(total + k * np.log(max(stats.n_eff_total, 1.0)))


def forecast(objective: ReplayObjective, x0: np.ndarray, steps: int = FORECAST_STEPS, streamed: bool | None = None,
             dense_limit_mb: float = DENSE_LIMIT_MB) -> tuple[float, dict[str, float]] | None:
    """(the bounded Gauss-Newton forecast of a refit's loss, the same per channel) from ``x0`` (the delay held).

    Each step is one batched finite-difference rollout and the bounded Gauss-Newton step from it; after the first,
    a step is taken only where the rollout at the stepped point replays finitely and scores below the point before
    it (a law
    whose shape is far from linear at its start, the Gaz sigmoid's slope, is judged after up to ``steps``
    re-linearizations, not by one linear model). None where the start does not replay finitely.

    ``streamed``: roll the sensitivity out a chunk at a time and solve the step from the p x p normal equations
    (:func:`~isaaclab_sysid.evaluate.friction_score.streamed_sensitivity`, ``bounded_step_normal``), as the
    static-friction score test does; None (the default): when the dense arrays would exceed ``dense_limit_mb``
    (issue 45: the dense forecast of a law was the long fits' memory peak). The forecast is the same to rounding."""
    x = np.asarray(x0, dtype=float)
    if streamed is None:
        streamed = dense_sensitivity_mb(objective.space, x, objective.runs) > dense_limit_mb
    best: tuple[float, dict[str, float]] | None = None
    last = np.inf  # the measured loss at the previous point
    widths = objective.space.widths()
    for _ in range(max(1, int(steps))):
        try:
            sens = (streamed_sensitivity(objective, x) if streamed
                    else sensitivity(objective, x, profile_delay=False))
        except IntervalError:  # the law's start (or a stepped point) diverges on a run
            return best
        here = float(sum(float(np.sum(rr * rr)) for rr in sens.r))
        if not here < last:  # the last step did not lower the measured loss: the linear model has run out
            return best
        if streamed:
            g = sum(sc.sum(axis=0) for sc in sens.scores())
            step = bounded_step_normal(objective.space, sens, sens.hessian(), g)
        else:
            step = bounded_step(objective.space, sens)
        if step is None:
            return best
        out = dict.fromkeys(CHANNELS, 0.0)
        for rr, jj in zip(sens.r, sens.J):  # per run: (T, C) residuals and (T, C, p) Jacobian
            pred = rr + jj @ step
            for c, a in _split(pred, objective.space.n_dof).items():
                out[c] += float(np.sum(a * a))
        if best is None or sum(out.values()) < best[0]:
            best = (float(sum(out.values())), out)
        last = here
        cont = np.asarray(sens.cont)
        x = x.copy()
        x[cont] = np.clip(x[cont] + step / widths[cont], 0.0, 1.0)
    return best


def continuous_count(space: ParamSpace) -> int:
    return int(len(space.continuous_index()))


def model_name(groups: Sequence[str]) -> str:
    """The law step's name of a model of ``groups``: its law's (:func:`law_of_groups`), or ``static`` for the
    static-friction group (the Stribeck law at the given velocity and shape 2), which the ``stribeck`` candidate,
    with both fitted, extends."""
    law = law_of_groups(groups)
    dry = {g for g in groups if g in DRY_GROUPS}
    return "static" if law.name == "stribeck" and dry != set(law.fit_groups) else law.name


def candidates_for(base_groups: Sequence[str], laws: Sequence[str]) -> tuple[list[str], str | None]:
    """The laws to weigh against a base fit of ``base_groups`` and, when none can be, why."""
    if "friction" not in base_groups and "mu_static" not in base_groups:
        return [], "no dry-friction group to replace"
    base = law_of_groups(base_groups).name
    dry = {g for g in base_groups if g in DRY_GROUPS}
    # the static-friction group is the Stribeck law at a given velocity and shape 2: the law with both fitted differs
    return [law for law in laws if law != base or set(LAWS[law].fit_groups) != dry], None


@dataclass
class Loro:
    """One model's cross-validated prediction of the fit runs, a block of samples left out at a time.

    Attributes:
        blocks: the left-out blocks' names (``run[start:stop]``, samples), in the fit's order.
        ssr: per block, per channel, the SSR of the weighted residual of that block replayed at the model's numbers
            fitted without it (inf where that replay diverged).
        score: per block, the predictive score ``sum_c n_eff_c log(SSR_c / n_c)`` with the block's per-channel n and
            n_eff from the base model (lower is better; no penalty per number: the block was not fitted, so a number
            that fits only noise costs prediction by itself).
        stats: per block, the :class:`ChannelStats` of this model's own residual at its optimum (the base's are the
            ones every model's score uses).
        in_score: per block, the score of the model's residual at its all-runs optimum (in sample), with the same
            n and n_eff as ``score``.
    """

    blocks: list[str]
    ssr: list[dict[str, float]]
    score: list[float]
    stats: list[ChannelStats] = field(default_factory=list)
    in_score: list[float] = field(default_factory=list)


def run_score(ssr: dict[str, float], stats: ChannelStats) -> float:
    """``sum_c n_eff_c log(SSR_c / n_c)`` over one block's channels with residuals (inf where an SSR is not finite)."""
    total = 0.0
    for c in CHANNELS:
        if stats.n[c] > 0 and stats.n_eff[c] > 0:
            if not np.isfinite(ssr[c]):
                return float("inf")
            total += stats.n_eff[c] * np.log(max(ssr[c], 1e-300) / stats.n[c])
    return float(total)


def _block_stats(r: np.ndarray, n_dof: int, n_eff_method: str | None = None) -> ChannelStats:
    """The :class:`ChannelStats` of one block's (T, C) weighted residuals (a whole run's, or a part of it);
    ``n_eff_method``: a key of ``_INFLATION`` (None: :data:`N_EFF_METHOD`)."""
    inflation = _INFLATION[n_eff_method or N_EFF_METHOD]
    n, n_eff, ssr = dict.fromkeys(CHANNELS, 0), dict.fromkeys(CHANNELS, 0.0), dict.fromkeys(CHANNELS, 0.0)
    for c, a in _split(r, n_dof).items():
        t, w = a.shape
        if w == 0 or not np.any(a):
            continue
        n[c] = a.size
        n_eff[c] = a.size / max(inflation(a.ravel(), w, [t], max(1, t // 4)), 1.0)
        ssr[c] = float(np.sum(a * a))
    return ChannelStats(n, n_eff, ssr)


def cv_blocks(lengths: Sequence[int], per_run: int) -> list[tuple[int, int, int]]:
    """The cross-validation blocks: each run of ``lengths`` (samples) cut into ``per_run`` contiguous blocks of
    (nearly) equal length; (run index, start, stop) each."""
    out = []
    for i, t in enumerate(lengths):
        edges = np.linspace(0, int(t), max(1, int(per_run)) + 1).astype(int)
        out += [(i, int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    return out


def leave_one_block_out(objective: ReplayObjective, x: np.ndarray, per_run: int = 2,
                        block_stats: Sequence[ChannelStats] | None = None, streamed: bool | None = None,
                        dense_limit_mb: float = DENSE_LIMIT_MB, n_eff_method: str | None = None) -> Loro | None:
    """The model's cross-validated prediction from its all-runs optimum ``x`` (D,) (the delay held): each fit run cut
    into ``per_run`` contiguous blocks (:func:`cv_blocks`; 1: leave one run out), each block left out in turn.

    For each block b the model is refitted without it by one bounded Gauss-Newton step from ``x`` on the other
    samples' normal equations, ``(H - H_b) dx = -(g - g_b)`` (the first-order leave-one-out estimate: at the all-runs
    optimum the other samples' gradient is minus the block's, so the step undoes what the block pulled the numbers to;
    the Jacobians come from one batched finite-difference rollout), shortened along :data:`LORO_SCALES` to the
    length that lowers the other samples' loss most (a line search that does not look at the block), and the block
    is then *replayed* (not linearized) at those numbers: one rollout of (blocks x len(LORO_SCALES)) candidates on
    every run. The replay runs each whole run: a left-out block's samples are only not scored in its fold.

    ``block_stats``: per block, the base model's :class:`ChannelStats` (n, n_eff) its score uses (None: this model's
    own, as for the base). ``n_eff_method``: how this model's own blocks count their independent residuals (None:
    :data:`N_EFF_METHOD`). None where there are fewer than two blocks or the optimum does not replay finitely."""
    runs = objective.runs
    n_dof = objective.space.n_dof
    blocks = cv_blocks([r.q.shape[0] for r in runs], per_run)
    if len(blocks) < 2:
        return None
    x = np.asarray(x, dtype=float)
    if streamed is None:
        streamed = dense_sensitivity_mb(objective.space, x, runs) > dense_limit_mb
    try:
        sens = streamed_sensitivity(objective, x) if streamed else sensitivity(objective, x, profile_delay=False)
    except IntervalError:
        return None
    Hb, gb = [], []
    for i, a, b in blocks:
        J = np.nan_to_num(sens.J[i][a:b])
        Hb.append(np.einsum("tcp,tcq->pq", J, J))
        gb.append(np.einsum("tcp,tc->p", J, sens.r[i][a:b]))
    H_all, g_all = sum(Hb), sum(gb)
    own = [_block_stats(np.asarray(sens.r[i][a:b], dtype=float), n_dof, n_eff_method) for i, a, b in blocks]
    stats = list(block_stats) if block_stats is not None else own
    cont = np.asarray(sens.cont)
    widths = objective.space.widths()
    x0 = np.asarray(sens.x0, dtype=float)
    B, S = len(blocks), len(LORO_SCALES)
    X = []
    for k in range(B):
        step = bounded_step_normal(objective.space, sens, H_all - Hb[k], g_all - gb[k])
        for sc in LORO_SCALES:
            xi = x0.copy()
            if step is not None:
                xi[cont] = np.clip(x0[cont] + sc * step / widths[cont], 0.0, 1.0)
            X.append(xi)
    res = weighted_residuals(objective.states(np.asarray(X)), runs, objective.weights, objective.traj_weights)
    # the candidate diverged or left a non-finite residual on the run
    div = [np.asarray(r.diverged, dtype=bool) for r in res]
    # per run, per channel: (K, T) squared residual summed over the channel's columns (not the (K, T, C) block)
    rows = [{c: np.sum(np.asarray(getattr(r, a), dtype=float) ** 2, axis=2) for c, a in zip(CHANNELS, ("q", "dq", "x"))}
            for r in res]
    del res
    totals = [sum(v.sum(axis=1) for v in rr.values()) for rr in rows]  # per run (K,)
    ssr: list[dict[str, float]] = []
    for k, (i, a, b) in enumerate(blocks):
        train = []
        for s_ in range(S):
            c = k * S + s_
            if any(d[c] for d in div):
                train.append(np.inf)
                continue
            held = sum(float(v[c, a:b].sum()) for v in rows[i].values())
            train.append(float(sum(t[c] for t in totals)) - held)
        t = np.asarray(train)
        best = int(np.argmin(t)) if np.any(np.isfinite(t)) else 0
        c = k * S + best
        if div[i][c]:
            ssr.append(dict.fromkeys(CHANNELS, float("inf")))
            continue
        ssr.append({ch: float(v[c, a:b].sum()) for ch, v in rows[i].items()})
    names = [f"{runs[i].name}[{a}:{b}]" for i, a, b in blocks]
    return Loro(names, ssr, [run_score(s_, st) for s_, st in zip(ssr, stats)], own,
                [run_score(o.ssr, st) for o, st in zip(own, stats)])


@dataclass
class Confirmation:
    """A richer law against the base model on cross-validated prediction (:func:`leave_one_block_out`).

    Attributes:
        law: the law; delta: per left-out block, the law's predictive score minus the base's (negative: the law
            predicts the samples its fit did not see better); confirmed: the sum is negative and more than half of
            the blocks are predicted better (the evidence holds block by block, not only pooled).
    """

    law: str
    delta: list[float]
    confirmed: bool


def confirm(law: str, law_loro: Loro, base_loro: Loro) -> Confirmation:
    """Whether ``law`` predicts the left-out blocks better than the base (:class:`Confirmation`); no threshold: an
    out-of-sample likelihood already charges each number what it costs in prediction."""
    d = [a - b if np.isfinite(a) else float("inf") for a, b in zip(law_loro.score, base_loro.score)]
    total = float(np.sum(d)) if d else float("inf")
    better = sum(1 for v in d if v < 0)
    return Confirmation(law, [float(v) for v in d], bool(d) and total < 0 and better * 2 > len(d))
