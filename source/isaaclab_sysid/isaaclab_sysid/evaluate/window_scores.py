"""Per-joint window RMS of a torque replay: how far each shooting window drifts from the measured run.

Every window of a torque run starts at the measured state, so its error is the drift the model
accumulates over the window's length; the RMS pools every sample of every window of every run.
A window whose simulation diverged (|qd| beyond the backend's limit) keeps its samples up to the
divergence and is counted, so a model that blows up is visible rather than silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import CandidateBatch


@dataclass(frozen=True)
class WindowScore:
    """One model's window drift on a set of torque runs.

    Attributes:
        q_rms_mrad: (N,) RMS of q_sim - q_real per joint over every finite sample [mrad].
        dq_rms_mrad_s: (N,) the same for qd [mrad/s].
        windows: shooting windows scored; diverged: windows whose simulation diverged.
        samples: samples scored (finite ones).
    """

    q_rms_mrad: np.ndarray
    dq_rms_mrad_s: np.ndarray
    windows: int
    diverged: int
    samples: int

    @property
    def q_pooled_mrad(self) -> float:
        """RMS over joints of the per-joint q RMS [mrad]."""
        return float(np.sqrt(np.mean(self.q_rms_mrad**2)))

    @property
    def dq_pooled_mrad_s(self) -> float:
        """RMS over joints of the per-joint qd RMS [mrad/s]."""
        return float(np.sqrt(np.mean(self.dq_rms_mrad_s**2)))


def window_scores(backend, batch: CandidateBatch, runs: Sequence[Run]) -> list[WindowScore]:
    """Score each of the batch's P candidates on ``runs`` (torque runs) window by window.

    Args:
        backend: a backend with ``windows_of`` (the MuJoCo backend built with the window length).
        batch: P candidate parameter sets.
        runs: torque runs (``meta.controller == "torque"``).

    Returns:
        P :class:`WindowScore`, in batch order.
    """
    bad = [r.name for r in runs if r.meta.controller != "torque"]
    if bad:
        raise ValueError(f"window scores need torque runs; {', '.join(bad)} are controller runs")
    rollouts = backend.rollout(batch, runs)
    windows = backend.windows_of(runs)
    n = runs[0].n_dof
    out = []
    for p in range(batch.size):
        sq, sdq, cnt = np.zeros(n), np.zeros(n), 0
        n_win, n_div = 0, 0
        for run, ro, wins in zip(runs, rollouts, windows):
            eq = ro.q[p] - run.q
            edq = ro.dq[p] - run.dq
            ok = np.all(np.isfinite(eq), axis=1) & np.all(np.isfinite(edq), axis=1)
            sq += np.sum(eq[ok] ** 2, axis=0)
            sdq += np.sum(edq[ok] ** 2, axis=0)
            cnt += int(ok.sum())
            n_win += len(wins)
            n_div += int(sum(not np.all(ok[a:b]) for a, b in wins))
        c = max(cnt, 1)
        out.append(WindowScore(1e3 * np.sqrt(sq / c), 1e3 * np.sqrt(sdq / c), n_win, n_div, cnt))
    return out
