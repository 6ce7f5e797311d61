"""The friction torque of a run, sample by sample: what the tracker reads.

Two sources (stated with ``--source``):

* ``model`` (default): the measured torque minus the arm's rigid-body torque and the rotor
  inertia, ``y = S - Y(q, qd, qdd) pi_arm - I_a qdd`` with ``S`` the run's ``tau_J`` (or ``tau``)
  and the arm's link inertials (the URDF's, or the least-squares result via ``--nominal``).
  Gravity is in the model when it is in ``S`` (``arm_model.gravity_in_signal``). For arms whose
  torque signal is the motor's (current-based, or the twin's), where friction acts before it.
* ``sensor_difference``: the motor torque minus the link-side sensor's,
  ``y = tau (+ g(q) when the controller compensates gravity) - tau_J - I_a qdd``: friction
  between the motor and a joint torque sensor (Franka's ``tau_J`` is link-side), with no
  rigid-body model.

Positions, velocities and torques are filtered and resampled first
(``rigid_body.preprocess``: zero-phase Butterworth, central differences), on the grid the
tracker's chunks are cut from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.arm_model import ArmModel, gravity_in_signal
from isaaclab_sysid.data import Run
from isaaclab_sysid.online.rls import TrackerError
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, preprocess
from isaaclab_sysid.robots import Robot

SOURCES = ("model", "sensor_difference")


@dataclass(frozen=True)
class SignalOptions:
    """Attributes:
    source: ``model`` or ``sensor_difference`` (module doc).
    torque: the torque signal of ``model``: ``tau_J`` (measured) or ``tau`` (commanded).
    preprocess: filtering and resampling (default: 100 Hz grid, 0.5 s trimmed at each end).
    """

    source: str = "model"
    torque: str = "tau_J"
    preprocess: PreprocessOptions = field(default_factory=lambda: PreprocessOptions(dt=0.01, trim_s=0.5))

    def validate(self) -> None:
        if self.source not in SOURCES:
            raise TrackerError(f"--source must be one of {', '.join(SOURCES)}; got {self.source!r}")
        if self.torque not in ("tau_J", "tau"):
            raise TrackerError(f"--torque must be tau_J or tau; got {self.torque!r}")


@dataclass
class FrictionSamples:
    """One run's friction readings on the filtered grid.

    Attributes:
        run: the run's name or file; t: (T,) time from the run's start [s].
        qd: (T, N) filtered velocity [rad/s]; y: (T, N) friction torque [N m].
    """

    run: str
    t: np.ndarray
    qd: np.ndarray
    y: np.ndarray


class FrictionSignal:
    """Turns runs into friction readings.

    Args:
        robot: the arm with its link inertials.
        armature: (N,) rotor inertia [kg m^2] subtracted with ``qdd`` (the replay fit's, or zeros).
        options: source, torque, preprocessing.
    """

    def __init__(self, robot: Robot, armature: np.ndarray | None = None, options: SignalOptions = SignalOptions()) -> None:
        options.validate()
        self.robot = robot
        self.model = ArmModel(robot)
        self.armature = np.zeros(robot.n_dof) if armature is None else np.asarray(armature, dtype=float)
        if self.armature.shape != (robot.n_dof,) or np.any(self.armature < 0):
            raise TrackerError(f"--armature must be {robot.n_dof} values >= 0; got {self.armature.tolist()}")
        self.options = options

    def of_run(self, run: Run) -> FrictionSamples:
        """The friction readings of one run (refuses a run of another robot, naming it)."""
        where = str(run.source or run.name)
        if run.meta.robot != self.robot.name or run.n_dof != self.robot.n_dof:
            raise TrackerError(f"{where}: recorded on {run.meta.robot!r} ({run.n_dof} joints), not {self.robot.name!r}")
        o = self.options
        signals = {"tau_J": np.asarray(run.tau_J, dtype=float), "tau": np.asarray(run.tau, dtype=float)}
        p = preprocess(run.t, run.q, signals, o.preprocess, source=where, velocity=run.dq)
        rotor = self.armature[None, :] * p.qdd
        if o.source == "model":
            grav = gravity_in_signal(run, o.torque)
            y = p.signals[o.torque] - self.model.arm_torque(p.q, p.qd, p.qdd, gravity=grav) - rotor
        else:
            g = self.model.arm_torque(p.q, gravity=True) if run.meta.gravity_compensated else 0.0
            y = p.signals["tau"] + g - p.signals["tau_J"] - rotor
        return FrictionSamples(where, p.t - float(run.t[0]), p.qd, y)
