"""The export: ranges policy, neutral JSON/YAML, and the generated Isaac Lab module.

The module's values are checked against the fit's by parsing it with ``ast`` (no
Isaac Lab needed); a second test imports it and builds its config objects, which
needs Isaac Lab (the ``[isaaclab]`` extra): in-process when ``isaaclab`` imports,
or with the interpreter named by ``ISAACLAB_PYTHON`` (e.g. a separate venv).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.export.build import FitContext, export
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.export.isaaclab_module import friction_term_params
from isaaclab_sysid.export.neutral import to_yaml
from isaaclab_sysid.export.record import DrRecord
from isaaclab_sysid.export.ranges import RangePolicy, make_range
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.objective.result import FitResult, SearchDistribution
from isaaclab_sysid.intervals.combine import IntervalReport, write_intervals
from isaaclab_sysid.intervals.common import Interval, IntervalSet

JOINTS = [f"panda_joint{i + 1}" for i in range(7)]
FIT = {
    "armature": [0.3, 0.25, 0.2, 0.15, 0.05, 0.0, 0.02],
    "friction": [1.0, 2.0, 0.5, 0.0, 0.3, 0.4, 0.2],
    "viscous": [0.5, 1.0, 0.8, 0.6, 0.2, 0.3, 0.1],
}


def _fit_dir(tmp_path: Path) -> Path:
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7, JOINTS)
    dec = {**{g: np.array(v) for g, v in FIT.items()}, "delay": 2}
    x = space.normalize(dec)
    result = FitResult.from_search(space, x, 0.0, run_names=["r"], weighted_loss=np.zeros(1), traj_weights=np.ones(1),
                                   search=SearchDistribution(x.copy(), 0.01, np.eye(space.dim)))
    d = tmp_path / "fit"
    d.mkdir()
    RunFolder(d).write_result(result)
    ivs = []
    for e in space.entries():
        if e.group == "delay":
            ivs.append(Interval("delay", "delay", None, 2.0, 1.0, 3.0, None, True, "profile"))
        elif e.label == "viscous[panda_joint7]":
            ivs.append(Interval(e.label, e.group, e.joint, 0.1, None, None, None, False, "null space"))
        else:
            v = FIT[e.group][JOINTS.index(e.joint)]
            ivs.append(Interval(e.label, e.group, e.joint, v, max(0.0, v - 0.05), v + 0.05, 0.0255, True, ""))
    s = IntervalSet("curvature", 0.95, ivs, ["curvature: viscous[panda_joint7] is not identifiable"])
    rep = IntervalReport({"curvature": s}, "curvature", 0.95, space.describe(), {"rho": 2.0})
    write_intervals(d / "intervals.json", rep)
    return d


def _export(tmp_path, **kw):
    from isaaclab_sysid.intervals.combine import read_intervals

    d = _fit_dir(tmp_path)
    ctx = FitContext.load(d)
    rep = read_intervals(d / "intervals.json")
    paths, warns = export(ctx, tmp_path / "out", rep, RangePolicy(**kw), viscous="envelope")  # the stock-term path
    return paths, warns


def _literals(src: str) -> dict:
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def test_module_values_equal_the_fit(tmp_path):
    paths, warns = _export(tmp_path)
    src = paths["module"].read_text()
    lit = _literals(src)
    assert lit["JOINT_NAMES"] == JOINTS
    for g in ("armature", "friction", "viscous"):
        assert lit["FITTED"][g] == pytest.approx(FIT[g], abs=1e-12)
    assert lit["FITTED"]["delay_steps"] == 2
    av = lit["ACTUATOR_VALUES"]
    assert [av["armature"][j] for j in JOINTS] == pytest.approx(FIT["armature"], abs=1e-12)
    assert [av["friction"][j] for j in JOINTS] == pytest.approx(FIT["friction"], abs=1e-12)
    assert av["dynamic_friction"] == av["friction"]
    assert [av["viscous_friction"][j] for j in JOINTS] == pytest.approx(FIT["viscous"], abs=1e-12)
    # rho = 2, linear: half-width x (1 + 1) = 0.1; delay margin 0 (rho <= 2)
    r = lit["RANGES"]["friction[panda_joint1]"]
    assert r == pytest.approx((0.9, 1.1))
    assert lit["DELAY_RANGE_STEPS"] == (1, 3)
    assert lit["INTERVALS"]["viscous[panda_joint7]"] == (None, None)
    assert lit["RANGES"]["viscous[panda_joint7]"] == (0.0, 5.0)  # search bounds (unidentified)
    assert any("viscous[panda_joint7]" in w for w in warns)
    # one randomize_joint_parameters term per joint; scale factors from the fitted values
    names = list(lit["EVENT_TERMS"])  # SysidEventsCfg's fields, in order
    assert [f"joint_{j}" for j in JOINTS] == [n for n in names if n.startswith("joint_")]
    assert "armature_panda_joint6" in names  # armature 0 cannot be scaled: own abs term
    # the neutral file carries the same numbers
    neutral = json.loads(paths["json"].read_text())
    assert neutral["fitted"]["friction"] == pytest.approx(FIT["friction"])
    assert neutral["intervals"]["viscous[panda_joint7]"]["lower"] is None
    assert paths["yaml"].read_text().count("friction[panda_joint1]") >= 2
    assert DrRecord.from_json(neutral).to_json() == neutral  # the typed record reads sysid_dr.json back whole


def test_policy_none_gives_the_intervals_and_skip_drops_unidentified(tmp_path):
    paths, _ = _export(tmp_path, allowance="none", unidentified="skip")
    lit = _literals(paths["module"].read_text())
    assert lit["RANGES"]["friction[panda_joint1]"] == pytest.approx((0.95, 1.05))
    assert "viscous[panda_joint7]" not in lit["RANGES"]


def test_range_policy_arithmetic():
    iv = Interval("friction[j1]", "friction", "j1", 1.0, 0.9, 1.1, 0.05, True)
    r, _ = make_range(iv, RangePolicy(combine="quadrature"), rho=4.0)
    assert (r.lower, r.upper) == pytest.approx((0.8, 1.2))
    r, _ = make_range(iv, RangePolicy(rel_margin=0.1), rho=1.0)
    assert (r.lower, r.upper) == pytest.approx((0.8, 1.2))
    r, _ = make_range(Interval("viscous[j1]", "viscous", "j1", 0.01, 0.0, 0.05, 0.02, True), RangePolicy(), rho=5.0)
    assert r.lower == 0.0  # physical limit
    with pytest.raises(ValueError):
        RangePolicy(combine="max")


def test_friction_term_covers_both_ranges():
    op, (lo, hi) = friction_term_params(1.0, 0.5, (0.9, 1.1), (0.3, 0.6), "envelope")
    assert op == "scale" and lo == pytest.approx(0.6) and hi == pytest.approx(1.2)
    op, (lo, hi) = friction_term_params(1.0, 0.5, (0.9, 1.1), (0.3, 0.6), "coulomb")
    assert (lo, hi) == pytest.approx((0.9, 1.1))
    op, p = friction_term_params(0.0, 0.5, (0.0, 0.2), None)
    assert op == "add" and p == pytest.approx((0.0, 0.2))


def test_neutral_yaml_holds_the_same_object_as_the_json(tmp_path):
    import json

    import yaml

    from isaaclab_sysid.export.neutral import write_neutral

    obj = {"a": [1, 2.5, None], "b": {"c": "x: y", "d": [{"e": True}]}, "null": "no", "inf": float("inf")}
    pj, py = write_neutral(tmp_path, obj)
    from_json = json.loads(pj.read_text())
    assert yaml.safe_load(py.read_text()) == from_json
    assert from_json["inf"] is None and from_json["null"] == "no"
    assert yaml.safe_load(to_yaml({"k": [1, 2]})) == {"k": [1, 2]}


_BUILD = textwrap.dedent(
    """
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("sysid_dr_isaaclab", sys.argv[1])
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    from isaaclab.actuators import DelayedPDActuatorCfg
    from isaaclab.assets import ArticulationCfg
    from isaaclab.managers import EventTermCfg
    a = m.make_actuator_cfg()
    assert isinstance(a, DelayedPDActuatorCfg) and (a.min_delay, a.max_delay) == m.DELAY_RANGE_STEPS
    assert a.armature == m.ACTUATOR_VALUES["armature"] and a.viscous_friction == m.ACTUATOR_VALUES["viscous_friction"]
    b = m.make_actuator_cfg(randomize_delay=False)
    assert b.min_delay == b.max_delay == m.FITTED["delay_steps"]
    art = m.apply_to(ArticulationCfg())
    assert art.actuators["sysid_arm"].friction == m.ACTUATOR_VALUES["friction"]
    ev = m.SysidEventsCfg()
    terms = {k: v for k, v in vars(ev).items() if isinstance(v, EventTermCfg)}
    assert len([k for k in terms if k.startswith("joint_")]) == len(m.JOINT_NAMES)
    for t in terms.values():
        assert t.mode == "startup" and t.params["asset_cfg"].name == m.ASSET_NAME
    print("OK", len(terms))
    """
)


def test_generated_module_builds_isaaclab_configs(tmp_path):
    paths, _ = _export(tmp_path)
    script = tmp_path / "build.py"
    script.write_text(_BUILD)
    py = os.environ.get("ISAACLAB_PYTHON")
    if py is None:
        pytest.importorskip("isaaclab", reason="needs Isaac Lab (pip install -e '.[isaaclab]', or set ISAACLAB_PYTHON)")
        py = sys.executable
    res = subprocess.run([py, str(script), str(paths["module"])], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "OK" in res.stdout


def _law_record(fitted: dict, ranges: dict) -> DrRecord:
    joints = ["j1", "j2"]
    labels = {g: [f"{g}[{j}]" for j in joints] for g in fitted}
    return DrRecord.from_json({
        "source": "test", "joint_names": joints, "fitted": fitted, "labels_per_joint": labels,
        "ranges": {k: {"value": 0.0, "lower": lo, "upper": hi} for k, (lo, hi) in ranges.items()},
        "intervals": {}, "delay": None, "masses": []})


def test_friction_law_literals_terms_and_refusals():
    """Issue 46 item 4 without Isaac Lab: a sigmoid / Dahl fit's FRICTION_LAW holds every number per joint (the
    sigmoid offset 0 where the fit left it out), the native friction is 0, the law's numbers leave the joint terms
    for one friction_law term whose ranges are cut to each number's domain (SAMPLED_RANGES says so); a Coulomb fit's
    module carries no law term; a load-law fit's literal holds Fc and both coefficients (PhysX refused); a Dahl fit
    without its Coulomb level is refused."""
    from isaaclab_sysid.export.isaaclab_module import generate_module

    sig = _law_record({"armature": [0.1, 0.2], "sigmoid_amplitude": [0.5, 0.6], "sigmoid_slope": [8.0, 9.0]},
                      {"armature[j1]": (0.05, 0.15), "sigmoid_amplitude[j1]": (0.4, 0.6),
                       "sigmoid_slope[j2]": (-2.0, 20.0)})
    lit = _literals(generate_module(sig, viscous="independent")[0])
    assert lit["FRICTION_LAW"] == {"name": "sigmoid", "params": {
        "sigmoid_amplitude": {"j1": 0.5, "j2": 0.6}, "sigmoid_slope": {"j1": 8.0, "j2": 9.0},
        "sigmoid_offset": {"j1": 0.0, "j2": 0.0}}}
    assert lit["ACTUATOR_VALUES"]["friction"] == {"j1": 0.0, "j2": 0.0}
    terms = lit["EVENT_TERMS"]
    assert terms["joint_j1"]["params"] == {"armature_range": (0.05, 0.15), "dynamic_ratio": 1.0}
    assert terms["friction_law"] == {"func": "randomize_friction_law", "params": {"group_name": "sysid_arm", "ranges": {
        "sigmoid_amplitude": {"j1": (0.4, 0.6)}, "sigmoid_slope": {"j2": (1e-6, 20.0)}}}}
    assert lit["SAMPLED_RANGES"]["sigmoid_slope[j2]"] == (1e-6, 20.0)  # cut to the slope's domain, said
    dahl = _law_record({"friction": [0.3, 0.4], "presliding_stiffness": [100.0, 200.0]}, {"friction[j2]": (0.2, 0.5)})
    lit = _literals(generate_module(dahl, viscous="independent")[0])
    assert lit["FRICTION_LAW"]["params"] == {"coulomb_friction": {"j1": 0.3, "j2": 0.4},
                                             "presliding_stiffness": {"j1": 100.0, "j2": 200.0}}
    assert "joint_j2" not in lit["EVENT_TERMS"]  # the Coulomb level is the law's: no joint friction term
    assert lit["EVENT_TERMS"]["friction_law"]["params"]["ranges"] == {"coulomb_friction": {"j2": (0.2, 0.5)}}
    coulomb = _literals(generate_module(_law_record({"friction": [0.3, 0.4]}, {"friction[j1]": (0.2, 0.4)}),
                                        viscous="independent")[0])
    assert coulomb["FRICTION_LAW"] == {"name": "coulomb"} and "friction_law" not in coulomb["EVENT_TERMS"]
    assert coulomb["EVENT_TERMS"]["joint_j1"]["params"]["friction_range"] == (0.2, 0.4)
    load = _law_record({"friction": [0.3, 0.4], "load_friction_motor": [0.1, 0.2]},
                       {"load_friction_motor[j1]": (-0.1, 0.2), "friction[j2]": (0.2, 0.5)})
    lit = _literals(generate_module(load, viscous="independent")[0])  # k_ext left out: 0, as the replay takes it
    assert lit["FRICTION_LAW"] == {"name": "load", "params": {
        "coulomb_friction": {"j1": 0.3, "j2": 0.4}, "load_friction_motor": {"j1": 0.1, "j2": 0.2},
        "load_friction_external": {"j1": 0.0, "j2": 0.0}}}
    assert lit["ACTUATOR_VALUES"]["friction"] == {"j1": 0.3, "j2": 0.4}  # the joint starts at Fc; the budget follows
    assert "joint_j2" not in lit["EVENT_TERMS"] and lit["EVENT_TERMS"]["friction_law"]["params"]["ranges"] == {
        "load_friction_motor": {"j1": (0.0, 0.2)}, "coulomb_friction": {"j2": (0.2, 0.5)}}
    with pytest.raises(ValueError, match="load friction law's module is written for Newton only"):
        generate_module(load, physics="physx")
    with pytest.raises(ValueError, match="needs the fitted 'friction' group"):
        generate_module(_law_record({"presliding_stiffness": [100.0, 200.0]}, {}))


def test_the_real_controllers_clamp_and_slew_limit_reach_the_module():
    """What the fit's replay applied reaches the module, without Isaac Lab: the clamp as ``actuator_effort_limit``,
    the slew limit as ``TORQUE_RATE_LIMIT`` (a joint without one: None, inf); none of them when the fit applied none;
    a joint whose clamp is inf keeps the asset's limit (left out); a rate that is not one positive number per joint,
    or a rate on a servo motor model's fit (its replay slews nothing), refused."""
    from isaaclab_sysid.export.isaaclab_module import generate_module, rate_limit_literal

    rec = _law_record({"friction": [0.3, 0.4]}, {})
    lit = _literals(generate_module(rec, viscous="independent", effort_limit=[87.0, 12.0],
                                    torque_rate_limit=[1000.0, float("inf")])[0])
    assert lit["ACTUATOR_VALUES"]["actuator_effort_limit"] == {"j1": 87.0, "j2": 12.0}
    assert lit["TORQUE_RATE_LIMIT"] == {"j1": 1000.0, "j2": None}
    lit = _literals(generate_module(rec, viscous="independent")[0])
    assert lit["TORQUE_RATE_LIMIT"] == {} and "actuator_effort_limit" not in lit["ACTUATOR_VALUES"]
    assert _literals(generate_module(rec, torque_rate_limit=[float("inf")] * 2)[0])["TORQUE_RATE_LIMIT"] == {}
    with pytest.raises(ValueError, match="expected 2 positive rates"):
        generate_module(rec, torque_rate_limit=[1000.0, 0.0])
    lit = _literals(generate_module(rec, effort_limit=[87.0, float("inf")])[0])
    assert lit["ACTUATOR_VALUES"]["actuator_effort_limit"] == {"j1": 87.0}
    assert "actuator_effort_limit" not in _literals(generate_module(rec, effort_limit=[float("inf")] * 2)[0])[
        "ACTUATOR_VALUES"]
    servo = _law_record({"friction": [0.3, 0.4], "kp": [10.0, 12.0]}, {})  # a position servo's joint-PD runs slew
    assert _literals(generate_module(servo, torque_rate_limit=[50.0, 50.0])[0])["TORQUE_RATE_LIMIT"] == {
        "j1": 50.0, "j2": 50.0}
    motor = _law_record({"friction": [0.3, 0.4], "motor_kt": [0.5, 0.5], "motor_r": [5.0, 5.0]}, {})
    with pytest.raises(ValueError, match="a servo motor model's replay applies no slew limit"):
        rate_limit_literal(motor, [1000.0, 1000.0])
