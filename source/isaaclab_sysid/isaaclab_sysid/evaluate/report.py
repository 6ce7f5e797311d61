"""The Markdown summary of a fit (and of held-out evaluations)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from isaaclab_sysid.fit.result import FitResult
from isaaclab_sysid.utils.atomic import atomic_write_text

REPORT_FILE = "report.md"
#: order of the per-joint groups in the parameter table
_REPORT_ORDER = ("armature", "friction", "viscous", "mu_static", "dynamic_ratio")


def eval_section(title: str, result, joint_names: Sequence[str]) -> list[str]:
    lines = [f"## {title}", ""]
    lines.append("| run | loss nominal | loss fitted | q RMS all [mrad] nominal -> fitted | EE RMS [mm] nominal -> fitted |")
    lines.append("|---|---|---|---|---|")
    for name, b, f in zip(result.runs, result.baseline, result.fitted):
        flag = " (diverged)" if f.diverged else ""
        lines.append(
            f"| {name} | {b.loss:.4g} | {f.loss:.4g}{flag} | {b.q_rms_all_mrad:.2f} -> {f.q_rms_all_mrad:.2f} | "
            f"{b.ee_rms_mm:.2f} -> {f.ee_rms_mm:.2f} |"
        )
    lines.append("")
    lines.append("Per-joint position RMS [mrad], nominal / fitted:")
    lines.append("")
    lines.append("| run | " + " | ".join(joint_names) + " |")
    lines.append("|---|" + "---|" * len(joint_names))
    for name, b, f in zip(result.runs, result.baseline, result.fitted):
        cells = [f"{x:.2f} / {y:.2f}" for x, y in zip(b.q_rms_mrad, f.q_rms_mrad)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def write_report(
    run_dir: str | Path,
    result: FitResult,
    fit_eval=None,
    heldout_eval=None,
    plots: Sequence[Path] = (),
    wall_s: float | None = None,
) -> Path:
    """Write ``report.md`` in ``run_dir``: the fitted values, the loss per run, scores and plots."""
    run_dir = Path(run_dir)
    joint_names = result.space.joint_names
    lines = ["# System identification report", ""]
    lines.append(f"- backend: `{result.backend}`, population {result.popsize}, "
                 f"{result.iterations} generations, {result.evaluations} evaluations, seed {result.seed}")
    lines.append(f"- best loss: {result.best_score:.6g}")
    if wall_s is not None:
        lines.append(f"- wall time: {wall_s:.1f} s")
    lines.append("")
    lines.append("## Fitted parameters")
    lines.append("")
    lines.append("| parameter | " + " | ".join(joint_names) + " |")
    lines.append("|---|" + "---|" * len(joint_names))
    for g in sorted((g for g in result.space.groups if g.per_joint), key=lambda g: _REPORT_ORDER.index(g.name)):
        lines.append(f"| {g.name} [{g.unit}] | " + " | ".join(f"{v:.4g}" for v in result.values[g.name]) + " |")
    if result.delay is not None:
        lines.append("")
        lines.append(f"Actuator delay: **{result.delay} ticks** ({result.delay} ms).")
    lines.append("")
    lines.append("## Loss per fit run (best candidate)")
    lines.append("")
    lines.append("| run | weight | L | w*L |")
    lines.append("|---|---|---|---|")
    for (name, l), w in zip(result.loss_per_run.items(), result.traj_weights):
        lines.append(f"| {name} | {w:g} | {l:.4g} | {w * l:.4g} |")
    lines.append("")
    if fit_eval is not None:
        lines += eval_section("Fit runs: nominal vs fitted", fit_eval, joint_names)
    if heldout_eval is not None:
        lines += eval_section("Held-out runs: nominal vs fitted", heldout_eval, joint_names)
    if plots:
        lines.append("## Plots")
        lines.append("")
        for p in plots:
            lines.append(f"![{Path(p).stem}]({Path(p).name})")
            lines.append("")
    path = run_dir / REPORT_FILE
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def eval_report(out_dir: str | Path, result, joint_names: Sequence[str], plots: Sequence[Path] = ()) -> Path:
    """A Markdown summary of an ``--eval_params`` evaluation (``eval_report.md``)."""
    lines = ["# Evaluation report", "", f"Parameters: `{result.source}`", ""]
    lines += eval_section("Nominal vs given parameters", result, joint_names)
    for p in plots:
        lines.append(f"![{Path(p).stem}]({Path(p).name})")
        lines.append("")
    path = Path(out_dir) / "eval_report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


__all__ = ["eval_report", "write_report"]
