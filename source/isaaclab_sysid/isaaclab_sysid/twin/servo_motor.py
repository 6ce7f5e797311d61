"""The servo motor model's twin (issue 42): a servo test bench whose truth is hidden from the fit, logged as BAM logs.

The truth is the replay's servo motor model (sim/servo.py: the firmware's duty from the delayed goal and its register
gain, the current-limit window, the DC motor ``kt (duty V - kt dq) / R`` with back-EMF, zero torque while the torque
is off) with BAM's load-dependent friction (sim/friction.py: ``friction + |k_ext tau_ext - k_motor tau_motor|``),
viscous friction, an armature and an encoder offset, simulated by the MuJoCo backend at 1 ms on the bench robot
(``configs/robots/bam_pendulum_xl330.toml``).

What the twin adds is what a real recording does to that truth, modelled on BAM's recorder
(``bam/dynamixel/record.py``) and on the shared XL330 logs (``shared/data/bam_xl330/raw``):

* **the recorder's loop**: every iteration computes the goal at its start ``t_c``; with the torque on it writes
  the goal (``write_ms``) and sleeps (``sleep_ms``); then five register reads (position, speed, PWM, voltage,
  temperature, ``read_ms`` each, jittered), stamped at the middle of the reads ``(t0 + t1) / 2``; the goal is
  logged with that stamp. About 190 Hz with the torque on, 285 Hz off (the logs' 5.3 and 3.5 ms), and a rare
  hiccup of the bus (``hiccup_prob``: a gap of a few ms, as the logs' largest gaps);
* **the servo's latency**: a goal (and a torque enable) acts ``firmware_ms`` after its write ends. The hidden
  ``delay`` of the truth is the delay the fit's replay sees in the log's frame (a goal logged at ``s`` acting at
  ``s + delay`` on the positions' frame): ``firmware_ms`` is derived from it and the loop's mean timing
  (:meth:`MotorTruth.firmware_latency_ms`), so the truth's delay is stated in the fit's own terms;
* **the sensors**: the position read at its own instant, plus the encoder offset and noise, quantized to the
  encoder's 4096 counts per turn; the speed quantized to the XL330's 0.229 rpm unit with noise; the present PWM as
  the raw uint16 register (``load``); the supply voltage in 0.1 V with noise and the sag (or rise) of the battery's
  internal resistance under the motor's supply current ``duty x I``; the temperature in whole degrees.

:func:`record_bench_log` returns one log (a dict in BAM's JSON layout) and the dense truth it was read from; the
proof (``jobs/servo_motor_proof.py``) writes the logs and imports them with ``scripts/import_runs.py --format bam``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run, RunMeta
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.robots.servos import ServoFamily, servo_family
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.timebase import TICK_HZ

#: the XL330's encoder: counts per turn, and its present-velocity unit (0.229 rpm) [rad/s]
COUNTS_PER_TURN = 4096
STEP_RAD = 2.0 * math.pi / COUNTS_PER_TURN
SPEED_UNIT_RAD_S = 0.229 * 2.0 * math.pi / 60.0
#: the length of BAM's trajectories [s] and of its hold before them (the pre-phase of bam/dynamixel/record.py) [s]
TRAJECTORY_S = 6.0
PRE_PHASE_S = 1.0


@dataclass(frozen=True)
class MotorTruth:
    """The hidden truth of one servo on a bench (scalars: the bench has one joint).

    Attributes:
        motor_kt: torque constant at the output shaft [N m/A]; motor_r: winding resistance [Ohm].
        armature: reflected rotor and gearbox inertia [kg m^2].
        friction: the load-dependent law's base level [N m]; load_friction_motor, load_friction_external: its
            coefficients of the motor's and the external torque [-]; viscous: [N m s/rad].
        delay: the bus and firmware delay as the fit's replay sees it in the log's frame [ticks of 1 ms].
        encoder_offset: the encoder's zero error [rad] (logged = true + offset).
        supply_v: the battery's open-circuit voltage [V]; supply_r_ohm: its internal resistance [Ohm] (the sag).
        volts_noise: the voltage reading's noise before its 0.1 V quantization [V, std].
        q_noise_counts: the encoder's noise before quantization [counts, std].
        speed_noise_units: the present velocity's noise before quantization [0.229 rpm units, std].
        actuator_tau_std: torque noise acting on the joint every tick [N m, std].
        write_ms, sleep_ms, read_ms: the recorder loop's goal write, its sleep after it, one register read [ms].
        jitter_ms: the std of each of those durations [ms]; hiccup_prob: the chance an iteration's reads stall by
            1..``hiccup_ms`` ms (a bus retry).
    """

    motor_kt: float
    motor_r: float
    armature: float
    friction: float
    load_friction_motor: float
    load_friction_external: float
    viscous: float
    delay: int
    encoder_offset: float
    supply_v: float = 7.6
    supply_r_ohm: float = 0.9
    volts_noise: float = 0.04
    q_noise_counts: float = 0.3
    speed_noise_units: float = 0.7
    actuator_tau_std: float = 0.002
    write_ms: float = 0.7
    sleep_ms: float = 1.1
    read_ms: float = 0.7
    jitter_ms: float = 0.05
    hiccup_prob: float = 0.004
    hiccup_ms: float = 4.0

    def __post_init__(self) -> None:
        for name in ("motor_kt", "motor_r", "supply_v"):
            if not getattr(self, name) > 0:
                raise ValueError(f"MotorTruth.{name} must be > 0")
        for name in ("armature", "friction", "load_friction_motor", "load_friction_external", "viscous",
                     "supply_r_ohm", "volts_noise", "q_noise_counts", "speed_noise_units", "actuator_tau_std"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"MotorTruth.{name} must be a finite number >= 0")
        if int(self.delay) != self.delay or self.delay < 0:
            raise ValueError("MotorTruth.delay must be a non-negative integer (ticks)")
        if self.firmware_latency_ms() < 0:
            raise ValueError(f"MotorTruth.delay {self.delay} ms is shorter than the recorder's own lag: no firmware "
                             "latency gives it")

    def firmware_latency_ms(self) -> float:
        """The servo's latency from the end of a goal write to its arrival [ms] that gives :attr:`delay` in the
        log's frame at the loop's mean timing: the goal is logged ``sleep + 2.5 reads`` after its write ends, the
        position is read ``2 reads`` before that stamp, and an arrived goal acts from the next 1 ms tick (half a
        tick later on average), so ``delay = firmware + 0.5 - (sleep + 2.5 reads) + 2 reads``."""
        return float(self.delay) + self.sleep_ms + 0.5 * self.read_ms - 0.5

    def as_dict(self) -> dict:
        """Plain values for reports (the fit never reads this)."""
        return dataclasses.asdict(self) | {"firmware_latency_ms": self.firmware_latency_ms()}

    def batch(self, n: int = 1) -> CandidateBatch:
        """The truth as a one-candidate batch (load law); the delay is 0 here: the recorder's goal schedule
        carries the latency (:func:`record_bench_log`)."""
        row = lambda v: np.full((1, n), float(v))  # noqa: E731
        return CandidateBatch(armature=row(self.armature), friction=row(self.friction), viscous=row(self.viscous),
                              delay=np.array([0]), motor_kt=row(self.motor_kt), motor_r=row(self.motor_r),
                              load_friction_motor=row(self.load_friction_motor),
                              load_friction_external=row(self.load_friction_external),
                              encoder_offset=row(self.encoder_offset))

    def values(self) -> dict[str, float]:
        """Group -> true value, for the groups a fit of the servo motor model can have."""
        return {g: float(getattr(self, g)) for g in ("motor_kt", "motor_r", "armature", "friction",
                                                      "load_friction_motor", "load_friction_external", "viscous",
                                                      "delay", "encoder_offset")}


#: An XL330 on BAM's bench: values of the order of BAM's published m3 (kt 0.38, R 3.4, armature 0.0019, friction
#: 0.009, load 0.12 / 0.12, viscous 0.0044) but none of them equal to it, a default, or a bound of the fit; chosen
#: once, before any fit, and not changed after.
XL330_TRUTH = MotorTruth(
    motor_kt=0.41, motor_r=3.7, armature=0.0022, friction=0.011, load_friction_motor=0.09,
    load_friction_external=0.15, viscous=0.0038, delay=4, encoder_offset=0.0127,
)


def _cubic(keys: list[tuple[float, float, float]], t: float) -> float:
    """BAM's ``cubic_interpolate``: a Hermite cubic through (t, x, x') keyframes, held outside them."""
    if t <= keys[0][0]:
        return keys[0][1]
    if t >= keys[-1][0]:
        return keys[-1][1]
    for (t0, x0, v0), (t1, x1, v1) in zip(keys[:-1], keys[1:]):
        if t0 <= t <= t1:
            h, s = t1 - t0, (t - t0) / (t1 - t0)
            h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
            return h00 * x0 + h10 * h * v0 + h01 * x1 + h11 * h * v1
    raise AssertionError("unreachable")


def _lift_and_drop(t: float) -> tuple[float, bool]:
    return _cubic([(0.0, 0.0, 0.0), (2.0, -math.pi / 2, 0.0)], t), t < 2.0


def _up_and_down(t: float) -> tuple[float, bool]:
    return _cubic([(0.0, 0.0, 0.0), (3.0, math.pi / 2, 0.0), (6.0, 0.8 * math.pi / 2, 0.0)], t), True


#: BAM's trajectories (``bam/trajectory.py``, 6 s each): name -> t [s] -> (goal [rad], torque enable).
TRAJECTORIES = {
    "sin_sin": lambda t: (math.sin(t) * math.pi / 2 + math.sin(5.0 * t) * 0.5 * math.sin(2.0 * t), True),
    "lift_and_drop": _lift_and_drop,
    "up_and_down": _up_and_down,
    "sin_time_square": lambda t: (math.sin(t**2), True),
}


@dataclass
class RecorderLoop:
    """The recorder's iterations (M,): goal computed at ``t_goal``, written until ``t_written`` (torque on), the
    five reads' instants ``t_read`` (M, 5: position, speed, PWM, voltage, temperature), the stamp, goal, enable."""

    t_goal: np.ndarray
    t_written: np.ndarray
    t_read: np.ndarray
    stamp: np.ndarray
    goal: np.ndarray
    enable: np.ndarray


def recorder_loop(trajectory: str, truth: MotorTruth, rng: np.random.Generator,
                  duration_s: float = TRAJECTORY_S) -> RecorderLoop:
    """BAM's recording loop on ``trajectory`` (module doc), its durations jittered."""
    traj = TRAJECTORIES[trajectory]
    ms = lambda mean: max(0.05, mean + truth.jitter_ms * rng.standard_normal()) * 1e-3  # noqa: E731
    t, prev_enable = 0.0, True
    rows: list[tuple] = []
    while t < duration_s:
        goal, enable = traj(t)
        t_c, now = t, t
        if enable != prev_enable:  # write_torque_enable, then BAM sleeps 1 ms
            now += ms(truth.write_ms) + ms(truth.sleep_ms)
            prev_enable = enable
        written = now
        if enable:
            now += ms(truth.write_ms)
            written = now
            now += ms(truth.sleep_ms)
        t0 = now
        if rng.random() < truth.hiccup_prob:
            now += rng.uniform(1.0, truth.hiccup_ms) * 1e-3
        reads = []
        for _ in range(5):
            d = ms(truth.read_ms)
            reads.append(now + 0.5 * d)
            now += d
        rows.append((t_c, written, reads, 0.5 * (t0 + now), goal, enable))
        t = now
    return RecorderLoop(t_goal=np.array([r[0] for r in rows]), t_written=np.array([r[1] for r in rows]),
                        t_read=np.array([r[2] for r in rows]), stamp=np.array([r[3] for r in rows]),
                        goal=np.array([r[4] for r in rows]), enable=np.array([r[5] for r in rows], dtype=bool))


def _dense_servo_run(robot: Robot, kp: float, goal: np.ndarray, enable: np.ndarray, volts: np.ndarray,
                     q_init: float) -> Run:
    """A 1 kHz servo run whose rows are the ticks (the truth's setpoints; states are placeholders)."""
    n = len(goal)
    meta = RunMeta(robot=robot.config.name, controller="servo", control_rate_hz=float(TICK_HZ),
                   log_rate_hz=float(TICK_HZ), num_samples=n, q_init=np.array([q_init]), anchor_pos=np.zeros(3),
                   anchor_quat=np.array([0.0, 0.0, 0.0, 1.0]), kp=np.array([float(kp)]), kd=np.zeros(1),
                   gravity_compensated=False)
    z = np.zeros((n, 1))
    return Run(name="dense", meta=meta, t=np.arange(n) / TICK_HZ, q=z, dq=z, ee_pos=np.zeros((n, 3)),
               ee_quat=np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)), tau=z, tau_J=z, q_des=goal[:, None],
               torque_enable=enable[:, None], supply_v=volts[:, None])


@dataclass
class DenseTruth:
    """The truth at every 1 ms tick from the first (tick k = k ms after the trajectory's start): true joint angle
    ``q`` [rad], ``dq`` [rad/s], motor torque ``tau`` [N m], duty, supply voltage [V], and the servo's own goal and
    enable as they acted."""

    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    duty: np.ndarray
    volts: np.ndarray
    goal: np.ndarray
    enable: np.ndarray


def simulate_truth(robot: Robot, kp: float, loop: RecorderLoop, truth: MotorTruth, family: ServoFamily,
                   rng: np.random.Generator) -> DenseTruth:
    """The truth on the recorder's goals: each goal (and enable) acts from ``firmware_latency_ms`` after its write
    ends, held until the next; 1 s of the first goal before (BAM's pre-phase); the supply voltage sags with the
    supply current of a first pass at the open-circuit voltage (two passes of the MuJoCo backend at 1 ms)."""
    last = int(math.ceil(loop.stamp[-1] * TICK_HZ)) + 2
    ticks = np.arange(last + 1)
    act = loop.t_written + truth.firmware_latency_ms() * 1e-3
    idx = np.searchsorted(act * TICK_HZ, ticks, side="right") - 1
    before = idx < 0
    goal = np.where(before, loop.goal[0], loop.goal[np.maximum(idx, 0)])
    enable = np.where(before, True, loop.enable[np.maximum(idx, 0)])
    goal_enc = goal  # the firmware's goal is in the encoder's frame (the replay takes the offset off)
    warm = int(PRE_PHASE_S * TICK_HZ)
    be = MujocoBackend(robot, ReplayOptions(warmup_ticks=warm, gravity=True), n_threads=1)
    try:
        volts = np.full(len(ticks), truth.supply_v)
        for _ in range(2):
            dense = _dense_servo_run(robot, kp, goal_enc, enable, volts, q_init=float(goal_enc[0]))
            dist = truth.actuator_tau_std * np.random.default_rng(rng.integers(1 << 31)).standard_normal((warm + last, 1))
            roll = be.rollout(truth.batch(), [dense], disturbance=[dist])[0]
            if roll.diverged[0]:
                raise RuntimeError("the servo motor twin diverged")
            tau, dq = roll.tau[0][:, 0], roll.dq[0][:, 0]
            current = tau / truth.motor_kt
            duty = np.where(enable, (current * truth.motor_r + truth.motor_kt * dq) / volts, 0.0)
            new_volts = truth.supply_v - truth.supply_r_ohm * duty * current
            volts, prev = new_volts, volts
        # the second pass ran with the first pass's sag: that is the voltage that acted
        volts = prev
        duty = np.where(enable, (current * truth.motor_r + truth.motor_kt * dq) / volts, 0.0)
    finally:
        be.close()
    return DenseTruth(q=roll.q[0][:, 0] - truth.encoder_offset, dq=dq, tau=tau, duty=np.clip(duty, -1, 1),
                      volts=volts, goal=goal, enable=enable.astype(bool))


def _at(signal: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``signal`` (per 1 ms tick) linearly interpolated at instants ``t`` [s]."""
    return np.interp(t * TICK_HZ, np.arange(len(signal)), signal)


def record_bench_log(robot: Robot, trajectory: str, kp: float, truth: MotorTruth = XL330_TRUTH, seed: int = 0,
                     bench: tuple[float, float] = (0.49, 0.1)) -> tuple[dict, DenseTruth, RecorderLoop]:
    """One BAM log of the twin: ``trajectory`` at register gain ``kp`` on the bench ``robot`` (one servo; ``bench``
    = the header's mass [kg] and length [m], which must be the robot's).

    Returns:
        (the log as BAM's JSON layout: header + entries, the dense truth, the recorder's loop).
    """
    if robot.n_dof != 1 or robot.config.servo is None:
        raise ValueError(f"robot '{robot.config.name}': the BAM log twin records a one-servo bench whose config states "
                         "its servo family")
    family = servo_family(robot.config.servo[0])
    rng = np.random.default_rng(seed)
    loop = recorder_loop(trajectory, truth, rng)
    tr = simulate_truth(robot, kp, loop, truth, family, rng)
    m = len(loop.stamp)
    tp, ts, tl, tv = (loop.t_read[:, i] for i in range(4))
    counts = np.round((_at(tr.q, tp) + truth.encoder_offset) / STEP_RAD + truth.q_noise_counts * rng.standard_normal(m))
    units = np.round(_at(tr.dq, ts) / SPEED_UNIT_RAD_S + truth.speed_noise_units * rng.standard_normal(m))
    pwm = np.round(_at(tr.duty, tl) * family.pwm_full_scale).astype(int)
    load = np.where(pwm < 0, pwm + 65536, pwm)
    volts = np.round((_at(tr.volts, tv) + truth.volts_noise * rng.standard_normal(m)) * 10.0) / 10.0
    temp = np.round(29.0 + 3.0 * loop.stamp / TRAJECTORY_S + 0.3 * rng.standard_normal(m)).astype(int)
    entries = [{"position": float(counts[i] * STEP_RAD), "speed": float(units[i] * SPEED_UNIT_RAD_S),
                "load": int(load[i]), "input_volts": float(volts[i]), "temp": int(temp[i]),
                "timestamp": float(loop.stamp[i]), "goal_position": float(loop.goal[i]),
                "torque_enable": bool(loop.enable[i])} for i in range(m)]
    log = {"mass": float(bench[0]), "length": float(bench[1]), "kp": float(kp), "vin": 7.4, "motor": family.name,
           "trajectory": trajectory, "entries": entries}
    return log, tr, loop
