"""The input of one shooting window of a torque run: the measured torque it needs, less the candidate's offset.

A torque run's schedule holds the measured torque on every tick of the run
(:func:`~isaaclab_sysid.sim.shooting.torque_per_tick`). A window whose first sample is at tick
``t_a`` and last at ``t_b``, replayed with a delay of ``d`` ticks, reads the torque of ticks
``max(0, t_a - d) .. t_b`` only; this module cuts that slice, shifts the window's sample ticks
to it (exactly the same ticks are read: the replay is bit for bit the one on the whole run)
and subtracts the candidate's ``torque_offset`` (the torque that acted is ``logged - offset``,
a torque sensor's or current loop's bias; docs/replay.md).
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.sim.interface import CandidateBatch


def torque_offset_arrays(batch: CandidateBatch, n_dof: int) -> dict[str, np.ndarray]:
    """``{"torque_offset": (P, N)}`` [N m] when the batch sets the group, else ``{}``.

    Raises:
        ValueError: wrong shape or a non-finite value.
    """
    if batch.torque_offset is None:
        return {}
    off = np.asarray(batch.torque_offset, dtype=np.float64)
    p = batch.size
    if off.shape != (p, n_dof):
        raise ValueError(f"CandidateBatch.torque_offset must have shape ({p}, {n_dof}), got {off.shape}")
    if not np.all(np.isfinite(off)):
        raise ValueError("CandidateBatch.torque_offset must be finite")
    return {"torque_offset": np.ascontiguousarray(off)}


def window_input(torque: np.ndarray, sample_ticks: np.ndarray, delay: int,
                 offset: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The torque slice one window reads and its sample ticks relative to that slice.

    Args:
        torque: (K, N) measured torque on ticks 0..K-1 of the run [N m].
        sample_ticks: (S,) the window's sample ticks (run ticks, increasing; the last < K).
        delay: the candidate's delay [ticks] (>= 0).
        offset: (N,) the candidate's torque offset [N m], or None (no offset).

    Returns:
        ((L, N) C-contiguous torque of ticks base..last, with base = max(0, first - delay), less the
        offset; (S,) int64 sample ticks minus base).
    """
    base = max(0, int(sample_ticks[0]) - int(delay))
    last = int(sample_ticks[-1])
    tau = torque[base:last + 1]
    if offset is not None:
        tau = tau - offset[None, :]
    return np.ascontiguousarray(tau), np.ascontiguousarray(np.asarray(sample_ticks, dtype=np.int64) - base)
