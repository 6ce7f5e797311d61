"""The fit's report: one document (sections of paragraphs and tables) rendered as ``report.md`` and ``report.html``.

The verdicts come first (model adequacy, values at a search bound, the search stages'
convergence: a stage that did not converge is said out loud with the flag that gives it
more room), then the
fitted values, the loss per run and the scores of the fit and held-out runs.
``report.html`` (evaluate/html_report.py) carries the same sections plus
zoomable plots of real against sim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from isaaclab_sysid.evaluate.heldout import NO_BASELINE
from isaaclab_sysid.objective.param_space import GROUPS
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.utils.atomic import atomic_write_text
from isaaclab_sysid.fit.run_folder import REPORT_FILE



@dataclass
class Table:
    """A table: header cells and rows of cells (plain text)."""

    header: list[str]
    rows: list[list[str]]


@dataclass
class Section:
    """A titled section: paragraphs (str; a leading ``- `` makes a bullet) and tables, in order."""

    title: str
    blocks: list[str | Table] = field(default_factory=list)
    kind: str = ""  # "verdict" sections are highlighted in the HTML page


def eval_sections(title: str, result, joint_names: Sequence[str]) -> list[Section]:
    """Nominal-vs-fitted scores of an :class:`~isaaclab_sysid.evaluate.heldout.EvalResult`.

    A run that states no servo gains has no baseline (evaluate/heldout.py): its nominal cells say so
    (:data:`~isaaclab_sysid.evaluate.heldout.NO_BASELINE`) instead of a "diverged" nominal replay, and a note under
    the title names those runs. A diverged replay is flagged in either column.
    """
    summary = Table(["run", "loss nominal", "loss fitted", "q RMS all [mrad] nominal -> fitted",
                     "EE RMS [mm] nominal -> fitted"], [])
    per_joint = Table(["run", *joint_names], [])
    missing = []
    for i, (name, b, f) in enumerate(zip(result.runs, result.baseline, result.fitted)):
        flag = " (diverged)" if f.diverged else ""
        if not result.has_baseline(i):
            missing.append(name)
            summary.rows.append([name, NO_BASELINE, f"{f.loss:.4g}{flag}", f"- -> {f.q_rms_all_mrad:.2f}",
                                 f"- -> {f.ee_rms_mm:.2f}"])
            per_joint.rows.append([name, *(f"- / {y:.2f}" for y in f.q_rms_mrad)])
            continue
        b_flag = " (diverged)" if b.diverged else ""
        summary.rows.append([name, f"{b.loss:.4g}{b_flag}", f"{f.loss:.4g}{flag}",
                             f"{b.q_rms_all_mrad:.2f} -> {f.q_rms_all_mrad:.2f}", f"{b.ee_rms_mm:.2f} -> {f.ee_rms_mm:.2f}"])
        per_joint.rows.append([name, *(f"{x:.2f} / {y:.2f}" for x, y in zip(b.q_rms_mrad, f.q_rms_mrad))])
    note: list[str | Table] = [] if not missing else [
        f"{NO_BASELINE.capitalize()} ({', '.join(missing)}): their gains come from the fit, and the nominal model has "
        "no servo to replay them with (a servo at the nominal kp lets the arm fall). Only the fitted scores are shown."]
    return [Section(title, [*note, summary, "Per-joint position RMS [mrad], nominal / fitted:", per_joint])]


def verdict_sections(result: FitResult) -> list[Section]:
    """Model adequacy and values at a bound (said out loud, first)."""
    out = []
    a = result.adequacy
    if a is not None:
        blocks: list[str | Table] = [f"**{a.verdict}**"] + [f"- {m}" for m in a.messages]
        blocks.append(f"- noise floor {a.floor_mrad:.3g} mrad ({a.floor_source}); fit residual {a.residual_over_floor:.2f}x it"
                      + ("" if a.heldout_over_fit is None else f"; held-out / fit q RMS {a.heldout_over_fit:.2f}"))
        out.append(Section("Model adequacy", blocks, "verdict"))
    conv = convergence_section(result)
    if conv is not None:
        out.append(conv)
    hits = result.at_bounds()
    if hits:
        out.append(Section("Values at a search bound", [
            "These values sit within 1 % of a search bound: the data may want a value outside the box, or cannot pin "
            "it down. Their export ranges span the search bounds.", *(f"- {h.describe()}" for h in hits)], "verdict"))
    return out


def convergence_section(result: FitResult) -> Section | None:
    """Each search stage's convergence verdict (None for a result without verdicts, e.g. an older file).

    A verdict section when a stage did not converge; the headline says whether the stage that produced
    the result (the last one) converged.
    """
    verdicts = list(getattr(result, "convergence", None) or [])
    if not verdicts:
        return None
    bad = [v for v in verdicts if not v.converged]
    if not bad:
        return Section("Convergence", [f"- {v.line()}" for v in verdicts])
    last = verdicts[-1]
    head = ("**Not converged**: the stage that produced these values did not converge; they are a point on the "
            "way, not the optimum." if not last.converged else
            f"**Converged**, but an earlier stage did not (the {last.name} after it did).")
    return Section("Convergence", [head, *(f"- {v.line()}" for v in verdicts)], "verdict")


def search_summary(result: FitResult) -> str:
    """What the search did, in words: CMA-ES's population, generations and evaluations, or what the fast path did
    instead (its Levenberg-Marquardt tracks and iterations) when it finished without CMA-ES."""
    stages = [v.stage for v in result.convergence]
    cmaes = f"population {result.popsize}, {result.iterations} generations, {result.evaluations} evaluations"
    if "fast" not in stages:
        return cmaes
    if "cmaes" in stages:
        return f"fast path, then CMA-ES on its evidence: {cmaes}"
    ref = result.refine
    delays = sorted({t.delay for t in ref.tracks if t.delay is not None}) if ref is not None else []
    return ("fast path: Levenberg-Marquardt refinement from its starts"
            + (f", {ref.iterations} iterations, {len(ref.tracks)} tracks" if ref is not None else "")
            + (f" (delays {', '.join(map(str, delays))})" if delays else "")
            + "; no CMA-ES generations (its evidence did not call for them)")


def fit_sections(result: FitResult, fit_eval=None, heldout_eval=None, wall_s: float | None = None,
                 context: Sequence[str] = ()) -> list[Section]:
    """Every section of a fit's report (``context``: bullet lines about the replay, e.g. the state-age model)."""
    joint_names = result.space.joint_names
    head = [f"- backend: `{result.backend}`, {search_summary(result)}, seed {result.seed}",
            f"- best loss: {result.best_score:.6g}"]
    if wall_s is not None:
        head.append(f"- wall time: {wall_s:.1f} s")
    head += [f"- {c}" for c in context]
    params = Table(["parameter", *joint_names], [])
    for g in sorted((g for g in result.space.groups if g.per_joint), key=lambda g: list(GROUPS).index(g.name)):
        params.rows.append([f"{g.name} [{g.unit}]", *(f"{v:.4g}" for v in result.values[g.name])])
    pblocks: list[str | Table] = [params]
    if result.delay is not None:
        line = f"Actuator delay: **{result.delay} ticks** ({result.delay} ms)."
        if result.adequacy is not None and result.adequacy.verdict == "misfit":
            line += (" The verdict is misfit: this is the model's optimum, not a measurement of the actuator (a model "
                     "that lacks a term shifts its delay to absorb it, more firmly the more data); the intervals say "
                     "which delays the held-out runs prefer.")
        pblocks.append(line)
    loss = Table(["run", "weight", "L", "w*L"], [[n, f"{w:g}", f"{l:.4g}", f"{w * l:.4g}"]
                                              for (n, l), w in zip(result.loss_per_run.items(), result.traj_weights)])
    out = [Section("Summary", head), *verdict_sections(result), Section("Fitted parameters", pblocks),
           Section("Loss per fit run (best candidate)", [loss])]
    if fit_eval is not None:
        out += eval_sections("Fit runs: nominal vs fitted", fit_eval, joint_names)
    if heldout_eval is not None:
        out += eval_sections("Held-out runs: nominal vs fitted", heldout_eval, joint_names)
    return out


def render_markdown(title: str, sections: Sequence[Section], plots: Sequence[Path] = ()) -> str:
    """The sections as Markdown (plots as image links)."""
    lines = [f"# {title}", ""]
    for s in sections:
        if s.title != "Summary":
            lines += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, Table):
                lines.append("| " + " | ".join(b.header) + " |")
                lines.append("|" + "---|" * len(b.header))
                lines += ["| " + " | ".join(r) + " |" for r in b.rows]
            else:
                lines.append(b)
            lines.append("")
    if plots:
        lines += ["## Plots", ""]
        for p in plots:
            lines += [f"![{Path(p).stem}]({Path(p).name})", ""]
    return "\n".join(lines) + "\n"


def write_report(run_dir: str | Path, sections: Sequence[Section], plots: Sequence[Path] = (),
                 title: str = "System identification report") -> Path:
    """Write ``report.md`` in ``run_dir`` (atomically)."""
    path = Path(run_dir) / REPORT_FILE
    atomic_write_text(path, render_markdown(title, sections, plots))
    return path


def eval_report(out_dir: str | Path, result, joint_names: Sequence[str], plots: Sequence[Path] = (),
                extra: Sequence[Section] = ()) -> Path:
    """A Markdown summary of an ``--eval_params`` evaluation (``eval_report.md``; ``extra``: more sections)."""
    sections = [Section("Summary", [f"Parameters: `{result.source}`"]),
                *eval_sections("Nominal vs given parameters", result, joint_names), *extra]
    path = Path(out_dir) / "eval_report.md"
    atomic_write_text(path, render_markdown("Evaluation report", sections, plots))
    return path


__all__ = ["Section", "Table", "convergence_section", "eval_report", "eval_sections", "fit_sections", "render_markdown", "write_report"]
