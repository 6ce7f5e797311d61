"""report.html opens in a real browser (headless Chromium): the verdict at the top, every plot drawn, no console error.

CI installs Debian's chromium (.ci/run); elsewhere the test skips with the reason.
"""

from __future__ import annotations

import dataclasses
import html
import re
import shutil
import subprocess

import pytest
from conftest import make_run
from test_fit_fakes import FakeBackend

from isaaclab_sysid.evaluate.adequacy import assess
from isaaclab_sysid.evaluate.heldout import evaluate_params
from isaaclab_sysid.evaluate.html_report import HTML_FILE, convergence_figure, run_figures, write_html_report
from isaaclab_sysid.evaluate.report import fit_sections, render_markdown
from isaaclab_sysid.fit import CmaesFit, CmaesSettings, ParamSpace
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000"]


def _report(tmp_path):
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)
    runs = [make_run(n=60, seed=0), dataclasses.replace(make_run(n=50, seed=1), name="heldout")]
    fit = CmaesFit(ReplayObjective(space, FakeBackend(), runs[:1]), CmaesSettings(popsize=8, max_iter=3, seed=0))
    fit.run()
    result = fit.result()
    ev = evaluate_params(FakeBackend(), result, runs)
    result.adequacy = assess(runs, ev.rollouts, 1)
    fit_ev, held_ev = ev.split(1)
    sections = fit_sections(result, fit_ev, held_ev, 1.0)
    figs = [convergence_figure(fit.state.history)]
    for run, ro in zip(runs, ev.rollouts):
        figs += run_figures(run, ro.q[0], ro.q[1], space.joint_names)
    return result, sections, write_html_report(tmp_path, "System identification report", sections, figs), len(figs)


def test_markdown_and_html_carry_the_same_verdict_first(tmp_path):
    result, sections, path, _ = _report(tmp_path)
    md = render_markdown("r", sections)
    page = path.read_text()
    assert path.name == HTML_FILE and not re.search(r"<script[^>]*\bsrc=", page)  # self-contained: no external script
    verdict = result.adequacy.verdict
    assert md.index("## Model adequacy") < md.index("## Fitted parameters")
    assert page.index("Model adequacy") < page.index("Fitted parameters") and f"<b>{verdict}</b>" in page
    for m in result.adequacy.messages:
        assert html.escape(m.split(":")[0]) in page


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (CI installs Debian's chromium; "
                    "apt-get install chromium to run this here)")
def test_report_html_renders_every_plot_in_headless_chromium(tmp_path):
    result, _, path, n_figs = _report(tmp_path)
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", path.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert len(re.findall(r'class="plot-container plotly"', dom)) == n_figs  # plotly drew every figure
    assert result.adequacy.verdict in dom and "Model adequacy" in dom
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln]
    assert not [ln for ln in console if re.search(r"error|uncaught|exception", ln, re.I)], console


def test_a_misfit_reports_its_delay_as_the_models_optimum(tmp_path):
    """Issue 45: a misfit model moves its delay to absorb what it lacks; report.md must not state it as a measurement."""
    result, _, _, _ = _report(tmp_path)
    for verdict in ("adequate", "misfit"):
        result.adequacy = dataclasses.replace(result.adequacy, verdict=verdict)
        md = render_markdown("r", fit_sections(result))
        line = next(ln for ln in md.splitlines() if ln.startswith("Actuator delay:"))
        assert ("not a measurement of the actuator" in line) == (verdict == "misfit"), line
