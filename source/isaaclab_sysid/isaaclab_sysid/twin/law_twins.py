"""Twins of the friction-law matrix (issue 46, benchmarks/friction_laws.py --matrix) under three controllers and two
log rates, with a real recording's noise, quantization and stale rows.

* **joint_pd** and **task_impedance**: the Franka's own controllers, gravity compensated, the torque logged;
* **servo**: a position servo as a LeRobot-style arm runs and logs it: a joint PD closed on the arm's own encoder,
  gravity *not* compensated (a servo's loop does not know the arm's weight), gains stated (a user who knows his
  servo's registers in N m/rad; ``--fit_groups auto`` fits no gains), no torque logged, and the velocity the
  central difference of the logged (quantized, stale) positions, as LeRobot records none;
* **rates**: 1 kHz (every tick, fresh states) or a lower rate (one row per setpoint, e.g. 50 Hz, each row's state
  0..``stale_max_ms`` old; the run states that age, as a schema-1 sidecar does, so the fit scores it).

:func:`matrix_noise` is each cell's realism: the encoder quantization (a 16-bit joint encoder for the Franka's
controllers, the servo's 4096 counts per turn), the state age of a row below 1 kHz (a bus read a few ms before the
frame, as the SO-101 twin's), the measured torque in 0.01 N m steps and torque noise acting on the arm.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.twin.params import TwinNoise, TwinParams
from isaaclab_sysid.twin.recorder import record_twin

#: the matrix's controllers
CONTROLLERS = ("joint_pd", "task_impedance", "servo")
#: a 16-bit joint encoder [rad]; a servo's 4096 counts per turn [rad]
ENCODER_16BIT = 2.0 * np.pi / 2**16
SERVO_COUNT = 2.0 * np.pi / 4096
#: a row below 1 kHz: its state is 0..this many ms old (a bus read before the frame)
STALE_MS = 4


def matrix_noise(controller: str, rate_hz: float) -> TwinNoise:
    """The realism of a matrix cell: (controller, log rate [Hz]) -> :class:`TwinNoise`.

    Franka controllers: q noise 0.2 mrad on a 16-bit encoder grid, dq noise 2 mrad/s, measured torque 0.02 N m in
    0.01 N m steps, 0.02 N m of torque noise on the arm; servo: half a count of noise on its 4096-count grid, the same
    torque noise, no torque logged. Below 1 kHz every row's state is 0..:data:`STALE_MS` ms old."""
    if controller not in CONTROLLERS:
        raise ValueError(f"controller '{controller}': one of {', '.join(CONTROLLERS)}")
    stale = 0 if rate_hz >= TICK_HZ else STALE_MS
    if controller == "servo":
        return TwinNoise(q_std=0.5 * SERVO_COUNT, actuator_tau_std=0.02, q_quantum=SERVO_COUNT, stale_max_ms=stale)
    return TwinNoise(q_std=2e-4, dq_std=2e-3, tau_J_std=0.02, actuator_tau_std=0.02, q_quantum=ENCODER_16BIT,
                     tau_quantum=0.01, stale_max_ms=stale)


def servo_target(target: Run) -> Run:
    """A joint-PD target as a position servo runs it: gravity not compensated (the gains stay stated)."""
    if target.meta.controller != "joint_pd":
        raise ValueError(f"a servo target is a joint_pd target, not {target.meta.controller}")
    return dataclasses.replace(target, meta=dataclasses.replace(target.meta, gravity_compensated=False))


def record_law_twin(robot: Robot, target: Run, params: TwinParams, controller: str, rate_hz: float, seed: int,
                    name: str | None = None) -> Run:
    """Record one matrix run: ``target`` (a joint_pd target for ``joint_pd`` and ``servo``, a task_impedance one
    otherwise) on the twin ``params`` (its ``noise`` the cell's), logged at ``rate_hz`` [Hz] (1000: every tick; lower:
    the target's setpoint rate, which must equal it).

    Servo: ``tau`` and ``tau_J`` are NaN (not logged) and ``dq`` [rad/s] is ``np.gradient`` of the logged ``q`` over
    the rows' times. Below 1 kHz the run states its rows' state age (``meta.state_age_ms``)."""
    if controller == "servo":
        target = servo_target(target)
    one_khz = rate_hz >= TICK_HZ
    if not one_khz and abs(target.meta.control_rate_hz - rate_hz) > 1e-9:
        raise ValueError(f"a {rate_hz:g} Hz log needs a {rate_hz:g} Hz target (this one: "
                         f"{target.meta.control_rate_hz:g} Hz)")
    run = record_twin(robot, target, params, seed=seed, log_rate_hz=float(TICK_HZ) if one_khz else None, name=name)
    meta = run.meta
    if not one_khz:
        meta = dataclasses.replace(meta, state_age_ms=int(params.noise.stale_max_ms))
    if controller != "servo":
        return dataclasses.replace(run, meta=meta)
    nan = np.full_like(run.q, np.nan)
    return dataclasses.replace(run, meta=meta, dq=np.gradient(run.q, run.t, axis=0), tau=nan, tau_J=nan.copy())
