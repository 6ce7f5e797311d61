"""The servo as a part (issue 42 item 4; robots/servo_model.py, export/servo_part.py, docs/servo_arms.md): the part
file's round trip and refusals, an arm config naming a part per joint, the exact mapping onto Isaac Lab's DCMotor
and where it stops holding, the MJCF export of a servo-motor fit replaying as the fit, and the refusals of the laws
an export would reduce."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.data.formats.csv_run import write_run
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.export.build import EXPORTED_MOTOR_LAWS, ExportError, FitContext, check_exported_law, \
    export_mjcf, export_servo_part
from isaaclab_sysid.export.servo_part import ServoPartError, dc_motor_holds, dc_motor_params, servo_model_of
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.fit.outputs import write_config
from isaaclab_sysid.fit.problem import build_space
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.paths import ROBOT_CONFIGS_DIR
from isaaclab_sysid.robots import load_robot, load_robot_config
from isaaclab_sysid.robots.config import RobotConfigError
from isaaclab_sysid.robots.servo_model import PART_LAWS, Estimate, ServoModel, ServoModelFileError, part_values, \
    read_servo_model, write_servo_model
from isaaclab_sysid.robots.servos import servo_family
from isaaclab_sysid.sim.friction import LAWS
from isaaclab_sysid.sim.servo import servo_table, servo_torque

sys.path.insert(0, str(Path(__file__).parent))
from test_servo_motor import servo_run  # noqa: E402  (the 200 Hz bench run with steps, a sine and a torque-off phase)

KT, R = 0.377, 3.37
VALUES = {"armature": [0.0024], "friction": [0.03], "viscous": [0.006], "delay": 4, "motor_kt": [KT], "motor_r": [R],
          "encoder_offset": [-0.02]}


def _part(**kw) -> ServoModel:
    base = dict(family="xl330", kt=Estimate(KT, 0.35, 0.40), r=Estimate(R, 3.1, 3.6), armature=Estimate(0.0024, 0.002, 0.003),
                friction_law="load", friction={"friction": Estimate(0.007), "load_friction_motor": Estimate(0.35, 0.3, 0.4),
                                               "load_friction_external": Estimate(0.11, None, 0.2, "unbounded below")},
                viscous=Estimate(0.006, 0.005, 0.007), delay=Estimate(4, 3, 5), source="fit/sysid_best_params.json",
                joint="servo", notes=("kt and R trade off",))
    base.update(kw)
    return ServoModel(**base)


# ------------------------------------------------------------------------------------------- the part file
def test_part_file_round_trip(tmp_path):
    part = _part()
    p = write_servo_model(tmp_path / "xl330.json", part)
    assert read_servo_model(p) == part
    body = json.loads(p.read_text())
    assert body["kt"] == {"value": KT, "lower": 0.35, "upper": 0.40, "note": ""}
    assert body["units"]["kt"] == "N m/A" and body["friction_law"] == "load"
    assert part.values()["motor_r"] == R and part.values()["load_friction_motor"] == 0.35


def test_part_laws_are_the_replays_laws():
    assert PART_LAWS == {name: law.fit_groups for name, law in LAWS.items()}


@pytest.mark.parametrize("edit, key", [
    (lambda b: b.pop("kt"), "'kt': missing"),
    (lambda b: b["r"].update(value=-1.0), "'r.value': must be > 0"),
    (lambda b: b["kt"].update(value="x"), "'kt.value': expected a finite number"),
    (lambda b: b.update(family="mx999"), "'family'"),
    (lambda b: b.update(friction_law="magic"), "'friction_law'"),
    (lambda b: b["friction"].pop("load_friction_motor"), "'friction': the load law's parameters"),
    (lambda b: b["delay"].update(value=2.5, lower=2.0, upper=3.0), "'delay.value': must be a whole number"),
    (lambda b: b["armature"].update(lower=0.01), "'armature': the interval"),
    (lambda b: b.update(kind="something"), "'kind'"),
])
def test_bad_part_file_refused_in_one_line_naming_file_and_key(tmp_path, edit, key):
    body = _part().to_json()
    edit(body)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(body))
    with pytest.raises(ServoModelFileError) as exc:
        read_servo_model(p)
    msg = str(exc.value)
    assert "\n" not in msg and str(p) in msg and key in msg
    p.write_text("{not json")
    with pytest.raises(ServoModelFileError, match="bad.json"):
        read_servo_model(p)


# --------------------------------------------------------------------------------------- the arm config
def _arm_config(tmp_path: Path, servo_model, servo: str | None = "xl330") -> Path:
    urdf = ROBOT_CONFIGS_DIR / "urdf" / "bam_pendulum_xl330.urdf"
    lines = ['name = "my_bench"', f'urdf = "{urdf}"', 'base_link = "base_link"', 'joints = ["servo"]',
             'ee_link = "pendulum"', "gravity_compensated = false", f"servo_model = {json.dumps(servo_model)}"]
    if servo:
        lines.append(f'servo = "{servo}"')
    p = tmp_path / "arms" / "my_bench.toml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(lines) + "\n")
    return p


def test_arm_config_names_a_part_per_joint_relative_to_its_folder(tmp_path):
    part = _part()
    (tmp_path / "arms" / "parts").mkdir(parents=True)
    write_servo_model(tmp_path / "arms" / "parts" / "xl330.json", part)
    cfg = load_robot_config(_arm_config(tmp_path, ["parts/xl330.json"], servo=None))
    assert cfg.servo_model == (part,)
    assert cfg.servo == ("xl330",)  # the part states the family when the config does not
    assert cfg.servo_model_paths == (tmp_path / "arms" / "parts" / "xl330.json",)
    assert part_values(cfg.servo_model)["motor_kt"] == [KT] and part_values(cfg.servo_model)["delay"] == [4.0]
    robot = load_robot(_arm_config(tmp_path, "parts/xl330.json"))  # one name for every joint; the Robot builds
    assert robot.config.servo_model == (part,)


def test_arm_config_refuses_a_missing_or_bad_part_or_a_family_clash(tmp_path):
    with pytest.raises(RobotConfigError, match="does not exist"):
        load_robot_config(_arm_config(tmp_path, ["nowhere.json"]))
    body = _part().to_json()
    body["r"]["value"] = 0
    (tmp_path / "arms" / "bad.json").write_text(json.dumps(body))
    with pytest.raises(RobotConfigError) as exc:
        load_robot_config(_arm_config(tmp_path, ["bad.json"]))
    assert "'servo_model'" in str(exc.value) and "bad.json" in str(exc.value) and "'r.value'" in str(exc.value)
    write_servo_model(tmp_path / "arms" / "good.json", _part())
    with pytest.raises(RobotConfigError, match="is a xl330 part"):
        load_robot_config(_arm_config(tmp_path, ["good.json"], servo="sts3215"))
    with pytest.raises(RobotConfigError, match="1 or 1"):
        load_robot_config(_arm_config(tmp_path, ["good.json", "good.json"]))


# ------------------------------------------------------------------------------------- Isaac Lab DCMotor
def _isaaclab_dc_motor(p, n_env: int):
    """Isaac Lab's own DCMotor (isaaclab/actuators/actuator_pd.py) with the mapped numbers, on the CPU."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("isaaclab.actuators")
    from isaaclab.actuators import DCMotorCfg
    from isaaclab.actuators.actuator_pd import DCMotor

    cfg = DCMotorCfg(joint_names_expr=[".*"], stiffness=p.stiffness, damping=p.damping, saturation_effort=p.saturation_effort,
                     actuator_velocity_limit=p.velocity_limit,
                     actuator_effort_limit=None if math.isinf(p.effort_limit) else p.effort_limit)
    return torch, DCMotor(cfg, ["servo"], slice(None), n_env, "cpu")


@pytest.mark.parametrize("family, volts, kp", [("xl330", 7.4, 400.0), ("xl330", 6.9, 100.0), ("sts3215", 7.4, 32.0)])
def test_dc_motor_mapping_equals_the_servo_model_where_it_holds(family, volts, kp):
    fam = servo_family(family)
    p = dc_motor_params(fam, KT, R, kp, volts)
    assert p.damping == pytest.approx(KT ** 2 / R) and p.saturation_effort / p.velocity_limit == pytest.approx(p.damping)
    err, dq = np.meshgrid(np.linspace(-1.5, 1.5, 61), np.linspace(-3 * p.velocity_limit, 3 * p.velocity_limit, 81))
    err, dq = err.ravel(), dq.ravel()
    n = err.size
    tab = np.repeat(servo_table((fam,), np.array([KT]), np.array([R])), n, axis=0)
    ours = servo_torque(tab, np.full(n, kp), err, np.ones(n), np.full(n, volts), np.zeros(n), dq)
    torch, motor = _isaaclab_dc_motor(p, n)
    from isaaclab.utils.types import ArticulationActions

    act = ArticulationActions(joint_positions=torch.tensor(err[:, None]), joint_velocities=torch.zeros(n, 1, dtype=torch.float64),
                              joint_efforts=torch.zeros(n, 1, dtype=torch.float64))
    motor.stiffness = motor.stiffness.double()
    motor.damping = motor.damping.double()
    lab = motor.compute(act, torch.zeros(n, 1, dtype=torch.float64), torch.tensor(dq[:, None])).joint_efforts
    lab = lab.double().numpy()[:, 0]
    holds = dc_motor_holds(p, dq)
    assert holds.sum() > n // 3  # a grid that spans the envelope: saturated and unsaturated duty, both signs
    np.testing.assert_allclose(lab[holds], ours[holds], rtol=1e-5, atol=1e-6 * p.saturation_effort)
    if math.isinf(p.effort_limit):  # no current limit (STS3215): exact at every speed
        assert holds.all()
    else:  # beyond the corner speed the servo applies the duty-clip torque, DCMotor its continuous limit
        gap = np.abs(lab[~holds] - ours[~holds])
        assert (~holds).any() and gap.max() > 0.1 * p.effort_limit
        assert np.all(np.abs(lab[~holds]) <= p.effort_limit + 1e-9)


def test_dc_motor_numbers_are_the_derivation():
    fam = servo_family("xl330")
    p = dc_motor_params(fam, KT, R, 400.0, 7.4)
    assert p.stiffness == pytest.approx(KT * 7.4 * fam.error_gain * 400 / R, rel=1e-12)
    assert p.saturation_effort == pytest.approx(KT * 7.4 * fam.max_pwm / R, rel=1e-12)
    assert p.velocity_limit == pytest.approx(7.4 * fam.max_pwm / KT, rel=1e-12)
    assert p.effort_limit == pytest.approx(KT * fam.max_current_a, rel=1e-12)
    assert p.corner_velocity == pytest.approx(p.velocity_limit * (1 + p.effort_limit / p.saturation_effort), rel=1e-12)
    assert dc_motor_params(fam, KT, R, 400.0).stiffness == pytest.approx(p.stiffness)  # the nominal supply


# ------------------------------------------------------------------------------------------ servo fits
def _servo_fit_dir(tmp: Path, values: dict, groups: str, name: str = "fit") -> Path:
    """A bench fit folder as the fit writes it, with ``values`` as the fitted numbers (two short servo runs)."""
    d = tmp / name
    (d / "runs").mkdir(parents=True)
    args = FitArgs()
    args.replay.robot = "bam_pendulum_xl330"
    args.params.fit_groups = groups
    args.replay.warmup_ticks = 20
    args.runs.state_age_ms = 0
    runs = [servo_run(kp=400.0, seconds=2.0, off_from=1.2), servo_run(kp=200.0, seconds=1.5, off_from=None, volts=None)]
    runs[1] = type(runs[1])(**{**runs[1].__dict__, "name": "servo_sine"})
    args.runs.real_csv.append(str(write_run(runs[0], d / "runs" / "a.csv")[0]))
    args.runs.heldout_csv.append(str(write_run(runs[1], d / "runs" / "b.csv")[0]))
    robot = load_robot("bam_pendulum_xl330")
    space = build_space(args.problem, robot.joint_names, robot.config, servo=True, log=lambda _s: None)
    x = space.normalize({k: np.asarray(v) for k, v in values.items()})
    result = FitResult.from_search(space, x, 0.0, run_names=["servo_steps"], weighted_loss=np.zeros(1),
                                   traj_weights=np.ones(1))
    RunFolder(d).write_result(result)
    write_config(d, args.problem.to_dict(), args.job_dict())
    return d


@pytest.fixture(scope="module")
def coulomb_fit(tmp_path_factory):
    return _servo_fit_dir(tmp_path_factory.mktemp("servo_part"), VALUES,
                          "armature,friction,viscous,delay,motor_kt,motor_r,encoder_offset")


@pytest.fixture(scope="module")
def load_fit(tmp_path_factory):
    vals = {**VALUES, "load_friction_motor": [0.3], "load_friction_external": [0.1]}
    return _servo_fit_dir(tmp_path_factory.mktemp("servo_part_load"), vals,
                          "armature,friction,viscous,delay,motor_kt,motor_r,encoder_offset,load_friction_motor,"
                          "load_friction_external")


def test_servo_model_of_a_fit_and_its_cli_file(coulomb_fit, tmp_path):
    ctx = FitContext.load(coulomb_fit)
    part = servo_model_of(ctx.result, None, "xl330", source="s")
    assert part.kt.value == pytest.approx(KT) and part.r.value == pytest.approx(R) and part.delay.value == 4
    assert part.friction_law == "coulomb" and part.friction["friction"].value == pytest.approx(0.03)
    assert part.kt.lower is None and "no intervals" in part.notes[0]
    p, written = export_servo_part(ctx, None, tmp_path / "part.json")
    assert read_servo_model(p) == written and written.family == "xl330" and written.joint == "servo"
    with pytest.raises(ServoPartError, match="no joint 'elbow'"):
        servo_model_of(ctx.result, None, "xl330", joint="elbow")


def test_servo_model_of_a_fit_without_the_motor_model_is_refused():
    args = FitArgs()
    args.params.fit_groups = "armature,friction"
    space = build_space(args.problem, ["servo"])
    res = FitResult.from_search(space, np.full(space.dim, 0.3), 0.0, run_names=[], weighted_loss=np.zeros(0),
                                traj_weights=np.zeros(0))
    with pytest.raises(ServoPartError, match="no servo motor model"):
        servo_model_of(res, None, "xl330")


@pytest.mark.parametrize("fit", ["coulomb_fit", "load_fit"])
def test_mjcf_of_a_servo_motor_fit_replays_as_the_fit(fit, request, tmp_path):
    ctx = FitContext.load(request.getfixturevalue(fit))
    path, check = export_mjcf(ctx, tmp_path, log=lambda _s: None)
    assert check.passed and check.worst <= 1e-6 and path.is_file()
    assert len(check.runs) == 1 and check.samples[0] > 100
    text = path.read_text()
    assert "sysid_servo_motor" in text and "servo motor model" in text


def test_exports_refuse_what_they_would_reduce(load_fit, coulomb_fit):
    load_space = FitContext.load(load_fit).space
    with pytest.raises(ExportError) as exc:
        check_exported_law(load_space, "isaaclab")
    assert "load friction law" in str(exc.value) and "\n" not in str(exc.value)
    check_exported_law(load_space, "mjcf")  # MJCF's driver applies the load law with the motor model
    check_exported_law(FitContext.load(coulomb_fit).space, "isaaclab")
    assert EXPORTED_MOTOR_LAWS["isaaclab"] == ("coulomb", "stribeck", "sigmoid", "dahl")  # SysidServoMotorWithLaw


def test_a_servo_run_on_a_file_without_the_motor_model_is_refused(coulomb_fit, tmp_path):
    from isaaclab_sysid.export import mjcf
    from isaaclab_sysid.sim.interface import ReplayOptions

    robot = load_robot("bam_pendulum_xl330")
    fit = mjcf.FittedJoints(armature=np.array([0.002]), friction=np.array([0.01]), viscous=np.zeros(1), delay=0)
    p = mjcf.write_mjcf(tmp_path / "plain.xml", robot, fit, ReplayOptions())
    import mujoco

    with pytest.raises(mjcf.MjcfError, match="not the servo motor model"):
        mjcf.replay_mjcf(mujoco.MjModel.from_xml_path(str(p)), servo_run(seconds=0.5), ReplayOptions())


def test_the_mjcf_check_sees_a_wrong_motor(coulomb_fit, tmp_path):
    """The 1e-6 rad check is not vacuous: the same file with kt 2 % off fails it on the fit's runs."""
    import re

    from isaaclab_sysid.export import mjcf

    ctx = FitContext.load(coulomb_fit)
    path, check = export_mjcf(ctx, tmp_path, log=lambda _s: None)
    problem = ctx.problem()
    text = path.read_text()
    m = re.search(r'name="sysid_servo_motor"[^>]*data="([^"]+)"', text)
    rows = [float(v) for v in m.group(1).split()]
    assert rows[4] == pytest.approx(KT) and rows[5] == pytest.approx(R)
    rows[4] *= 1.02
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace(m.group(1), " ".join(repr(v) for v in rows)))
    runs = list(problem.heldout)
    states = mjcf.fit_rollouts(problem.robot, ctx.result, runs, problem.backend.options)
    assert np.ptp(states[0][0]) > 0.3  # the pendulum moved
    worse = mjcf.check_mjcf(bad, problem.robot, ctx.result, runs, problem.backend.options, fit_states=states)
    assert not worse.passed and worse.worst > 1e-4


# ---------------------------------------------------------------------------------- the Isaac Lab module
@pytest.fixture(scope="module")
def servo_module(coulomb_fit, tmp_path_factory):
    from isaaclab_sysid.export.build import export, intervals_for
    from isaaclab_sysid.export.ranges import RangePolicy

    ctx = FitContext.load(coulomb_fit)
    rep = intervals_for(ctx, log=lambda _s: None)
    out = tmp_path_factory.mktemp("servo_module")
    paths, warns = export(ctx, out, rep, RangePolicy())
    return paths, warns, rep


def _literals(src: str) -> dict:
    from test_export_module import _literals as module_literals  # the generated module's literal assignments

    return module_literals(src)


def test_isaaclab_module_of_a_servo_motor_fit_holds_the_dc_motor_and_its_ranges(servo_module):
    paths, _warns, rep = servo_module
    lit = _literals(paths["module"].read_text())
    sm = lit["SERVO_MOTOR"]
    fam = servo_family("xl330")
    assert sm["kt"]["servo"] == pytest.approx(KT) and sm["r"]["servo"] == pytest.approx(R)
    assert sm["error_gain"]["servo"] == fam.error_gain and sm["max_current_a"]["servo"] == fam.max_current_a
    term = lit["EVENT_TERMS"]["servo_motor_servo"]
    assert term["func"] == "randomize_servo_motor"
    assert tuple(term["params"]["kt_range"]) == tuple(lit["RANGES"]["motor_kt[servo]"])
    assert tuple(term["params"]["r_range"]) == tuple(lit["RANGES"]["motor_r[servo]"])
    lo, hi = lit["RANGES"]["motor_kt[servo]"]
    assert lo < KT < hi
    assert lit["ACTUATOR_VALUES"]["friction"]["servo"] == pytest.approx(0.03)
    assert lit["FITTED"]["delay_steps"] == 4


def _load_module(path: Path):
    import importlib.util

    pytest.importorskip("isaaclab.managers")
    spec = importlib.util.spec_from_file_location(f"servo_export_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # configclass resolves its string annotations in the module
    spec.loader.exec_module(mod)
    return mod


def test_generated_servo_actuator_is_the_servo_model_with_its_delay(servo_module):
    """The module's SysidServoMotor, built by Isaac Lab from make_servo_motor_cfg on the CPU, applies servo_torque to
    the target of ``delay`` steps ago, wherever the mapping holds."""
    paths, _, _ = servo_module
    m = _load_module(paths["module"])
    torch = pytest.importorskip("torch")
    from isaaclab.utils.types import ArticulationActions

    with pytest.raises(ValueError, match="make_servo_motor_cfg"):
        m.make_actuator_cfg()
    cfg = m.make_servo_motor_cfg(400.0, 7.3, randomize_delay=False)
    assert cfg.min_delay == cfg.max_delay == 4
    n = 200
    act = cfg.class_type(cfg, ["servo"], slice(None), n, "cpu")
    act.reset(slice(None))
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, n)
    dq = rng.uniform(-8, 8, n)
    fam = servo_family("xl330")
    tab = np.repeat(servo_table((fam,), np.array([KT]), np.array([R])), n, axis=0)
    goals = [rng.uniform(-1.5, 1.5, n) for _ in range(6)]
    outs = []
    for g in goals:
        a = ArticulationActions(joint_positions=torch.tensor(g[:, None], dtype=torch.float32),
                                joint_velocities=torch.zeros(n, 1), joint_efforts=torch.zeros(n, 1))
        outs.append(act.compute(a, torch.tensor(q[:, None], dtype=torch.float32),
                                torch.tensor(dq[:, None], dtype=torch.float32)).joint_efforts.double().numpy()[:, 0])
    p = dc_motor_params(fam, KT, R, 400.0, 7.3)
    holds = dc_motor_holds(p, dq)
    ours = servo_torque(tab, np.full(n, 400.0), goals[0], np.ones(n), np.full(n, 7.3), q, dq)
    np.testing.assert_allclose(outs[4][holds], ours[holds], rtol=1e-5, atol=1e-5)  # step 4 applies the first goal
    assert not np.allclose(outs[4], outs[5])


def test_generated_randomization_redraws_every_dc_motor_number(servo_module):
    paths, _, _ = servo_module
    m = _load_module(paths["module"])
    cfg = m.make_servo_motor_cfg(400.0)
    n = 64
    act = cfg.class_type(cfg, ["servo"], slice(None), n, "cpu")
    term_spec = m.EVENT_TERMS["servo_motor_servo"]

    class _Scene(dict):
        num_envs = n

    class _Asset:
        actuators = {"sysid_arm": act}

    class _Env:
        scene = _Scene(robot=_Asset())

    class _Cfg:
        params = {"asset_cfg": type("A", (), {"name": "robot"})(), **term_spec["params"]}

    term = m.randomize_servo_motor.__new__(m.randomize_servo_motor)
    term.asset, term.actuator = _Env.scene["robot"], act
    term(_Env(), None, _Cfg.params["asset_cfg"], **term_spec["params"])
    kt_lo, kt_hi = term_spec["params"]["kt_range"]
    damping = act.damping[:, 0].double().numpy()
    sat = act._saturation_effort[:, 0].double().numpy()
    vlim = act.actuator_velocity_limit[:, 0].double().numpy()
    kt = 7.4 * servo_family("xl330").max_pwm / vlim  # vlim = V max_pwm / kt at the nominal supply
    r = kt * kt / damping
    assert np.all((kt >= kt_lo - 1e-6) & (kt <= kt_hi + 1e-6)) and np.ptp(kt) > 0
    vals = m.servo_motor_values(400.0, None, kt={"servo": float(kt[0])}, r={"servo": float(r[0])})
    assert float(act.stiffness[0, 0]) == pytest.approx(vals["stiffness"]["servo"], rel=1e-5)
    assert float(act.actuator_effort_limit[0, 0]) == pytest.approx(vals["actuator_effort_limit"]["servo"], rel=1e-5)
    assert float(sat[0]) == pytest.approx(vals["saturation_effort"]["servo"], rel=1e-5)
    corner = vals["actuator_velocity_limit"]["servo"] * (1 + vals["actuator_effort_limit"]["servo"] / vals["saturation_effort"]["servo"])
    assert float(act._vel_at_effort_lim[0, 0]) == pytest.approx(corner, rel=1e-5)


# ------------------------------------------------------------------------------------------ the fit's start
def test_a_part_seeds_the_fits_start(tmp_path):
    """``--x0 PART.json``: the groups the part holds start at its values on every joint (clipped to the bounds, said
    in the log); the groups it lacks keep the low start. ``seed_from_parts`` takes one part per joint (an arm config's
    ``servo_model``)."""
    from isaaclab_sysid.fit.problem import seed_from_parts, start_point

    args = FitArgs()
    args.params.fit_groups = "armature,friction,viscous,delay,motor_kt,motor_r,encoder_offset"
    args.params.delay_bounds = (0, 6)
    robot = load_robot("bam_pendulum_xl330")
    space = build_space(args.problem, robot.joint_names, robot.config, servo=True, log=lambda _s: None)
    part = _part(friction_law="coulomb", friction={"friction": Estimate(0.02, 0.01, 0.03)})
    p = write_servo_model(tmp_path / "part.json", part)
    lines: list[str] = []
    x = start_point(str(p), space, log=lines.append)
    dec = space.decode(x)
    assert dec["motor_kt"][0] == pytest.approx(KT) and dec["motor_r"][0] == pytest.approx(R)
    assert dec["friction"][0] == pytest.approx(0.02) and dec["delay"] == 4
    low = space.decode(space.low_start())
    assert dec["encoder_offset"][0] == pytest.approx(low["encoder_offset"][0])  # not the part's: a mounting's number
    assert "start from the servo part" in lines[0] and "motor_kt[servo] = 0.377" in lines[0]
    # a value outside the search box is clipped, and the log says so
    big = _part(kt=Estimate(50.0), friction_law="coulomb", friction={"friction": Estimate(0.02)})
    lines.clear()
    x2 = seed_from_parts(space.low_start(), space, (big,), lines.append)
    assert space.decode(x2)["motor_kt"][0] == pytest.approx(space.group("motor_kt").upper)
    assert "clipped to the search bounds: motor_kt[servo]" in lines[0]
    # a joint without a part keeps the start
    lines.clear()
    assert np.allclose(seed_from_parts(space.low_start(), space, (None,), lines.append), space.low_start())
    # a bad part file named as the start is refused in one line
    body = part.to_json()
    body["kt"]["value"] = -1
    (tmp_path / "bad.json").write_text(json.dumps(body))
    from isaaclab_sysid.objective.errors import FitError

    with pytest.raises(FitError, match="bad.json.*'kt.value'"):
        start_point(str(tmp_path / "bad.json"), space)


def test_check_export_refuses_a_servo_motor_module_in_one_line(servo_module):
    """scripts/check_export.py reads a PD actuator back in Isaac Lab; a servo motor module is refused before any
    simulation starts, not checked as something it is not."""
    from isaaclab_sysid.export.check import CheckError, check_module

    paths, _, _ = servo_module
    m = _load_module(paths["module"])
    with pytest.raises(CheckError, match="servo motor model") as exc:
        check_module(m, load_robot("bam_pendulum_xl330"), log=lambda _s: None)
    assert "\n" not in str(exc.value)


def test_export_cli_writes_the_part_and_the_mjcf_of_a_load_law_servo(load_fit, tmp_path, capsys):
    """``export_dr.py --servo_model``: the part is written before the Isaac Lab export refuses the load law (exit 2);
    ``--no_isaaclab --mjcf`` writes the part and the exact MJCF only."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_dr_cli", Path(__file__).parents[1] / "scripts" / "export_dr.py")
    cli = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = cli  # its dataclass resolves string annotations in the module
    spec.loader.exec_module(cli)
    part = tmp_path / "xl330.json"
    rc = cli.main(cli.Args(fit_dir=str(load_fit), out=str(tmp_path / "a"), servo_model=str(part), quiet=True))
    err = capsys.readouterr().err
    assert rc == 2 and "load friction law" in err and read_servo_model(part).friction_law == "load"
    rc = cli.main(cli.Args(fit_dir=str(load_fit), out=str(tmp_path / "b"), servo_model=str(tmp_path / "p2.json"),
                           mjcf=True, no_isaaclab=True, quiet=True))
    out = capsys.readouterr().out
    assert rc == 0 and "MJCF replay PASS" in out
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["bam_pendulum_xl330_sysid.xml"]
    assert read_servo_model(tmp_path / "p2.json") == read_servo_model(part)
    # --no_isaaclab does not open a way round the refusal: the USD variant (Isaac Lab's asset) is refused the same
    rc = cli.main(cli.Args(fit_dir=str(load_fit), out=str(tmp_path / "c"), usd=True, no_isaaclab=True, quiet=True))
    assert rc == 2 and "load friction law" in capsys.readouterr().err


def test_a_fit_of_an_arm_whose_config_names_a_part_starts_from_it(tmp_path):
    """The fit job reads the arm config's parts (``servo_model``) and starts the groups they hold at their values."""
    from test_servo_motor import servo_run

    from isaaclab_sysid.data import write_run
    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_job import run_fit

    (tmp_path / "arms" / "parts").mkdir(parents=True)
    write_servo_model(tmp_path / "arms" / "parts" / "xl330.json", _part())
    cfg = _arm_config(tmp_path, ["parts/xl330.json"])
    run = servo_run(seconds=1.0, off_from=None)
    run.meta.robot, run.meta.state_age_ms = str(cfg), 0
    csv, _ = write_run(run, tmp_path / "r.csv")
    lines: list[str] = []
    run_fit(FitArgs.build(real_csv=[str(csv)], fit_groups="armature,friction,viscous,delay,motor_kt,motor_r",
                          log_dir=str(tmp_path / "fit"), plots=False, refine_iter=1, max_iter=1), lines.append)
    seeded = [s for s in lines if s.startswith("start from the servo part")]
    assert seeded and "motor_kt[servo]" in seeded[0]


def test_generated_servo_actuator_with_a_friction_law_adds_its_torque(servo_module):
    """Issue 46: a servo motor fit with the Gaz sigmoid law (the Coulomb fit's record with the law in place of its
    friction): make_servo_motor_cfg builds SysidServoMotorWithLaw, whose effort is the Coulomb module's DC-motor
    effort (its joint friction is native, not in the effort) plus the sigmoid's torque at the joint velocity, added
    after the DC motor's clip; check_exported_law no longer refuses it for Isaac Lab."""
    import dataclasses
    import json

    from isaaclab_sysid.export.isaaclab_module import generate_module
    from isaaclab_sysid.export.record import DrRecord

    paths, _, _ = servo_module
    torch = pytest.importorskip("torch")
    from isaaclab.utils.types import ArticulationActions

    rec = DrRecord.from_json(json.loads(paths["json"].read_text()))
    law = {"sigmoid_amplitude": [0.05], "sigmoid_slope": [12.0], "sigmoid_offset": [0.01]}
    fitted = {k: v for k, v in rec.fitted.items() if k != "friction"} | law
    rec = dataclasses.replace(rec, fitted=fitted, labels_per_joint={
        **{k: v for k, v in rec.labels_per_joint.items() if k != "friction"}, **{g: [f"{g}[servo]"] for g in law}})
    src, _ = generate_module(rec, viscous="independent", servo_families=[servo_family("xl330")])
    p = paths["module"].parent / "sysid_dr_isaaclab_sigmoid.py"
    p.write_text(src)
    m, coulomb = _load_module(p), _load_module(paths["module"])
    n = 50
    rng = np.random.default_rng(1)
    q, dq, goal = rng.uniform(-1, 1, n), rng.uniform(-3, 3, n), rng.uniform(-1.5, 1.5, n)
    outs = {}
    for name, mod in (("law", m), ("coulomb", coulomb)):
        cfg = mod.make_servo_motor_cfg(400.0, 7.3, randomize_delay=False)
        act = cfg.class_type(cfg, ["servo"], slice(None), n, "cpu")
        act.reset(slice(None))
        a = ArticulationActions(joint_positions=torch.tensor(goal[:, None], dtype=torch.float32),
                                joint_velocities=torch.zeros(n, 1), joint_efforts=torch.zeros(n, 1))
        outs[name] = act.compute(a, torch.tensor(q[:, None], dtype=torch.float32),
                                 torch.tensor(dq[:, None], dtype=torch.float32)).joint_efforts.double().numpy()[:, 0]
        outs[name + "_type"] = type(act).__name__
    assert outs["law_type"] == "SysidServoMotorWithLaw" and outs["coulomb_type"] == "SysidServoMotor"
    v = torch.tensor(dq, dtype=torch.float32).double().numpy()
    a_, s_, o_ = 0.05, 12.0, 0.01
    sig = -(a_ / (1 + np.exp(-s_ * (v + o_))) - a_ / (1 + np.exp(-s_ * o_)))
    np.testing.assert_allclose(outs["law"], outs["coulomb"] + sig, rtol=1e-6, atol=1e-6)
    assert np.abs(sig).max() > 0.02
