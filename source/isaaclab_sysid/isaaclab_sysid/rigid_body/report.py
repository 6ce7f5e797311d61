"""Held-out report: measured vs predicted output per joint (PNG, Markdown), and ``report.md``'s sections."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_text
from isaaclab_sysid.rigid_body.feasibility import mass_sentence

if TYPE_CHECKING:  # type names only: the pipeline does not import this module
    from isaaclab_sysid.rigid_body.drive_gains import DriveGainResult
    from isaaclab_sysid.rigid_body.pipeline import RigidBodyIdentification


def plot_run(
    path: str | Path,
    t: np.ndarray,
    measured: np.ndarray,
    predictions: dict[str, np.ndarray],
    joint_names: tuple[str, ...],
    unit: str,
    title: str,
) -> Path:
    """One PNG: a panel per joint with the measured signal and every model's prediction (atomic write)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    n = measured.shape[1]
    fig, axes = plt.subplots((n + 1) // 2, 2, figsize=(12, 2.2 * ((n + 1) // 2)), sharex=True)
    for j, ax in enumerate(np.ravel(axes)[:n]):
        ax.plot(t - t[0], measured[:, j], "k-", lw=1.2, label="measured")
        for k, (name, pred) in enumerate(predictions.items()):
            ax.plot(t - t[0], pred[:, j], lw=0.9, ls=["-", "--", ":", "-."][k % 4], label=name)
        ax.set_ylabel(f"{joint_names[j]}\n[{unit}]", fontsize=7)
        ax.grid(alpha=0.3)
    np.ravel(axes)[0].legend(fontsize=7)
    for ax in np.ravel(axes)[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=90, format="png")
    finally:
        plt.close(fig)
    return path


def markdown_table(rows: dict[str, dict[str, np.ndarray]], joint_names: tuple[str, ...], unit: str) -> str:
    """Markdown table: one row per (run, model) with per-joint RMSE."""
    head = "| run | model | " + " | ".join(joint_names) + " |\n"
    head += "|---|---|" + "---|" * len(joint_names) + "\n"
    body = ""
    for run, models in rows.items():
        for model, r in models.items():
            body += f"| {run} | {model} | " + " | ".join(f"{v:.3f}" for v in r) + " |\n"
    return f"Per-joint RMSE [{unit}]\n\n" + head + body


def write_report(path: str | Path, sections: list[str]) -> Path:
    """Write the Markdown report atomically."""
    atomic_write_text(path, "\n\n".join(sections) + "\n")
    return Path(path)


def verdict(passed: bool) -> str:
    """"PASS" or "FAIL"."""
    return "PASS" if passed else "FAIL"


def summary_lines(res: RigidBodyIdentification) -> list[str]:
    """The report's opening bullets: base parameters and LS fit, both audits, SDP consistency."""
    base, fit, rec, opt, unit = res.base, res.fit, res.reconstruction, res.options, res.data.unit
    a_ls, a_rec, c = res.audit_ls, res.audit_reconstructed, res.consistency
    return [
        f"- base parameters: {base.rank} of {len(base.param_names)} standard; method {fit.method}; "
        f"condition number {fit.cond:.1f}; residual RMS per joint [{unit}]: "
        + ", ".join(f"{v:.3f}" for v in fit.sigma_joint),
        f"- all-pose audit of the LS estimate: {verdict(a_ls.passed)} "
        f"({a_ls.n_violations} of {a_ls.n_poses} poses violate; min eigenvalue {a_ls.min_eig:.4g}; "
        f"seeds {a_ls.seeds})",
        f"- SDP reconstruction: mode {rec.mode} ({rec.status}, {rec.solver}), prior std {opt.prior_rel_std:g} x link "
        f"scale, weight {opt.prior_weight:g}, mass bounds x[{opt.mass_lower_factor}, {opt.mass_upper_factor}]; "
        f"audit {verdict(a_rec.passed)} (min eigenvalue {a_rec.min_eig:.4g})",
        f"- consistency of its base parameters with the LS estimate (b = {base.rank}): Mahalanobis "
        f"{c.mahalanobis_conditioned_cov:.1f} under the conditioned HAC covariance the SDP uses by default "
        f"(p = {c.p_value_conditioned_cov:.3g}), {c.mahalanobis_hac_cov:.1f} under the HAC covariance as it is "
        f"(p = {c.p_value_hac_cov:.3g}), "
        f"{c.mahalanobis_ols_cov:.1f} under the white-noise OLS covariance (p = {c.p_value_ols_cov:.3g})",
    ]


def mass_section(res: RigidBodyIdentification) -> str:
    """The link-mass table: the prior, the SDP's value, the masses the data allow and whether they fix it."""
    reg, rec = res.regressor, res.reconstruction
    ranges = {r.link: r for r in res.mass_ranges}
    rows = []
    for n, m0, m in zip(reg.link_names, rec.prior_masses, rec.masses):
        r = ranges.get(n)
        allow = "" if r is None else r.text().split(" ", 1)[1]
        fixed = "" if r is None else ("yes" if r.fixed else "no: the prior's choice")
        rows.append(f"| {n} | {m0:.3f} | {m:.3f} | {allow} | {fixed} |")
    note = f"\n\n{mass_sentence(res.mass_ranges)}" if res.mass_ranges else ""
    return ("## Link masses [kg]\n\n| link | URDF prior | reconstructed | the data allow | fixed by the data |\n"
            "|---|---|---|---|---|\n" + "\n".join(rows) + note)


def report_sections(res: RigidBodyIdentification, pngs: list[str]) -> list[str]:
    """The sections of ``report.md`` (Markdown); ``pngs``: the plots, relative to the report."""
    reg, unit, held = res.regressor, res.data.unit, res.heldout
    names = reg.robot.joint_names
    return [
        f"# Rigid-body identification report: {reg.robot.name}",
        *summary_lines(res),
        mass_section(res),
        "## Held-out prediction, pooled over all runs\n\n" + markdown_table({"all held-out": held.pooled}, names, unit),
        "## Per run\n\n" + markdown_table(held.per_run, names, unit),
        *drive_gain_sections(names, res.data.drive_gains, held.loaded, unit),
        "## Plots\n\n" + "\n".join(f"![{p}]({p})" for p in pngs),
    ]


def drive_gain_sections(
    joint_names: tuple[str, ...], dg: DriveGainResult | None, loaded: dict[str, dict[str, np.ndarray]], unit: str
) -> list[str]:
    """The drive-gain table and the payload runs' RMSE (none without identified gains)."""
    if dg is None:
        return []
    rows = "\n".join(
        f"| {n} | {k:.3f} | {'given' if fx else f'{s:.3f} ({r:.1f} %)'} | {ke:.3f} |"
        for n, k, s, r, fx, ke in zip(joint_names, dg.gains, dg.std_hac, dg.rel_std_hac, dg.fixed,
                                      dg.equation_error_gains)
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
            + markdown_table(loaded, joint_names, unit)
        )
    return out
