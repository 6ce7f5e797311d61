"""The rigid-body pipeline end to end (what ``scripts/identify_rigid_body.py`` runs).

identification logs -> preprocess -> regressor -> base parameters -> LS ->
all-pose audit -> SDP reconstruction -> audit of the reconstruction ->
held-out prediction -> ``rb_params.json``, ``nominal_inertials.json``, report.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.rigid_body.base_params import BaseParameters, compute_base_parameters
from isaaclab_sysid.rigid_body.drive_gains import (
    DriveGainResult,
    current_from_regressor,
    payload_from_regressor,
    payload_link_slice,
)
from isaaclab_sysid.rigid_body.estimate import LSResult, estimate, hac_covariance
from isaaclab_sysid.rigid_body.feasibility import (
    AuditResult,
    Reconstruction,
    audit_mass_matrix,
    chi2_sf,
    default_domain,
    reconstruct_standard,
)
from isaaclab_sysid.rigid_body.io import save_nominal, write_rb_params
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, Processed, preprocess
from isaaclab_sysid.rigid_body.regressor import Regressor
from isaaclab_sysid.rigid_body.report import markdown_table, plot_run, rmse_per_joint, write_report
from isaaclab_sysid.rigid_body.ur10e_data import PublishedParameters, load_ur10e_csv


@dataclass(frozen=True)
class PipelineOptions:
    """Choices of one identification.

    Attributes:
        method: "ols", "wls", "tls" or "iv" (needs ``instruments`` in :func:`run_pipeline`).
        base_samples, base_seed: random samples and seed of the base-parameter QR.
        audit_grid, audit_uniform, audit_dense, audit_seeds: the all-pose audit's pose set.
        sdp_eps: pseudo-inertia margin; sdp_mode: "map" (default), "exact", "auto".
        prior_rel_std: relative std of the URDF prior in the SDP (30 % of the link mass,
            scaled by the link's radius of gyration for moments and inertias).
        prior_weight: multiplier of the prior term (0: nearest to the data only).
        mass_upper_factor, mass_lower_factor: optional SDP bounds factor x URDF mass.
        sdp_covariance: covariance of the base parameters used by the SDP's Mahalanobis
            term: "hac" (Newey-West, residual autocorrelation within ``hac_lag_s``) or "ols".
        hac_lag_s: the HAC window [s].
        plots: write a PNG per held-out run.
    """

    method: str = "ols"
    base_samples: int = 300
    base_seed: int = 0
    audit_grid: int = 3
    audit_uniform: int = 2000
    audit_dense: int = 1000
    audit_seeds: tuple[int, ...] = (0, 1, 2)
    sdp_eps: float = 1e-6
    sdp_mode: str = "map"
    prior_rel_std: float = 0.3
    prior_weight: float = 1.0
    mass_upper_factor: float | None = None
    mass_lower_factor: float | None = None
    sdp_covariance: str = "hac"
    hac_lag_s: float = 0.5
    plots: bool = True


@dataclass
class PipelineResult:
    """Everything the pipeline produced (arrays, not files)."""

    base: BaseParameters
    fit: LSResult
    audit_ls: AuditResult
    reconstruction: Reconstruction
    audit_reconstructed: AuditResult
    validation_rmse: dict[str, dict[str, np.ndarray]]
    pooled_rmse: dict[str, np.ndarray]
    cov_hac: np.ndarray | None = None
    loaded_rmse: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    consistency: dict = field(default_factory=dict)
    timing_s: dict[str, float] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


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


def _stack(reg: Regressor, base: BaseParameters, runs: list[Processed], signal: str, gains):
    W = np.vstack([base.columns(reg.matrix(p.q, p.qd, p.qdd, gains)) for p in runs])
    y = np.concatenate([p.signals[signal].ravel() for p in runs])
    return W, y, [int(p.q.shape[0]) for p in runs]


def _mahalanobis(e: np.ndarray, cov: np.ndarray) -> float:
    w, V = np.linalg.eigh(0.5 * (cov + cov.T))
    z = V.T @ e / np.sqrt(np.maximum(w, 1e-12 * w.max()))
    return float(z @ z)


def published_standard_vector(reg: Regressor, pub: PublishedParameters) -> np.ndarray:
    """(P,) the UR10e authors' parameters on this regressor's columns (needs all four joint terms)."""
    if reg.joint_terms != ("armature", "viscous", "coulomb", "offset"):
        raise ValueError("the published UR10e model needs armature, viscous, coulomb and offset columns")
    f = pub.friction
    return np.concatenate([pub.pinocchio_pi().ravel(), pub.rotor_inertia, f[:, 0], f[:, 1], f[:, 2]])


def run_pipeline(
    reg: Regressor,
    ident: list[Processed],
    valid: dict[str, Processed],
    out_dir: str | Path,
    signal: str = "current",
    gains: np.ndarray | None = None,
    unit: str = "A",
    options: PipelineOptions | None = None,
    reference: dict[str, np.ndarray | tuple[np.ndarray, np.ndarray]] | None = None,
    drive_gains: DriveGainResult | None = None,
    loaded_valid: dict[str, Processed] | None = None,
    instruments: list[Processed] | None = None,
) -> PipelineResult:
    """Identify on ``ident``, predict ``valid``, audit, reconstruct, write files into ``out_dir``.

    Args:
        reg: the regressor (robot + joint terms).
        ident: preprocessed identification runs; valid: name -> held-out runs.
        signal: name of the output signal in each :class:`Processed`.
        gains: (N,) drive gains [N m / A] when the output is current; None for torque.
        unit: output unit for the report.
        reference: name -> (P,) other standard parameter sets to compare (e.g. published),
            or name -> ((P,), (N,) its own drive gains) when it comes with its own gains.
        drive_gains: the identified gains (from :func:`identify_drive_gains`), written
            into ``rb_params.json`` and the report; ``gains`` should be its ``gains``.
        loaded_valid: held-out runs carrying the payload of ``drive_gains``: each model
            predicts them after fitting the payload's placement (9 values) on that run.
        instruments: for method "iv": one run per ``ident`` run on the same time grid, the
            commanded trajectory (q, qd, qdd) whose regressor is the instrument Z.
    """
    opt = options or PipelineOptions()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timing: dict[str, float] = {}
    t0 = time.perf_counter()
    base = compute_base_parameters(reg, opt.base_samples, opt.base_seed)
    timing["base_parameters"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    W, y, segments = _stack(reg, base, ident, signal, gains)
    Z = None
    if opt.method == "iv":
        if not instruments or len(instruments) != len(ident):
            raise ValueError("method 'iv' needs one instrument run (the commanded trajectory) per identification run")
        for p, z in zip(ident, instruments):
            if z.q.shape != p.q.shape:
                raise ValueError(f"instrument run {z.record.get('source')} has {z.q.shape}, its run {p.q.shape}")
        Z = np.vstack([base.columns(reg.matrix(z.q, z.qd, z.qdd, gains)) for z in instruments])
    timing["regressor"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = estimate(W, y, reg.n_dof, opt.method, Z=Z)
    dt = float(ident[0].record.get("target_dt_s", np.median(np.diff(ident[0].t))))
    hac_lags = max(1, int(round(opt.hac_lag_s / dt)))
    bread = fit.cov / fit.sigma2 if fit.method == "ols" and fit.sigma2 > 0 else None
    cov_hac = hac_covariance(W, y - W @ fit.theta, reg.n_dof, hac_lags, segments, bread=bread, instrument=Z)
    timing["estimate"] = time.perf_counter() - t0
    if opt.sdp_covariance not in ("hac", "ols"):
        raise ValueError(f"sdp_covariance must be 'hac' or 'ols'; got {opt.sdp_covariance!r}")
    t0 = time.perf_counter()
    domain = default_domain(reg)
    akw = dict(
        domain=domain,
        grid_points=opt.audit_grid,
        n_uniform=opt.audit_uniform,
        n_dense=opt.audit_dense,
        seeds=opt.audit_seeds,
    )
    audit_ls = audit_mass_matrix(reg, base.to_standard(fit.theta), **akw)
    timing["audit_ls"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rec = reconstruct_standard(
        reg,
        base,
        fit.theta,
        cov_hac if opt.sdp_covariance == "hac" else fit.cov,
        eps=opt.sdp_eps,
        mode=opt.sdp_mode,
        prior_rel_std=opt.prior_rel_std,
        prior_weight=opt.prior_weight,
        mass_upper_factor=opt.mass_upper_factor,
        mass_lower_factor=opt.mass_lower_factor,
    )
    timing["sdp"] = time.perf_counter() - t0
    e = base.to_base(rec.pi) - fit.theta
    d2 = {"ols": _mahalanobis(e, fit.cov), "hac": _mahalanobis(e, cov_hac)}
    consistency = {
        "base_dof": base.rank,
        "mahalanobis_ols_cov": d2["ols"],
        "p_value_ols_cov": chi2_sf(d2["ols"], base.rank),
        "mahalanobis_hac_cov": d2["hac"],
        "p_value_hac_cov": chi2_sf(d2["hac"], base.rank),
        "hac_lags_samples": hac_lags,
        "hac_over_ols_std_median": float(np.median(np.sqrt(np.diag(cov_hac)) / fit.std)),
        "sdp_covariance": opt.sdp_covariance,
        "link_masses": dict(zip(reg.link_names, rec.masses.tolist())),
        "prior_link_masses": dict(zip(reg.link_names, rec.prior_masses.tolist())),
    }
    t0 = time.perf_counter()
    audit_rec = audit_mass_matrix(reg, rec.pi, **akw)
    timing["audit_reconstructed"] = time.perf_counter() - t0

    # ----- held-out prediction
    t0 = time.perf_counter()
    models: dict[str, np.ndarray] = {"LS (base)": base.to_standard(fit.theta), "SDP (standard)": rec.pi}
    model_gains: dict[str, np.ndarray | None] = {m: gains for m in models}
    for name, ref in (reference or {}).items():
        pi_ref, g_ref = ref if isinstance(ref, tuple) else (ref, gains)
        models[name] = np.asarray(pi_ref, dtype=float)
        model_gains[name] = None if g_ref is None else np.asarray(g_ref, dtype=float)
    table: dict[str, dict[str, np.ndarray]] = {}
    sq: dict[str, list[np.ndarray]] = {m: [] for m in models}
    pngs = []
    for run_name, p in valid.items():
        Y = reg.matrix(p.q, p.qd, p.qdd)
        meas = p.signals[signal]
        preds = {}
        for m, pi in models.items():
            pr = (Y @ pi).reshape(-1, reg.n_dof)
            preds[m] = pr if model_gains[m] is None else pr / model_gains[m][None, :]
        table[run_name] = {m: rmse_per_joint(meas, pr) for m, pr in preds.items()}
        for m, pr in preds.items():
            sq[m].append((meas - pr) ** 2)
        if opt.plots:
            png = out / "plots" / f"{Path(run_name).stem}.png"
            plot_run(png, p.t, meas, preds, reg.robot.joint_names, unit, f"held-out {run_name}: measured vs predicted")
            pngs.append(str(png.relative_to(out)))
    pooled = {m: np.sqrt(np.mean(np.vstack(v), axis=0)) for m, v in sq.items() if v}
    loaded_table: dict[str, dict[str, np.ndarray]] = {}
    if loaded_valid:
        if drive_gains is None:
            raise ValueError("loaded_valid needs the drive_gains result (its payload mass and link)")
        cols, _ = payload_link_slice(reg, drive_gains.payload_link)
        for run_name, p in loaded_valid.items():
            meas = p.signals[signal]
            Y = reg.matrix(p.q, p.qd, p.qdd)  # once per run, shared by every model
            row, preds = {}, {}
            for m, pi in models.items():
                g = model_gains[m]
                psi = payload_from_regressor(Y, meas, pi, g, drive_gains.payload_mass, cols)
                preds[m] = current_from_regressor(Y, pi, g, psi, cols)
                row[m] = rmse_per_joint(meas, preds[m])
            loaded_table[run_name] = row
            if opt.plots:
                png = out / "plots" / f"{Path(run_name).stem}.png"
                plot_run(png, p.t, meas, preds, reg.robot.joint_names, unit,
                         f"held-out with payload {run_name}: measured vs predicted (placement fitted)")
                pngs.append(str(png.relative_to(out)))
    timing["validation"] = time.perf_counter() - t0

    # ----- files
    inertials = reg.link_inertials(rec.pi)
    nominal_path = save_nominal(out / "nominal_inertials.json", inertials, meta={"source": "rigid_body SDP"})
    payload = {
        "robot": reg.robot.name,
        "output": {
            "signal": signal,
            "unit": unit,
            "drive_gains": gains,
            "drive_gains_source": "identified (payload)" if drive_gains is not None else ("given" if gains is not None
                                                                                        else None),
        },
        "drive_gain_identification": drive_gains.summary() if drive_gains is not None else None,
        "regressor": {"param_names": reg.param_names, "options": asdict(reg.options)},
        "preprocessing": [p.record for p in ident],
        "base_parameters": {
            "n_base": base.rank,
            "n_standard": len(base.param_names),
            "names": base.names(),
            "groups": base.groups(),
            "unidentifiable": base.unidentifiable(),
            "qr": {"n_samples": base.n_samples, "seed": base.seed, "tol": base.tol},
        },
        "estimate": {**fit.summary(), "names": base.names(), "cov_hac": cov_hac, "std_hac": np.sqrt(np.diag(cov_hac)),
                     "hac_lags_samples": hac_lags},
        "audit_ls": audit_ls.summary(),
        "reconstruction": {
            **rec.summary(),
            "eps": opt.sdp_eps,
            "options": {k: getattr(opt, k) for k in ("sdp_mode", "prior_rel_std", "prior_weight", "mass_upper_factor",
                                                     "mass_lower_factor", "sdp_covariance", "hac_lag_s")},
            "consistency": consistency,
            "standard": dict(zip(reg.param_names, rec.pi.tolist())),
        },
        "audit_reconstructed": audit_rec.summary(),
        "link_inertials": {"links": {k: v for k, v in _inertials_json(inertials).items()}},
        "validation": {
            "rmse_per_run": table,
            "rmse_pooled": pooled,
            "rmse_loaded_payload_refit": loaded_table,
            "joint_names": reg.robot.joint_names,
        },
        "timing_s": timing,
    }
    rb_path = write_rb_params(out / "rb_params.json", payload)
    sections = [
        f"# Rigid-body identification report: {reg.robot.name}",
        f"- base parameters: {base.rank} of {len(base.param_names)} standard; method {fit.method}; "
        f"condition number {fit.cond:.1f}; residual RMS per joint [{unit}]: "
        + ", ".join(f"{v:.3f}" for v in fit.sigma_joint),
        f"- all-pose audit of the LS estimate: {'PASS' if audit_ls.passed else 'FAIL'} "
        f"({audit_ls.n_violations} of {audit_ls.n_poses} poses violate; min eigenvalue {audit_ls.min_eig:.4g}; "
        f"seeds {audit_ls.seeds})",
        f"- SDP reconstruction: mode {rec.mode} ({rec.status}, {rec.solver}), prior std {opt.prior_rel_std:g} x link "
        f"scale, weight {opt.prior_weight:g}, mass bounds x[{opt.mass_lower_factor}, {opt.mass_upper_factor}]; "
        f"audit {'PASS' if audit_rec.passed else 'FAIL'} (min eigenvalue {audit_rec.min_eig:.4g})",
        f"- consistency of its base parameters with the LS estimate (b = {base.rank}): Mahalanobis "
        f"{d2['hac']:.1f} under the HAC covariance (p = {consistency['p_value_hac_cov']:.3g}), "
        f"{d2['ols']:.1f} under the white-noise OLS covariance (p = {consistency['p_value_ols_cov']:.3g})",
        "## Link masses [kg]\n\n| link | URDF prior | reconstructed |\n|---|---|---|\n"
        + "\n".join(f"| {n} | {m0:.3f} | {m:.3f} |" for n, m0, m in zip(reg.link_names, rec.prior_masses, rec.masses)),
        "## Held-out prediction, pooled over all runs\n\n"
        + markdown_table({"all held-out": pooled}, reg.robot.joint_names, unit),
        "## Per run\n\n" + markdown_table(table, reg.robot.joint_names, unit),
        *_drive_gain_sections(reg, drive_gains, loaded_table, unit),
        "## Plots\n\n" + "\n".join(f"![{p}]({p})" for p in pngs),
    ]
    md = write_report(out / "report.md", sections)
    return PipelineResult(
        base=base,
        fit=fit,
        audit_ls=audit_ls,
        reconstruction=rec,
        audit_reconstructed=audit_rec,
        validation_rmse=table,
        pooled_rmse=pooled,
        cov_hac=cov_hac,
        loaded_rmse=loaded_table,
        consistency=consistency,
        timing_s=timing,
        files={"rb_params": str(rb_path), "nominal": str(nominal_path), "report": str(md)},
    )


def _drive_gain_sections(reg: Regressor, dg: DriveGainResult | None, loaded: dict, unit: str) -> list[str]:
    if dg is None:
        return []
    names = reg.robot.joint_names
    rows = "\n".join(
        f"| {n} | {k:.3f} | {'given' if fx else f'{s:.3f} ({r:.1f} %)'} | {ke:.3f} |"
        for n, k, s, r, fx, ke in zip(names, dg.gains, dg.std_hac, dg.rel_std_hac, dg.fixed, dg.equation_error_gains)
    )
    out = [
        f"## Drive gains, identified with a {dg.payload_mass:g} kg payload on {dg.payload_link}\n\n"
        f"Method {dg.method} ({dg.n_obs} rows, {dg.iterations} evaluations); residual RMS per joint [A]: "
        + ", ".join(f"{v:.3f}" for v in dg.sigma_joint)
        + ("\n\nWeakly identified (relative std above the threshold): " + ", ".join(dg.weak) if dg.weak else "")
        + "\n\n| joint | k [N m/A] | std (HAC) | equation-error k |\n|---|---|---|---|\n"
        + rows
        + "\n\nPayload centre of mass per placement [m, link frame]: "
        + "; ".join("(" + ", ".join(f"{c:.3f}" for c in com) + ")" for com in dg.payload_com),
    ]
    if loaded:
        out.append(
            "## Held-out runs with the payload (its placement fitted on each run, 9 values)\n\n"
            + markdown_table(loaded, names, unit)
        )
    return out


def _inertials_json(inertials) -> dict:
    return {
        k: {"mass": float(v.mass), "com": np.asarray(v.com).tolist(), "inertia": np.asarray(v.inertia).tolist()}
        for k, v in inertials.items()
    }
