"""The position servo's fitted terms in a joint-PD replay (issue 27): gains a run leaves unstated, encoder offset.

A smart servo (Feetech STS3215, Dynamixel) closes a PD loop on its own encoder:
``tau = kp (q* - q_enc) - kd dq``, clamped to its torque limit, with ``q_enc = q + encoder_offset``
(the homing offset's calibration error; the logged position is the encoder's). So with an offset
the controller drives the true joint to ``q* - offset`` and the log reads ``q + offset``; the
backends replay the true joint with the setpoints and the start state shifted by ``-offset`` and
add ``offset`` back to the replayed positions.

Gains: a run states its gains in ``meta.kp`` / ``meta.kd``; an entry that is NaN is unstated (a
LeRobot arm's gains are servo register values with no published mapping to N m/rad). A candidate's
``kp`` / ``kd`` fill the unstated entries only: a run that states its gains keeps them.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.sim.interface import CandidateBatch
from isaaclab_sysid.sim.schedule import RunSchedule

SERVO_GROUPS = ("kp", "kd", "encoder_offset")


def servo_arrays(batch: CandidateBatch, n_dof: int) -> dict[str, np.ndarray]:
    """The batch's servo groups as validated (P, N) float64 arrays (absent groups are left out).

    Raises:
        ValueError: a wrong shape, a non-finite value, a negative gain.
    """
    out: dict[str, np.ndarray] = {}
    for g in SERVO_GROUPS:
        val = getattr(batch, g)
        if val is None:
            continue
        arr = np.ascontiguousarray(np.asarray(val, dtype=np.float64))
        if arr.shape != (batch.size, n_dof):
            raise ValueError(f"CandidateBatch.{g} must have shape ({batch.size}, {n_dof}), got {arr.shape}")
        if not np.all(np.isfinite(arr)) or (g != "encoder_offset" and np.any(arr < 0)):
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
    kp, kd = effective_gains(s, params, p)
    if "encoder_offset" not in params:
        return kp, kd, s.sp_values, s.q_init, None
    off = np.ascontiguousarray(params["encoder_offset"][p])
    return (kp, kd, np.ascontiguousarray(s.sp_values - off), np.ascontiguousarray(s.q_init - off), off)
