"""The pre-flight's verdict: PASS / WARN / FAIL per check, `safe to run: yes|no` with what to change, exit status."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import load_script

from isaaclab_sysid.excitation import MultibandSpec, anchor_pose, default_q_init, multiband
from isaaclab_sysid.excitation.cli import build_task_run
from isaaclab_sysid.excitation.design_io import write_target
from isaaclab_sysid.excitation.identifiability import IdentifiabilityTable, SensitivityRow
from isaaclab_sysid.excitation.limits import DesignLimits
from isaaclab_sysid.excitation.verdict import EXIT_FAIL, FAIL, PASS, WARN, build_verdict, design_kind
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.robots import load_robot


def _numbers(slew=(0.5,) * 7, tau=(0.3,) * 7, rng=(0.5,) * 7, speed=(0.5,) * 7, cond=300.0):
    return {"joint_range_frac": list(rng), "joint_speed_frac": list(speed), "tau_limit_frac": list(tau),
            "tau_peak_nm": [87 * f for f in tau], "tau_step_slew_frac": list(slew), "tau_step_peak_nm": list(slew),
            "tau_step_over_slew_count": int(sum(s > 1 for s in slew)), "tracking_ratio": 0.9,
            "regressor_cond": cond, "n_base_params": 43}


def _check(v, name):
    (c,) = [c for c in v.checks if c.name == name]
    return c


LIMITS = dict(slew_limit=np.ones(7), tau_limit=np.full(7, 87.0))


def test_torque_step_at_83_percent_warns_and_above_100_fails_naming_the_flag():
    ok = build_verdict(_numbers(), None, {"kind": "chirp_low"}, **LIMITS)
    assert ok.safe and ok.status == PASS and ok.overall_line() == "safe to run: yes"
    assert all(c.status == PASS for c in ok.checks)

    warn = build_verdict(_numbers(slew=(0.5, 0.83, 0.5, 0.92, 0.5, 0.5, 0.5)), None, {"kind": "chirp_low"}, **LIMITS)
    c = _check(warn, "torque slew")
    assert c.status == WARN and "92%" in c.detail and "j4" in c.detail and "j2 83%" in c.detail
    assert warn.safe and warn.overall_line() == "safe to run: yes (1 WARN: torque slew)"

    fail = build_verdict(_numbers(slew=(0.5, 0.83, 0.5, 1.01, 0.5, 0.5, 0.5)), None, {"kind": "chirp_low"}, **LIMITS)
    c = _check(fail, "torque slew")
    assert c.status == FAIL and "--f-end-hz" in c.fix and "1 setpoint(s) above the limit" in c.detail
    assert not fail.safe and fail.overall_line().startswith("safe to run: no")
    text = fail.format()
    assert "FAIL  torque slew" in text and "change (torque slew):" in text and "--f-end-hz" in text.splitlines()[-1]
    d = fail.to_dict()
    assert d["safe_to_run"] is False and d["status"] == FAIL and d["thresholds"]["warn_frac"] == 0.8
    json.dumps(d)  # plain JSON


def test_each_safety_check_has_its_thresholds_and_the_designs_flags():
    v = build_verdict(_numbers(tau=(0.81,) * 7, rng=(1.02,) * 7, speed=(0.79,) * 7), None, {"generator": "fourier"},
                      **LIMITS)
    assert _check(v, "joint torque").status == WARN and _check(v, "joint speed").status == PASS
    assert _check(v, "joint range").status == FAIL and "--joint-margin-rad" in _check(v, "joint range").fix
    assert design_kind({"kind": "multiband"}) == "multiband" and design_kind({}) == "generic"
    # a stricter warn fraction moves the same numbers to WARN
    assert _check(build_verdict(_numbers(), None, {}, warn_frac=0.4, **LIMITS), "torque slew").status == WARN
    # no replay: the torque checks did not run, which is not a PASS
    n = {k: v for k, v in _numbers().items() if not k.startswith("tau")}
    v = build_verdict(n, None, {}, **LIMITS)
    assert _check(v, "joint torque").status == WARN and "not checked" in _check(v, "joint torque").detail
    # a diverged replay FAILs
    v = build_verdict(_numbers(), None, {"kind": "multiband"}, replay_error="the replay diverged", **LIMITS)
    assert _check(v, "replay").status == FAIL and "--kp-trans" in _check(v, "replay").fix and not v.safe


def test_usefulness_checks_warn_never_fail():
    rows = [SensitivityRow("friction", j, 0.5, 0.1, 1e-4, 1e-5) for j in range(1, 8)]
    rows[0].conditional = 1e-8  # joint 1 barely moves
    table = IdentifiabilityTable(rows, LossWeights(), 0.05)
    v = build_verdict(_numbers(cond=float("inf")), table, {}, **LIMITS)
    assert _check(v, "conditioning").status == WARN and "rank-deficient" in _check(v, "conditioning").detail
    c = _check(v, "identifiability")
    assert c.status == WARN and "friction j1" in c.detail and "friction j2" not in c.detail
    assert v.safe and v.overall_line() == "safe to run: yes (2 WARN: conditioning, identifiability)"


@pytest.fixture(scope="module")
def short_design(tmp_path_factory):
    r = load_robot("franka_panda")
    q0 = default_q_init(r)
    pos, quat = anchor_pose(r, q0)
    # a third of the default amplitudes: every torque step well inside the Panda's slew limit
    d = multiband(MultibandSpec(duration_s=3.0, fade_s=1.0, amplitude=(0.02, 0.02, 0.02, 0.07, 0.05, 0.08)), pos, quat)
    run, _, _ = build_task_run(r, q0, d, DesignLimits(), "mb_short", 500, 30, None, None)
    out = tmp_path_factory.mktemp("targets")
    csv, _ = write_target(run, out)
    return csv


def test_preflight_cli_prints_the_verdict_last_and_exits_3_on_a_fail(short_design, tmp_path, capsys):
    pf = load_script("preflight")
    base = dict(run=short_design, out_dir=tmp_path, identifiability=False)
    assert pf.main(pf.Args(**base)) == 0
    out = capsys.readouterr().out
    assert "  verdict (WARN above 80% of a limit, FAIL above 100%" in out and "PASS  joint torque" in out
    assert out.strip().splitlines()[-1].startswith("pre-flight: safe to run: yes")
    rep = json.loads((tmp_path / "mb_short_preflight.json").read_text())
    assert rep["verdict"]["safe_to_run"] is True and {c["name"] for c in rep["verdict"]["checks"]} >= {
        "joint range", "joint speed", "replay", "joint torque", "torque slew", "conditioning"}
    # a controller that slews 10x slower: the same design's torque steps are past its limit
    assert pf.main(pf.Args(**base, torque_rate_limit=(100.0,) * 7)) == EXIT_FAIL
    out = capsys.readouterr().out
    assert "FAIL  torque slew" in out and "change (torque slew):" in out and "--corner-hz" in out
    assert out.strip().splitlines()[-1].startswith("pre-flight: safe to run: no")
    rep = json.loads((tmp_path / "mb_short_preflight.json").read_text())
    assert rep["verdict"]["safe_to_run"] is False and rep["verdict"]["line"].startswith("safe to run: no")
