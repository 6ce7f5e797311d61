"""The noise floor of a torque replay: what a right model still leaves, from the measured start states' noise.

Each shooting window starts at the measured (q, qd), so a right model's joint-position error at
time t into a window is the q noise of the sample plus that of the start, plus the start
velocity's noise integrated over t (free motion; friction and damping only shrink it). Per joint::

    floor^2 = 2 s_q^2 + s_qd^2 mean(t^2)

with s_q and s_qd the white noise of the q and qd residuals (``sqrt(mean(diff(e)^2) / 2)``, from
differences inside windows only: a window's reset is no noise) and mean(t^2) over every scored
sample. The white-noise floor of a controller replay would call every torque replay a misfit:
its residual is dominated by this drift, not by the encoder.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.adequacy_record import NoiseFloor
from isaaclab_sysid.sim.interface import RunRollout
from isaaclab_sysid.timebase import TICK_HZ


def _within(e: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """(M, N) first differences of ``e`` (T, N) inside each window (none across a reset)."""
    return np.concatenate([np.diff(e[a:b], axis=0) for a, b in windows if b - a > 1], axis=0)


def shooting_floor(runs: Sequence[Run], rollouts: Sequence[RunRollout], windows: Sequence[np.ndarray],
                   candidate: int = 1) -> NoiseFloor:
    """The floor (see module docstring) of the fit runs' replay by ``candidate``.

    Args:
        runs: the fit runs (torque runs); rollouts: their rollouts; windows: per run, the (W, 2)
            [start, stop) sample ranges of its shooting windows.
        candidate: the rollouts' candidate index scored (1: the fitted one beside the nominal).

    Returns:
        A :class:`NoiseFloor` with source ``"shooting"`` [mrad].
    """
    dq_all, dqd_all, t2 = [], [], []
    for run, ro, wins in zip(runs, rollouts, windows):
        eq = ro.q[candidate] - run.q
        edq = ro.dq[candidate] - run.dq
        dq_all.append(_within(eq, wins))
        dqd_all.append(_within(edq, wins))
        ticks = run.sample_ticks()
        for a, b in wins:
            t2.append(((ticks[a:b] - ticks[a]) / TICK_HZ) ** 2)
    s_q2 = np.nanmean(np.concatenate(dq_all) ** 2, axis=0) / 2.0
    s_qd2 = np.nanmean(np.concatenate(dqd_all) ** 2, axis=0) / 2.0
    mean_t2 = float(np.mean(np.concatenate(t2)))
    per_joint = 1e3 * np.sqrt(2.0 * s_q2 + s_qd2 * mean_t2)
    method = (f"the torque replay's drift floor sqrt(2 s_q^2 + s_qd^2 mean(t^2)) per joint: s_q, s_qd the white noise "
              f"of the q and qd residuals inside windows, mean(t^2) = ({np.sqrt(mean_t2):.3g} s)^2 over the windows "
              "(the measured start state's noise, integrated freely; give repeats with --noise_floor_from to measure it)")
    return NoiseFloor(float(np.sqrt(np.mean(per_joint**2))), [float(v) for v in per_joint], "shooting", method)
