"""Torque runs: a log's measured torque as the input of a torque-driven replay (``--replay torque``).

A torque run is a :class:`~isaaclab_sysid.data.run.Run` with ``meta.controller = "torque"``:
``tau`` holds the torque that acted on the joints [N m] (the signal the user names:
measured joint torque ``tau_J``, commanded torque ``tau``, or motor current times the
drive gains), ``tick`` stamps every row (its time on the 1 ms tick grid, from the log's
own stamps), and ``meta.gravity_compensated`` is True when that torque excludes gravity.
The replay applies it (delayed by the fitted delay) in shooting windows that start from
the measured state (sim/shooting.py); a row's state and torque come from the same
instant, so a common age of both only shifts the run in time (no ``--state_age_ms``).

Two sources: a run-format file (:func:`torque_run`) and a raw UR10e CSV
(:func:`read_ur10e_torque_run`: 31 columns, about 100 Hz, irregular stamps; current x
drive gains or the desired torque). Every refusal is one line naming the file and the flag.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from isaaclab_sysid.data.run import Run, RunMeta
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.utils.errors import UserError

TorqueSignal = Literal["tau_J", "tau", "current"]
SIGNALS: tuple[str, ...] = ("tau_J", "tau", "current")


class TorqueRunError(UserError, ValueError):
    """A log cannot drive a torque replay (the message is one line naming the file and the flag; exit 2)."""


@dataclass(frozen=True)
class TorqueSource:
    """Which logged signal drives the replay, and what it contains (never guessed: the user states it).

    Attributes:
        signal: ``"tau_J"`` (measured joint torque; libfranka's includes gravity), ``"tau"``
            (commanded torque; the UR10e log's desired torque) or ``"current"`` (measured motor
            current [A] x ``drive_gains``; UR10e logs).
        includes_gravity: the signal contains the gravity torque (the replay then runs with gravity).
        drive_gains: (N,) current-to-torque gains [N m/A], for ``"current"`` only.
    """

    signal: TorqueSignal
    includes_gravity: bool
    drive_gains: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise TorqueRunError(f"--torque_signal {self.signal!r}: expected one of {', '.join(SIGNALS)}")
        if self.signal == "current" and self.drive_gains is None:
            raise TorqueRunError("--torque_signal current needs --drive_gains K1 ... KN [N m/A] (the current-to-torque "
                                 "gain of each joint; the UR10e authors' are in UR10E_parameters.txt, drvGains)")
        if self.drive_gains is not None:
            k = np.asarray(self.drive_gains, dtype=float)
            if not (np.all(np.isfinite(k)) and np.all(k > 0)):
                raise TorqueRunError(f"--drive_gains {list(self.drive_gains)}: every gain must be finite and > 0 [N m/A]")

    def gains(self, n_dof: int, file: str) -> np.ndarray:
        """(N,) drive gains [N m/A], checked against the joint count."""
        k = np.asarray(self.drive_gains, dtype=float)
        if k.shape != (n_dof,):
            raise TorqueRunError(f"{file}: --drive_gains has {k.size} values for {n_dof} joints")
        return k


def _check_torque(tau: np.ndarray, file: str, what: str) -> None:
    bad = np.argwhere(~np.isfinite(tau))
    if bad.size:
        r, c = bad[0]
        if np.all(~np.isfinite(tau[:, c])):
            raise TorqueRunError(f"{file}: column {what}{c + 1}: no torque recorded (every row NaN); --replay torque "
                                 "needs the torque that acted: choose another --torque_signal")
        raise TorqueRunError(f"{file}: row {r + 2}, column {what}{c + 1}: non-finite torque {tau[r, c]}")


def _stamped(run: Run, tau: np.ndarray, gravity_included: bool, summary: dict) -> Run:
    ticks = run.sample_ticks()
    meta = replace(run.meta, controller="torque", gravity_compensated=not gravity_included,
                   summary={**run.meta.summary, "torque_replay": summary}, unrecorded=())
    return replace(run, meta=meta, tau=np.ascontiguousarray(tau, dtype=float), tick=ticks.astype(np.int64),
                   setpoint_tick=None, q_des=None, x_des=None, quat_des=None)


def torque_run(run: Run, source: TorqueSource) -> Run:
    """The torque run of a run-format log: ``tau`` set to the signal the source names.

    Raises:
        TorqueRunError: the signal is absent (NaN in every row), non-finite in a row, or is
            ``"current"`` (run-format files carry no motor current).
    """
    file = str(run.source or run.name)
    if source.signal == "current":
        raise TorqueRunError(f"{file}: --torque_signal current: run-format files carry no motor current; give "
                             "--torque_signal tau_J or tau, or read a UR10e log with --log_format ur10e")
    tau = run.tau_J if source.signal == "tau_J" else run.tau
    _check_torque(tau, file, source.signal)
    return _stamped(run, tau, source.includes_gravity,
                    {"signal": source.signal, "includes_gravity": source.includes_gravity})


def read_ur10e_torque_run(path: str | Path, source: TorqueSource, robot, max_corrupt_head_rows: int = 40) -> Run:
    """A raw UR10e CSV (shared/data/ur10e layout) as a torque run of ``robot``.

    Rows are stamped on the 1 ms grid from their own time stamps (t - t0, rounded); a row
    landing on the tick of the row before is dropped and counted. The EE pose is the
    forward kinematics of the logged q at the robot's EE point.

    Args:
        path: the CSV (31 columns; the 19-column files have no desired torque).
        source: ``"current"`` (measured current x drive gains) or ``"tau"`` (desired torque).
        robot: the UR10e :class:`~isaaclab_sysid.robots.Robot` (joint count, FK).
        max_corrupt_head_rows: corrupt rows at the head of the file that may be dropped
            (two of the real logs begin with ~20 rows of garbage packets).

    Raises:
        TorqueRunError: unreadable file (row and column named), missing signal, wrong joint count.
    """
    from isaaclab_sysid.robots.kinematics import ee_poses
    from isaaclab_sysid.data.formats.ur10e import UR10eDataError, load_ur10e_csv

    path = Path(path)
    try:
        log = load_ur10e_csv(path, max_corrupt_head_rows=max_corrupt_head_rows)
    except UR10eDataError as exc:
        raise TorqueRunError(str(exc)) from None
    n = log.q.shape[1]
    if n != robot.n_dof:
        raise TorqueRunError(f"{path}: {n} joints in the log, robot {robot.name} has {robot.n_dof}")
    if source.signal == "tau_J":
        raise TorqueRunError(f"{path}: --torque_signal tau_J: a UR10e log has no measured joint torque; give "
                             "--torque_signal current (with --drive_gains) or tau (the desired torque)")
    if source.signal == "current":
        tau = log.current * source.gains(n, str(path))[None, :]
    else:
        if log.tau_des is None:
            raise TorqueRunError(f"{path}: --torque_signal tau: this 19-column log has no desired-torque columns "
                                 "(26-31); give --torque_signal current")
        tau = log.tau_des
    ticks = np.rint((log.t - log.t[0]) * TICK_HZ).astype(np.int64)
    keep = np.ones(ticks.size, dtype=bool)
    keep[1:] = np.diff(ticks) > 0
    dropped = int((~keep).sum())
    ticks, q, dq, tau = ticks[keep], log.q[keep], log.qd[keep], tau[keep]
    pos, quat = ee_poses(robot, q)
    t = ticks / TICK_HZ
    rate = float((ticks.size - 1) * TICK_HZ / max(int(ticks[-1]), 1))
    meta = RunMeta(
        robot=robot.name, controller="torque", control_rate_hz=rate, log_rate_hz=rate, num_samples=int(ticks.size),
        q_init=q[0].copy(), anchor_pos=pos[0].copy(), anchor_quat=quat[0].copy(), kp=np.zeros(0), kd=np.zeros(0),
        impedance=None, gravity_compensated=not source.includes_gravity,
        excitation={"source": "ur10e_csv"},
        summary={"torque_replay": {"signal": source.signal, "includes_gravity": source.includes_gravity,
                                   "drive_gains": None if source.drive_gains is None else [float(k) for k in source.drive_gains],
                                   "dropped_same_tick_rows": dropped, "dropped_head_rows": log.dropped_head_rows,
                                   "dropped_truncated_last_row": log.dropped_last_row}},
    )
    nan = np.full_like(tau, np.nan)
    return Run(name=path.stem, meta=meta, t=t, q=np.ascontiguousarray(q), dq=np.ascontiguousarray(dq), ee_pos=pos,
               ee_quat=quat, tau=np.ascontiguousarray(tau), tau_J=nan, tick=ticks, source=path)
