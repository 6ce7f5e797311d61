"""Issue 45, end to end at CI size: a fit whose runs are long against --first_pass_s runs its search on windows, then
polishes on the full run from that answer, and lands at least as well as the direct fit (--first_pass_s 0) on the
same run. The twin is the demo's hidden truth (benchmarks/scaling.py's recorder, its CI size: 4 s of multiband, the
static-friction groups, 8 refinement iterations)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import scaling  # noqa: E402


def _fit(tmp: Path, csv: str, name: str, *extra: str, calls: list | None = None) -> Path:
    from isaaclab_sysid.jobs import fit_job
    from isaaclab_sysid.jobs.fit_args import FitArgs

    argv = dict(real_csv=[csv], fit_groups=scaling.CI_GROUPS, refine_iter=8, plots=False, quiet=True,
                log_dir=str(tmp / name))
    args = FitArgs.build(**argv)
    for flag, value in zip(extra[::2], extra[1::2]):
        setattr(args.search, flag, float(value))
    orig = fit_job._search

    def spy(a, p, log, run_dir=None, x0=None, refit=False):  # every search the job starts: where, from where
        if calls is not None:
            calls.append((None if run_dir is None else Path(run_dir), None if x0 is None else np.array(x0), refit,
                          [r.name for r in p.runs]))
        return orig(a, p, log, run_dir=run_dir, x0=x0, refit=refit)

    fit_job._search = spy
    try:
        return fit_job.run_fit(args, log=lambda s: None)
    finally:
        fit_job._search = orig


def test_first_pass_then_polish_lands_at_least_as_well_as_direct(tmp_path):
    csv = scaling.record(tmp_path / "twin", "multiband_4s", 4.0, "multiband")
    direct = _fit(tmp_path, csv, "direct", "first_pass_s", "0")
    assert not (direct / "first_pass.json").exists()
    calls: list = []
    two = _fit(tmp_path, csv, "two", "first_pass_s", "1.5", "first_pass_window_s", "0.75", calls=calls)
    summary = json.loads((two / "first_pass.json").read_text())
    assert len(summary["windows"]) == 2 and summary["window_total_s"] == pytest.approx(1.5, abs=0.01)
    # the first pass searched the windows only; the polish ran on the full run, from the first pass's answer
    first_calls = [c for c in calls if c[0] is not None and c[0].name == "first_pass"]
    assert first_calls and all(c[3] == ["multiband_4s_w0", "multiband_4s_w1"] for c in first_calls)
    polish = [c for c in calls if c[0] == two]
    assert len(polish) == 1 and polish[0][2] and polish[0][3] == ["multiband_4s"]
    first = json.loads((two / "first_pass" / "sysid_best_params.json").read_text())
    np.testing.assert_array_equal(polish[0][1], np.asarray(first["best_params"], dtype=float))
    # the polish improved on its start, and is at least as good as the direct fit on the same full run
    best_two = json.loads((two / "sysid_best_params.json").read_text())
    best_direct = json.loads((direct / "sysid_best_params.json").read_text())
    assert best_two["best_score"] <= summary["polish"]["start_loss"]
    assert best_two["best_score"] <= best_direct["best_score"] * 1.01, (best_two["best_score"],
                                                                        best_direct["best_score"])
    assert best_two["best_params_decoded"]["motor_delay_steps"] == scaling.truth_errors(best_two)["delay_true"]
    assert "first pass (first_pass.json)" in (two / "report.md").read_text()
    # --resume on the finished folder: both passes resume from their checkpoints, nothing is refitted, same answer
    from isaaclab_sysid.jobs import fit_job
    from isaaclab_sysid.jobs.fit_args import FitArgs

    lines: list[str] = []
    again = fit_job.run_fit(FitArgs.build(resume=str(two), quiet=True, plots=False), log=lines.append)
    assert again == two
    assert json.loads((two / "sysid_best_params.json").read_text())["best_params"] == best_two["best_params"]
    assert any(line.startswith(f"resuming {two / 'first_pass'}") for line in lines), lines


class _Killed(Exception):
    """Stands for a kill mid-polish (the process ends; what was checkpointed is on disk)."""


def test_a_two_pass_fit_killed_in_its_polish_resumes_to_the_uninterrupted_answer(tmp_path, monkeypatch):
    """Issue 45: a long fit killed in its polish resumes the polish from its checkpoint (the first pass's finished
    stages read back, not rerun) and ends with the bits of the fit that was never interrupted."""
    from isaaclab_sysid.fit import refine
    from isaaclab_sysid.jobs import fit_job
    from isaaclab_sysid.jobs.fit_args import FitArgs

    csv = scaling.record(tmp_path / "twin", "multiband_4s", 4.0, "multiband")
    passes = ("first_pass_s", "1.5", "first_pass_window_s", "0.75")
    orig_step, steps, kill = refine.LMRefiner.step, [], []

    def step(self, state):  # the polish is the refinement on the full run (the first pass's are on windows)
        if self.objective.runs[0].name == "multiband_4s":
            steps.append(state.iteration)
            if kill and len(steps) == kill[0]:
                raise _Killed()
        return orig_step(self, state)

    monkeypatch.setattr(refine.LMRefiner, "step", step)
    ref = _fit(tmp_path, csv, "ref", *passes)
    polish = list(steps)
    assert len(polish) >= 6, polish
    steps.clear()
    kill.append(6)  # killed in its 6th iteration, after the checkpoint of its 4th
    with pytest.raises(_Killed):
        _fit(tmp_path, csv, "killed", *passes)
    (killed,) = list((tmp_path / "killed").iterdir())
    assert (killed / "first_pass" / "sysid_best_params.json").exists()
    assert not (killed / "sysid_best_params.json").exists() and (killed / "checkpoint_0.json").exists()
    steps.clear()
    kill.clear()
    lines: list[str] = []
    again = fit_job.run_fit(FitArgs.build(resume=str(killed), quiet=True, plots=False), log=lines.append)
    assert again == killed
    assert any(line.startswith(f"resuming {killed / 'first_pass'}") for line in lines), lines
    assert steps == polish[4:], (steps, polish)  # the polish went on from its 4th iteration's checkpoint
    a = json.loads((ref / "sysid_best_params.json").read_text())
    b = json.loads((killed / "sysid_best_params.json").read_text())
    assert a["best_params"] == b["best_params"] and a["best_score"] == b["best_score"]
