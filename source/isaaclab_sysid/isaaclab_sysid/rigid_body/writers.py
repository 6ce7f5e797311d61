"""The files of one identification: plots, ``nominal_inertials.json``, ``rb_params.json``, ``report.md``.

:func:`write_identification` writes them all into one folder from a
:class:`~isaaclab_sysid.rigid_body.pipeline.RigidBodyIdentification`;
:func:`rb_params_body` is the JSON body of ``rb_params.json`` (schema in docs/rigid_body.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.rigid_body.io import inertials_to_dict, save_nominal, write_rb_params
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
        rb_params: ``rb_params.json``; nominal: ``nominal_inertials.json``; report: ``report.md``.
        plots: the PNGs, relative to the output folder.
    """

    rb_params: Path
    nominal: Path
    report: Path
    plots: tuple[str, ...] = ()

    def named(self) -> dict[str, Path]:
        """name -> path of the three result files (the order the CLI prints them)."""
        return {"rb_params": self.rb_params, "nominal": self.nominal, "report": self.report}


def write_identification(res: RigidBodyIdentification, out_dir: str | Path) -> OutputFiles:
    """Write the plots (when ``res.options.plots``), the inertial override, ``rb_params.json``
    and the report into ``out_dir`` (created); every file atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pngs = write_plots(res, out) if res.options.plots else []
    inertials = res.regressor.link_inertials(res.reconstruction.pi)
    nominal = save_nominal(out / "nominal_inertials.json", inertials, meta={"source": "rigid_body SDP"})
    rb_params = write_rb_params(out / "rb_params.json", rb_params_body(res, inertials))
    report = write_report(out / "report.md", report_sections(res, pngs))
    return OutputFiles(rb_params, nominal, report, tuple(pngs))


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


def rb_params_body(res: RigidBodyIdentification, inertials: dict[str, LinkInertial]) -> dict:
    """The body of ``rb_params.json`` (schema tag added by :func:`write_rb_params`);
    ``inertials`` are the reconstruction's link inertials (``Regressor.link_inertials``)."""
    reg, fit, rec, opt, data = res.regressor, res.fit, res.reconstruction, res.options, res.data
    dg = data.drive_gains
    return {
        "robot": reg.robot.name,
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
            "standard": dict(zip(reg.param_names, rec.pi.tolist())),
        },
        "audit_reconstructed": res.audit_reconstructed.summary(),
        "link_inertials": {"links": inertials_to_dict(inertials)["links"]},
        "validation": {
            "rmse_per_run": res.heldout.per_run,
            "rmse_pooled": res.heldout.pooled,
            "rmse_loaded_payload_refit": res.heldout.loaded,
            "joint_names": reg.robot.joint_names,
        },
        "timing_s": res.timing_s,
    }
