"""Excitation for a position-servo arm (issue 27): a joint-space multisine commanded at the recorder's
frame rate (LeRobot: 30 fps), inside the limits, and its pre-flight.

The servo's parameters show in different parts of the motion. Below the loop's bandwidth
(``sqrt(kp / J)``, a few Hz for an STS3215) the joint follows the command and lags it by the gravity
torque over kp: slow, large motions against gravity measure kp (and the encoder offset, through the
pose dependence of gravity). Near and above the bandwidth the inertia (armature) and the damping
(kd + viscous) set the amplitude and phase of the response. Reversals at low speed measure static and
Coulomb friction. A design with only slow motion cannot separate kp from armature (the fit's intervals
then show their correlation); :func:`servo_preflight` states which pairs trade off on the design it checks.

Each joint gets its own frequencies (harmonics of 1 / duration, interleaved between joints, so no two
joints share one), Schroeder phases, amplitudes falling as 1/f (flat speed), scaled onto the tighter of
the position range and the speed limit, faded in and out (raised cosine) so the run starts and ends at
rest at the centre pose.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.run import Run, RunMeta
from isaaclab_sysid.excitation.limits import DesignLimitError
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions


@dataclass(frozen=True)
class ServoDesignSpec:
    """The multisine design (units in the names); ``scripts/gen_servo_traj.py`` takes its fields as flags.

    After the multisine each joint in turn steps by +step_rad, holds, steps back and holds. A step far enough to
    saturate the servo gives the replay its one absolute torque scale where gravity gives none (shoulder_pan,
    wrist_roll, the gripper): with the torque at its limit the acceleration measures the inertia, not inertia over kp.
    """

    duration_s: float = 20.0
    """Length of the multisine [s] (the steps follow it)."""
    fps: float = 30.0
    """Frame rate of the commands [Hz] (LeRobot records at 30)."""
    f_min_hz: float = 0.1
    """Lowest sine [Hz]."""
    f_max_hz: float = 6.0
    """Highest sine [Hz] (below fps / 2)."""
    n_sines: int = 6
    """Sines per joint (each joint its own frequencies)."""
    range_frac: float = 0.3
    """Peak excursion as a fraction of each joint's half range (about the centre)."""
    speed_max_rad_s: float = 1.5
    """Peak commanded joint speed [rad/s]."""
    fade_s: float = 1.0
    """Raised-cosine fade in and out [s]."""
    step_rad: float = 0.3
    """Saturating step per joint after the multisine [rad] (0: none)."""
    step_hold_s: float = 0.8
    """Hold after each step edge [s]."""
    centre: tuple[float, ...] | None = None
    """(N,) centre pose [rad]; None: the middle of the limits."""
    seed: int = 0
    """Phase seed (Schroeder phases + a seeded rotation)."""

    def __post_init__(self) -> None:
        if not (0 < self.f_min_hz < self.f_max_hz < 0.5 * self.fps):
            raise DesignLimitError(f"need 0 < f_min_hz < f_max_hz < fps/2 ({0.5 * self.fps:g} Hz)")
        if not (0 < self.range_frac < 1) or self.speed_max_rad_s <= 0 or self.n_sines < 1:
            raise DesignLimitError("range_frac in (0, 1), speed_max_rad_s > 0, n_sines >= 1")
        if self.duration_s <= 2 * self.fade_s:
            raise DesignLimitError("duration_s must exceed twice fade_s")


def _frequencies(spec: ServoDesignSpec, n: int) -> np.ndarray:
    """(N, n_sines) frequencies [Hz]: harmonics of 1/duration in the band, interleaved between joints,
    spread log-uniformly over the band."""
    df = 1.0 / spec.duration_s
    ks = np.arange(int(np.ceil(spec.f_min_hz / df)), int(np.floor(spec.f_max_hz / df)) + 1)
    if ks.size < n * spec.n_sines:
        raise DesignLimitError(f"the band {spec.f_min_hz}-{spec.f_max_hz} Hz holds {ks.size} harmonics of 1/{spec.duration_s:g} s; "
                         f"{n * spec.n_sines} needed (longer run, wider band or fewer sines)")
    # n * n_sines harmonics log-spaced over the band, dealt to the joints in turn
    pick = np.unique(np.round(np.geomspace(ks[0], ks[-1], 4 * n * spec.n_sines)).astype(int))
    if pick.size < n * spec.n_sines:
        pick = ks
    idx = np.round(np.linspace(0, pick.size - 1, n * spec.n_sines)).astype(int)
    chosen = pick[idx]
    if np.unique(chosen).size < chosen.size:
        chosen = ks[np.round(np.linspace(0, ks.size - 1, n * spec.n_sines)).astype(int)]
    return (chosen.reshape(spec.n_sines, n).T * df).astype(float)


def servo_multisine(robot: Robot, spec: ServoDesignSpec = ServoDesignSpec(), name: str = "servo_multisine") -> Run:
    """The design as a target run at ``spec.fps``: ``q_des`` the commands, ``q`` / ``dq`` the reference
    (what a perfect servo would do), gains unstated (NaN), gravity not compensated."""
    n = robot.n_dof
    lo, hi = robot.q_lower, robot.q_upper
    centre = 0.5 * (lo + hi) if spec.centre is None else np.asarray(spec.centre, dtype=float)
    half = np.minimum(centre - lo, hi - centre)
    if np.any(half <= 0):
        raise DesignLimitError(f"centre {centre.tolist()} is not inside the limits")
    freqs = _frequencies(spec, n)
    m = spec.n_sines
    k = np.arange(1, m + 1)
    phases = -np.pi * k * (k - 1) / m + np.random.default_rng(spec.seed).uniform(0, 2 * np.pi, (n, 1))  # Schroeder
    t = np.arange(int(round(spec.duration_s * spec.fps)) + 1) / spec.fps
    fine = np.linspace(0, spec.duration_s, int(spec.duration_s * 1000) + 1)
    fade = np.clip(np.minimum(fine, spec.duration_s - fine) / spec.fade_s, 0, 1)
    win = 0.5 - 0.5 * np.cos(np.pi * fade)

    def shape(tt, w):
        amp = 1.0 / freqs  # (N, m): flat speed
        return w[:, None] * np.einsum("jk,tjk->tj", amp, np.sin(2 * np.pi * freqs[None] * tt[:, None, None] + phases[None]))

    raw = shape(fine, win)
    speed = np.abs(np.gradient(raw, fine, axis=0)).max(axis=0)
    peak = np.abs(raw).max(axis=0)
    scale = np.minimum(spec.range_frac * half / peak, spec.speed_max_rad_s / speed)
    fade_t = np.clip(np.minimum(t, spec.duration_s - t) / spec.fade_s, 0, 1)
    q = centre + scale * shape(t, 0.5 - 0.5 * np.cos(np.pi * fade_t))
    if spec.step_rad > 0:  # the saturating steps, one joint at a time, from the centre
        hold = int(round(spec.step_hold_s * spec.fps))
        step = np.minimum(spec.step_rad, 0.9 * half)
        blocks = []
        for j in range(n):
            b = np.tile(centre, (2 * hold, 1))
            b[:hold, j] += step[j]
            blocks.append(b)
        q = np.vstack([q, *blocks, np.tile(centre, (hold, 1))])
        t = np.arange(len(q)) / spec.fps
    excitation = {"design": "servo_multisine", **{k_: v for k_, v in asdict(spec).items() if k_ != "centre"},
                  "centre": centre.tolist(), "frequencies_hz": freqs.tolist(), "amplitude_scale": scale.tolist()}
    return _target_run(robot, name, t, q, spec.fps, excitation)


def _target_run(robot: Robot, name: str, t: np.ndarray, q: np.ndarray, fps: float, excitation: dict) -> Run:
    """A joint-PD target run at ``fps``: ``q`` (T, N) the commands and the reference states; gains unstated (NaN),
    gravity not compensated (a servo)."""
    n = robot.n_dof
    pos, quat = robot.ee_pose(q[0])
    meta = RunMeta(robot=robot.name, controller="joint_pd", control_rate_hz=float(fps), log_rate_hz=float(fps),
                   num_samples=len(t), q_init=q[0].copy(), anchor_pos=pos, anchor_quat=quat, kp=np.full(n, np.nan),
                   kd=np.full(n, np.nan), gravity_compensated=False, excitation=excitation)
    z = np.zeros((len(t), n))
    return Run(name=name, meta=meta, t=np.asarray(t, dtype=float), q=q, dq=np.gradient(q, t, axis=0),
               ee_pos=np.tile(pos, (len(t), 1)), ee_quat=np.tile(quat, (len(t), 1)), tau=z, tau_J=z.copy(), q_des=q)


def _every_tick(run: Run) -> Run:
    """``run``'s commands held on every 1 ms tick, each tick a sample (the torque between frames is seen)."""
    import dataclasses

    sp_ticks, values = run.setpoints()
    ticks = np.arange(int(run.sample_ticks()[-1]) + 1, dtype=np.int64)
    idx = np.maximum(np.searchsorted(sp_ticks, ticks, side="right") - 1, 0)
    k, n = len(ticks), run.n_dof
    z = np.zeros((k, n))
    return dataclasses.replace(run, meta=dataclasses.replace(run.meta, log_rate_hz=1000.0, num_samples=k),
                               t=ticks / 1000.0, q=np.tile(run.meta.q_init, (k, 1)), dq=z, tau=z, tau_J=z.copy(),
                               ee_pos=np.tile(run.ee_pos[0], (k, 1)), ee_quat=np.tile(run.ee_quat[0], (k, 1)),
                               q_des=values[idx], tick=ticks, setpoint_tick=sp_ticks[idx].astype(np.int64))


@dataclass(frozen=True)
class ServoNominal:
    """What pre-flight assumes about the servo before the fit (N,) each, or a scalar for every joint."""

    kp: float | tuple[float, ...] = 15.0
    kd: float | tuple[float, ...] = 0.3
    armature: float | tuple[float, ...] = 0.01
    friction: float | tuple[float, ...] = 0.05
    viscous: float | tuple[float, ...] = 0.03
    delay: int = 5


@dataclass
class ServoPreflight:
    """The verdict on a servo design.

    Attributes:
        numbers: range used, commanded speed, predicted torque peak over the limit, per joint.
        sensitivity: per parameter label, the squared change of the logged positions a step of it makes that no
            other parameter can make (the part of its Jacobian column the others do not explain) [rad^2].
        tradeoffs: (label a, label b, correlation) of the pairs the design cannot tell apart well (|rho| > 0.9).
        problems: the FAILs (a limit crossed, a torque saturating); empty: safe to run.
    """

    numbers: dict
    sensitivity: dict[str, float]
    tradeoffs: list[tuple[str, str, float]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def safe(self) -> bool:
        return not self.problems

    def format(self) -> str:
        n = self.numbers
        f = lambda v: " ".join(f"{x:6.2f}" for x in v)  # noqa: E731
        lines = [f"servo pre-flight: {n['run']} ({n['duration_s']:.1f} s at {n['fps']:g} fps)",
                 f"  range used / half range      {f(n['range_frac'])}",
                 f"  commanded speed [rad/s]      {f(n['speed_peak'])}",
                 f"  predicted torque / limit     {f(n['tau_limit_frac'])}",
                 f"  steps: saturated [ms]        {' '.join(f'{int(x):6d}' for x in n['steps_saturated_ms'])}",
                 "  trade-offs (|corr| > 0.9): " + ("; ".join(f"{a} ~ {b} ({r:+.2f})" for a, b, r in self.tradeoffs)
                                                   or "none")]
        lines += [f"  no information: {x}" for x in n.get("no_information", [])]
        lines += [f"  FAIL: {p}" for p in self.problems] or ["  safe to run: yes"]
        return "\n".join(lines)


#: The per-joint parameters pre-flight steps. Viscous friction is not one of them: below the torque limit
#: ``kd dq`` and ``viscous dq`` are the same torque, so a replay fixes only their sum (fit ``kd``, which then
#: holds the joint's viscous friction too; docs/servo_arms.md).
GROUPS = ("kp", "kd", "armature", "friction", "encoder_offset")


def servo_preflight(robot: Robot, run: Run, nominal: ServoNominal = ServoNominal(), rel_step: float = 0.05,
                    max_torque_frac: float = 0.9) -> ServoPreflight:
    """Check a servo design: limits, the torque a nominal servo would need, and which parameters trade off.

    The design is replayed at the nominal (gravity on, torque limit on); every per-joint parameter of
    :data:`GROUPS` and the delay is stepped by ``rel_step`` of its nominal (the offset by 5 mrad, the delay
    by one tick) and the change in the logged position gives the Jacobian J; its correlation matrix
    ``C = D^-1/2 (J^T J)^-1 D^-1/2`` names the pairs the design leaves tied.
    """
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    n = robot.n_dof
    lo, hi = robot.q_lower, robot.q_upper
    centre = 0.5 * (lo + hi)
    nums = {"run": run.name, "duration_s": run.duration, "fps": run.meta.control_rate_hz,
            "range_frac": (np.abs(run.q_des - centre).max(axis=0) / (0.5 * (hi - lo))).tolist(),
            "speed_peak": np.abs(np.gradient(run.q_des, run.t, axis=0)).max(axis=0).tolist()}
    problems = []
    out = np.flatnonzero((run.q_des < lo).any(axis=0) | (run.q_des > hi).any(axis=0))
    for j in out:
        problems.append(f"{robot.joint_names[j]} is commanded outside its limits")
    vec = lambda v: np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy()  # noqa: E731
    base = {g: vec(getattr(nominal, g)) for g in ("kp", "kd", "armature", "friction", "viscous")}
    base["encoder_offset"] = np.zeros(n)
    cands = [dict(base, delay=int(nominal.delay))]
    labels, steps = [], []
    for g in GROUPS:
        for j in range(n):
            h = 0.005 if g == "encoder_offset" else rel_step * max(base[g][j], 1e-4)
            for sign in (1, -1):
                c = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in cands[0].items()}
                c[g][j] += sign * h
                cands.append(c)
            labels.append(f"{g}[{robot.joint_names[j]}]")
            steps.append(h)
    for sign in (1, -1):
        cands.append(dict(cands[0], delay=int(nominal.delay) + sign))
    labels.append("delay")
    steps.append(1.0)
    batch = CandidateBatch(**{g: np.stack([c[g] for c in cands]) for g in (*GROUPS, "viscous")},
                           delay=np.array([c["delay"] for c in cands], dtype=np.int64))
    be = MujocoBackend(robot, ReplayOptions(warmup_ticks=0, torque_clamp=True, gravity=True), n_threads=1)
    try:
        ro = be.rollout(batch, [run])[0]
        tau = be.rollout(batch.take(np.array([0])), [_every_tick(run)], with_command=True)[0].extra["tau_cmd"][0]
    finally:
        be.close()
    if ro.diverged[0]:
        problems.append("the nominal servo diverged on the design")
    t_sine = float(run.meta.excitation.get("duration_s", run.duration))
    sine = np.arange(tau.shape[0]) <= int(round(t_sine * 1000))
    nums["tau_limit_frac"] = (np.abs(tau[sine]).max(axis=0) / robot.tau_max).tolist()
    sat = np.abs(tau[~sine]) >= robot.tau_max
    nums["steps_saturated_ms"] = sat.sum(axis=0).tolist() if sat.size else [0] * n
    for j in np.flatnonzero(np.asarray(nums["tau_limit_frac"]) > max_torque_frac):
        problems.append(f"{robot.joint_names[j]} needs {nums['tau_limit_frac'][j]:.0%} of its {robot.tau_max[j]:g} N m "
                        "(the servo would saturate: lower range_frac or speed_max_rad_s)")
    q = ro.q.reshape(len(cands), -1)
    jac = np.stack([(q[1 + 2 * i] - q[2 + 2 * i]) / 2.0 for i in range(len(labels))], axis=1)  # per step
    norms = np.linalg.norm(jac, axis=0)
    # a step that moves no logged position by a thousandth of an encoder count (2 pi / 4096) is solver rounding
    live = np.abs(jac).max(axis=0) > 1e-3 * 2.0 * np.pi / 4096
    sens = {}
    for i, lab in enumerate(labels):  # |the part of J_i no other column explains|^2 [rad^2 per step]
        if not live[i]:
            sens[lab] = 0.0
            continue
        others = jac[:, live & (np.arange(len(labels)) != i)]
        coef, *_ = np.linalg.lstsq(others, jac[:, i], rcond=None)
        sens[lab] = float(np.sum((jac[:, i] - others @ coef) ** 2))
    for i in np.flatnonzero(~live):
        problems_none = f"{labels[i]}: a step of it moves no logged position by 1/1000 of an encoder count"
        nums.setdefault("no_information", []).append(problems_none)
    ju = jac[:, live] / norms[live]
    cov = np.linalg.pinv(ju.T @ ju, rcond=1e-12)
    d = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    corr = cov / np.outer(d, d)
    live_labels = [lab for lab, ok in zip(labels, live) if ok]
    trade = [(live_labels[a_], live_labels[b_], float(corr[a_, b_])) for a_ in range(len(live_labels))
             for b_ in range(a_ + 1, len(live_labels)) if abs(corr[a_, b_]) > 0.9]
    trade.sort(key=lambda x: -abs(x[2]))
    return ServoPreflight(nums, sens, trade, problems)


def write_servo_design(robot: Robot, spec: ServoDesignSpec, out: str | Path, name: str = "servo_multisine",
                       nominal: ServoNominal = ServoNominal()) -> tuple[Run, ServoPreflight, list[Path]]:
    """Design, pre-flight and write: ``<out>/<name>.csv`` + ``.json`` (the 30 fps target run, gains null) and
    ``<out>/<name>_preflight.json``, every file atomically. Returns the run, the pre-flight and the paths."""
    from isaaclab_sysid.data import write_run
    from isaaclab_sysid.utils.atomic import atomic_write_json

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run = servo_multisine(robot, spec, name=name)
    pf = servo_preflight(robot, run, nominal)
    csv, side = write_run(run, out / f"{name}.csv")
    report = atomic_write_json(out / f"{name}_preflight.json", {
        "numbers": pf.numbers, "sensitivity_rad2": pf.sensitivity, "safe": pf.safe, "problems": pf.problems,
        "tradeoffs": [{"a": a, "b": b, "correlation": r} for a, b, r in pf.tradeoffs], "nominal": asdict(nominal)})
    return run, pf, [Path(csv), Path(side), Path(report)]
