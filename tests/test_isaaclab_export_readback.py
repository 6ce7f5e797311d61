"""The exported Isaac Lab module applied in a real Isaac Lab environment (CPU Newton, kit-less) and read back.

``export.check.check_module`` builds a manager-based env of 16 Frankas with the
exported actuator and event terms, resets it 4 times and reads every env's
armature, friction, viscous damping and actuator delay from the simulation (the
MJWarp solver's arrays). The export here has a zero fitted viscous value with a
range (it must be drawn anyway), a number without a range (it must stay fixed),
and a delay range (each env's measured latency must equal its delay).

The Isaac Lab parts skip without the [isaaclab] extra; the delay/units parts run everywhere.
"""

from __future__ import annotations

import ast

import pytest

from isaaclab_sysid.export.isaaclab_module import generate_module
from isaaclab_sysid.export.record import DrRecord

JOINTS = [f"panda_joint{i + 1}" for i in range(7)]
FIT = {
    "armature": [0.3, 0.25, 0.2, 0.15, 0.05, 0.08, 0.02],
    "friction": [1.0, 2.0, 0.5, 0.4, 0.3, 0.4, 0.2],
    "viscous": [0.5, 1.0, 0.8, 0.0, 0.2, 0.3, 0.1],
}
NO_RANGE = "friction[panda_joint7]"  # identifiable but skipped: stays at its fitted value


def _dr_record(delay=(3, 2, 5), fitted=None) -> DrRecord:
    fitted = fitted or FIT
    labels = {g: [f"{g}[{j}]" for j in JOINTS] for g in fitted}
    ranges = {}
    for g, vals in fitted.items():
        for j, v in zip(JOINTS, vals):
            lab = f"{g}[{j}]"
            if lab != NO_RANGE:
                ranges[lab] = {"value": v, "lower": max(0.0, 0.7 * v - 0.01), "upper": 1.3 * v + 0.05}
    value, lo, hi = delay
    ranges["delay"] = {"value": value, "lower": lo, "upper": hi}
    return DrRecord.from_json({
        "source": "test", "joint_names": JOINTS, "fitted": fitted, "labels_per_joint": labels, "ranges": ranges,
        "intervals": {k: {"lower": v["lower"], "upper": v["upper"]} for k, v in ranges.items()},
        "delay": {"value_ticks": value, "interval_ticks": [lo, hi], "range_ticks": [lo, hi], "tick_s": 0.001},
        "masses": [],
    })


def _literals(src: str) -> dict:
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def test_delay_in_physics_steps_and_a_dt_that_cannot_represent_it_is_refused():
    lit = _literals(generate_module(_dr_record(), viscous="independent", physics_dt=0.0005)[0])
    assert lit["FITTED"]["delay_steps"] == 6 and lit["DELAY_RANGE_STEPS"] == (4, 10)  # 3 ms, [2, 5] ms at 0.5 ms
    assert _literals(generate_module(_dr_record(delay=(4, 2, 6)), physics_dt=0.002)[0])["DELAY_RANGE_STEPS"] == (1, 3)
    with pytest.raises(ValueError, match="cannot represent the delay of 3 ticks"):
        generate_module(_dr_record(), physics_dt=0.002)  # 3 ms = 1.5 steps of 2 ms


def test_friction_units_per_physics_backend():
    """A static/dynamic (Stribeck) fit: the actuator writes its budget every step on either engine (the joint starts at
    the break-away level); its numbers leave the joint terms for the friction_law term."""
    fitted = {"armature": FIT["armature"], "mu_static": [1.0] * 7, "dynamic_ratio": [0.8] * 7, "viscous": FIT["viscous"]}
    for physics in ("physx", "newton"):
        src, warns = generate_module(_dr_record(fitted=fitted), viscous="independent", physics=physics,
                                     stribeck_velocity=0.04)
        lit = _literals(src)
        av = lit["ACTUATOR_VALUES"]
        assert av["friction"]["panda_joint1"] == 1.0 and av["dynamic_friction"]["panda_joint1"] == 1.0
        assert f"PHYSICS = '{physics}'" in src and not any("Stribeck" in w for w in warns)
        law = lit["FRICTION_LAW"]
        assert law["name"] == "stribeck" and law["params"]["dynamic_ratio"]["panda_joint2"] == 0.8
        assert law["params"]["stribeck_velocity"]["panda_joint3"] == 0.04 and law["params"]["stribeck_shape"]["panda_joint7"] == 2.0
        terms = lit["EVENT_TERMS"]
        assert "friction_range" not in terms["joint_panda_joint1"]["params"]
        assert terms["friction_law"]["params"]["ranges"]["static_friction"]["panda_joint1"] == pytest.approx((0.69, 1.35))
    with pytest.raises(ValueError, match="--stribeck_velocity"):
        generate_module(_dr_record(fitted=fitted), physics="newton")
    # one Coulomb level: the same torque on both backends; Newton's actuator gets no dynamic friction
    for physics in ("newton", "physx"):
        av = _literals(generate_module(_dr_record(), physics=physics)[0])["ACTUATOR_VALUES"]
        assert av["friction"] == av["dynamic_friction"] == dict(zip(JOINTS, FIT["friction"]))


@pytest.fixture(scope="module")
def robot():
    pytest.importorskip("isaaclab", reason="the read-back needs Isaac Lab (pip install -e '.[isaaclab]')")
    pytest.importorskip("urdf_usd_converter", reason="the read-back needs the [isaaclab] extra")
    from isaaclab_sysid.robots import load_robot

    return load_robot("franka_panda")


def _module(tmp_path, viscous):
    from isaaclab_sysid.export.check import load_export_module

    p = tmp_path / f"sysid_dr_isaaclab_{viscous}.py"
    p.write_text(generate_module(_dr_record(), viscous=viscous)[0])
    return load_export_module(p)


def test_exported_dr_applied_in_isaaclab_reads_back(robot, tmp_path):
    from isaaclab_sysid.export.check import check_module, spread_tolerance

    mod = _module(tmp_path, "independent")
    report = check_module(mod, robot, num_envs=16, resets=4, decimation=2, seed=3)
    print("\n" + report.table())
    assert report.ok, report.failures + [f"{r.label}: {r.failures}" for r in report.rows if r.failures]
    rows = {r.label: r for r in report.rows}
    assert len(rows) == 3 * 7 + 1 and rows["armature[panda_joint1]"].n == 64
    for g, vals in FIT.items():  # nominal (before any draw) = the fit, read from the solver
        for j, v in zip(JOINTS, vals):
            assert rows[f"{g}[{j}]"].nominal == pytest.approx((v, v), rel=1e-6, abs=1e-7)
    fixed = rows[NO_RANGE]
    assert fixed.exported is None and fixed.read == pytest.approx((0.2, 0.2), rel=1e-6)
    zero = rows["viscous[panda_joint4]"]  # fitted 0, range [0, 0.05]: drawn over it (a scale factor could not)
    q = spread_tolerance(zero.n)
    assert zero.read[1] > (1 - q) * zero.exported[1] and zero.read[1] <= zero.exported[1] + 1e-7
    delay = rows["delay"]
    assert delay.read == (2.0, 5.0) and report.latency_ok  # every env's measured latency = its delay


def test_the_check_fails_an_export_whose_draws_leave_the_ranges(robot, tmp_path):
    """Isaac Lab's stock term scales Coulomb and viscous friction by one factor: the envelope export draws
    the Coulomb friction outside its range and cannot draw a viscous range around a fitted 0."""
    from isaaclab_sysid.export.check import CheckError, check_module

    mod = _module(tmp_path, "envelope")
    with pytest.raises(CheckError, match="re-export with scripts/export_dr.py --physics_dt 0.002"):
        check_module(mod, robot, sim_dt=0.002)  # the task's dt is not the export's: refused before building
    report = check_module(mod, robot, num_envs=16, resets=2, decimation=1, seed=3)
    bad = {r.label: r.failures for r in report.rows if r.failures}
    assert not report.ok
    assert any("outside the exported range" in f for f in bad["friction[panda_joint2]"])
    assert any("does not cover the exported range" in f for f in bad["viscous[panda_joint4]"])
    assert "armature[panda_joint1]" not in bad and "delay" not in bad


def test_delay_matches_the_fit_at_another_physics_step_and_decimation(robot, tmp_path):
    """Exported for sim.dt = 0.5 ms: the delay [2, 5] ms is [4, 10] physics steps, and the env (decimation 4)
    applies each env's effort exactly that many physics steps late."""
    from isaaclab_sysid.export.check import check_module, load_export_module

    p = tmp_path / "sysid_dr_isaaclab_half_ms.py"
    p.write_text(generate_module(_dr_record(), viscous="independent", physics_dt=0.0005)[0])
    report = check_module(load_export_module(p), robot, num_envs=16, resets=4, decimation=4, seed=5)
    delay = next(r for r in report.rows if r.label == "delay")
    assert report.sim_dt == 0.0005 and report.delay_ticks == (2.0, 5.0)
    assert delay.exported == (4.0, 10.0) and delay.read == (4.0, 10.0) and not delay.failures
    assert report.latency_ok and report.ok, report.failures


SERVO_JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
SERVO_FIT = {
    "kp": [12.0, 18.0, 15.0, 8.0, 6.0, 4.0],
    "kd": [0.25, 0.35, 0.3, 0.12, 0.08, 0.05],
    "armature": [0.012, 0.015, 0.012, 0.008, 0.006, 0.004],
    "friction": [0.04, 0.05, 0.04, 0.03, 0.02, 0.02],
}


def _servo_record() -> DrRecord:
    """An SO-101 servo fit (Coulomb friction: Newton) with a range on every number and a delay range [5, 9] ms."""
    labels = {g: [f"{g}[{j}]" for j in SERVO_JOINTS] for g in SERVO_FIT}
    ranges = {f"{g}[{j}]": {"value": v, "lower": 0.7 * v, "upper": 1.3 * v}
              for g, vals in SERVO_FIT.items() for j, v in zip(SERVO_JOINTS, vals)}
    ranges["delay"] = {"value": 7, "lower": 5, "upper": 9}
    return DrRecord.from_json({
        "source": "test", "joint_names": SERVO_JOINTS, "fitted": SERVO_FIT, "labels_per_joint": labels,
        "ranges": ranges, "intervals": {k: {"lower": v["lower"], "upper": v["upper"]} for k, v in ranges.items()},
        "delay": {"value_ticks": 7, "interval_ticks": [5, 9], "range_ticks": [5, 9], "tick_s": 0.001}, "masses": [],
    })


def test_servo_export_applied_in_isaaclab_reads_back_gains_effort_limit_and_delay(tmp_path):
    """The SO-101 (its own USD from the URDF) with a servo export: every env starts at the fitted kp, kd (Newton's
    native PD), the servo's effort limit and the fitted joint physics; the resets draw kp and kd inside their
    ranges and over them; the effort limit stays; each env's latency is its delay."""
    pytest.importorskip("isaaclab", reason="the read-back needs Isaac Lab (pip install -e '.[isaaclab]')")
    pytest.importorskip("urdf_usd_converter", reason="the read-back needs the [isaaclab] extra")
    from isaaclab_sysid.export.check import check_module, load_export_module
    from isaaclab_sysid.robots import load_robot

    so101 = load_robot("so101")
    p = tmp_path / "sysid_dr_so101.py"
    p.write_text(generate_module(_servo_record(), viscous="independent", effort_limit=list(so101.tau_max))[0])
    report = check_module(load_export_module(p), so101, num_envs=16, resets=4, decimation=2, seed=2)
    print("\n" + report.table())
    assert report.ok, report.failures + [f"{r.label}: {r.failures}" for r in report.rows if r.failures]
    rows = {r.label: r for r in report.rows}
    for g in ("kp", "kd"):
        for j, v in zip(SERVO_JOINTS, SERVO_FIT[g]):
            r = rows[f"{g}[{j}]"]
            assert r.nominal == pytest.approx((v, v), rel=1e-6) and r.n == 64
            assert 0.7 * v - 1e-6 <= r.read[0] < r.read[1] <= 1.3 * v + 1e-6
    for j, lim in zip(SERVO_JOINTS, so101.tau_max):
        assert rows[f"effort_limit[{j}]"].nominal == pytest.approx((lim, lim), rel=1e-6)
    assert rows["delay"].read == (5.0, 9.0) and report.latency_ok
