"""The files of one identification: plots, ``nominal_inertials.json``, ``rb_params.json``, ``report.md``.

:func:`write_identification` writes them all into one folder from a
:class:`~isaaclab_sysid.rigid_body.pipeline.RigidBodyIdentification`;
:func:`rb_params_body` is the JSON body of ``rb_params.json`` (schema in docs/rigid_body.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.arm_model import NominalRefused, write_nominal
from isaaclab_sysid.robots.identified import ADMIT_FLAG, inertials_to_dict, write_rb_params
from isaaclab_sysid.rigid_body.carried import carried_evidence
from isaaclab_sysid.rigid_body.causes import ranked_causes
from isaaclab_sysid.rigid_body.decision import prediction_decision
from isaaclab_sysid.rigid_body.pipeline import RigidBodyIdentification
from isaaclab_sysid.rigid_body.report import plot_run, report_sections, write_report
from isaaclab_sysid.robots import LinkInertial

#: The SDP options recorded under ``reconstruction.options``.
SDP_OPTION_KEYS = (
    "sdp_mode",
    "prior_rel_std",
    "prior_weight",
    "mass_upper_factor",
    "mass_lower_factor",
    "sdp_covariance",
    "hac_lag_s",
)


@dataclass(frozen=True)
class OutputFiles:
    """Where :func:`write_identification` wrote its files.

    Attributes:
        rb_params: ``rb_params.json``; nominal: ``nominal_inertials.json`` (None when refused); report: ``report.md``.
        plots: the PNGs, relative to the output folder.
        engine_notes: one line per link whose inertia was raised to the engines' margin (:func:`write_identification`).
        nominal_refused: why no ``nominal_inertials.json`` was written (a body lighter than its fixed children), or None.
    """

    rb_params: Path
    nominal: Path | None
    report: Path
    plots: tuple[str, ...] = ()
    engine_notes: tuple[str, ...] = ()
    nominal_refused: str | None = None

    def named(self) -> dict[str, Path]:
        """name -> path of the result files written (the order the CLI prints them)."""
        out = {"rb_params": self.rb_params, "nominal": self.nominal, "report": self.report}
        return {k: v for k, v in out.items() if v is not None}


#: Below this p-value the SDP set's consistency test with the LS estimate fails: a warning naming the joints that
#: differ, not a rejection (:mod:`.decision`: only a measurably worse prediction blocks the set).
CONSISTENCY_ALPHA = 1e-3


def nominal_verdict(res: RigidBodyIdentification, facts: dict[str, str] | None = None) -> dict:
    """Whether ``nominal_inertials.json`` may be used, and why (issue 43).

    Blocked (``usable: false``) when the SDP set predicts torque measurably worse than the LS
    (:func:`.decision.prediction_decision`, on the held-out runs, else the identification runs, said as such), when
    it fails the all-pose audit, or when the data say the signal's gravity is the other way (the LS itself is then
    wrong). A failed consistency test (p below :data:`CONSISTENCY_ALPHA` under the covariance the SDP used) is a
    warning naming the joints that differ. Every cause is tested where it can be and ranked (:mod:`.causes`).

    Args:
        res: the identification.
        facts: what the signal was taken to contain and where from (``{"gravity_in_signal": ...}``).
    Returns:
        ``{"usable", "reason", "test", "decision", "causes", "likely_causes", "warnings", "warning", "carries",
        "carried_evidence"}``, written into both files: ``causes`` every cause ranked with its status, evidence and
        fix; ``likely_causes`` their lines when blocked (empty when usable); ``warnings`` the failed consistency
        test and the supported causes when usable (``warning``: the first).
    """
    c, reg = res.consistency, res.regressor
    names, unit = reg.robot.joint_names, res.data.unit
    p, d2 = {
        "hac_conditioned": (c.p_value_conditioned_cov, c.mahalanobis_conditioned_cov),
        "hac": (c.p_value_hac_cov, c.mahalanobis_hac_cov),
        "ols": (c.p_value_ols_cov, c.mahalanobis_ols_cov),
    }[c.sdp_covariance]
    test = (f"SDP consistency with the LS estimate: Mahalanobis {d2:.1f} on {c.base_dof} dof under the "
            f"{c.sdp_covariance} covariance, p {p:.3g} (a warning below {CONSISTENCY_ALPHA:g})")
    decision = prediction_decision(res)
    evidence = carried_evidence(reg.robot, dict(zip(reg.link_names, res.reconstruction.masses.tolist())))
    causes = ranked_causes(res, evidence, (facts or {}).get("gravity_in_signal", ""))
    gravity = next(x for x in causes if x.key == "gravity")
    problems = []
    if decision.blocked:
        problems.append(f"the physical (SDP) link inertials predict torque measurably worse than the least-squares "
                        f"estimate: {decision.sentence(unit)}; joints that differ: {decision.joints_text(names, unit)}")
    if not res.audit_reconstructed.passed:
        problems.append("the SDP set fails the all-pose audit (M(q) not positive definite somewhere)")
    if gravity.status == "supported":
        problems.append(f"the data say the signal's gravity is the other way ({gravity.evidence['ratio']:.2f}x the "
                        "residual flipped): the least-squares estimate itself is wrong")
    warnings = []
    if not p >= CONSISTENCY_ALPHA:
        warnings.append(f"the SDP set is statistically inconsistent with the LS estimate (p {p:.3g}) under a covariance "
                        f"that autocorrelated residuals and model error make optimistic; {decision.sentence(unit)}, "
                        f"not blocked; joints that differ: {decision.joints_text(names, unit)}")
    supported = [x for x in causes if x.status == "supported"]
    if not problems:
        warnings += [x.line() for x in supported]
    rests = (f"decided on the {decision.rests_on}: the SDP set is blocked only when it predicts torque measurably "
             "worse than the LS")
    out = {"usable": not problems, "reason": "; ".join(problems) if problems else f"{rests}; {decision.sentence(unit)}",
           "test": test, "decision": decision.summary(names), "causes": [x.summary() for x in causes],
           "likely_causes": [x.line() for x in causes] if problems else [], "warnings": warnings,
           "carries": reg.robot.carries}
    if warnings:
        out["warning"] = warnings[0]
    if evidence is not None:
        out["carried_evidence"] = evidence.summary()
    return out


def write_identification(res: RigidBodyIdentification, out_dir: str | Path, verdict: dict | None = None) -> OutputFiles:
    """Write the plots (when ``res.options.plots``), the inertial override, ``rb_params.json``
    and the report into ``out_dir`` (created); every file atomically.

    The override holds each moving body's inertials (fixed children merged in), raised where needed so that
    every link the engines build from it passes their inertia check with margin
    (:func:`~isaaclab_sysid.arm_model.engine_ready_bodies`; the change is recorded and returned); ``verdict``
    (default :func:`nominal_verdict`) marks whether it may be used."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    verdict = nominal_verdict(res) if verdict is None else verdict
    pngs = write_plots(res, out) if res.options.plots else []
    robot, bodies = res.regressor.robot, res.regressor.link_inertials(res.reconstruction.pi)
    meta = {"source": "rigid_body SDP", "robot": robot.name, "carries": robot.carries}
    try:
        nominal, notes = write_nominal(out / "nominal_inertials.json", robot, bodies, meta=meta, verdict=verdict)
        inertials, refused = load_written(nominal), None
    except NominalRefused as exc:
        nominal, notes, inertials, refused = None, [], None, str(exc)
    body = rb_params_body(res, inertials)
    body["verdict"] = verdict
    if refused is not None:
        body["link_inertials"] = None
        body["link_inertials_refused"] = refused
    elif notes:
        body["link_inertials"]["engine_adjustments"] = notes
    rb_params = write_rb_params(out / "rb_params.json", body)
    report = write_report(out / "report.md", [*report_sections(res, pngs), verdict_section(verdict)])
    return OutputFiles(rb_params, nominal, report, tuple(pngs), tuple(notes), refused)


def load_written(path: Path) -> dict[str, LinkInertial]:
    """The bodies as written (read back by the readers' own reader, whatever the verdict)."""
    from isaaclab_sysid.robots.identified import load_nominal

    return dict(load_nominal(path, admit_rejected=True))


def verdict_lines(verdict: dict, files: OutputFiles) -> list[str]:
    """The verdict as printed: one line, the warnings, then every cause ranked with its status and fix when blocked."""
    refused = [f"no nominal_inertials.json: {files.nominal_refused}"] if files.nominal_refused else []
    warn = [f"warning: {w}" for w in verdict.get("warnings", [])]
    if verdict["usable"]:
        return [f"verdict: usable ({verdict['reason']}). {verdict['test']}"] + warn + refused
    where = (f"{files.nominal} is marked not to be used (--nominal refuses it unless {ADMIT_FLAG})"
             if files.nominal is not None else "no nominal_inertials.json was written")
    return ([f"verdict: REJECTED: {verdict['reason']}. {where}. Causes, tested and ranked (supported, inconclusive, "
             "untested, refuted):"] + [f"  - {c}" for c in verdict["likely_causes"]] + warn + refused)


def verdict_section(verdict: dict) -> str:
    """``report.md``'s verdict: the decision, the warnings and every cause ranked with its status and fix."""
    head = "usable" if verdict["usable"] else "REJECTED"
    rows = "\n".join(f"| {i + 1} | {c['key']} | {c['status']} | {c['text']} | {c['fix']} |"
                      for i, c in enumerate(verdict.get("causes", [])))
    warns = "".join(f"\n- warning: {w}" for w in verdict.get("warnings", []))
    return (f"## Verdict: {head}\n\n{verdict['reason']}\n\n{verdict['test']}{warns}\n\n"
            "### Causes, tested against the data and ranked\n\n| rank | cause | status | evidence | fix |\n"
            "|---|---|---|---|---|\n" + rows)


def write_plots(res: RigidBodyIdentification, out: Path) -> list[str]:
    """One PNG per held-out run under ``out/plots`` (measured vs every model); paths relative to ``out``."""
    pngs = []
    for run in res.heldout.runs:
        png = out / "plots" / f"{Path(run.name).stem}.png"
        title = (
            f"held-out with payload {run.name}: measured vs predicted (placement fitted)"
            if run.payload_refit
            else f"held-out {run.name}: measured vs predicted"
        )
        plot_run(png, run.t, run.measured, run.predictions, res.regressor.robot.joint_names, res.data.unit, title)
        pngs.append(str(png.relative_to(out)))
    return pngs


def _output_entry(res: RigidBodyIdentification) -> dict:
    """``rb_params.json["output"]``: the signal, its unit and the drive gains with their source."""
    data = res.data
    if data.drive_gains is not None:
        source = "identified (payload)"
    else:
        source = "given" if data.gains is not None else None
    return {"signal": data.signal, "unit": data.unit, "drive_gains": data.gains, "drive_gains_source": source}


def _base_parameters_entry(res: RigidBodyIdentification) -> dict:
    """``rb_params.json["base_parameters"]``: rank, names, groups and the QR's settings."""
    base = res.base
    return {
        "n_base": base.rank,
        "n_standard": len(base.param_names),
        "names": base.names(),
        "groups": base.groups(),
        "unidentifiable": base.unidentifiable(),
        "qr": {"n_samples": base.n_samples, "seed": base.seed, "tol": base.tol},
    }


def rb_params_body(res: RigidBodyIdentification, inertials: dict[str, LinkInertial] | None) -> dict:
    """The body of ``rb_params.json`` (schema tag added by :func:`write_rb_params`);
    ``inertials`` are the reconstruction's link inertials as written to ``nominal_inertials.json`` (None: refused)."""
    reg, fit, rec, opt, data = res.regressor, res.fit, res.reconstruction, res.options, res.data
    dg = data.drive_gains
    return {
        "robot": reg.robot.name,
        "robot_config": None if reg.robot.config.source is None else str(reg.robot.config.source),
        "carries": reg.robot.carries,
        "output": _output_entry(res),
        "drive_gain_identification": dg.summary() if dg is not None else None,
        "regressor": {"param_names": reg.param_names, "options": asdict(reg.options)},
        "preprocessing": [p.record for p in data.ident],
        "base_parameters": _base_parameters_entry(res),
        "estimate": {**fit.summary(), "names": res.base.names(), "cov_hac": res.cov_hac,
                     "std_hac": np.sqrt(np.diag(res.cov_hac)), "hac_lags_samples": res.hac_lags},
        "audit_ls": res.audit_ls.summary(),
        "reconstruction": {
            **rec.summary(),
            "eps": opt.sdp_eps,
            "options": {k: getattr(opt, k) for k in SDP_OPTION_KEYS},
            "consistency": res.consistency.summary(),
            "mass_ranges": {r.link: r.summary() for r in res.mass_ranges},
            "standard": dict(zip(reg.param_names, rec.pi.tolist())),
        },
        "audit_reconstructed": res.audit_reconstructed.summary(),
        "link_inertials": None if inertials is None else {"links": inertials_to_dict(inertials)["links"]},
        "validation": {
            "rmse_per_run": res.heldout.per_run,
            "rmse_pooled": res.heldout.pooled,
            "rmse_loaded_payload_refit": res.heldout.loaded,
            "joint_names": reg.robot.joint_names,
        },
        "timing_s": res.timing_s,
    }
