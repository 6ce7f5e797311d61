"""The position servo's fitted terms: gains a joint-PD run leaves unstated, encoder offset (issue 27), and the
servo motor model of a ``servo`` run (issue 42).

A smart servo (Feetech STS3215, Dynamixel) closes a PD loop on its own encoder:
``tau = kp (q* - q_enc) - kd dq``, clamped to its torque limit, with ``q_enc = q + encoder_offset``
(the homing offset's calibration error; the logged position is the encoder's). So with an offset
the controller drives the true joint to ``q* - offset`` and the log reads ``q + offset``; the
backends replay the true joint with the setpoints and the start state shifted by ``-offset`` and
add ``offset`` back to the replayed positions.

The servo motor model (controller ``servo``, :mod:`isaaclab_sysid.robots.servos`): the firmware turns the goal
error into a PWM duty with its register gain, kept in the current-limit window and clipped; the DC motor gives
``kt (duty V - kt dq) / R`` at the output shaft, zero while the torque is off. The family's firmware facts come
from the robot config (``servo``); ``motor_kt`` [N m/A] and ``motor_r`` [Ohm] are fitted (:func:`servo_table`,
:func:`servo_torque`, the numpy spec the native loop mirrors).

Gains: a run states its gains in ``meta.kp`` / ``meta.kd``; an entry that is NaN is unstated (a
LeRobot arm's gains are servo register values with no published mapping to N m/rad). A candidate's
``kp`` / ``kd`` fill the unstated entries only: a run that states its gains keeps them.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.robots.servos import ServoFamily, servo_family
from isaaclab_sysid.sim.interface import CandidateBatch
from isaaclab_sysid.sim.schedule import RunSchedule

SERVO_GROUPS = ("kp", "kd", "encoder_offset")
#: the servo motor model's fitted groups (a ``servo`` run needs both)
MOTOR_GROUPS = ("motor_kt", "motor_r")
#: columns of a servo table row (native/replay.c: SERVO_COLS): error gain [1/rad], largest duty, current limit [A]
#: (0: none), nominal supply [V], kt [N m/A], R [Ohm]
SERVO_COLUMNS = 6


class ServoModelError(ValueError):
    """A servo run on a robot or candidate that lacks the servo model (families or motor groups)."""


def families_of(servo: tuple[str, ...] | None, n_dof: int, robot_name: str) -> tuple[ServoFamily, ...]:
    """(N,) the servo family of each joint, from a robot config's ``servo``.

    Raises:
        ServoModelError: the robot states no servo family.
    """
    if servo is None:
        raise ServoModelError(f"robot '{robot_name}' states no servo family ('servo' in its config, robots/servos.py): "
                              "a servo run cannot be replayed on it")
    return tuple(servo_family(f) for f in servo)[:n_dof]


def servo_table(families: tuple[ServoFamily, ...], kt: np.ndarray, r: np.ndarray) -> np.ndarray:
    """(N, SERVO_COLUMNS) the servo controller's row per joint (native/replay.c: ``servo_p``).

    Args:
        families: (N,) the firmware facts per joint.
        kt: (N,) torque constant [N m/A] (> 0); r: (N,) winding resistance [Ohm] (> 0).
    """
    kt, r = np.asarray(kt, dtype=np.float64), np.asarray(r, dtype=np.float64)
    if np.any(~(kt > 0)) or np.any(~(r > 0)):
        raise ValueError("motor_kt and motor_r must be > 0")
    rows = [[f.error_gain, f.max_pwm, f.max_current_a or 0.0, f.vin_nominal_v, kt[j], r[j]] for j, f in enumerate(families)]
    return np.ascontiguousarray(np.array(rows, dtype=np.float64))


def servo_torque(table: np.ndarray, kp: np.ndarray, goal: np.ndarray, enable: np.ndarray, vin: np.ndarray,
                 q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """(N,) the servos' motor torque [N m] (the spec of native/replay.c: ``servo_torque``).

    Args:
        table: (N, SERVO_COLUMNS) :func:`servo_table`. kp: (N,) register gains. goal: (N,) [rad] (encoder frame,
        as ``q``). enable: (N,) torque on where > 0.5. vin: (N,) supply [V] (NaN or <= 0: the nominal).
        q, dq: (N,) [rad], [rad/s].
    """
    eg, max_pwm, imax, vnom, kt, r = (table[:, i] for i in range(SERVO_COLUMNS))
    v = np.where(np.isfinite(vin) & (vin > 0), vin, vnom)
    duty = eg * kp * (goal - q)
    mid, half = kt * dq / v, r * imax / v
    duty = np.where(imax > 0, np.clip(duty, mid - half, mid + half), duty)
    duty = np.clip(duty, -max_pwm, max_pwm)
    return np.where(enable > 0.5, kt * (duty * v - kt * dq) / r, 0.0)


def servo_arrays(batch: CandidateBatch, n_dof: int) -> dict[str, np.ndarray]:
    """The batch's servo groups as validated (P, N) float64 arrays (absent groups are left out).

    Raises:
        ValueError: a wrong shape, a non-finite value, a negative gain.
    """
    out: dict[str, np.ndarray] = {}
    for g in SERVO_GROUPS + MOTOR_GROUPS:
        val = getattr(batch, g)
        if val is None:
            continue
        arr = np.ascontiguousarray(np.asarray(val, dtype=np.float64))
        if arr.shape != (batch.size, n_dof):
            raise ValueError(f"CandidateBatch.{g} must have shape ({batch.size}, {n_dof}), got {arr.shape}")
        if not np.all(np.isfinite(arr)) or (g != "encoder_offset" and np.any(arr < 0)) or (g in MOTOR_GROUPS and np.any(arr <= 0)):
            raise ValueError(f"CandidateBatch.{g} must be finite" + (" and >= 0" if g != "encoder_offset" else ""))
        out[g] = arr
    return out


def effective_gains(s: RunSchedule, params: dict[str, np.ndarray], p: int) -> tuple[np.ndarray, np.ndarray]:
    """(N,) kp [N m/rad] and kd [N m s/rad] candidate ``p`` replays run ``s`` with.

    The run's stated entries; its unstated (NaN) entries from the candidate's ``kp`` / ``kd``.

    Raises:
        ValueError: the run leaves a gain unstated and the candidate does not fit it.
    """
    gains = []
    for g, stated in (("kp", s.kp), ("kd", s.kd)):
        stated = np.asarray(stated, dtype=np.float64)
        missing = ~np.isfinite(stated)
        if not missing.any():
            gains.append(np.ascontiguousarray(stated))
            continue
        if g not in params:
            raise ValueError(f"run '{s.name}' does not state its {g} (servo gains unknown): fit the group {g} "
                             f"(--groups ... {g}) or state the gains")
        gains.append(np.ascontiguousarray(np.where(missing, params[g][p], stated)))
    return gains[0], gains[1]


def servo_job_arrays(s: RunSchedule, params: dict[str, np.ndarray], p: int):
    """What a joint-PD job of candidate ``p`` replays: gains, setpoints and start in the true joint's frame.

    Returns:
        kp, kd: (N,) gains (:func:`effective_gains`); sp_values: (K, N) setpoints minus the offset [rad];
        q_init: (N,) true start posture [rad]; offset: (N,) encoder offset to add to the replayed q, or None.
    """
    if s.controller == "servo":  # register gains, stated by every servo run
        kp, kd = s.kp, s.kd
    else:
        kp, kd = effective_gains(s, params, p)
    if "encoder_offset" not in params:
        return kp, kd, s.sp_values, s.q_init, None
    off = np.ascontiguousarray(params["encoder_offset"][p])
    sp = s.sp_values.copy()
    sp[:, : off.shape[0]] -= off  # the goals (a servo run's rows also hold its enable and voltage columns)
    return (kp, kd, np.ascontiguousarray(sp), np.ascontiguousarray(s.q_init - off), off)


def motor_table(s: RunSchedule, params: dict[str, np.ndarray], p: int, families: tuple[ServoFamily, ...]) -> np.ndarray:
    """(N, SERVO_COLUMNS) the servo table candidate ``p`` replays servo run ``s`` with.

    Raises:
        ServoModelError: the candidate does not carry both motor groups.
    """
    missing = [g for g in MOTOR_GROUPS if g not in params]
    if missing:
        raise ServoModelError(f"run '{s.name}' is a servo run: its motor model needs {', '.join(MOTOR_GROUPS)} "
                              f"(fit them: --fit_groups ...,{','.join(MOTOR_GROUPS)}); missing {', '.join(missing)}")
    return servo_table(families, params["motor_kt"][p], params["motor_r"][p])
