"""The Isaac Lab code of the generated modules is real code: export/templates/ imports, builds and is
copied verbatim by the one emitter (export/emit.py) that export/, payload/ and contact/ share.

The template imports need Isaac Lab (the [isaaclab] extra) and skip without it; the verbatim copy,
the name check and the literals run everywhere.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import math

import numpy as np
import pytest

from isaaclab_sysid.export.emit import DATA_BEGIN, DATA_END, Literal, module_source, plain, template_body, template_text
from isaaclab_sysid.export.isaaclab_module import generate_module
from isaaclab_sysid.export.record import DrRecord

TEMPLATES = ("sysid_dr_isaaclab", "payload_isaaclab", "contact_isaaclab")


def _undefined_globals(src: str) -> set[str]:
    """Names a module reads that nothing in it defines (imports, defs, classes, assignments, arguments) and that
    are not builtins: the error a linter's undefined-name check reports, by a coarse whole-module scope."""
    tree = ast.parse(src)
    defined = set(dir(builtins)) | {"__name__", "__file__"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - defined


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_is_complete_code_with_one_data_block(name):
    src = template_text(name)
    compile(src, name, "exec")
    assert not _undefined_globals(src)
    head, tail = template_body(name)
    assert DATA_BEGIN not in head + tail and DATA_END not in head + tail
    assert "{{" not in src and "}}" not in src  # no format-string escapes: nothing is formatted into it


def _dr_record() -> DrRecord:
    joints = ["j1", "j2"]
    ranges = {"armature[j1]": {"value": 0.1, "lower": 0.08, "upper": 0.12},
              "friction[j2]": {"value": 0.5, "lower": 0.4, "upper": 0.6},
              "delay": {"value": 2, "lower": 1, "upper": 3}}
    return DrRecord.from_json({
        "source": "test", "joint_names": joints, "fitted": {"armature": [0.1, 0.2], "friction": [0.3, 0.5]},
        "labels_per_joint": {g: [f"{g}[{j}]" for j in joints] for g in ("armature", "friction")}, "ranges": ranges,
        "intervals": ranges, "delay": {"value_ticks": 2, "interval_ticks": [1, 3], "range_ticks": [1, 3], "tick_s": 0.001}})


def test_the_generated_module_is_the_template_verbatim_with_the_numbers_as_data():
    src, _ = generate_module(_dr_record(), viscous="independent")
    head, tail = template_body("sysid_dr_isaaclab")
    assert head in src and src.endswith(tail)
    data = src[src.index(head) + len(head):len(src) - len(tail)]
    tree = ast.parse(data)  # the data block is assignments of literals only
    assert all(isinstance(n, ast.Assign) for n in tree.body)
    lit = {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body}
    assert lit["EVENT_TERMS"]["joint_j1"] == {"func": "randomize_joint_dynamics", "joint_names": ["j1"],
                                              "params": {"armature_range": (0.08, 0.12), "dynamic_ratio": 1.0}}
    assert lit["EVENT_TERMS"]["actuator_delay"]["params"]["delay_range"] == lit["DELAY_RANGE_STEPS"] == (1, 3)
    # the template's own data block names the same things, in the same order
    own = [n.targets[0].id if isinstance(n, ast.Assign) else n.target.id
           for n in ast.parse(template_text("sysid_dr_isaaclab").split(DATA_BEGIN)[1].split(DATA_END)[0]).body]
    assert list(lit) == own


def test_literals_are_plain_python():
    v = {"a": (np.float64(1.5), np.int64(2), np.bool_(True)), "b": [math.inf, -math.nan, None, "x"]}
    assert plain(v) == {"a": (1.5, 2, True), "b": [None, None, None, "x"]}
    assert type(plain(v)["a"][0]) is float and type(plain(v)["a"][1]) is int
    src = Literal("X", v, "two\nlines").source()
    assert src.splitlines()[:2] == ["#: two", "#: lines"]
    assert ast.literal_eval(src.split("X = ", 1)[1]) == plain(v)
    with pytest.raises(TypeError, match="not plain data"):
        plain({"a": object()})
    with pytest.raises(ValueError, match="three double quotes"):
        module_source("t", 'a """ b', "sysid_dr_isaaclab", [])


def _template(name: str):
    pytest.importorskip("isaaclab", reason="the templates import Isaac Lab (pip install -e '.[isaaclab]')")
    if name == "contact_isaaclab":
        pytest.importorskip("isaaclab_physx", reason="the contact template needs isaaclab_physx")
    return importlib.import_module(f"isaaclab_sysid.export.templates.{name}")


def test_dr_template_imports_and_builds_an_empty_export():
    m = _template("sysid_dr_isaaclab")
    a = m.make_actuator_cfg()
    assert a.joint_names_expr == [] and (a.min_delay, a.max_delay) == (0, 0)
    assert m.apply_to(importlib.import_module("isaaclab.assets").ArticulationCfg()).actuators["sysid_arm"].stiffness == 0.0
    assert vars(m.make_events_cfg("reset")) == {}
    m.check_physics_dt(m.PHYSICS_DT)
    with pytest.raises(ValueError, match="re-export with scripts/export_dr.py --physics_dt 0.002"):
        m.check_physics_dt(0.002)
    # the term builder the generated module runs on its EVENT_TERMS
    t = m._event_term({"func": "mdp.randomize_rigid_body_mass", "body_names": ["b"],
                       "params": {"mass_distribution_params": (1.0, 2.0), "operation": "abs"}})
    assert t.func.__name__ == "randomize_rigid_body_mass" and t.params["asset_cfg"].body_names == ["b"]
    assert m._term_func("randomize_joint_dynamics") is m.randomize_joint_dynamics


def test_payload_and_contact_templates_import_and_build():
    p = _template("payload_isaaclab")
    assert p.object_mass_cfg().mass == 1.0
    r = p.PayloadRandomizationEventsCfg()
    assert r.payload_mass.params["operation"] == "add" and r.payload_com.params["com_range"]["z"] == (0.0, 0.0)
    c = _template("contact_isaaclab")
    assert c.surface_material_cfg().compliant_contact_stiffness == 1.0e4
