"""``report.html``: the report's sections and zoomable plots of real against sim, in one self-contained page.

The page embeds plotly.js once (no network needed to open it) and one figure per
plot: convergence, and per run the joint positions (real, nominal, fitted), each joint
with its error panels (sim - real in mrad, nominal and fitted, each on its own axis). Long 1 kHz runs are decimated to at most ``max_points`` samples
per trace for the page (the CSV outputs keep every sample).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.evaluate.heldout import NO_BASELINE
from isaaclab_sysid.evaluate.report import Section, Table
from isaaclab_sysid.utils.atomic import atomic_write_text
from isaaclab_sysid.fit.run_folder import HTML_FILE


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
section.verdict { border-left: 6px solid #c60; background: #fff6ee; padding: 0.3em 1em; margin: 1em 0; }
section.verdict.adequate { border-color: #393; background: #f2fbf2; }
.plot { margin: 1em 0; }
"""


def _block_html(b: str | Table) -> str:
    if isinstance(b, Table):
        head = "".join(f"<th>{html.escape(c)}</th>" for c in b.header)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in b.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    text = html.escape(b)
    while "**" in text:  # the only Markdown the sections use besides bullets
        text = text.replace("**", "<b>", 1).replace("**", "</b>", 1)
    text = text.replace("`", "")
    return f"<li>{text[2:]}</li>" if b.startswith("- ") else f"<p>{text}</p>"


def _section_html(s: Section) -> str:
    parts, items = [], []
    for b in s.blocks:
        h = _block_html(b)
        if h.startswith("<li>"):
            items.append(h)
            continue
        if items:
            parts.append("<ul>" + "".join(items) + "</ul>")
            items = []
        parts.append(h)
    if items:
        parts.append("<ul>" + "".join(items) + "</ul>")
    cls = s.kind + (" adequate" if s.kind == "verdict" and any("<b>adequate</b>" in p for p in parts) else "")
    return f'<section class="{cls}"><h2>{html.escape(s.title)}</h2>{"".join(parts)}</section>'


def _stride(n: int, max_points: int) -> int:
    return max(1, int(np.ceil(n / max_points)))


def run_figures(run: Run, q_nominal: np.ndarray | None, q_fitted: np.ndarray, joint_names: Sequence[str],
                max_points: int = 2000) -> list:
    """One plotly figure of a run, a row per joint: q real/nominal/fitted [rad], then the error panels sim - real
    [mrad] of the nominal and of the fitted parameters, each on its own axis (a 0.1 mrad fitted error fills its
    panel beside a 50 mrad nominal one), RMS in the panel titles.

    ``q_nominal``: (T, N) [rad], or None for a run without a baseline (it states no servo gains:
    ``EvalResult.baseline_q``); its nominal traces are then left out and the nominal panels say why."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    n = run.n_dof
    k = _stride(run.n_samples, max_points)
    t = run.t[::k]
    err = {"fitted": (q_fitted - run.q) * 1e3}
    if q_nominal is not None:
        err["nominal"] = (q_nominal - run.q) * 1e3
    rms = {name: np.sqrt(np.nanmean(e**2, axis=0)) for name, e in err.items()}
    titles = []
    for j, name in enumerate(joint_names):
        titles += [f"{name} q [rad]", f"nominal sim - real [mrad], RMS {rms['nominal'][j]:.3g}" if q_nominal is not None
                   else f"nominal: {NO_BASELINE}", f"fitted sim - real [mrad], RMS {rms['fitted'][j]:.3g}"]
    fig = make_subplots(rows=n, cols=3, shared_xaxes=True, column_widths=[0.4, 0.3, 0.3], subplot_titles=titles,
                        horizontal_spacing=0.06, vertical_spacing=0.3 / n)
    styles = {"real": dict(color="black"), "nominal": dict(color="#1f77b4", dash="dot"), "fitted": dict(color="#d62728")}
    for j in range(n):
        traces = [("real", run.q[::k, j]), ("fitted", q_fitted[::k, j])]
        if q_nominal is not None:
            traces.insert(1, ("nominal", q_nominal[::k, j]))
        for name, y in traces:
            fig.add_trace(go.Scatter(x=t, y=y, name=name, legendgroup=name, showlegend=j == 0, line=styles[name]),
                          row=j + 1, col=1)
        for col, name in ((2, "nominal"), (3, "fitted")):
            if name not in err:
                continue
            fig.add_trace(go.Scatter(x=t, y=err[name][::k, j], name=f"{name} sim - real", legendgroup=name,
                                     showlegend=False, line=dict(color=styles[name]["color"], width=1)), row=j + 1, col=col)
    fig.update_annotations(font_size=11)
    fig.update_layout(height=190 * n, title=f"{run.name}: real vs sim, and sim - real per parameter set [mrad]",
                      margin=dict(t=70, b=30))
    return [fig]


def convergence_figure(history: Sequence) -> object:
    """Best, median and best-so-far loss per CMA-ES generation (log scale)."""
    import plotly.graph_objects as go

    it = [h.iteration for h in history]
    fig = go.Figure()
    for name, ys in (("median", [h.median for h in history]), ("generation best", [h.best for h in history]),
                     ("best so far", [h.best_ever for h in history])):
        fig.add_trace(go.Scatter(x=it, y=ys, name=name, mode="lines+markers"))
    fig.update_layout(height=360, title="convergence", xaxis_title="generation", yaxis_title="loss", yaxis_type="log")
    return fig


def write_html_report(out_dir: str | Path, title: str, sections: Sequence[Section], figures: Sequence) -> Path:
    """Write the self-contained ``report.html`` (plotly.js inlined once) atomically."""
    body = [_section_html(s) for s in sections]
    for i, fig in enumerate(figures):
        body.append('<div class="plot">' + fig.to_html(full_html=False, include_plotlyjs=(i == 0),
                                                      config={"responsive": True}, div_id=f"plot{i}") + "</div>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(body)}</body></html>")
    path = Path(out_dir) / HTML_FILE
    atomic_write_text(path, page)
    return path
