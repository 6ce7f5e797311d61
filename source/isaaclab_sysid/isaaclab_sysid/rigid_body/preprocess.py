"""Preprocessing of real logs for least squares (the usual routine of inverse-dynamics identification).

1. time-axis correction: drop repeated stamps, check order;
2. linear interpolation onto an even grid at the raw mean interval;
3. zero-phase Butterworth low-pass (``sosfiltfilt``), the same filter on
   positions and outputs, corner at ``cutoff_ratio`` x the Nyquist frequency of
   the target interval (or ``cutoff_hz``);
4. resampling onto the target grid (interpolation of the band-limited signal);
5. velocity and acceleration as central differences of the filtered positions;
6. trimming of the filter's edge transients.

Every choice is recorded in :attr:`Processed.record`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.signal


@dataclass(frozen=True)
class PreprocessOptions:
    """Preprocessing choices.

    Attributes:
        dt: target sample interval [s]; None keeps the raw mean interval.
        filter_order: Butterworth order (applied forward and backward: zero phase).
        cutoff_ratio: corner as a fraction of the target Nyquist frequency 0.5 / dt.
        cutoff_hz: corner [Hz]; overrides ``cutoff_ratio`` when set.
        trim_s: seconds dropped at each end after filtering.
    """

    dt: float | None = None
    filter_order: int = 4
    cutoff_ratio: float = 0.45
    cutoff_hz: float | None = None
    trim_s: float = 0.5


@dataclass
class Processed:
    """An evenly sampled, filtered log.

    Attributes:
        t: (T,) time [s] on the target grid.
        q: (T, N) filtered positions [rad].
        qd: (T, N) velocity [rad/s], central differences of ``q``.
        qdd: (T, N) acceleration [rad/s^2], central differences of ``qd``.
        signals: name -> (T, N) filtered output signals (torque, current, ...).
        record: the choices and statistics of every step.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    signals: dict[str, np.ndarray] = field(default_factory=dict)
    record: dict = field(default_factory=dict)


def correct_time_axis(t: np.ndarray, source: str = "log") -> tuple[np.ndarray, dict]:
    """Indices of the samples to keep (repeated stamps dropped) and statistics of the stamps.

    Raises:
        ValueError: if time goes backwards (names the row) or fewer than 10 stamps remain.
    """
    t = np.asarray(t, dtype=float)
    d = np.diff(t)
    back = np.flatnonzero(d < 0)
    if back.size:
        raise ValueError(f"{source}: row {back[0] + 2}: time goes backwards ({t[back[0]]} -> {t[back[0] + 1]})")
    keep = np.concatenate([[0], np.flatnonzero(d > 0) + 1])
    if keep.size < 10:
        raise ValueError(f"{source}: only {keep.size} distinct time stamps")
    dk = np.diff(t[keep])
    info = {
        "n_raw": int(t.size),
        "n_repeated_stamps_dropped": int(t.size - keep.size),
        "raw_dt_mean_s": float(dk.mean()),
        "raw_dt_median_s": float(np.median(dk)),
        "raw_dt_min_s": float(dk.min()),
        "raw_dt_max_s": float(dk.max()),
        "duration_s": float(t[keep[-1]] - t[keep[0]]),
    }
    return keep, info


def preprocess(
    t: np.ndarray,
    q: np.ndarray,
    signals: dict[str, np.ndarray] | None = None,
    options: PreprocessOptions | None = None,
    source: str = "log",
    velocity: np.ndarray | None = None,
) -> Processed:
    """Run steps 1-6 on one log.

    Args:
        t: (T,) time stamps [s], possibly irregular.
        q: (T, N) positions [rad].
        signals: name -> (T, N) outputs to filter identically (torque, current).
        options: the choices; defaults to :class:`PreprocessOptions`.
        source: a name for error messages (the file).
        velocity: (T, N) logged velocity [rad/s]; when given it is filtered like
            the positions and used instead of differentiating them (the
            acceleration is then its central difference). Useful when the
            controller reports an exact zero at rest, which keeps sign(qd) at 0.
    """
    opt = options or PreprocessOptions()
    signals = signals or {}
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[0] != t.size:
        raise ValueError(f"{source}: q must be (T, N) with T = {t.size}; got {q.shape}")
    keep, tinfo = correct_time_axis(t, source)
    tk = t[keep] - t[keep[0]]
    raw_dt = tinfo["raw_dt_mean_s"]
    dt = float(opt.dt) if opt.dt else raw_dt
    if dt < raw_dt * 0.999:
        raise ValueError(f"{source}: target dt {dt} s is finer than the raw mean interval {raw_dt:.5f} s")
    fine = np.arange(0.0, tk[-1] + 1e-12, raw_dt)
    cutoff = opt.cutoff_hz if opt.cutoff_hz else opt.cutoff_ratio * 0.5 / dt
    nyq_fine = 0.5 / raw_dt
    if not 0 < cutoff < nyq_fine:
        raise ValueError(f"{source}: cutoff {cutoff} Hz must lie in (0, {nyq_fine:.2f}) Hz")
    sos = scipy.signal.butter(opt.filter_order, cutoff, btype="low", fs=1.0 / raw_dt, output="sos")

    def _filter_resample(x: np.ndarray, name: str) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if x.shape[0] != t.size:
            raise ValueError(f"{source}: signal '{name}' has {x.shape[0]} rows, time has {t.size}")
        bad = np.argwhere(~np.isfinite(x))
        if bad.size:
            raise ValueError(f"{source}: signal '{name}' row {bad[0][0] + 1}, column {bad[0][1] + 1}: non-finite")
        xk = x[keep]
        xf = np.column_stack([np.interp(fine, tk, xk[:, j]) for j in range(xk.shape[1])])
        xf = scipy.signal.sosfiltfilt(sos, xf, axis=0)
        grid = np.arange(0.0, fine[-1] + 1e-12, dt)
        return np.column_stack([np.interp(grid, fine, xf[:, j]) for j in range(xf.shape[1])])

    qf = _filter_resample(q, "q")
    grid = np.arange(qf.shape[0]) * dt
    if velocity is None:
        qd = np.gradient(qf, dt, axis=0)
    else:
        qd = _filter_resample(velocity, "velocity")
    qdd = np.gradient(qd, dt, axis=0)
    out = {k: _filter_resample(v, k) for k, v in signals.items()}
    n_trim = int(round(opt.trim_s / dt))
    if grid.size <= 2 * n_trim + 10:
        raise ValueError(f"{source}: log too short ({grid.size} samples at dt={dt}) for trim {opt.trim_s} s")
    sl = slice(n_trim, grid.size - n_trim)
    record = {
        "source": source,
        "options": asdict(opt),
        "time_axis": tinfo,
        "interpolation": "linear onto an even grid at the raw mean interval",
        "filter": {
            "type": "butterworth low-pass, zero phase (sosfiltfilt)",
            "order": opt.filter_order,
            "cutoff_hz": float(cutoff),
            "applied_at_dt_s": raw_dt,
        },
        "target_dt_s": dt,
        "derivatives": (
            "central differences (numpy.gradient) of filtered positions, twice"
            if velocity is None
            else "logged velocity filtered like the positions; acceleration its central difference"
        ),
        "trim_samples_each_end": n_trim,
        "n_samples": int(grid[sl].size),
    }
    return Processed(
        t=grid[sl] + t[keep[0]],
        q=qf[sl],
        qd=qd[sl],
        qdd=qdd[sl],
        signals={k: v[sl] for k, v in out.items()},
        record=record,
    )
