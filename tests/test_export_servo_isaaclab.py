"""A position servo's fit (SO-101: kp, kd, armature, Coulomb friction, delay, encoder offset) exported as Isaac Lab
configs: the generated module's actuator has stiffness = the fitted kp, damping = the fitted kd, the servo's torque
limit as its effort limit and the delay; its event terms randomize the gains over their exported ranges (stock
``randomize_actuator_gains``). Checked on the module's literals (``ast``, no Isaac Lab) and, with Isaac Lab, by
building its configs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from isaaclab_sysid.export.build import FitContext, export, intervals_for
from isaaclab_sysid.export.ranges import RangePolicy
from isaaclab_sysid.robots import load_robot

sys.path.insert(0, os.path.dirname(__file__))
from test_export_mjcf import _fit_dir, _servo_run  # noqa: E402  (the fit-folder fixture of the MJCF tests)
from test_export_module import _literals  # noqa: E402  (the generated module's literal assignments)

FIT = {
    "kp": [12.0, 18.0, 15.0, 8.0, 6.0, 4.0],
    "kd": [0.25, 0.35, 0.3, 0.12, 0.08, 0.05],
    "armature": [0.012, 0.015, 0.012, 0.008, 0.006, 0.004],
    "friction": [0.04, 0.05, 0.04, 0.03, 0.02, 0.02],
    "encoder_offset": [0.01, -0.02, 0.03, 0.0, 0.01, -0.01],
    "delay": 7,
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    robot = load_robot("so101")
    tmp = tmp_path_factory.mktemp("servo")
    d = _fit_dir(tmp, "so101", FIT, "kp,kd,armature,friction,delay,encoder_offset",
                 [_servo_run(robot, 0, 3.0, "ep0")], [_servo_run(robot, 1, 3.0, "ep_heldout")], torque_clamp=True)
    ctx = FitContext.load(d)
    rep = intervals_for(ctx, log=lambda s: None)
    paths, warns = export(ctx, tmp / "out", rep, RangePolicy())
    return paths, warns, robot


def test_servo_module_has_the_fitted_gains_effort_limit_and_delay(exported):
    paths, warns, robot = exported
    lit = _literals(paths["module"].read_text())
    joints = list(robot.joint_names)
    av = lit["ACTUATOR_VALUES"]
    assert [av["stiffness"][j] for j in joints] == pytest.approx(FIT["kp"], rel=1e-12)
    assert [av["damping"][j] for j in joints] == pytest.approx(FIT["kd"], rel=1e-12)
    assert [av["actuator_effort_limit"][j] for j in joints] == pytest.approx(list(robot.tau_max), rel=1e-12)
    assert [av["armature"][j] for j in joints] == pytest.approx(FIT["armature"], rel=1e-12)
    assert [av["friction"][j] for j in joints] == pytest.approx(FIT["friction"], rel=1e-12)
    assert lit["FITTED"]["delay_steps"] == 7
    assert lit["FITTED"]["encoder_offset"] == pytest.approx(FIT["encoder_offset"], abs=1e-12)
    assert any("encoder_offset" in w for w in warns)
    # one gain term per joint, drawing kp and kd from their exported ranges (abs)
    terms = lit["EVENT_TERMS"]
    for j in joints:
        t = terms[f"gains_{j}"]
        assert t["func"] == "mdp.randomize_actuator_gains" and t["joint_names"] == [j]
        p = t["params"]
        assert p["operation"] == "abs"
        for g, key in (("kp", "stiffness_distribution_params"), ("kd", "damping_distribution_params")):
            lo, hi = lit["RANGES"][f"{g}[{j}]"]
            assert p[key] == pytest.approx((max(lo, 1e-6 if g == "kp" else 0.0), hi))
            assert lit["SAMPLED_RANGES"][f"{g}[{j}]"] == pytest.approx(p[key])


def test_a_torque_controlled_fit_keeps_zero_gains_and_no_gain_terms():
    """The Franka path: no kp/kd groups -> no stiffness/damping values, no gain terms; the effort limit only where the
    fit clamped (given: the real controller's clamp)."""
    from isaaclab_sysid.export.isaaclab_module import actuator_values, is_servo
    from isaaclab_sysid.export.record import DrRecord

    rec = DrRecord(joint_names=["a", "b"], fitted={"armature": [0.1, 0.2], "friction": [0.3, 0.4]},
                   labels_per_joint={}, intervals={}, ranges={}, delay=None)
    act, _ = actuator_values(rec, "newton")
    assert not is_servo(rec) and set(act) == {"armature", "friction", "dynamic_friction"}
    act, _ = actuator_values(rec, "newton", effort_limit=[87.0, 12.0])
    assert set(act) == {"armature", "friction", "dynamic_friction", "actuator_effort_limit"}
    assert act["actuator_effort_limit"] == {"a": 87.0, "b": 12.0}


_BUILD = textwrap.dedent(
    """
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("sysid_dr_isaaclab", sys.argv[1])
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    from isaaclab.actuators import DelayedPDActuatorCfg
    from isaaclab.managers import EventTermCfg
    import isaaclab.envs.mdp as mdp
    a = m.make_actuator_cfg()
    assert isinstance(a, DelayedPDActuatorCfg)
    assert a.stiffness == m.ACTUATOR_VALUES["stiffness"] and a.damping == m.ACTUATOR_VALUES["damping"], (a.stiffness,)
    assert a.actuator_effort_limit == m.ACTUATOR_VALUES["actuator_effort_limit"]
    assert (a.min_delay, a.max_delay) == m.DELAY_RANGE_STEPS
    b = m.make_actuator_cfg(stiffness=0.0, damping=0.0)
    assert b.stiffness == 0.0 and b.damping == 0.0
    ev = m.SysidEventsCfg()
    gains = {k: v for k, v in vars(ev).items() if isinstance(v, EventTermCfg) and k.startswith("gains_")}
    assert len(gains) == len(m.JOINT_NAMES) and all(t.func is mdp.randomize_actuator_gains for t in gains.values())
    print("OK", len(gains))
    """
)


def test_generated_servo_module_builds_isaaclab_configs(exported, tmp_path):
    paths, _, _ = exported
    script = tmp_path / "build.py"
    script.write_text(_BUILD)
    py = os.environ.get("ISAACLAB_PYTHON")
    if py is None:
        pytest.importorskip("isaaclab", reason="needs Isaac Lab (pip install -e '.[isaaclab]', or set ISAACLAB_PYTHON)")
        py = sys.executable
    res = subprocess.run([py, str(script), str(paths["module"])], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "OK 6" in res.stdout


def test_servo_effort_limit_follows_the_fits_torque_limit_flag(exported):
    """--torque_limit of the fit (the real controller's) is the effort limit, as the fit's replay clamps to it."""
    from isaaclab_sysid.export.build import fit_torque_limits

    paths, _, robot = exported
    ctx = FitContext.load(paths["module"].parent.parent / "fit_so101")
    assert fit_torque_limits(ctx) == (pytest.approx(list(robot.tau_max)), None)
    ctx.record.replay.torque_limit = (1.5,)
    assert fit_torque_limits(ctx) == (pytest.approx([1.5] * 6), None)
    # what the fit's replay applied, flag by flag: a slew limit too (a position servo's runs are joint-PD runs,
    # which the replay slews), no clamp without --torque_clamp, and config.json's null (inf: no limit) read as inf
    ctx.record.replay.torque_rate_limit, ctx.record.replay.slew_limit = (50.0,), True
    assert fit_torque_limits(ctx) == (pytest.approx([1.5] * 6), pytest.approx([50.0] * 6))
    ctx.record.replay.torque_clamp, ctx.record.replay.torque_rate_limit = False, (None,)
    assert fit_torque_limits(ctx) == (None, [float("inf")] * 6)
    assert np.all(np.isfinite(robot.tau_max))


def test_servo_usd_variant_authors_the_fitted_gains_per_degree(tmp_path):
    """--usd for a servo fit: the sysid variant's drive carries kp, kd (per degree) and the torque limit; the joint
    physics as for any arm. Read back with pxr from the written layer."""
    pytest.importorskip("pxr", reason="needs pxr (the [isaaclab] extra)")
    pytest.importorskip("urdf_usd_converter", reason="needs the [isaaclab] extra")
    from pxr import Usd, UsdPhysics

    from isaaclab_sysid.export.usd_variant import write_physics_variant

    robot = load_robot("so101")
    vals = {g: np.asarray(v) for g, v in FIT.items() if g != "encoder_offset"}
    layer = write_physics_variant(robot, vals, tmp_path, "newton")
    stage = Usd.Stage.Open(str(layer))
    got = {}
    for prim in stage.Traverse():
        if prim.IsA(UsdPhysics.RevoluteJoint):
            d = UsdPhysics.DriveAPI(prim, "angular")
            got[prim.GetName()] = (d.GetStiffnessAttr().Get(), d.GetDampingAttr().Get(), d.GetMaxForceAttr().Get(),
                                   prim.GetAttribute("newton:armature").Get())
    per_deg = np.pi / 180
    for k, j in enumerate(robot.joint_names):
        kp, kd, lim, arm = got[j]
        assert kp == pytest.approx(FIT["kp"][k] * per_deg, rel=1e-6) and kd == pytest.approx(FIT["kd"][k] * per_deg, rel=1e-6)
        assert lim == pytest.approx(robot.tau_max[k], rel=1e-6) and arm == pytest.approx(FIT["armature"][k], rel=1e-6)
