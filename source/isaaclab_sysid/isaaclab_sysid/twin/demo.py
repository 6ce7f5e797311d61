"""Target runs of the bundled demo (data/real_runs/): two fit runs and a held-out run."""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.data.run import ImpedanceLaw, Run
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets

#: (name, waveform, duration [s], translational kp, rotational kp, seed)
DEMO_RUNS = (
    ("twin_multiband_fit", "multiband", 12.0, 200.0, 20.0, 1),
    ("twin_chirp_low_fit", "chirp", 8.0, 200.0, 20.0, 2),
    ("twin_heldout_multiband", "multiband", 10.0, 500.0, 30.0, 3),
)


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


def demo_targets(robot: Robot) -> list[Run]:
    return [task_target(robot, kind, dur, kpt, kpr, seed, name) for name, kind, dur, kpt, kpr, seed in DEMO_RUNS]
