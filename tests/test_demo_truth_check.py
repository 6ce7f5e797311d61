"""scripts/demo.py's last step, the checks against the twin's hidden truth, on a fit folder made here (the demo's
fit itself takes minutes: ``make demo``). It reads the export's ``sysid_dr.json`` through the typed record
(export/record.py: DrRecord), not as a raw dict."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from isaaclab_sysid.export.record import DelayRow, DrRecord, SpanRow
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.objective.adequacy_record import Adequacy
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.paths import REPO_ROOT


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("_demo_script", REPO_ROOT / "scripts" / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BOUNDS = {"armature": (0.0, 0.5), "mu_static": (0.0, 5.0), "dynamic_ratio": (0.0, 1.0),
          "stribeck_velocity": (0.01, 0.2), "viscous": (0.0, 2.0), "delay": (0, 4)}


def _fit_dir(tmp_path, demo, widen=None, held_mrad=0.01, unreliable=None, bounds=BOUNDS):
    """A fit folder at the truth: sysid_best_params.json (noise floor from repeats, 0.01 mrad), export/sysid_dr.json
    with a +-10 % range about every true value (``widen``: label -> (lower, upper) instead) and eval_result.json."""
    truth = demo.truth_values()
    space = ParamSpace.from_bounds(bounds, 7)
    values = {g: (np.int64(int(truth[g][0])) if g == "delay" else np.asarray(truth[g], dtype=float)) for g in BOUNDS}
    adequacy = Adequacy(verdict="adequate", messages=[], heldout_over_fit=1.0, floor_mrad=0.01, floor_source="repeats",
                        residual_over_floor=1.0, runs=[])
    result = FitResult(space=space, best_x=space.normalize(values), values=values, best_score=0.0, run_names=["a"],
                       weighted_loss=np.zeros(1), traj_weights=np.ones(1), adequacy=adequacy)
    tmp_path.mkdir(parents=True, exist_ok=True)
    RunFolder(tmp_path).write_result(result)
    ranges, labels = {}, {}
    for e in space.entries():
        v = float(truth[e.group][0 if e.joint is None else space.joint_names.index(e.joint)])
        lo, hi = (widen or {}).get(e.label, (0.9 * v, 1.1 * v))
        ranges[e.label] = SpanRow(v, lo, hi)
        labels.setdefault(e.group, []).append(e.label)
    record = DrRecord(joint_names=list(space.joint_names), fitted={g: list(map(float, np.atleast_1d(v)))
                                                                   for g, v in values.items() if g != "delay"},
                      labels_per_joint=labels, intervals=dict(ranges), ranges=ranges,
                      delay=DelayRow(float(truth["delay"][0])), meta={"unreliable": unreliable or {}})
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "sysid_dr.json").write_text(json.dumps(record.to_json()))
    (tmp_path / "eval_result.json").write_text(json.dumps({"runs": {demo.DEMO_HELDOUT: {"fitted": {"q_rms_all_mrad": held_mrad}}}}))
    return tmp_path


def test_every_check_passes_at_the_truth(tmp_path, demo, capsys):
    assert demo.check_against_truth(_fit_dir(tmp_path, demo))
    out = capsys.readouterr().out
    assert out.count("  PASS  ") == 4 and "FAIL" not in out and "(36/36)" in out


def test_a_true_value_outside_its_range_fails_and_is_named(tmp_path, demo, capsys):
    assert not demo.check_against_truth(_fit_dir(tmp_path, demo, widen={"viscous[j3]": (0.0, 0.1)}))
    out = capsys.readouterr().out
    assert "  FAIL  every true value inside its exported range (35/36): outside viscous[j3] truth 0.29 range [0.0, 0.1]" in out


def test_an_unbounded_range_end_holds_the_truth(tmp_path, demo, capsys):
    """A range end written as null (SpanRow: unbounded on that side) is read as such, not as a number."""
    assert demo.check_against_truth(_fit_dir(tmp_path, demo, widen={"armature[j1]": (None, 1.0), "viscous[j2]": (0.0, None)}))
    assert "FAIL" not in capsys.readouterr().out


def test_held_out_error_above_the_bar_fails(tmp_path, demo, capsys):
    # the bar: 1.5 x the RMS between the repeats = 1.5 x sqrt(2) x 0.01 mrad = 0.0212 mrad
    assert not demo.check_against_truth(_fit_dir(tmp_path, demo, held_mrad=0.03))
    assert "  FAIL  held-out q RMS 0.030 mrad" in capsys.readouterr().out


def test_a_value_at_a_bound_passes_only_when_the_export_flags_it(tmp_path, demo, capsys):
    """viscous[j7] = 0.05 sits within 1 % of a [0, 5] box's lower end: a FAIL unless sysid_dr.json's ``unreliable``
    section (DrRecord.meta) names it."""
    wide = {**BOUNDS, "viscous": (0.0, 5.0)}
    assert not demo.check_against_truth(_fit_dir(tmp_path / "a", demo, bounds=wide))
    assert "  FAIL  no value at a bound unless flagged (at a bound: ['viscous[j7]'])" in capsys.readouterr().out
    flagged = {"viscous[j7]": "at its lower bound 0"}
    assert demo.check_against_truth(_fit_dir(tmp_path / "b", demo, bounds=wide, unreliable=flagged))
