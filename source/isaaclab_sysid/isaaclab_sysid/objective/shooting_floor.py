"""The noise floor of a torque replay: what a right model still leaves, from the measured start states' noise.

Each shooting window starts at the measured (q, qd), so a right model's joint-position error at
time t into a window is the q noise of the sample plus that of the start, plus the start
velocity's noise integrated over t (free motion; friction and damping only shrink it). Per joint::

    floor^2 = 2 s_q^2 + s_qd^2 mean(t^2)

with s_q and s_qd the white noise of the q and qd residuals (``sqrt(mean(diff(e)^2) / 2)``, from
differences inside windows only: a window's reset is no noise) and mean(t^2) over every scored
sample. The white-noise floor of a controller replay would call every torque replay a misfit:
its residual is dominated by this drift, not by the encoder.

The same floor chooses the default window (:func:`choose_window`, ``--window_s`` unset): the longest
candidate at which the start model's residual and the floor are comparable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.adequacy_record import NoiseFloor
from isaaclab_sysid.sim.interface import CandidateBatch, RunRollout
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


#: the shooting windows [s] the data-driven default (``--window_s`` unset) chooses among
WINDOW_CANDIDATES_S = (0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(frozen=True)
class WindowOption:
    """One candidate window length scored at the start model.

    Attributes:
        window_s: window length [s]; windows: shooting windows over the fit runs; diverged: of those, diverged.
        residual_mrad: the start model's q RMS over every finite sample, pooled over joints [mrad].
        floor_mrad: the drift floor at this window (:func:`shooting_floor`, pooled) [mrad].
    """

    window_s: float
    windows: int
    diverged: int
    residual_mrad: float
    floor_mrad: float

    @property
    def ratio(self) -> float:
        """Residual over drift floor (inf when a window diverged)."""
        return float("inf") if self.diverged else self.residual_mrad / max(self.floor_mrad, 1e-300)


@dataclass(frozen=True)
class WindowChoice:
    """The data-driven shooting window (:func:`choose_window`): the chosen length, every option and the reason."""

    window_s: float
    options: tuple[WindowOption, ...]
    max_ratio: float
    reason: str

    def lines(self) -> list[str]:
        """Log lines: the rule's outcome, then one line per candidate."""
        out = [f"shooting window chosen from the data: {self.window_s:g} s ({self.reason})"]
        for o in self.options:
            mark = " <- chosen" if o.window_s == self.window_s else ""
            div = f", {o.diverged}/{o.windows} windows diverged" if o.diverged else ""
            out.append(f"  {o.window_s:g} s: start model's q RMS {o.residual_mrad:.3g} mrad, drift floor "
                       f"{o.floor_mrad:.3g} mrad, ratio {o.ratio:.2f}{div}{mark}")
        return out


def choose_window(backend_for: Callable[[int], object], batch: CandidateBatch, runs: Sequence[Run],
                  max_ratio: float = 2.0, candidates_s: Sequence[float] = WINDOW_CANDIDATES_S) -> WindowChoice:
    """The default shooting window of a torque replay, from the fit runs and the start model.

    Rule: the start model (one candidate, ``batch``: the ``--x0`` seed, e.g. the rigid-body LS terms) is replayed
    at every candidate window length no longer than the shortest run. Its error grows with the window (a torque
    error integrates twice: ~t^2) faster than the drift floor of the measured start states (~t), so short windows
    bury the model's error under the start-state noise and long ones let it grow until the fit's loss is the seed's
    drift (or a divergence) rather than the noise. The chosen window is the **longest at which the start model's
    residual is at most ``max_ratio`` x the drift floor and no window diverges**: where model error and floor are
    comparable (``max_ratio``: the verdict's floor limit, 2). If no length qualifies, the shortest (the start model
    misfits even there; the reason says so).

    Args:
        backend_for: window length [ticks] -> a backend replaying torque runs in windows of that length.
        batch: the start model, one candidate.
        runs: the fit runs (torque runs).
        max_ratio: the largest residual / floor ratio that counts as comparable.
        candidates_s: candidate lengths [s].

    Returns:
        A :class:`WindowChoice`.

    Raises:
        ValueError: no candidate fits in the shortest run, or ``batch`` holds more than one candidate.
    """
    if batch.size != 1:
        raise ValueError(f"choose_window scores one start model, got {batch.size} candidates")
    shortest = min(float(r.sample_ticks()[-1]) / TICK_HZ for r in runs)
    cands = sorted(w for w in candidates_s if w <= shortest)
    if not cands:
        raise ValueError(f"the shortest run lasts {shortest:.3f} s, shorter than every candidate window "
                         f"({', '.join(f'{w:g}' for w in candidates_s)} s): give --window_s")
    opts = []
    for w in cands:
        be = backend_for(int(round(w * TICK_HZ)))
        ro = be.rollout(batch, list(runs))
        wins = be.windows_of(list(runs))
        sq, cnt, n_win, n_div = 0.0, 0, 0, 0
        for run, r, ws in zip(runs, ro, wins):
            e = r.q[0] - run.q
            ok = np.all(np.isfinite(e), axis=1)
            sq += float(np.sum(e[ok] ** 2))
            cnt += int(ok.sum()) * run.n_dof
            n_win += len(ws)
            n_div += int(sum(not np.all(ok[a:b]) for a, b in ws))
        floor = shooting_floor(runs, ro, wins, candidate=0)
        opts.append(WindowOption(w, n_win, n_div, 1e3 * np.sqrt(sq / max(cnt, 1)), floor.pooled_mrad))
    good = [o for o in opts if o.ratio <= max_ratio]
    if good:
        pick = good[-1]
        longer = next((o for o in opts if o.window_s > pick.window_s), None)
        why = (f"the longest window whose start-model residual is within {max_ratio:g}x the drift floor "
               f"({pick.ratio:.2f}x)" + (f"; at {longer.window_s:g} s it is {longer.ratio:.2f}x" if longer else
                                         "; the longest candidate"))
    else:
        pick = opts[0]
        why = (f"the shortest candidate: the start model exceeds {max_ratio:g}x the drift floor at every window "
               f"({pick.ratio:.2f}x here): a poor start (give a seed, --x0) or a model that misses something")
    return WindowChoice(pick.window_s, tuple(opts), max_ratio, why)
