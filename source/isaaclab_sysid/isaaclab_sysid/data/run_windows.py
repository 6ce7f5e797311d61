"""Windows cut from runs: short runs, each a slice of a recorded run that starts from the measured state there.

A long fit's first pass (``jobs/first_pass.py``, issue 45) runs its whole search on a few such windows spread over
every run, then polishes on the full runs. A window is an ordinary :class:`~isaaclab_sysid.data.run.Run`: its rows
are rows ``[a, b)`` of the run, its start state the measured ``q[a]`` and ``dq[a]`` (``meta.q_init``,
``meta.qd_init``: the replay starts it moving at tick 0, without the warm-up a recorded run's start at rest gets),
its time base counted from row ``a``'s tick, its setpoints the run's from the one in force at row ``a`` (a 1 kHz
log's setpoint stamped before the window is clamped to the window's tick 0, as :meth:`Run.setpoints` clamps any
early stamp).

What a window does not carry, and the guard: the controller's state before ``a``. The delay buffer is filled with
the window's first command (the commands of the ``delay`` ticks before it are taken equal to it), and the torque
rate limit (``--slew_limit``) ramps the applied torque up from zero over the first ticks; a friction state (stuck or
sliding) is set by the measured velocity alone. To keep what that leaves small, each window starts at the sample of
least normalized speed (each joint's ``|dq|`` over its RMS in the run, mean of squares) within ``search_s`` of its
nominal start. Starting a window at rest instead (the replay's start before the start velocity existed) left a
transient of 10-20 mrad that took 1-2 s to decay, or never did where a joint stuck at another offset, against a
0.1-0.4 mrad residual of the same numbers on the full run (the 48 s chirp of the demo truth; docs/fit.md, "Long
recordings").
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.timebase import TICK_HZ

#: the :class:`Run` arrays with one row per sample (sliced with the window)
_ROW_ARRAYS = ("t", "q", "dq", "ee_pos", "ee_quat", "tau", "tau_J", "q_des", "x_des", "quat_des", "tick",
               "setpoint_tick", "torque_enable", "supply_v", "pwm")


@dataclass(frozen=True)
class WindowSpec:
    """One window of one run.

    Attributes:
        run: index of the run in the list the windows were cut from.
        start, stop: rows ``[start, stop)`` of that run.
        t0_s, t1_s: the window's first and last sample time [s] from the run's first sample.
        start_speed: the normalized speed at ``start`` (the guard's criterion: sqrt of the mean over joints of
            ``(dq / rms(dq))^2``; 0 = at rest).
    """

    run: int
    start: int
    stop: int
    t0_s: float
    t1_s: float
    start_speed: float

    def to_json(self) -> dict:
        return {"run": self.run, "rows": [self.start, self.stop], "t_s": [round(self.t0_s, 4), round(self.t1_s, 4)],
                "start_speed": round(self.start_speed, 4)}


def windows_per_run(durations_s: list[float], n_windows: int) -> list[int]:
    """How many of ``n_windows`` windows each run gets: at least one each, the rest in proportion to the runs'
    durations [s] (largest remainder, ties to the earlier run). Returns (R,) counts summing to
    ``max(n_windows, R)``."""
    R = len(durations_s)
    n = max(int(n_windows), R)
    d = np.asarray(durations_s, dtype=float)
    share = d / d.sum() * n if d.sum() > 0 else np.full(R, n / R)
    counts = np.maximum(np.floor(share).astype(int), 1)
    while counts.sum() > n:  # the floor of one each may overshoot: take from the largest
        counts[int(np.argmax(counts - share))] -= 1
    rest = share - counts
    for i in np.argsort(-rest, kind="stable")[: n - int(counts.sum())]:
        counts[i] += 1
    return [int(c) for c in counts]


def plan_windows(runs: list[Run], budget_s: float, window_s: float, search_s: float = 0.5) -> list[WindowSpec]:
    """The windows of a first pass: about ``budget_s`` seconds in all, in windows of ``window_s`` [s] (shorter when
    the runs are more than ``budget_s / window_s``: every run gets a window of ``budget_s / R``), spread evenly over
    each run (run ``r``'s k windows are centred in its k equal segments), each start moved within ``search_s`` [s] to
    the sample of least normalized speed. Deterministic. Raises ValueError on a non-positive length."""
    if not (budget_s > 0 and window_s > 0):
        raise ValueError(f"window budget {budget_s} s and window length {window_s} s must be > 0")
    n = max(1, int(round(budget_s / window_s)))
    length = window_s if n >= len(runs) else budget_s / len(runs)
    counts = windows_per_run([r.duration for r in runs], n)
    out: list[WindowSpec] = []
    for i, (run, k) in enumerate(zip(runs, counts)):
        ticks = run.sample_ticks()
        total = int(ticks[-1])
        L = min(int(round(length * TICK_HZ)), total)
        rms = np.sqrt(np.mean(run.dq ** 2, axis=0))
        speed = np.sqrt(np.mean((run.dq / np.where(rms > 0, rms, 1.0)) ** 2, axis=1))
        seg = total / k
        for j in range(k):
            nominal = int(round(seg * j + (seg - L) / 2))
            lo, hi = max(0, nominal - int(search_s * TICK_HZ)), min(total - L, nominal + int(search_s * TICK_HZ))
            lo, hi = min(lo, hi), max(lo, hi)
            rows = np.flatnonzero((ticks >= lo) & (ticks <= hi))
            a = int(rows[np.argmin(speed[rows])]) if rows.size else int(np.searchsorted(ticks, max(0, nominal)))
            b = int(np.searchsorted(ticks, ticks[a] + L, side="right"))
            b = max(min(b, run.n_samples), a + 2)
            out.append(WindowSpec(i, a, b, float(ticks[a]) / TICK_HZ, float(ticks[b - 1]) / TICK_HZ,
                                  float(speed[a])))
    return out


def slice_run(run: Run, start: int, stop: int, name: str) -> Run:
    """Rows ``[start, stop)`` of ``run`` as a run of its own named ``name``: starting at the measured ``q[start]``
    (``meta.q_init``), its time base and setpoints counted from that row (module docstring). Raises ValueError for
    fewer than 2 rows or rows outside the run."""
    if not (0 <= start < stop <= run.n_samples and stop - start >= 2):
        raise ValueError(f"run '{run.name}': window rows [{start}, {stop}) outside 0..{run.n_samples} or under 2 rows")
    sl = {f.name: (getattr(run, f.name)[start:stop].copy() if getattr(run, f.name) is not None else None)
          for f in fields(run) if f.name in _ROW_ARRAYS}
    meta = replace(run.meta, q_init=np.asarray(run.q[start], dtype=float).copy(), num_samples=stop - start,
                   qd_init=np.asarray(run.dq[start], dtype=float).copy())
    return replace(run, name=name, meta=meta, **sl)


def cut_windows(runs: list[Run], specs: list[WindowSpec]) -> list[Run]:
    """The windows ``specs`` of ``runs`` as runs, named ``<run>_w<k>`` (k counts the run's windows from 0)."""
    seen: dict[int, int] = {}
    out = []
    for s in specs:
        k = seen.get(s.run, 0)
        seen[s.run] = k + 1
        out.append(slice_run(runs[s.run], s.start, s.stop, f"{runs[s.run].name}_w{k}"))
    return out


__all__ = ["WindowSpec", "cut_windows", "plan_windows", "slice_run", "windows_per_run"]
