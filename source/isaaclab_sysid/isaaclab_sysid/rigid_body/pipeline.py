"""The rigid-body identification end to end, as arrays (no files: see :mod:`.writers`).

identification logs -> checks of every option and input -> base parameters ->
regressor -> LS (+ HAC covariance) -> all-pose audit -> SDP reconstruction ->
audit of the reconstruction -> held-out prediction. :func:`identify` returns a
:class:`RigidBodyIdentification`; :func:`~isaaclab_sysid.rigid_body.writers.write_identification`
writes ``rb_params.json``, ``nominal_inertials.json``, the plots and the report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.rigid_body.base_params import BaseParameters, compute_base_parameters
from isaaclab_sysid.rigid_body.drive_gains import (
    DriveGainResult,
    current_from_regressor,
    payload_from_regressor,
    payload_link_slice,
)
from isaaclab_sysid.rigid_body.estimate import conditioned_cov, LSResult, estimate, hac_covariance, whitener
from isaaclab_sysid.rigid_body.feasibility import (
    AuditResult,
    MassRange,
    Reconstruction,
    audit_mass_matrix,
    chi2_sf,
    default_domain,
    mass_ranges,
    reconstruct_standard,
)
from isaaclab_sysid.rigid_body.options import PipelineOptions, RigidBodyError, flag, require
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, Processed, preprocess
from isaaclab_sysid.robots.regressor import Regressor
from isaaclab_sysid.data.formats.ur10e import PublishedParameters, load_ur10e_csv

#: Names of the two identified models in every table.
LS_MODEL, SDP_MODEL = "LS (base)", "SDP (standard)"


@dataclass(frozen=True)
class ReferenceModel:
    """Another standard parameter set to predict the held-out runs with (e.g. published).

    Attributes:
        pi: (P,) standard parameters on the regressor's columns [torque units].
        gains: (N,) its own drive gains [N m / A]; None: the identification's ``gains``.
    """

    pi: np.ndarray
    gains: np.ndarray | None = None


@dataclass(frozen=True)
class IdentificationData:
    """What one identification works on (the choices are in :class:`PipelineOptions`).

    Attributes:
        regressor: the regressor (robot + joint terms).
        ident: preprocessed identification runs.
        valid: name -> preprocessed held-out runs.
        signal: name of the output signal in each :class:`Processed` (``"current"``, ``"tau_J"``).
        unit: its unit for the report (``"A"``, ``"N m"``).
        gains: (N,) drive gains [N m / A] when the output is current; None for torque.
        reference: name -> other parameter sets predicting the held-out runs.
        drive_gains: the identified gains (:func:`identify_drive_gains`), written into
            ``rb_params.json`` and the report; ``gains`` should be its ``gains``.
        loaded_valid: name -> held-out runs carrying the payload of ``drive_gains``: each model
            predicts them after fitting the payload's placement (9 values) on that run.
        instruments: for method "iv": one run per ``ident`` run on the same time grid, the
            commanded trajectory (q, qd, qdd) whose regressor is the instrument Z.
    """

    regressor: Regressor
    ident: list[Processed]
    valid: dict[str, Processed]
    signal: str = "current"
    unit: str = "A"
    gains: np.ndarray | None = None
    reference: dict[str, ReferenceModel] = field(default_factory=dict)
    drive_gains: DriveGainResult | None = None
    loaded_valid: dict[str, Processed] = field(default_factory=dict)
    instruments: list[Processed] | None = None

    def validate(self, options: PipelineOptions) -> None:
        """Check the inputs against each other and ``options`` (cheap; before any regressor is built).

        Raises:
            RigidBodyError: naming the run, model or flag at fault.
        """
        reg = self.regressor
        require(len(self.ident) > 0, "no identification runs")
        require(options.base_samples * reg.n_dof >= reg.n_params,
                f"base_samples {options.base_samples} x {reg.n_dof} joints gives fewer rows than the "
                f"{reg.n_params} standard parameters")
        for p in [*self.ident, *self.valid.values(), *self.loaded_valid.values()]:
            require(self.signal in p.signals,
                    f"{p.record.get('source', 'run')}: no signal {self.signal!r} (has {sorted(p.signals)})")
        if self.gains is not None:
            _check_gains("drive gains", self.gains, reg.n_dof)
        for name, ref in self.reference.items():
            require(np.shape(ref.pi) == (reg.n_params,),
                    f"reference {name!r}: {np.shape(ref.pi)} parameters, the regressor has ({reg.n_params},)")
            if ref.gains is not None:
                _check_gains(f"reference {name!r} drive gains", ref.gains, reg.n_dof)
        require(not self.loaded_valid or self.drive_gains is not None,
                "held-out payload runs need the drive_gains result (its payload mass and link)")
        if options.method == "iv":
            require(bool(self.instruments) and len(self.instruments) == len(self.ident),
                    f"{flag('method')} iv needs one instrument run (the commanded trajectory) per identification run")
            for p, z in zip(self.ident, self.instruments):
                require(z.q.shape == p.q.shape, f"instrument run {z.record.get('source')} has {z.q.shape}, "
                        f"its run {p.q.shape}")



def rmse_per_joint(measured: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(N,) RMSE over samples of (T, N) arrays."""
    return np.sqrt(np.mean((np.asarray(measured) - np.asarray(predicted)) ** 2, axis=0))

def _check_gains(what: str, gains: np.ndarray, n_dof: int) -> None:
    """``gains`` must be (n_dof,) finite positive drive gains [N m/A]."""
    g = np.asarray(gains, dtype=float)
    require(g.shape == (n_dof,) and bool(np.all(np.isfinite(g) & (g > 0))),
            f"{what} must be {n_dof} positive numbers [N m/A]; got {g.tolist()}")


@dataclass(frozen=True)
class Consistency:
    """How well the SDP reconstruction agrees with the LS base parameters.

    Attributes:
        base_dof: b, the number of base parameters (the chi^2 degrees of freedom).
        mahalanobis_ols_cov, mahalanobis_hac_cov, mahalanobis_conditioned_cov: d^2 of (K pi_SDP - theta)
            under the OLS, the HAC and the conditioned HAC covariance (:func:`.estimate.conditioned_cov`).
        p_value_ols_cov, p_value_hac_cov, p_value_conditioned_cov: P(chi^2_b >= d^2).
        hac_lags_samples: the Newey-West window [samples].
        hac_over_ols_std_median: median of std_HAC / std_OLS over the base parameters.
        sdp_covariance: the covariance the SDP used ("hac_conditioned", "hac" or "ols").
        link_masses, prior_link_masses: link name -> reconstructed / URDF mass [kg].
    """

    base_dof: int
    mahalanobis_ols_cov: float
    p_value_ols_cov: float
    mahalanobis_hac_cov: float
    p_value_hac_cov: float
    mahalanobis_conditioned_cov: float
    p_value_conditioned_cov: float
    hac_lags_samples: int
    hac_over_ols_std_median: float
    sdp_covariance: str
    link_masses: dict[str, float]
    prior_link_masses: dict[str, float]

    def summary(self) -> dict:
        """JSON-ready dict (the ``reconstruction.consistency`` entry of ``rb_params.json``)."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class HeldOutRun:
    """One held-out run's measured and predicted output, (T, N) each [output unit].

    Attributes:
        name: the run's name; t: (T,) time [s].
        measured: (T, N); predictions: model -> (T, N).
        payload_refit: a payload run whose placement each model fitted first.
    """

    name: str
    t: np.ndarray
    measured: np.ndarray
    predictions: dict[str, np.ndarray]
    payload_refit: bool = False


@dataclass
class HeldOutScores:
    """Per-joint RMSE [output unit] of every model on the held-out runs.

    Attributes:
        per_run: run -> model -> (N,).
        pooled: model -> (N,) over all samples of all ``valid`` runs (empty without any).
        loaded: run -> model -> (N,) on the payload runs (placement fitted per run).
        runs: every run's signals, in the order the plots are written.
    """

    per_run: dict[str, dict[str, np.ndarray]]
    pooled: dict[str, np.ndarray]
    loaded: dict[str, dict[str, np.ndarray]]
    runs: list[HeldOutRun]


@dataclass
class RigidBodyIdentification:
    """Everything one identification produced (arrays, not files).

    Attributes:
        data, options: what it ran on and with.
        base: the base-parameter map; fit: the LS estimate (b,) with its white-noise covariance.
        cov_hac: (b, b) Newey-West covariance of ``fit.theta``; hac_lags: its window [samples].
        audit_ls, audit_reconstructed: the all-pose M(q) audits of the LS estimate and of the SDP.
        reconstruction: the SDP's physically consistent standard set (P,).
        consistency: the SDP set against the LS estimate.
        heldout: per-joint held-out RMSE of every model.
        timing_s: step -> wall time [s].
        mass_ranges: each link's masses the data allow (:func:`.feasibility.mass_ranges`): which of the SDP's
            masses the data fix and which the prior chose.
    """

    data: IdentificationData
    options: PipelineOptions
    base: BaseParameters
    fit: LSResult
    cov_hac: np.ndarray
    hac_lags: int
    audit_ls: AuditResult
    reconstruction: Reconstruction
    audit_reconstructed: AuditResult
    consistency: Consistency
    heldout: HeldOutScores
    timing_s: dict[str, float] = field(default_factory=dict)
    mass_ranges: list[MassRange] = field(default_factory=list)

    @property
    def regressor(self) -> Regressor:
        """The regressor of :attr:`data`."""
        return self.data.regressor


def load_ur10e_processed(path: Path, options: PreprocessOptions, max_corrupt_head_rows: int = 0) -> Processed:
    """Load one UR10e CSV and preprocess it; the motor current is the signal ``"current"``.

    The logged velocity is used (exactly zero at rest on the UR controller, which
    keeps the Coulomb column at zero there). ``max_corrupt_head_rows``: see
    :func:`load_ur10e_csv`; the rows dropped are in the record.
    """
    log = load_ur10e_csv(path, max_corrupt_head_rows)
    p = preprocess(log.t, log.q, {"current": log.current}, options, source=str(path), velocity=log.qd)
    p.record["dropped_corrupt_head_rows"] = log.dropped_head_rows
    p.record["dropped_truncated_last_row"] = log.dropped_last_row
    return p


def published_standard_vector(reg: Regressor, pub: PublishedParameters) -> np.ndarray:
    """(P,) the UR10e authors' parameters on this regressor's columns (needs all four joint terms)."""
    if reg.joint_terms != ("armature", "viscous", "coulomb", "offset"):
        raise RigidBodyError("the published UR10e model needs armature, viscous, coulomb and offset columns")
    f = pub.friction
    return np.concatenate([pub.pinocchio_pi().ravel(), pub.rotor_inertia, f[:, 0], f[:, 1], f[:, 2]])


@contextmanager
def _timed(timing: dict[str, float], step: str) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    timing[step] = time.perf_counter() - t0


def identify(data: IdentificationData, options: PipelineOptions | None = None) -> RigidBodyIdentification:
    """Identify on ``data.ident``, audit, reconstruct, predict ``data.valid`` (and ``data.loaded_valid``).

    Every option and input is checked first (:meth:`PipelineOptions.validate`,
    :meth:`IdentificationData.validate`): a bad one raises :class:`RigidBodyError`
    before any regressor is built.
    """
    opt = (options or PipelineOptions()).validate()
    data.validate(opt)
    reg, timing = data.regressor, {}
    with _timed(timing, "base_parameters"):
        base = compute_base_parameters(reg, opt.base_samples, opt.base_seed)
    with _timed(timing, "regressor"):
        W, y, segments, Z = _stack(data, base, opt.method == "iv")
    with _timed(timing, "estimate"):
        fit = estimate(W, y, reg.n_dof, opt.method, Z=Z)
        hac_lags = _hac_lags(data.ident[0], opt.hac_lag_s)
        bread = fit.cov / fit.sigma2 if fit.method == "ols" and fit.sigma2 > 0 else None
        cov_hac = hac_covariance(W, y - W @ fit.theta, reg.n_dof, hac_lags, segments, bread=bread, instrument=Z)
    with _timed(timing, "audit_ls"):
        audit_ls = _audit(reg, base.to_standard(fit.theta), opt)
    with _timed(timing, "sdp"):
        rec = _reconstruct(reg, base, fit, cov_hac, opt)
    consistency = _consistency(reg, base, fit, cov_hac, rec, hac_lags, opt.sdp_covariance)
    with _timed(timing, "mass_ranges"):
        ranges = mass_ranges(reg, base, fit.theta, sdp_covariance(fit, cov_hac, opt.sdp_covariance), rec.masses,
                             eps=opt.sdp_eps, mass_upper_factor=opt.mass_upper_factor,
                             mass_lower_factor=opt.mass_lower_factor)
    with _timed(timing, "audit_reconstructed"):
        audit_rec = _audit(reg, rec.pi, opt)
    with _timed(timing, "validation"):
        heldout = predict_heldout(data, _models(data, base.to_standard(fit.theta), rec.pi))
    return RigidBodyIdentification(
        data=data, options=opt, base=base, fit=fit, cov_hac=cov_hac, hac_lags=hac_lags, audit_ls=audit_ls,
        reconstruction=rec, audit_reconstructed=audit_rec, consistency=consistency, heldout=heldout,
        timing_s=timing, mass_ranges=ranges,
    )


def _stack(
    data: IdentificationData, base: BaseParameters, with_instruments: bool
) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray | None]:
    """(M, b) base regressor, (M,) output and the rows per run of the identification runs;
    the (M, b) instrument regressor of ``data.instruments`` when asked (else None)."""
    reg, gains = data.regressor, data.gains
    W = np.vstack([base.columns(reg.matrix(p.q, p.qd, p.qdd, gains)) for p in data.ident])
    y = np.concatenate([p.signals[data.signal].ravel() for p in data.ident])
    Z = None
    if with_instruments:
        Z = np.vstack([base.columns(reg.matrix(z.q, z.qd, z.qdd, gains)) for z in data.instruments])
    return W, y, [int(p.q.shape[0]) for p in data.ident], Z


def _hac_lags(run: Processed, hac_lag_s: float) -> int:
    """The Newey-West window [samples] of ``hac_lag_s`` [s] on the run's grid (at least 1)."""
    dt = float(run.record.get("target_dt_s", np.median(np.diff(run.t))))
    return max(1, int(round(hac_lag_s / dt)))


def _audit(reg: Regressor, pi: np.ndarray, opt: PipelineOptions) -> AuditResult:
    """The all-pose M(q) audit of the standard vector ``pi`` (P,) on the options' pose set."""
    return audit_mass_matrix(
        reg,
        pi,
        domain=default_domain(reg),
        grid_points=opt.audit_grid,
        n_uniform=opt.audit_uniform,
        n_dense=opt.audit_dense,
        seeds=opt.audit_seeds,
    )


def sdp_covariance(fit: LSResult, cov_hac: np.ndarray, choice: str) -> np.ndarray:
    """(b, b) the base-parameter covariance the SDP's Mahalanobis term uses (``--sdp-covariance``):
    "hac_conditioned" (the HAC one floored against the white-noise one, :func:`.estimate.conditioned_cov`),
    "hac" or "ols"."""
    if choice == "hac_conditioned":
        return conditioned_cov(cov_hac, fit.cov)
    return cov_hac if choice == "hac" else fit.cov


def _reconstruct(
    reg: Regressor, base: BaseParameters, fit: LSResult, cov_hac: np.ndarray, opt: PipelineOptions
) -> Reconstruction:
    """The SDP reconstruction of ``fit.theta`` under the covariance ``opt.sdp_covariance`` names."""
    return reconstruct_standard(
        reg,
        base,
        fit.theta,
        sdp_covariance(fit, cov_hac, opt.sdp_covariance),
        eps=opt.sdp_eps,
        mode=opt.sdp_mode,
        prior_rel_std=opt.prior_rel_std,
        prior_weight=opt.prior_weight,
        mass_upper_factor=opt.mass_upper_factor,
        mass_lower_factor=opt.mass_lower_factor,
    )


def _mahalanobis(e: np.ndarray, cov: np.ndarray) -> float:
    """e^T Cov^-1 e for e (b,), Cov (b, b) (:func:`.estimate.whitener`: eigenvalues floored at 1e-12 of the largest)."""
    z = whitener(cov) @ e
    return float(z @ z)


def _consistency(
    reg: Regressor,
    base: BaseParameters,
    fit: LSResult,
    cov_hac: np.ndarray,
    rec: Reconstruction,
    hac_lags: int,
    sdp_covariance: str,
) -> Consistency:
    """The SDP set's base parameters against the LS estimate, under both covariances."""
    e = base.to_base(rec.pi) - fit.theta
    d2_ols, d2_hac = _mahalanobis(e, fit.cov), _mahalanobis(e, cov_hac)
    d2_cond = _mahalanobis(e, conditioned_cov(cov_hac, fit.cov))
    return Consistency(
        base_dof=base.rank,
        mahalanobis_ols_cov=d2_ols,
        p_value_ols_cov=chi2_sf(d2_ols, base.rank),
        mahalanobis_hac_cov=d2_hac,
        p_value_hac_cov=chi2_sf(d2_hac, base.rank),
        mahalanobis_conditioned_cov=d2_cond,
        p_value_conditioned_cov=chi2_sf(d2_cond, base.rank),
        hac_lags_samples=hac_lags,
        hac_over_ols_std_median=float(np.median(np.sqrt(np.diag(cov_hac)) / fit.std)),
        sdp_covariance=sdp_covariance,
        link_masses=dict(zip(reg.link_names, rec.masses.tolist())),
        prior_link_masses=dict(zip(reg.link_names, rec.prior_masses.tolist())),
    )


def _models(data: IdentificationData, pi_ls: np.ndarray, pi_sdp: np.ndarray) -> dict[str, ReferenceModel]:
    """Every model predicting the held-out runs: LS, SDP, then ``data.reference`` (gains resolved)."""
    models = {LS_MODEL: ReferenceModel(pi_ls, data.gains), SDP_MODEL: ReferenceModel(pi_sdp, data.gains)}
    for name, ref in data.reference.items():
        g = data.gains if ref.gains is None else ref.gains
        models[name] = ReferenceModel(np.asarray(ref.pi, dtype=float), None if g is None else np.asarray(g, float))
    return models


def predict_heldout(data: IdentificationData, models: dict[str, ReferenceModel]) -> HeldOutScores:
    """Every model's prediction and per-joint RMSE on ``data.valid`` and ``data.loaded_valid``."""
    reg = data.regressor
    per_run: dict[str, dict[str, np.ndarray]] = {}
    sq: dict[str, list[np.ndarray]] = {m: [] for m in models}
    runs: list[HeldOutRun] = []
    for run_name, p in data.valid.items():
        Y = reg.matrix(p.q, p.qd, p.qdd)
        meas = p.signals[data.signal]
        preds = {}
        for m, model in models.items():
            pr = (Y @ model.pi).reshape(-1, reg.n_dof)
            preds[m] = pr if model.gains is None else pr / model.gains[None, :]
        per_run[run_name] = {m: rmse_per_joint(meas, pr) for m, pr in preds.items()}
        for m, pr in preds.items():
            sq[m].append((meas - pr) ** 2)
        runs.append(HeldOutRun(run_name, p.t, meas, preds))
    pooled = {m: np.sqrt(np.mean(np.vstack(v), axis=0)) for m, v in sq.items() if v}
    loaded = {}
    if data.loaded_valid:
        cols, _ = payload_link_slice(reg, data.drive_gains.payload_link)
        for run_name, p in data.loaded_valid.items():
            meas = p.signals[data.signal]
            Y = reg.matrix(p.q, p.qd, p.qdd)  # once per run, shared by every model
            preds = {}
            for m, model in models.items():
                psi = payload_from_regressor(Y, meas, model.pi, model.gains, data.drive_gains.payload_mass, cols)
                preds[m] = current_from_regressor(Y, model.pi, model.gains, psi, cols)
            loaded[run_name] = {m: rmse_per_joint(meas, pr) for m, pr in preds.items()}
            runs.append(HeldOutRun(run_name, p.t, meas, preds, payload_refit=True))
    return HeldOutScores(per_run, pooled, loaded, runs)
