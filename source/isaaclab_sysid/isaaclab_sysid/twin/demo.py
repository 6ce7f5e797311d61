"""Target runs of the bundled demo (data/real_runs/): two fit runs, a held-out run, its repeat and a 50 Hz copy.

All at 1 kHz (every tick logged, setpoints stamped) but one: the 50 Hz copy of the
held-out run, with the stale rows of a real 50 Hz log, shows the difference in
docs/fit.md. The repeat (same target, other noise seed) gives the noise floor.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.data.run import ImpedanceLaw, Run
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.twin.targets import Q_READY, envelope, multisine, pose_offsets, skeleton_run, task_targets

#: (name, waveform, duration [s], translational kp, rotational kp, target seed, noise seed, log rate [Hz])
DEMO_RUNS = (
    ("twin_joint_multisine_fit", "joint_multisine", 8.0, 0.0, 0.0, 4, 0, 1000.0),
    ("twin_chirp_low_fit", "chirp", 6.0, 200.0, 20.0, 2, 1, 1000.0),
    ("twin_heldout_multiband", "multiband", 6.0, 500.0, 30.0, 3, 2, 1000.0),
    ("twin_heldout_multiband_repeat", "multiband", 6.0, 500.0, 30.0, 3, 3, 1000.0),
    ("twin_heldout_multiband_50hz", "multiband", 6.0, 500.0, 30.0, 3, 2, 50.0),
)
#: which bundled runs the demo fits, holds out, and takes the noise floor from
DEMO_FIT = ("twin_joint_multisine_fit", "twin_chirp_low_fit")
DEMO_HELDOUT = "twin_heldout_multiband"
DEMO_REPEAT = "twin_heldout_multiband_repeat"


def gains(kp_trans: float, kp_rot: float) -> tuple[np.ndarray, np.ndarray]:
    """Task impedance gains with critical damping kd = 2 sqrt(kp)."""
    kp = np.array([kp_trans] * 3 + [kp_rot] * 3)
    return kp, 2.0 * np.sqrt(kp)


def task_target(
    robot: Robot, kind: str, duration: float, kp_trans: float, kp_rot: float, seed: int = 0,
    name: str | None = None, rate_hz: float = 50.0, law: ImpedanceLaw | None = None, scale: float = 1.0,
) -> Run:
    """A 50 Hz task_impedance target run around the EE pose at the ready posture."""
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets(kind, duration, rate_hz, seed=seed, scale=scale)
    x, qd = task_targets(pos, quat, off)
    kp, kd = gains(kp_trans, kp_rot)
    return skeleton_run(
        robot, "task_impedance", t, np.hstack([x, qd]), kp, kd, q_init=Q_READY, control_rate_hz=rate_hz,
        law=law, name=name or f"twin_{kind}",
        excitation={"kind": kind, "generator": "isaaclab_sysid.twin.targets", "seed": seed, "duration_s": duration},
    )


#: joint PD gains of the joint-space demo run [N m/rad], [N m s/rad] (softer than libfranka's example)
JOINT_KP = np.array([300.0, 300.0, 300.0, 300.0, 120.0, 80.0, 40.0])
JOINT_KD = np.array([25.0, 25.0, 25.0, 25.0, 10.0, 8.0, 4.0])
#: amplitude scale of each joint's multisine [rad]
JOINT_AMP = np.array([0.35, 0.25, 0.3, 0.25, 0.35, 0.3, 0.4])


def joint_target(robot: Robot, duration: float, seed: int = 0, name: str = "twin_joint_multisine",
                 rate_hz: float = 50.0, kp: np.ndarray = JOINT_KP, kd: np.ndarray = JOINT_KD) -> Run:
    """A 50 Hz joint_pd target: three tones per joint (0.15-1.2 Hz, amplitude ~ 1/f) around the ready posture.

    Every joint moves well past its static friction (the task-space runs leave the base yaw
    almost still: the redundant arm moves joints 3/5/7 instead).
    """
    t = np.arange(int(round(duration * rate_hz)) + 1) / rate_hz
    rng = np.random.default_rng(seed)
    n = robot.n_dof
    freqs = np.stack([rng.uniform(lo, hi, n) for lo, hi in ((0.15, 0.3), (0.4, 0.7), (0.8, 1.2))], axis=1)
    amps = JOINT_AMP[:n, None] * np.minimum(1.0, 0.25 / freqs)
    q = Q_READY[None, :n] + multisine(t, amps, freqs, rng.uniform(0, 2 * np.pi, (n, 3))) * envelope(t, 1.5, 1.5)[:, None]
    return skeleton_run(robot, "joint_pd", t, q, np.asarray(kp, dtype=float), np.asarray(kd, dtype=float), q_init=Q_READY,
                        control_rate_hz=rate_hz, name=name,
                        excitation={"kind": "joint_multisine", "generator": "isaaclab_sysid.twin.demo", "seed": seed,
                                    "duration_s": duration})


def demo_targets(robot: Robot) -> list[tuple[Run, int, float]]:
    """(target run, noise seed, log rate [Hz]) of every bundled demo run (see :data:`DEMO_RUNS`)."""
    out = []
    for name, kind, dur, kpt, kpr, seed, noise_seed, rate in DEMO_RUNS:
        tgt = (joint_target(robot, dur, seed, name) if kind == "joint_multisine"
               else task_target(robot, kind, dur, kpt, kpr, seed, name))
        out.append((tgt, noise_seed, rate))
    return out
