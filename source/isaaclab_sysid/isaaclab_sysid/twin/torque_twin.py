"""The torque-replay twin (docs/replay.md, issue 14 and 28): a Franka under joint PD whose log carries the torque
command with sensor noise and a constant offset, acting a hidden delay after it is logged.

Hidden truth: armature, Coulomb and viscous friction per joint (a light wrist: 0.03 kg m^2 on joint 7), encoder,
velocity and actuator noise, encoder quantization; the logged torque leads the acting one by :data:`DELAY` ticks
and carries white noise of a chosen level and, optionally, the per-joint bias :data:`OFFSET` and a first-order
sensor filter (the defects the torque-replay verdict names: evaluate/torque_residual.py). The fit run is a
multisine; the held-out run another waveform at 1.6x the stiffness.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from isaaclab_sysid.data import write_run
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.twin.demo import joint_target
from isaaclab_sysid.twin.params import TwinNoise, TwinParams
from isaaclab_sysid.twin.recorder import record_twin

TRUTH = TwinParams(
    robot="franka_panda",
    armature=np.array([0.28, 0.24, 0.18, 0.15, 0.06, 0.05, 0.03]),
    friction=np.array([0.55, 0.50, 0.40, 0.35, 0.18, 0.15, 0.09]),
    viscous=np.array([0.35, 0.32, 0.25, 0.20, 0.09, 0.08, 0.04]),
    delay=0,
    substeps=2,
    torque_clamp=False,
    slew_limit=False,
    noise=TwinNoise(q_std=5e-5, dq_std=2e-3, actuator_tau_std=0.02, q_quantum=6e-6),
)
#: ticks from the logged torque command to the torque acting (the torque replay's hidden delay)
DELAY = 3
#: a torque sensor's bias: the logged torque is the one that acted + this [N m] (the LS offsets of a real Franka
#: log span -0.20..+0.09 N m)
OFFSET = np.array([0.15, -0.20, 0.09, -0.08, 0.05, -0.06, 0.04])


def lead(tau: np.ndarray, d: int) -> np.ndarray:
    """The command log of an applied torque (T, N) that acts ``d`` ticks after it is logged (1 kHz rows)."""
    return np.vstack([tau[d:], np.repeat(tau[-1:], d, axis=0)])


def low_pass(x: np.ndarray, time_constant_s: float) -> np.ndarray:
    """A first-order low-pass (a torque sensor's filter) of 1 kHz rows ``x`` (T, N), time constant [s]; started at
    the first row. 0: ``x`` itself."""
    if time_constant_s <= 0:
        return x
    a = np.exp(-1.0 / (1000.0 * time_constant_s))
    y = np.empty_like(x)
    y[0] = x[0]
    for k in range(1, x.shape[0]):
        y[k] = a * y[k - 1] + (1 - a) * x[k]
    return y


def torque_logged(robot: Robot, target: Run, seed: int, noise: float, offset: np.ndarray | None = None,
                  filter_s: float = 0.0, delay: int = DELAY) -> Run:
    """The twin's 1 kHz log of ``target``: ``tau`` the acting torque led by ``delay`` ticks (default :data:`DELAY`),
    through a first-order sensor filter of time constant ``filter_s`` [s] (0: none), plus white noise of ``noise``
    [N m] and ``offset`` (N,) [N m]."""
    run = record_twin(robot, target, TRUTH, seed=seed, log_rate_hz=1000)  # tau: the torque the PD law applied
    rng = np.random.default_rng(100 + seed)
    tau = low_pass(lead(run.tau, delay), filter_s) + noise * rng.standard_normal(run.tau.shape)
    return dataclasses.replace(run, tau=tau if offset is None else tau + offset)


def write_twin(robot: Robot, d: Path, noise: float, offset: np.ndarray | None = None,
               fit_s: float = 6.0) -> tuple[Path, Path]:
    """Write the fit run (a ``fit_s`` multisine) and the held-out run (4 s, 1.6x the stiffness) into ``d``;
    returns their CSV paths."""
    fit = torque_logged(robot, joint_target(robot, fit_s, seed=11, name="fit_multisine"), seed=1, noise=noise,
                        offset=offset)
    stiff = (1.6 * np.array([600, 600, 600, 600, 250, 150, 50.0]), 1.4 * np.array([50, 50, 50, 50, 30, 25, 15.0]))
    held = torque_logged(robot, joint_target(robot, 4.0, seed=29, name="heldout_multisine", kp=stiff[0], kd=stiff[1]),
                         seed=2, noise=noise, offset=offset)
    return write_run(fit, Path(d) / "fit_multisine.csv")[0], write_run(held, Path(d) / "heldout_multisine.csv")[0]
