"""Multiple shooting of a torque-driven replay: the run cut into windows, each started from the measured state.

An open-loop replay of a measured torque drifts within a second (every model error
integrates twice), so a torque run is cut into windows of ``window_ticks``; window w
starts at its first sample from the measured (q, qd) of that sample and applies the
measured torque (delayed by the candidate's delay) until its last sample. The windows
are independent jobs: a batch of P candidates on a run of W windows is P x W replays
(the env blocks of docs/replay.md). Between samples the torque is interpolated
linearly onto the 1 ms ticks.
"""

from __future__ import annotations

import numpy as np


def torque_per_tick(sample_ticks: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The measured torque on every tick 0..last, linearly interpolated between samples.

    Args:
        sample_ticks: (T,) strictly increasing sample ticks (the first is 0).
        tau: (T, N) torque at the samples [N m].

    Returns:
        (last + 1, N) C-contiguous torque per tick [N m].
    """
    ticks = np.arange(int(sample_ticks[-1]) + 1, dtype=np.float64)
    st = np.asarray(sample_ticks, dtype=np.float64)
    out = np.empty((ticks.size, tau.shape[1]))
    for j in range(tau.shape[1]):
        out[:, j] = np.interp(ticks, st, tau[:, j])
    return np.ascontiguousarray(out)


def shooting_windows(sample_ticks: np.ndarray, window_ticks: int | None) -> np.ndarray:
    """Sample-index ranges [start, stop) of the shooting windows of one run.

    A window opens at a sample and takes every sample less than ``window_ticks`` after
    it; a last window shorter than half a window joins the one before, so no window is
    a stub. ``None`` is one window over the whole run (single shooting).

    Args:
        sample_ticks: (T,) strictly increasing sample ticks.
        window_ticks: window length [ticks of 1 ms] (>= 1), or None.

    Returns:
        (W, 2) int64 [start, stop) sample indices covering 0..T, each window >= 2 samples
        when the run has them.
    """
    st = np.asarray(sample_ticks, dtype=np.int64)
    t = st.shape[0]
    if window_ticks is None:
        return np.array([[0, t]], dtype=np.int64)
    if window_ticks < 1:
        raise ValueError(f"window_ticks must be >= 1, got {window_ticks}")
    starts = [0]
    while True:
        nxt = int(np.searchsorted(st, st[starts[-1]] + window_ticks, side="left"))
        if nxt >= t:
            break
        starts.append(nxt)
    bounds = starts + [t]
    if len(starts) > 1 and (st[-1] - st[starts[-1]]) < window_ticks / 2:
        bounds.pop(-2)  # a short tail joins the previous window
    out = np.array([[bounds[i], bounds[i + 1]] for i in range(len(bounds) - 1)], dtype=np.int64)
    return out


def run_windows(runs, window_ticks: int | None) -> list[np.ndarray]:
    """Per run, its (W, 2) shooting windows: a torque run cut at ``window_ticks``, a controller run one window."""
    return [shooting_windows(r.sample_ticks(), window_ticks) if is_torque_run(r)
            else np.array([[0, r.n_samples]], dtype=np.int64) for r in runs]


def is_torque_run(run) -> bool:
    """Whether ``run`` is a torque run (``meta.controller == "torque"``; objects without a meta are not)."""
    return getattr(getattr(run, "meta", None), "controller", None) == "torque"


def backend_windows(backend, runs) -> list[np.ndarray | None] | None:
    """Per run, the shooting windows the backend cuts (None for a controller run), or None when no run is a torque
    run (``backend`` is a :class:`~isaaclab_sysid.sim.interface.ReplayBackend`)."""
    if not any(is_torque_run(r) for r in runs):
        return None
    return [w if is_torque_run(r) else None for r, w in zip(runs, backend.windows_of(runs))]
