"""Contact stiffness and damping: a MuJoCo table-contact twin with hidden truth recovered within its intervals,
the mapping to MuJoCo solref/solimp checked with MuJoCo's own contact, the export, and bad input refused."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import load_script
from isaaclab_sysid.cautious import PolicyError, parse_policy
from isaaclab_sysid.contact import (ContactInputError, ContactOptions, identify_contact, read_contact_run,
                                    write_contact_run)
from isaaclab_sysid.contact.export import REQUIRED, build_export, isaaclab_module
from isaaclab_sysid.contact.geometry import normal_coordinates
from isaaclab_sysid.contact.io import contact_paths
from isaaclab_sysid.contact.mapping import body_invweight, to_mujoco
from isaaclab_sysid.contact.twin import ContactTwin, record_contact_run
from isaaclab_sysid.data import RunFormatError
from isaaclab_sysid.robots import load_robot

ROBOT = load_robot("franka_panda")
K, B = 2.0e4, 30.0


def session(twin: ContactTwin, seed: int, press=(0.001, 0.0005), impacts=(0.05, 0.1, 0.2)):
    """Presses at a quasi-static 0.5 mm/s (and 1 mm/s: the speed check), impacts at three speeds."""
    runs = [record_contact_run(ROBOT, twin, "press", v, seed * 100 + i, above=0.001, depth=0.004)
            for i, v in enumerate(press)]
    runs += [record_contact_run(ROBOT, twin, "impact", v, seed * 100 + 50 + i, above=0.015, depth=0.005, hold_s=0.2)
             for i, v in enumerate(impacts)]
    return runs


def test_stiffness_and_damping_recovered_within_their_intervals_over_seeds():
    twin = ContactTwin(stiffness=K, damping=B)
    hit_k = hit_b = alarms = 0
    n = 12
    for seed in range(n):
        est = identify_contact(ROBOT, session(twin, seed))
        hit_k += est.stiffness.contains(K)
        hit_b += est.damping.contains(B)
        rel = lambda iv: (iv.upper - iv.lower) / iv.value  # noqa: E731
        assert rel(est.damping) > 3 * rel(est.stiffness)  # damping is the harder number
        assert not [w for w in est.warnings if "not straight" in w]
        alarms += any("not quasi-static" in w for w in est.warnings)  # a 5 % test at these slow speeds
    assert hit_k >= n - 2 and hit_b >= n - 2 and alarms <= 2, (hit_k, hit_b, alarms)


def test_the_mapping_to_mujoco_reproduces_the_numbers_with_mujocos_own_contact():
    """A sphere tip on a plane with solref/solimp from to_mujoco(k, b): identified back within 0.5 % / its interval."""
    native = ContactTwin(stiffness=K, damping=B, law="mujoco")
    est = identify_contact(ROBOT, session(native, 7))
    assert est.stiffness.value == pytest.approx(K, rel=5e-3)
    assert est.damping.contains(B)
    m = ROBOT.build_mujoco()
    inv = body_invweight(m, ROBOT.config.ee_link)
    mc = to_mujoco(K, B, inv, 0.001)
    assert mc.solref[0] == pytest.approx(-K * 0.999 * inv) and mc.solimp[:2] == (0.001, 0.001)
    assert mc.virtual_mass == pytest.approx(0.001 / (0.999 * inv))
    tc, dr = mc.solref_standard  # the standard form: the same K and B through MuJoCo's formulas
    d = 0.001
    assert 1 / (d * d * tc * tc * dr * dr) * d == pytest.approx(-mc.solref[0] / d, rel=1e-9)
    assert 2 / (d * tc) == pytest.approx(-mc.solref[1] / d, rel=1e-9)


def test_a_nonlinear_contact_is_reported_as_not_straight():
    cr = record_contact_run(ROBOT, ContactTwin(), "press", 0.004, 3, above=0.001, depth=0.004)
    s, _, f = normal_coordinates(ROBOT, cr.run, cr.test.normal, cr.test.tip_offset, cr.force)
    s0 = s[np.argmax(f > 1.0)]
    hertz = 3e6 * np.clip(s - s0, 0, None) ** 1.5  # F ~ phi^1.5: a Hertzian (not linear) contact
    bent = dataclasses.replace(cr, force=np.column_stack([np.zeros_like(s), np.zeros_like(s), hertz]))
    est = identify_contact(ROBOT, [bent])
    assert any("not straight" in w for w in est.warnings)
    assert any("quasi-static condition not checked" in w for w in est.warnings)
    assert est.damping is None


def test_export_takes_the_stated_end_and_the_module_builds(tmp_path):
    est = identify_contact(ROBOT, session(ContactTwin(), 1))
    labels = [iv.label for iv in est.intervals]
    with pytest.raises(PolicyError, match="state the end to act on for contact_stiffness"):
        parse_policy(["contact_damping:lower"], labels, REQUIRED)
    pol = parse_policy(["contact_stiffness:upper"], labels, REQUIRED, use="force limit")
    inv = body_invweight(ROBOT.build_mujoco(), ROBOT.config.ee_link)
    exp = build_export(est, pol, inv)
    assert exp.override["contact_stiffness"] == est.stiffness.upper
    assert exp.override["contact_damping"] == est.damping.value  # not stated: the point estimate, noted
    assert any("contact_damping: value (not stated" in n for n in exp.notes)
    assert exp.physx["compliant_contact_stiffness"] == est.stiffness.upper
    assert exp.mujoco_range[0].solref[0] > exp.mujoco.solref[0] >= exp.mujoco_range[1].solref[0]  # upper end = range top
    src = isaaclab_module(exp)
    lit = {t.targets[0].id: ast.literal_eval(t.value) for t in ast.parse(src).body
           if isinstance(t, ast.Assign) and t.targets[0].id in ("OVERRIDE", "CONTACT", "MUJOCO")}
    assert lit["CONTACT"]["contact_stiffness"] == (est.stiffness.lower, est.stiffness.value, est.stiffness.upper)
    assert lit["MUJOCO"]["solref"][0] == pytest.approx(exp.mujoco.solref[0])
    json.dumps(exp.to_json(), allow_nan=False)
    if importlib.util.find_spec("isaaclab_physx") is None:
        pytest.skip("isaaclab_physx not installed: the generated module's import is not checked")
    mod = tmp_path / "contact_isaaclab.py"
    mod.write_text(src)
    code = ("import importlib.util as u; s = u.spec_from_file_location('m', %r); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); c = m.surface_material_cfg(); print(repr(c.compliant_contact_stiffness), "
            "c.compliant_contact_acceleration_spring)" % str(mod))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [repr(est.stiffness.upper), "False"]


def test_contact_files_round_trip_and_bad_input_is_refused_in_one_line(tmp_path):
    cr = record_contact_run(ROBOT, ContactTwin(), "impact", 0.1, 0, above=0.015, depth=0.005, hold_s=0.2)
    path = write_contact_run(cr, tmp_path / "imp.csv")
    back = read_contact_run(path)
    np.testing.assert_array_equal(back.force, cr.force)
    assert back.test.test == "impact" and np.allclose(back.test.tip_offset, cr.test.tip_offset)
    csv, side = contact_paths(path)
    good_csv, good_side = csv.read_text(), side.read_text()

    def expect(match: str):
        with pytest.raises(RunFormatError, match=match) as e:
            read_contact_run(path)
        assert "\n" not in str(e.value)
        csv.write_text(good_csv)
        side.write_text(good_side)

    lines = good_csv.splitlines()
    csv.write_text("\n".join(lines[:-5]) + "\n")
    expect(r"_contact.csv: row \d+, column t_s: \d+ rows, the run has")
    bad = lines.copy()
    bad[10] = bad[10].split(",")[0] + ",nan,0,0"
    csv.write_text("\n".join(bad) + "\n")
    expect(r"_contact.csv: row 11, column fx: not a finite number")
    bad = lines.copy()
    bad[5] = "9.5," + ",".join(bad[5].split(",")[1:])
    csv.write_text("\n".join(bad) + "\n")
    expect(r"row 6, column t_s: 9.5 differs from the run's time stamp")
    meta = json.loads(good_side)
    for key, val, match in (("normal", [0, 0, 2], "column normal: must be a unit vector"),
                            ("test", "slide", "column test: must be one of press, impact"),
                            ("tip_offset", None, "column tip_offset: missing")):
        m = dict(meta)
        if val is None:
            m.pop(key)
        else:
            m[key] = val
        side.write_text(json.dumps(m))
        expect(match)
    side.unlink()
    with pytest.raises(RunFormatError, match="contact sidecar not found"):
        read_contact_run(path)
    side.write_text(good_side)
    # the data: a wrong normal sign, one impact only, no press
    flipped = dataclasses.replace(cr, test=dataclasses.replace(cr.test, normal=-cr.test.normal))
    press = record_contact_run(ROBOT, ContactTwin(), "press", 0.004, 1, above=0.001, depth=0.004)
    with pytest.raises(ContactInputError, match="check the normal's sign"):
        identify_contact(ROBOT, [dataclasses.replace(press, test=dataclasses.replace(press.test, normal=-press.test.normal))])
    with pytest.raises(ContactInputError, match="impacts at several approach speeds"):
        identify_contact(ROBOT, [press, cr])
    with pytest.raises(ContactInputError, match="no press run"):
        identify_contact(ROBOT, [cr, flipped])
    with pytest.raises(ContactInputError, match="--f_min"):
        identify_contact(ROBOT, [press], ContactOptions(f_min=0.0))
    cli = load_script("identify_contact")
    assert cli.main(["fit", "--runs", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2


def test_a_press_that_is_not_quasi_static_is_reported():
    """Seed 000 WE-L.B.d: a fast press on a damped contact does not give the stiffness; two speeds show it."""
    twin = ContactTwin(damping=1000.0)
    runs = [record_contact_run(ROBOT, twin, "press", v, i, above=0.001, depth=0.004) for i, v in enumerate((0.05, 0.001))]
    est = identify_contact(ROBOT, runs)
    assert any("not quasi-static" in w and "slow the press" in w for w in est.warnings)
