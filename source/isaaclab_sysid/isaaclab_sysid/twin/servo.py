"""The servo twin (issue 27): a LeRobot-recorded SO-101 whose truth is hidden from the fit.

The arm's servos close a PD loop on their own encoders (sim/servo.py) with gains nobody states,
drive a 1:345 gearbox (armature dominates the link inertia), stick (static above Coulomb friction,
Stribeck), hear the 30 Hz command over the bus a few ms late, and report positions quantized to
the encoder's 4096 counts per turn, offset by the homing calibration's error, read over the bus
0..``state_age_max_ms`` before each frame. :func:`record_servo_twin` records a 30 Hz run from a
target (the commanded positions); :func:`write_twin_dataset` writes runs as LeRobot writes them
(normalized range with the calibration file), so the proof goes through the importer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.importers.lerobot_dataset import Episode, json_calibration, write_calibration, write_lerobot_dataset
from isaaclab_sysid.importers.lerobot_units import COUNTS_PER_TURN, MotorCalibration, from_radians
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend, StribeckFriction
from isaaclab_sysid.twin.recorder import dense_run
from isaaclab_sysid.utils.atomic import atomic_write_text

STEP_RAD = 2.0 * np.pi / COUNTS_PER_TURN


@dataclass(frozen=True)
class ServoTruth:
    """The hidden truth of a servo arm, per joint (N,) unless stated.

    Attributes:
        kp: PD stiffness [N m/rad]; kd: PD damping [N m s/rad].
        armature: reflected rotor inertia [kg m^2].
        friction: Coulomb (sliding) friction [N m]; static_friction: breakaway [N m] (>= friction);
            stribeck_velocity: [rad/s]; viscous: [N m s/rad].
        delay: bus delay of the command [ticks of 1 ms] (one value).
        encoder_offset: homing calibration error [rad] (logged = true + offset).
        q_noise_counts: encoder noise before quantization [counts, std].
        actuator_tau_std: torque noise acting on the arm every tick [N m].
        state_age_max_ms: a row's state is 0..this many ms old (the bus read before the frame).
    """

    kp: np.ndarray
    kd: np.ndarray
    armature: np.ndarray
    friction: np.ndarray
    static_friction: np.ndarray
    stribeck_velocity: np.ndarray
    viscous: np.ndarray
    delay: int
    encoder_offset: np.ndarray
    q_noise_counts: float = 0.5
    actuator_tau_std: float = 0.004
    state_age_max_ms: int = 4

    def __post_init__(self) -> None:
        n = len(self.kp)
        for name in ("kp", "kd", "armature", "friction", "static_friction", "stribeck_velocity", "viscous",
                     "encoder_offset"):
            a = np.asarray(getattr(self, name), dtype=float)
            if a.shape != (n,) or not np.all(np.isfinite(a)) or (name != "encoder_offset" and np.any(a < 0)):
                raise ValueError(f"ServoTruth.{name} must be {n} finite" + (" non-negative" if name != "encoder_offset" else "")
                                 + " numbers")
        if np.any(np.asarray(self.static_friction) < np.asarray(self.friction)):
            raise ValueError("ServoTruth.static_friction must be >= friction (Coulomb)")
        if int(self.delay) != self.delay or self.delay < 0:
            raise ValueError("ServoTruth.delay must be a non-negative integer (ticks)")

    def as_dict(self) -> dict:
        """Plain values (lists) for reports and tests (the fit never reads this)."""
        return {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in dataclasses.asdict(self).items()}


def _a(*v: float) -> np.ndarray:
    return np.array(v, dtype=float)


#: An SO-101's hidden truth: plausible STS3215 values (1:345 gear; armature a few times the link inertia),
#: none of them a default or a bound of the fit.
SO101_TRUTH = ServoTruth(
    kp=_a(14.5, 21.0, 17.5, 9.5, 7.2, 5.6),
    kd=_a(0.31, 0.44, 0.37, 0.19, 0.13, 0.09),
    armature=_a(0.0112, 0.0127, 0.0096, 0.0083, 0.0071, 0.0061),
    friction=_a(0.048, 0.066, 0.054, 0.041, 0.034, 0.029),
    static_friction=_a(0.071, 0.094, 0.079, 0.058, 0.049, 0.043),
    stribeck_velocity=_a(0.04, 0.035, 0.045, 0.05, 0.04, 0.05),
    viscous=_a(0.034, 0.041, 0.029, 0.024, 0.019, 0.016),
    delay=7,
    encoder_offset=_a(0.021, -0.034, 0.027, -0.015, 0.012, -0.025),
)

#: The SO-101 calibration the twin's dataset is written with (LeRobot's layout: range middles and half spans
#: [counts]; the gripper's drive mode inverted, as LeRobot's calibration often leaves one).
SO101_CAL_MIDS = (2047, 2049, 2046, 2048, 2047, 2263)
SO101_CAL_HALF = (1250, 1140, 1100, 1080, 1850, 1140)
SO101_CAL_DRIVE = (0, 0, 0, 0, 0, 1)


def servo_backend(robot: Robot, truth: ServoTruth, warmup_ticks: int = 200) -> MujocoBackend:
    """The twin's replay: Stribeck friction, the torque limit, gravity on (the servo does not cancel it)."""
    opts = ReplayOptions(warmup_ticks=warmup_ticks, torque_clamp=True, gravity=True)
    return MujocoBackend(robot, opts, n_threads=1, stribeck=StribeckFriction(np.asarray(truth.static_friction, dtype=float),
                                                                             np.asarray(truth.stribeck_velocity, dtype=float)))


def truth_batch(truth: ServoTruth) -> CandidateBatch:
    """The truth as a one-candidate batch (kp / kd fill the run's unstated gains)."""
    row = lambda v: np.asarray(v, dtype=float)[None]  # noqa: E731
    return CandidateBatch(armature=row(truth.armature), friction=row(truth.friction), viscous=row(truth.viscous),
                          delay=np.array([int(truth.delay)]), kp=row(truth.kp), kd=row(truth.kd),
                          encoder_offset=row(truth.encoder_offset))


def quantize_counts(q: np.ndarray, mids: Sequence[float] | None = None) -> np.ndarray:
    """Angles [rad] on the encoder's grid: whole raw counts about each joint's range middle (half counts allowed)."""
    mid = np.zeros(q.shape[-1]) if mids is None else np.asarray(mids, dtype=float)
    frac = mid - np.floor(mid)
    return (np.round(q / STEP_RAD + frac) - frac) * STEP_RAD


def record_servo_twin(robot: Robot, target: Run, truth: ServoTruth, seed: int = 0, name: str | None = None,
                      mids: Sequence[float] | None = None, warmup_ticks: int = 200) -> Run:
    """Record the twin on ``target``'s commanded positions (its rows and rate, e.g. 30 Hz), as LeRobot logs it.

    The run states no gains (kp, kd NaN: the servo's registers are not N m/rad) and its state age
    (``meta.state_age_ms``); ``q`` is the encoder's reading (true + offset, noise, 4096 counts per turn,
    0..``state_age_max_ms`` old); ``dq`` are central differences of it (LeRobot records no velocity).
    """
    rng = np.random.default_rng(seed)
    n = robot.n_dof
    unstated = dataclasses.replace(target.meta, kp=np.full(n, np.nan), kd=np.full(n, np.nan), gravity_compensated=False)
    tgt = dataclasses.replace(target, meta=unstated)
    dense = dense_run(tgt)
    last = dense.n_samples - 1
    dist = truth.actuator_tau_std * rng.standard_normal((warmup_ticks + last, n)) if truth.actuator_tau_std > 0 else None
    be = servo_backend(robot, truth, warmup_ticks)
    try:
        roll = be.rollout(truth_batch(truth), [dense], disturbance=None if dist is None else [dist])[0]
    finally:
        be.close()
    if roll.diverged[0]:
        raise RuntimeError(f"servo twin diverged on '{target.name}'")
    rows = tgt.sample_ticks()
    age = rng.integers(0, truth.state_age_max_ms + 1, size=rows.shape[0]) if truth.state_age_max_ms > 0 else 0
    state_tick = np.maximum(rows - age, 0)
    q = roll.q[0][state_tick] + truth.q_noise_counts * STEP_RAD * rng.standard_normal((rows.shape[0], n))
    q = quantize_counts(q, mids)
    t = rows / 1000.0
    dq = np.gradient(q, t, axis=0)
    meta = dataclasses.replace(unstated, num_samples=len(rows), log_rate_hz=unstated.control_rate_hz,
                               state_age_ms=int(truth.state_age_max_ms),
                               summary={"recorder": "isaaclab_sysid servo twin", "seed": int(seed)})
    z = np.full((len(rows), n), np.nan)
    from isaaclab_sysid.robots.kinematics import ee_poses

    pos, quat = ee_poses(robot, q)
    return dataclasses.replace(tgt, name=name or target.name, meta=meta, t=t, q=q, dq=dq, ee_pos=pos, ee_quat=quat,
                               tau=z, tau_J=z.copy(), tick=None, setpoint_tick=None, source=None)


def so101_calibration(motors: Sequence[str]) -> dict[str, dict]:
    """The twin's LeRobot calibration record (:data:`SO101_CAL_MIDS`, ...)."""
    return json_calibration(motors, SO101_CAL_MIDS, SO101_CAL_HALF, SO101_CAL_DRIVE)


def write_twin_dataset(root: str | Path, runs: Sequence[Run], motors: Sequence[str], fps: float = 30.0,
                       calibration_path: str | Path | None = None, state_age_ms: int | None = None,
                       stated_gains: tuple[Sequence[float], Sequence[float]] | None = None) -> Path:
    """Write twin runs as a LeRobot dataset in LeRobot's default units (arm -100..100, gripper 0..100) with its
    calibration file beside it, and the import mapping (``<root name>.yaml``) next to it; returns the mapping's path.

    ``stated_gains``: (kp, kd) the mapping states [N m/rad, N m s/rad] (a user who believes he knows them);
    default ``gains: unknown``."""
    root = Path(root)
    cal = so101_calibration(motors)
    cal_path = Path(calibration_path) if calibration_path else root.parent / f"{root.name}_calibration.json"
    write_calibration(cal_path, cal)
    mc = {m: MotorCalibration(c["drive_mode"], 0, c["range_min"], c["range_max"]) for m, c in cal.items()}
    units = ["range_m100_100"] * (len(motors) - 1) + ["range_0_100"]
    conv = lambda a: np.stack([from_radians(a[:, j], units[j], mc[m]) for j, m in enumerate(motors)], axis=1)  # noqa
    episodes = [Episode(state=conv(r.q), action=conv(r.q_des)) for r in runs]
    write_lerobot_dataset(root, episodes, motors, fps)
    mapping = root.parent / f"{root.name}.yaml"
    cal_ref = cal_path.name if cal_path.parent.resolve() == mapping.parent.resolve() else str(cal_path.resolve())
    age = "" if state_age_ms is None else f"  state_age_ms: {int(state_age_ms)}\n"
    fmt = lambda v: "[" + ", ".join(f"{float(x):.6g}" for x in v) + "]"  # noqa: E731
    gains = "unknown" if stated_gains is None else f"{{kp: {fmt(stated_gains[0])}, kd: {fmt(stated_gains[1])}}}"
    atomic_write_text(mapping, (
        "# LeRobot SO-101 dataset -> runs (docs/servo_arms.md)\n"
        f"robot: so101\ncontroller: joint_pd\ngains: {gains}\ngravity_compensated: false\n"
        "features:\n  q: {feature: observation.state}\n  dq: differentiate\n  tau: none\n"
        f"  targets: {{feature: action}}\n  units: [{', '.join(units)}]\n  calibration: {cal_ref}\n" + age))
    return mapping
