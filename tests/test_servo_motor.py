"""The servo motor model (issue 42; sim/servo.py, native/replay.c ``CTRL_SERVO``, docs/servo_arms.md): a smart
servo's firmware duty, current window and DC motor with back-EMF, torque-off phases, the bus delay and the
encoder offset, replayed by the native loop exactly as the plain-Python reference specifies; the bench robot; the
refusals."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.data.run import Run, RunMeta
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.fit.problem import build_space
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.bench import BenchError, pendulum_robot_config, pendulum_toml, pendulum_urdf, write_pendulum
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.robots.servos import SERVO_FAMILIES, UnknownServoFamily, servo_family
from isaaclab_sysid.sim.friction import LAWS
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.reference import reference_replay
from isaaclab_sysid.sim.servo import ServoModelError, families_of, servo_table, servo_torque
from isaaclab_sysid.paths import ROBOT_CONFIGS_DIR

KT, R, ARM, FC, VISC = 0.38, 3.4, 0.0019, 0.009, 0.0044


@pytest.fixture(scope="module")
def bench():
    return load_robot("bam_pendulum_xl330")


def servo_run(kp: float = 400.0, seconds: float = 3.0, off_from: float | None = 1.6, volts: float | None = 7.3) -> Run:
    """A 200 Hz servo run: goal steps and a sine, the torque off from ``off_from`` s to the end less 0.5 s."""
    rate = 200.0
    t = np.arange(int(seconds * rate)) / rate
    goal = np.where(t < 0.5, 0.0, np.where(t < 1.0, 1.2, 0.8 * np.sin(2 * np.pi * 1.3 * t)))[:, None]
    enable = np.ones_like(goal, dtype=bool)
    if off_from is not None:
        enable[(t >= off_from) & (t < seconds - 0.5)] = False
    n = len(t)
    meta = RunMeta(robot="bam_pendulum_xl330", controller="servo", control_rate_hz=rate, log_rate_hz=rate,
                   num_samples=n, q_init=np.zeros(1), anchor_pos=np.zeros(3), anchor_quat=np.array([0, 0, 0, 1.0]),
                   kp=np.array([kp]), kd=np.zeros(1), gravity_compensated=False)
    nan = np.full((n, 1), np.nan)
    return Run(name="servo_steps", meta=meta, t=t, q=np.zeros((n, 1)), dq=np.zeros((n, 1)), ee_pos=np.zeros((n, 3)),
               ee_quat=np.tile([0, 0, 0, 1.0], (n, 1)), tau=nan, tau_J=nan, q_des=goal, torque_enable=enable,
               supply_v=None if volts is None else np.full((n, 1), volts))


def batch(**kw) -> CandidateBatch:
    base = dict(armature=[[ARM]], friction=[[FC]], viscous=[[VISC]], delay=[3], motor_kt=[[KT]], motor_r=[[R]],
                load_friction_motor=[[0.12]], load_friction_external=[[0.08]], encoder_offset=[[0.02]])
    base.update(kw)
    return CandidateBatch(**{k: np.asarray(v, dtype=float if k != "delay" else int) for k, v in base.items()})


def test_servo_torque_is_the_dc_motor_behind_the_firmware_duty():
    fam = servo_family("xl330")
    tab = servo_table((fam,), np.array([KT]), np.array([R]))
    # small error, at rest: duty = error_gain kp e, torque kt V duty / R
    e = 0.01
    tau = servo_torque(tab, np.array([400.0]), np.array([e]), np.ones(1), np.array([7.3]), np.zeros(1), np.zeros(1))
    duty = fam.error_gain * 400 * e
    assert tau[0] == pytest.approx(KT * duty * 7.3 / R, rel=1e-12)
    # back-EMF: the same duty gives less torque when moving with it
    mov = servo_torque(tab, np.array([400.0]), np.array([e]), np.ones(1), np.array([7.3]), np.zeros(1), np.array([2.0]))
    assert mov[0] == pytest.approx(KT * (duty * 7.3 - KT * 2.0) / R, rel=1e-12)
    # a large error: the current window holds |I| <= 1.75 A at rest
    big = servo_torque(tab, np.array([400.0]), np.array([2.0]), np.ones(1), np.array([7.3]), np.zeros(1), np.zeros(1))
    assert big[0] == pytest.approx(KT * 1.75, rel=1e-12)
    # torque off: nothing; no voltage recorded: the family's nominal
    assert servo_torque(tab, np.array([400.0]), np.array([e]), np.zeros(1), np.array([7.3]), np.zeros(1), np.zeros(1))[0] == 0
    nom = servo_torque(tab, np.array([400.0]), np.array([e]), np.ones(1), np.array([np.nan]), np.zeros(1), np.zeros(1))
    assert nom[0] == pytest.approx(KT * duty * fam.vin_nominal_v / R, rel=1e-12)


@pytest.mark.parametrize("volts", [7.3, None])
def test_native_servo_replay_equals_the_reference(bench, volts):
    run = servo_run(volts=volts)
    opts = ReplayOptions(warmup_ticks=20)
    be = MujocoBackend(bench, opts, n_threads=1)
    ro = be.rollout(batch(encoder_offset=[[0.0]]), [run])[0]
    tab = servo_table(families_of(bench.config.servo, 1, bench.name), np.array([KT]), np.array([R]))
    lp = np.zeros((1, 4))
    lp[0, :2] = 0.12, 0.08
    ref = reference_replay(bench, run, JointOverrides(np.array([ARM]), np.array([FC]), np.array([VISC])), delay=3,
                           options=opts, friction_law=(LAWS["load"], lp), servo=tab)
    assert not ro.diverged[0]
    assert np.ptp(ref["q"]) > 0.5  # the pendulum moved
    np.testing.assert_allclose(ro.q[0], ref["q"], atol=1e-9, rtol=0)
    np.testing.assert_allclose(ro.tau[0], ref["tau"], atol=1e-9, rtol=0)


def test_torque_off_phase_lets_the_pendulum_fall_and_swing(bench):
    run = servo_run(off_from=1.6)
    be = MujocoBackend(bench, ReplayOptions(warmup_ticks=0), n_threads=1)
    ro = be.rollout(batch(delay=[0]), [run])[0]  # (with a delay the enable row also arrives late)
    off = ~run.torque_enable[:, 0]
    assert np.all(ro.tau[0, off, 0] == 0.0)  # no motor torque while off
    assert np.any(ro.tau[0, ~off, 0] != 0.0)
    # off at 1.6 s with the goal away from the bottom: it falls back toward q = 0 (hanging) and swings through it
    q_off = ro.q[0, off, 0]
    assert np.min(np.abs(q_off)) < 0.1


def test_encoder_offset_shifts_goals_not_enable_or_voltage(bench):
    run = servo_run()
    be = MujocoBackend(bench, ReplayOptions(warmup_ticks=20), n_threads=1)
    a = be.rollout(batch(encoder_offset=[[0.0]], delay=[0]), [run])[0]
    b = be.rollout(batch(encoder_offset=[[0.05]], delay=[0]), [run])[0]
    # with the offset, the true joint is driven to goal - offset and the logged (encoder) position is true + offset:
    # in the held (tracking) phase the logged positions agree within the gravity sag change
    assert not np.allclose(a.q, b.q)
    assert np.all(b.tau[0, ~run.torque_enable[:, 0], 0] == 0.0)


def test_delay_is_the_bus_delay_of_the_goal(bench):
    run = servo_run(off_from=None)
    be = MujocoBackend(bench, ReplayOptions(warmup_ticks=20), n_threads=1)
    q0 = be.rollout(batch(delay=[0]), [run])[0].q[0, :, 0]
    q4 = be.rollout(batch(delay=[4]), [run])[0].q[0, :, 0]
    step = int(0.5 * 200)  # the goal steps at 0.5 s: the delayed replay leaves later
    assert q0[step + 1] > q4[step + 1] + 1e-6


def test_servo_runs_refused_without_the_motor_model(bench):
    run = servo_run()
    be = MujocoBackend(bench, n_threads=1)
    no_motor = CandidateBatch(armature=np.array([[ARM]]), friction=np.array([[FC]]), viscous=np.array([[VISC]]),
                              delay=np.array([0]))
    with pytest.raises(ServoModelError, match="motor_kt, motor_r"):
        be.rollout(no_motor, [run])
    with pytest.raises(ServoModelError, match="states no servo family"):
        MujocoBackend(load_robot("so101"), n_threads=1)._run_job  # noqa: B018 - the robot check is at replay time
        families_of(None, 1, "so101")
    d_gain = servo_run()
    d_gain.meta.kd = np.array([3.0])
    with pytest.raises(ValueError, match="D gain"):
        be.rollout(batch(), [d_gain])


def test_fit_space_for_servo_runs():
    names = ("servo",)
    auto = build_space(FitArgs.build(real_csv=["x.csv"]).problem, names, servo=True, log=lambda s: None)
    for g in ("motor_kt", "motor_r", "encoder_offset", "armature", "friction"):
        assert g in auto.group_names
    with pytest.raises(FitError, match="motor_kt and motor_r"):
        build_space(FitArgs.build(real_csv=["x.csv"], fit_groups="armature,friction").problem, names, servo=True)


def test_bench_robot_is_the_pendulum_of_its_header(bench, tmp_path):
    import mujoco

    # the shipped config is what the generator writes
    assert (ROBOT_CONFIGS_DIR / "bam_pendulum_xl330.toml").read_text() == pendulum_toml(
        "bam_pendulum_xl330", "urdf/bam_pendulum_xl330.urdf", 0.49, 0.1, "xl330")
    assert (ROBOT_CONFIGS_DIR / "urdf" / "bam_pendulum_xl330.urdf").read_text() == pendulum_urdf(0.49, 0.1)
    assert bench.config.servo == ("xl330",)
    m = bench.build_mujoco(gravity=True)
    d = mujoco.MjData(m)
    d.qpos[0] = 0.7
    mujoco.mj_forward(m, d)
    g = float(-m.opt.gravity[2])
    assert -d.qfrc_bias[0] == pytest.approx(-0.49 * g * 0.1 * np.sin(0.7), rel=1e-9)  # BAM's -m g l sin q
    full = np.zeros((1, 1))
    mujoco.mj_fullM(m, d, full)
    assert full[0, 0] == pytest.approx(0.49 * 0.1**2, rel=1e-4)
    # another header: its own config, in the folder named
    assert pendulum_robot_config(0.49, 0.1, "xl330") == "bam_pendulum_xl330"
    path = pendulum_robot_config(0.3, 0.15, "sts3215", tmp_path)
    other = load_robot(path)
    assert other.config.servo == ("sts3215",)
    with pytest.raises(BenchError):
        pendulum_robot_config(0.3, 0.15, "sts3215")
    with pytest.raises(BenchError):
        write_pendulum(-1.0, 0.1, "xl330", tmp_path)
    with pytest.raises(UnknownServoFamily, match="known: sts3215, xl330"):
        servo_family("mx28")
    assert set(SERVO_FAMILIES) == {"xl330", "sts3215"}


def test_servo_runs_get_servo_scale_boxes_unless_flagged():
    from isaaclab_sysid.fit.problem import SERVO_BOUNDS, servo_scale_bounds

    args = FitArgs.build(real_csv=["x.csv"], friction_bounds=(0.0, 2.0))
    lines = []
    servo_scale_bounds(args.problem, lines.append)
    assert args.params.friction_bounds == (0.0, 2.0)  # the user's box is kept
    assert args.params.viscous_bounds == SERVO_BOUNDS["viscous"]
    assert "viscous 0..0.1" in lines[0] and "friction" not in lines[0].split("(")[1].split(";")[0]


def _bench_runs(tmp_path, seconds: float = 2.5):
    """Noise-free servo runs on two benches (the shipped 0.49 kg at 0.1 m and a 0.3 kg at 0.15 m) at the truth."""
    from isaaclab_sysid.data import write_run

    other = write_pendulum(0.3, 0.15, "xl330", tmp_path)
    truth, paths = batch(), []
    for ref in ("bam_pendulum_xl330", str(other)):
        be = MujocoBackend(load_robot(ref), ReplayOptions(warmup_ticks=50), n_threads=1)
        for kp in (200.0, 400.0):
            run = servo_run(kp=kp, seconds=seconds, off_from=1.5)
            run.meta.robot, run.meta.state_age_ms = ref, 0
            ro = be.rollout(truth, [run])[0]
            run.q, run.dq, run.ee_pos, run.ee_quat = ro.q[0], ro.dq[0], ro.ee_pos[0], ro.ee_quat[0]
            run.name = f"{'a' if ref.startswith('bam') else 'b'}_kp{int(kp)}"
            paths.append(str(write_run(run, tmp_path / f"{run.name}.csv")[0]))
    return paths


def test_several_benches_fit_one_servo(tmp_path):
    from isaaclab_sysid.jobs.fit_args import resolve_problem
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.jobs.fit_job import run_fit
    from isaaclab_sysid.sim.benches import BenchSetBackend

    paths = _bench_runs(tmp_path)
    groups = "armature,friction,load,viscous,delay,motor_kt,motor_r,encoder_offset"
    args = FitArgs.build(real_csv=[paths[0], paths[2]], heldout_csv=[paths[1], paths[3]], fit_groups=groups,
                         log_dir=str(tmp_path / "fit"), plots=False)
    lines: list[str] = []
    problem = resolve_problem(args, lines.append)
    assert isinstance(problem.backend, BenchSetBackend) and len(problem.backend.backends) == 2
    assert any("2 benches, one servo" in s for s in lines)
    # each run replays on its own bench: the two benches' runs differ at the same parameters
    ro = problem.backend.rollout(batch(), problem.runs)
    assert np.abs(ro[0].q[0] - ro[1].q[0]).max() > 0.05
    problem.backend.close()
    run_dir = run_fit(FitArgs.build(real_csv=[paths[0], paths[2]], heldout_csv=[paths[1], paths[3]],
                                    fit_groups=groups, log_dir=str(tmp_path / "fit"), plots=False), lambda s: None)
    fitted = FitResult.read(run_dir / "sysid_best_params.json").values
    truth = dict(armature=ARM, friction=FC, viscous=VISC, motor_kt=KT, motor_r=R, load_friction_motor=0.12,
                 load_friction_external=0.08, encoder_offset=0.02)
    for g, v in truth.items():
        assert float(fitted[g][0]) == pytest.approx(v, rel=1e-3, abs=1e-6), g
    assert int(fitted["delay"]) == 3


def test_benches_with_different_servos_are_refused(tmp_path):
    from isaaclab_sysid.data import read_run
    from isaaclab_sysid.fit.problem import bench_set

    paths = _bench_runs(tmp_path, seconds=1.0)
    runs = [read_run(p) for p in paths]
    assert bench_set(runs[:2]) is None  # one bench
    assert set(bench_set(runs)) == {r.meta.robot for r in runs}
    sts = write_pendulum(0.3, 0.15, "sts3215", tmp_path / "sts")
    runs[-1].meta.robot = str(sts)
    with pytest.raises(FitError, match="different servos"):
        bench_set(runs)
