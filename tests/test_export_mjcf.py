"""The MJCF export (export/mjcf.py, ``export_dr.py --mjcf``): the file plain MuJoCo loads replays the fit's
held-out run within 1e-6 rad of the fit's own replay, for a Franka task-impedance fit and an SO-101 servo fit
(gains, encoder offset, static friction, delay, torque limit); a file that does not is refused.

The fits are written directly (a fit folder: runs as CSV + sidecar, ``config.json``, ``sysid_best_params.json``)
with values chosen away from zero, so every group the file carries moves the replay.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest

from isaaclab_sysid.data.formats.csv_run import write_run
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.data.run import ImpedanceLaw
from isaaclab_sysid.export import mjcf
from isaaclab_sysid.export.build import ExportError, FitContext, export_mjcf
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.fit.outputs import write_config
from isaaclab_sysid.fit.problem import build_space
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets

SO101_FIT = {
    "kp": [12.0, 18.0, 15.0, 8.0, 6.0, 4.0],
    "kd": [0.25, 0.35, 0.3, 0.12, 0.08, 0.05],
    "armature": [0.012, 0.015, 0.012, 0.008, 0.006, 0.004],
    "mu_static": [0.05, 0.06, 0.05, 0.04, 0.03, 0.03],
    "dynamic_ratio": [0.7, 0.6, 0.7, 0.65, 0.7, 0.7],
    "stribeck_velocity": [0.04, 0.05, 0.04, 0.045, 0.04, 0.04],
    "encoder_offset": [0.01, -0.02, 0.03, 0.0, 0.01, -0.01],
    "delay": 7,
}
FRANKA_FIT = {
    "armature": [0.3, 0.25, 0.2, 0.15, 0.05, 0.04, 0.02],
    "friction": [0.4, 0.5, 0.3, 0.3, 0.2, 0.2, 0.1],
    "viscous": [0.5, 1.0, 0.8, 0.6, 0.2, 0.3, 0.1],
    "delay": 3,
}


def _servo_run(robot, seed: int, seconds: float, name: str):
    """A 30 fps LeRobot-like servo run: a random walk of setpoints, gains unstated, gravity not compensated."""
    n = robot.n_dof
    rng = np.random.default_rng(seed)
    T = int(seconds * 30)
    targets = np.cumsum(rng.normal(0, 0.04, (T, n)), axis=0) + np.array([0, 0.3, -0.4, 0.2, 0, 0.5])
    targets = np.clip(targets, 0.8 * robot.q_lower, 0.8 * robot.q_upper)
    run = skeleton_run(robot, "joint_pd", np.arange(T) / 30.0, targets, np.full(n, np.nan), np.full(n, np.nan),
                       q_init=targets[0], control_rate_hz=30.0, name=name)
    return dataclasses.replace(run, meta=dataclasses.replace(run.meta, gravity_compensated=False))


def _task_run(robot, seed: int, seconds: float, name: str):
    """A 50 Hz task-impedance run of the Franka (rotation-vector error, Coriolis compensation, null space)."""
    kp6 = np.array([200.0, 200.0, 200.0, 20.0, 20.0, 20.0])
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets("multiband", seconds, 50.0, seed=seed)
    x, qd = task_targets(pos, quat, off)
    law = ImpedanceLaw(orientation_error="rotvec", coriolis_compensation=True, nullspace_stiffness=10.0)
    return skeleton_run(robot, "task_impedance", t, np.hstack([x, qd]), kp6, 2 * np.sqrt(kp6), law=law, name=name)


def _fit_dir(tmp: Path, robot_name: str, values: dict, groups: str, runs, heldout, **replay) -> Path:
    """A fit folder as the fit writes it, with ``values`` as the fitted numbers."""
    d = tmp / f"fit_{robot_name}"
    (d / "runs").mkdir(parents=True)
    args = FitArgs()
    args.replay.robot = robot_name
    args.params.fit_groups = groups
    for k, v in replay.items():
        setattr(args.replay, k, v)
    args.runs.state_age_ms = 4 if robot_name == "so101" else 0
    for r in runs:
        args.runs.real_csv.append(str(write_run(r, d / "runs" / f"{r.name}.csv")[0]))
    for r in heldout:
        args.runs.heldout_csv.append(str(write_run(r, d / "runs" / f"{r.name}.csv")[0]))
    if robot_name == "so101":
        args.params.kp_bounds, args.params.kd_bounds = (1.0, 60.0), (0.0, 2.0)
        args.params.mu_static_bounds, args.params.encoder_offset_bounds = (0.0, 0.3), (-0.08, 0.08)
        args.params.delay_bounds = (0, 12)
    robot = load_robot(robot_name)
    space = build_space(args.problem, robot.joint_names, robot.config)
    x = space.normalize({k: np.asarray(v) for k, v in values.items()})
    result = FitResult.from_search(space, x, 0.0, run_names=[r.name for r in runs], weighted_loss=np.zeros(len(runs)),
                                   traj_weights=np.ones(len(runs)))
    RunFolder(d).write_result(result)
    write_config(d, args.problem.to_dict(), args.job_dict())
    return d


@pytest.fixture(scope="module")
def so101_fit(tmp_path_factory):
    robot = load_robot("so101")
    return _fit_dir(tmp_path_factory.mktemp("so101"), "so101", SO101_FIT,
                    "kp,kd,armature,mu_static,dynamic_ratio,stribeck_velocity,delay,encoder_offset",
                    [_servo_run(robot, 0, 3.0, "ep0")], [_servo_run(robot, 1, 6.0, "ep_heldout")], torque_clamp=True)


@pytest.fixture(scope="module")
def franka_fit(tmp_path_factory):
    robot = load_robot("franka_panda")
    return _fit_dir(tmp_path_factory.mktemp("franka"), "franka_panda", FRANKA_FIT, "armature,friction,viscous,delay",
                    [_task_run(robot, 0, 2.0, "task0")], [_task_run(robot, 1, 3.0, "task_heldout")], torque_clamp=True)


def test_servo_mjcf_replays_the_heldout_run_within_1e_6(so101_fit, tmp_path):
    ctx = FitContext.load(so101_fit)
    path, check = export_mjcf(ctx, tmp_path, log=lambda s: None)
    assert path == tmp_path / "so101_sysid.xml" and path.is_file()
    assert check.runs == ["ep_heldout"] and check.samples == [180]
    assert check.passed and check.worst <= 1e-6, check.lines()
    print("\n".join(check.lines()))
    # the file holds the fitted servo: plain MuJoCo reads kp, kd, offset, limit, joint physics
    m = mujoco.MjModel.from_xml_path(str(path))
    fit = {k: np.asarray(v) for k, v in SO101_FIT.items() if k != "delay"}
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], fit["kp"], rtol=1e-12)
    np.testing.assert_allclose(-m.actuator_biasprm[:, 2], fit["kd"], rtol=1e-12)
    np.testing.assert_allclose(m.actuator_biasprm[:, 0], -fit["kp"] * fit["encoder_offset"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m.actuator_forcerange[:, 1], load_robot("so101").tau_max, rtol=1e-12)
    assert np.all(m.actuator_forcelimited == 1)
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    np.testing.assert_allclose(m.dof_armature, fit["armature"], rtol=1e-12)
    np.testing.assert_allclose(m.dof_frictionloss, fit["dynamic_ratio"] * fit["mu_static"], rtol=1e-12)
    facts = mjcf.read_facts(m)
    assert facts.delay == 7 and facts.servo
    np.testing.assert_allclose(facts.mu_static, fit["mu_static"], rtol=1e-12)
    note = next(el for el in ET.parse(path).getroot().iter("text") if el.get("name") == "sysid_note")
    assert "delay" in note.get("data") and "Stribeck" in note.get("data")


def test_franka_mjcf_replays_the_heldout_run_within_1e_6(franka_fit, tmp_path):
    ctx = FitContext.load(franka_fit)
    path, check = export_mjcf(ctx, tmp_path, log=lambda s: None)
    assert path.name == "franka_panda_sysid.xml"
    assert check.runs == ["task_heldout"] and check.passed and check.worst <= 1e-6, check.lines()
    print("\n".join(check.lines()))
    m = mujoco.MjModel.from_xml_path(str(path))
    np.testing.assert_allclose(m.dof_damping, FRANKA_FIT["viscous"], rtol=1e-12)
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], 1.0)  # motors: ctrl is the joint torque
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert mjcf.read_facts(m).delay == 3


def test_numbers_are_written_at_full_precision(so101_fit, tmp_path):
    """MuJoCo's own writer keeps 6 digits: its file misses the fit's replay by far more than 1e-6 rad over 6 s."""
    ctx = FitContext.load(so101_fit)
    problem = ctx.problem()
    opts = problem.backend.options
    robot = problem.robot
    fit = mjcf.fitted_joints(ctx.result, robot.n_dof, opts.stribeck_velocity)
    spec = mjcf.fitted_spec(robot, fit, opts)
    (tmp_path / "six.xml").write_text(spec.to_xml())
    rough = mjcf.check_mjcf(tmp_path / "six.xml", robot, ctx.result, problem.heldout, opts)
    exact = mjcf.check_mjcf(mjcf.write_mjcf(tmp_path / "full.xml", robot, fit, opts), robot, ctx.result,
                            problem.heldout, opts)
    assert exact.worst < 1e-12 < rough.worst, (exact.worst, rough.worst)
    inert = next(ET.parse(tmp_path / "full.xml").getroot().iter("inertial"))
    assert len(inert.get("diaginertia").split()[0]) > 10


def test_a_file_that_misses_the_fit_is_refused_and_not_written(so101_fit, tmp_path, monkeypatch):
    """An export whose file does not replay like the fit (here: its armature 1 % off) is refused with the figure."""
    real = mjcf.fitted_joints

    def off_by_one_percent(*a, **k):
        f = real(*a, **k)
        return dataclasses.replace(f, armature=f.armature * 1.01)

    monkeypatch.setattr(mjcf, "fitted_joints", off_by_one_percent)
    with pytest.raises(ExportError, match=r"ep_heldout.*rad away from the fit's replay \(required <= 1e-06 rad\)"):
        export_mjcf(FitContext.load(so101_fit), tmp_path, log=lambda s: None)
    assert not list(tmp_path.glob("*.xml")) and not list(tmp_path.glob(".*.xml"))


def test_the_driver_takes_the_static_friction_and_offset_from_the_file(so101_fit, tmp_path):
    """Dropping the file's static friction or its encoder offset moves the replay by far more than 1e-6 rad:
    the check sees what the file holds."""
    ctx = FitContext.load(so101_fit)
    problem = ctx.problem()
    opts, robot = problem.backend.options, problem.robot
    fit = mjcf.fitted_joints(ctx.result, robot.n_dof, opts.stribeck_velocity)
    ref = mjcf.fit_rollouts(robot, ctx.result, problem.heldout, opts)
    for change in (dict(mu_static=None, stribeck_velocity=None, law="coulomb", law_p=None),
                   dict(encoder_offset=np.zeros(robot.n_dof))):
        p = mjcf.write_mjcf(tmp_path / "x.xml", robot, dataclasses.replace(fit, **change), opts)
        chk = mjcf.check_mjcf(p, robot, ctx.result, problem.heldout, opts, fit_states=ref)
        assert not chk.passed and chk.worst > 1e-4 and math.isfinite(chk.worst), (change, chk.worst)


def test_torque_replay_fit_mjcf_replays_its_windows_within_1e_6(tmp_path):
    """A torque replay (--replay torque, the UR10e's kind of fit; here the Franka torque twin): the motors apply the
    logged torque less the fitted offset, delayed, window by window from the measured states."""
    from isaaclab_sysid.importers.torque_runs import TorqueSource, torque_run
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.twin.demo import joint_target
    from isaaclab_sysid.twin.torque_twin import OFFSET, torque_logged

    robot = load_robot("franka_panda")
    logged = torque_logged(robot, joint_target(robot, 1.5, seed=29, name="held"), seed=2, noise=0.02, offset=OFFSET)
    run = torque_run(logged, TorqueSource("tau", includes_gravity=False))
    vals = {**{g: np.asarray(v) for g, v in FRANKA_FIT.items() if g != "delay"}, "delay": 2,
            "torque_offset": np.asarray(OFFSET, dtype=float)}
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in vals}, robot.n_dof, robot.joint_names)
    result = FitResult.from_search(space, space.normalize(vals), 0.0, run_names=["r"], weighted_loss=np.zeros(1),
                                   traj_weights=np.ones(1))
    opts = ReplayOptions(window_ticks=200)
    fit = mjcf.fitted_joints(result, robot.n_dof, opts.stribeck_velocity)
    assert fit.torque_offset is not None and np.any(fit.torque_offset != 0)
    path = mjcf.write_mjcf(tmp_path / "franka_torque.xml", robot, fit, opts)
    check = mjcf.check_mjcf(path, robot, result, [run], opts)
    print("\n".join(check.lines()))
    assert check.passed and check.samples == [run.n_samples], check.lines()
    no_offset = mjcf.write_mjcf(tmp_path / "x.xml", robot, dataclasses.replace(fit, torque_offset=None), opts)
    assert mjcf.check_mjcf(no_offset, robot, result, [run], opts).worst > 1e-4


def _export_dr_main():
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_dr_script", Path(__file__).parents[1] / "scripts" / "export_dr.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve the module of Args through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_export_dr_mjcf_prints_the_figure_and_refuses_a_failing_file(franka_fit, tmp_path, capsys, monkeypatch):
    """scripts/export_dr.py --mjcf: the file and the check's figure; a file that misses: exit 2, one line, no file."""
    script = _export_dr_main()
    assert script.main(script.Args(fit_dir=str(franka_fit), out=str(tmp_path / "ok"), mjcf=True, quiet=True)) == 0
    out = capsys.readouterr().out
    assert "task_heldout: max |q_mjcf - q_fit| =" in out and "MJCF replay PASS" in out
    assert (tmp_path / "ok" / "franka_panda_sysid.xml").is_file()
    real = mjcf.fitted_joints
    monkeypatch.setattr(mjcf, "fitted_joints",
                        lambda *a, **k: dataclasses.replace(real(*a, **k), viscous=real(*a, **k).viscous * 1.05))
    assert script.main(script.Args(fit_dir=str(franka_fit), out=str(tmp_path / "bad"), mjcf=True, quiet=True)) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "rad away from the fit's replay (required <= 1e-06 rad): not written" in err
    assert not (tmp_path / "bad" / "franka_panda_sysid.xml").exists()


def test_substeps_and_slew_limit_replay_as_the_fit_and_a_servo_with_substeps_is_refused(tmp_path):
    """A fit replayed with 2 physics steps per tick and the torque slew limit (the bundled demo's setup): the file's
    timestep is half a tick, the motor's torque held over both; a servo cannot be written so (MuJoCo would apply
    its PD on every physics step, the fit once per tick)."""
    from isaaclab_sysid.sim.interface import ReplayOptions

    robot = load_robot("franka_panda")
    ctx = FitContext.load(_fit_dir(tmp_path, "franka_panda", FRANKA_FIT, "armature,friction,viscous,delay",
                                   [_task_run(robot, 0, 1.0, "t0")], [], torque_clamp=True))
    runs = [_task_run(robot, 3, 1.5, "t1")]
    opts = ReplayOptions(torque_clamp=True, slew_limit=True)
    fit = mjcf.fitted_joints(ctx.result, robot.n_dof, opts.stribeck_velocity)
    path = mjcf.write_mjcf(tmp_path / "sub2.xml", robot, fit, opts, substeps=2)
    assert mujoco.MjModel.from_xml_path(str(path)).opt.timestep == 0.0005
    ref = mjcf.fit_rollouts(robot, ctx.result, runs, opts, substeps=2)
    check = mjcf.check_mjcf(path, robot, ctx.result, runs, opts, fit_states=ref)
    assert check.passed, check.lines()
    one = mjcf.check_mjcf(mjcf.write_mjcf(tmp_path / "sub1.xml", robot, fit, opts), robot, ctx.result, runs, opts,
                          fit_states=ref)
    assert one.worst > 1e-6  # the file must carry the fit's step: one step per tick replays another discretization
    servo = dataclasses.replace(fit, kp=np.full(robot.n_dof, 50.0), kd=np.full(robot.n_dof, 2.0))
    with pytest.raises(mjcf.MjcfError, match="acts on every physics step"):
        mjcf.write_mjcf(tmp_path / "servo.xml", robot, servo, opts, substeps=2)


def test_so100_servo_mjcf_replays_within_1e_6(tmp_path):
    """The SO-100 (its URDF's own zeros: setpoints about the middle of its ranges) written and checked the same way."""
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.sim.interface import ReplayOptions

    robot = load_robot("so100")
    n = robot.n_dof
    vals = {"kp": np.asarray(SO101_FIT["kp"]), "kd": np.asarray(SO101_FIT["kd"]), "armature": np.full(n, 0.01),
            "friction": np.full(n, 0.03), "delay": 5, "encoder_offset": np.full(n, 0.01)}
    bounds = {"kp": (1.0, 60.0), "kd": (0.0, 2.0), "armature": DEFAULT_BOUNDS["armature"], "friction": (0.0, 0.3),
              "delay": (0, 12), "encoder_offset": (-0.08, 0.08)}
    space = ParamSpace.from_bounds(bounds, n, robot.joint_names)
    result = FitResult.from_search(space, space.normalize(vals), 0.0, run_names=["r"], weighted_loss=np.zeros(1),
                                   traj_weights=np.ones(1))
    mid = 0.5 * (robot.q_lower + robot.q_upper)
    run = _servo_run(robot, 4, 5.0, "so100")
    run = dataclasses.replace(run, q_des=np.clip(run.q_des - run.q_des[0] + mid, robot.q_lower, robot.q_upper),
                              meta=dataclasses.replace(run.meta, q_init=mid))
    opts = ReplayOptions(torque_clamp=True)
    path = mjcf.write_mjcf(tmp_path / "so100_sysid.xml", robot, mjcf.fitted_joints(result, n, 0.05), opts)
    check = mjcf.check_mjcf(path, robot, result, [run], opts)
    assert check.passed and check.samples == [150], check.lines()
