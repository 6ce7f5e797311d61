"""Simple excitation targets for the twin and for tests (the product's excitation
designs live in ``isaaclab_sysid.excitation``): sums of sines and linear chirps
on the EE pose around an anchor, or on the joints around a posture, under a
fade-in / fade-out envelope so a target starts and ends at the anchor.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from isaaclab_sysid.data.run import ImpedanceLaw, Run, RunMeta
from isaaclab_sysid.robots.robot import Robot

#: Franka "ready" posture [rad].
Q_READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def envelope(t: np.ndarray, fade_in: float, fade_out: float) -> np.ndarray:
    """Half-cosine fade-in over ``fade_in`` s and fade-out over the last ``fade_out`` s."""
    dur = float(t[-1])
    e = np.ones_like(t)
    if fade_in > 0:
        a = np.clip(t / fade_in, 0, 1)
        e *= 0.5 - 0.5 * np.cos(np.pi * a)
    if fade_out > 0:
        b = np.clip((dur - t) / fade_out, 0, 1)
        e *= 0.5 - 0.5 * np.cos(np.pi * b)
    return e


def multisine(t: np.ndarray, amps: np.ndarray, freqs: np.ndarray, phases: np.ndarray) -> np.ndarray:
    """(T, A) sum of sines: amps/freqs/phases are (A, M) per axis and tone."""
    arg = 2 * np.pi * freqs[None, :, :] * t[:, None, None] + phases[None, :, :]
    return np.sum(amps[None, :, :] * np.sin(arg), axis=2)


def chirp(t: np.ndarray, amps: np.ndarray, f0: float, f1: float, phases: np.ndarray) -> np.ndarray:
    """(T, A) linear chirp f0 -> f1 over the duration, one amplitude and phase per axis."""
    dur = float(t[-1]) if t[-1] > 0 else 1.0
    ph = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / dur * t**2)
    return amps[None, :] * np.sin(ph[:, None] + phases[None, :])


def pose_offsets(
    kind: str, duration: float, rate_hz: float, seed: int = 0, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Time base (T,) and (T, 6) offsets [dx, dy, dz, rx, ry, rz] of a ``"multiband"``
    (three tones per axis, amplitude ~ 1/f) or ``"chirp"`` (0.1 -> 0.7 Hz) target."""
    t = np.arange(int(round(duration * rate_hz)) + 1) / rate_hz
    rng = np.random.default_rng(seed)
    base = scale * np.array([0.04, 0.04, 0.04, 0.12, 0.10, 0.15])
    if kind == "multiband":
        freqs = np.stack([rng.uniform(lo, hi, 6) for lo, hi in ((0.15, 0.3), (0.55, 1.1), (1.25, 2.0))], axis=1)
        amps = base[:, None] * np.minimum(1.0, 0.35 / freqs)
        off = multisine(t, amps, freqs, rng.uniform(0, 2 * np.pi, (6, 3)))
        off *= envelope(t, 2.0, 2.0)[:, None]
    elif kind == "chirp":
        off = chirp(t, 1.5 * base, 0.1, 0.7, np.arange(6) * np.pi / 3)
        off *= envelope(t, 2.0, 3.0)[:, None]
    else:
        raise ValueError(f"unknown target kind '{kind}' (multiband, chirp)")
    return t, off


def task_targets(anchor_pos: np.ndarray, anchor_quat: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EE targets: anchor position + offset, rotation vector applied in the world frame
    to the anchor orientation (xyzw)."""
    x = np.asarray(anchor_pos)[None, :] + offsets[:, :3]
    rot = Rotation.from_rotvec(offsets[:, 3:6]) * Rotation.from_quat(np.asarray(anchor_quat))
    quat = rot.as_quat()
    quat[quat[:, 3] < 0] *= -1
    return x, quat


def skeleton_run(
    robot: Robot,
    controller: str,
    t: np.ndarray,
    targets: np.ndarray,
    kp: np.ndarray,
    kd: np.ndarray,
    q_init: np.ndarray = Q_READY,
    control_rate_hz: float = 50.0,
    law: ImpedanceLaw | None = None,
    name: str = "target",
    excitation: dict | None = None,
) -> Run:
    """A run with the given setpoints (one per row, logged at ``control_rate_hz``)
    and zero states: what a replay or the twin needs as input.

    ``targets`` is (T, N) joint targets for ``joint_pd``, (T, 7) position ++ quat xyzw
    for ``task_impedance``.
    """
    n = robot.n_dof
    T = len(t)
    pos, quat = robot.ee_pose(q_init)
    meta = RunMeta(
        robot=robot.name,
        controller=controller,
        control_rate_hz=control_rate_hz,
        log_rate_hz=control_rate_hz,
        num_samples=T,
        q_init=np.asarray(q_init, dtype=float).copy(),
        anchor_pos=pos,
        anchor_quat=quat,
        kp=np.asarray(kp, dtype=float),
        kd=np.asarray(kd, dtype=float),
        impedance=law or ImpedanceLaw(),
        gravity_compensated=True,
        excitation=excitation or {},
    )
    z = np.zeros((T, n))
    targets = np.asarray(targets, dtype=float)
    return Run(
        name=name,
        meta=meta,
        t=np.asarray(t, dtype=float),
        q=np.tile(q_init, (T, 1)),
        dq=z.copy(),
        ee_pos=np.tile(pos, (T, 1)),
        ee_quat=np.tile(quat, (T, 1)),
        tau=z.copy(),
        tau_J=z.copy(),
        q_des=targets if controller == "joint_pd" else None,
        x_des=targets[:, :3] if controller == "task_impedance" else None,
        quat_des=targets[:, 3:7] if controller == "task_impedance" else None,
    )
