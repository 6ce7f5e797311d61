"""Per-joint window RMS of a torque replay: how far each shooting window drifts from the measured run.

Every window of a torque run starts at the measured state, so its error is the drift the model
accumulates over the window's length; the RMS pools every sample of every window of every run.
A window whose simulation diverged (|qd| beyond the backend's limit) keeps its samples up to the
divergence and is counted, so a model that blows up is visible rather than silently dropped; such a
model's RMS flatters it (the samples after its divergence are missing) and :attr:`WindowScore.scored`
is False.

A comparison of models is only fair on the same windows: :func:`common_windows` marks the windows where
every model stayed finite, and :func:`window_scores` with ``keep`` scores only those, so every model
(a URDF nominal that diverges in most windows too) gets a number on the same samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import CandidateBatch, RunRollout


@dataclass(frozen=True)
class WindowScore:
    """One model's window drift on a set of torque runs.

    Attributes:
        q_rms_mrad: (N,) RMS of q_sim - q_real per joint over every finite sample scored [mrad].
        dq_rms_mrad_s: (N,) the same for qd [mrad/s].
        windows: shooting windows scored (all, or those kept); diverged: of those, windows whose simulation diverged.
        samples: samples scored (finite ones).
        finite: per run, (W,) whether each of its windows stayed finite (all windows, kept or not).
    """

    q_rms_mrad: np.ndarray
    dq_rms_mrad_s: np.ndarray
    windows: int
    diverged: int
    samples: int
    finite: tuple[np.ndarray, ...] = ()

    @property
    def scored(self) -> bool:
        """Whether every window scored stayed finite (else the RMS counts only the samples before divergences)."""
        return self.diverged == 0

    @property
    def q_pooled_mrad(self) -> float:
        """RMS over joints of the per-joint q RMS [mrad]."""
        return float(np.sqrt(np.mean(self.q_rms_mrad**2)))

    @property
    def dq_pooled_mrad_s(self) -> float:
        """RMS over joints of the per-joint qd RMS [mrad/s]."""
        return float(np.sqrt(np.mean(self.dq_rms_mrad_s**2)))


def score_rollouts(rollouts: Sequence[RunRollout], runs: Sequence[Run], windows: Sequence[np.ndarray], p: int,
                   keep: Sequence[np.ndarray] | None = None) -> WindowScore:
    """Candidate ``p``'s :class:`WindowScore` from its rollouts on ``runs`` cut into ``windows`` ((W, 2) per run).

    ``keep``: per run, (W,) bool, the windows scored (None: all).
    """
    n = runs[0].n_dof
    sq, sdq, cnt = np.zeros(n), np.zeros(n), 0
    n_win, n_div = 0, 0
    finite = []
    for i, (run, ro, wins) in enumerate(zip(runs, rollouts, windows)):
        eq = ro.q[p] - run.q
        edq = ro.dq[p] - run.dq
        ok = np.all(np.isfinite(eq), axis=1) & np.all(np.isfinite(edq), axis=1)
        fin = np.array([bool(np.all(ok[a:b])) for a, b in wins], dtype=bool)
        finite.append(fin)
        kept = np.ones(len(wins), dtype=bool) if keep is None else np.asarray(keep[i], dtype=bool)
        for (a, b), k in zip(wins, kept):
            if not k:
                continue
            m = ok[a:b]
            sq += np.sum(eq[a:b][m] ** 2, axis=0)
            sdq += np.sum(edq[a:b][m] ** 2, axis=0)
            cnt += int(m.sum())
        n_win += int(kept.sum())
        n_div += int(np.sum(kept & ~fin))
    c = max(cnt, 1)
    return WindowScore(1e3 * np.sqrt(sq / c), 1e3 * np.sqrt(sdq / c), n_win, n_div, cnt, tuple(finite))


def window_scores(backend, batch: CandidateBatch, runs: Sequence[Run],
                  keep: Sequence[np.ndarray] | None = None) -> list[WindowScore]:
    """Score each of the batch's P candidates on ``runs`` (torque runs) window by window.

    Args:
        backend: a backend with ``windows_of`` (the MuJoCo backend built with the window length).
        batch: P candidate parameter sets.
        runs: torque runs (``meta.controller == "torque"``).
        keep: per run, (W,) bool: score only these windows (e.g. :func:`common_windows`); None: all.

    Returns:
        P :class:`WindowScore`, in batch order.
    """
    bad = [r.name for r in runs if r.meta.controller != "torque"]
    if bad:
        raise ValueError(f"window scores need torque runs; {', '.join(bad)} are controller runs")
    rollouts = backend.rollout(batch, runs)
    windows = backend.windows_of(runs)
    return [score_rollouts(rollouts, runs, windows, p, keep) for p in range(batch.size)]


def common_windows(scores: Sequence[WindowScore]) -> list[np.ndarray]:
    """Per run, (W,) the windows where every scored model stayed finite (the scores' ``finite``, same runs and
    window length)."""
    return [np.logical_and.reduce([s.finite[i] for s in scores]) for i in range(len(scores[0].finite))]


@dataclass(frozen=True)
class WindowComparison:
    """Models' window RMS on a set of torque runs, on every window and on the windows where all stayed finite.

    Attributes:
        title: which runs (e.g. "held-out runs").
        labels: the models, in rollout-candidate order (e.g. ``("nominal", "fitted")``).
        every: per model, its :class:`WindowScore` on every window.
        common: per model, its :class:`WindowScore` on the common windows (:func:`common_windows`).
    """

    title: str
    labels: tuple[str, ...]
    every: tuple[WindowScore, ...]
    common: tuple[WindowScore, ...]

    def rows(self, joint_names: Sequence[str]) -> tuple[list[str], list[list[str]]]:
        """Header and rows of a table: windows scored, model, per-joint q RMS [mrad], pooled q, pooled qd."""
        head = ["windows", "model", *(f"q {j} [mrad]" for j in joint_names), "q pooled [mrad]", "qd pooled [mrad/s]"]
        rows = []
        total = self.every[0].windows
        for name, scores in (("all", self.every), ("common", self.common)):
            for lab, s in zip(self.labels, scores):
                where = (f"all {total}" if name == "all" else f"common {s.windows}/{total}")
                if name == "all" and not s.scored:
                    rows.append([where, lab, *(["-"] * len(joint_names)),
                                 f"not scored: diverged in {s.diverged}/{s.windows} windows", "-"])
                elif s.windows == 0:
                    rows.append([where, lab, *(["-"] * len(joint_names)), "no window where every model is finite",
                                 "-"])
                else:
                    rows.append([where, lab, *(f"{v:.3g}" for v in s.q_rms_mrad), f"{s.q_pooled_mrad:.3g}",
                                 f"{s.dq_pooled_mrad_s:.3g}"])
        return head, rows

    def lines(self, joint_names: Sequence[str]) -> list[str]:
        """The table as plain text lines (the log)."""
        head, rows = self.rows(joint_names)
        w = [max(len(r[k]) for r in [head, *rows]) for k in range(len(head))]
        out = [f"window RMS, {self.title} (a model that diverged in a window is scored on the common windows only):"]
        out += ["  " + "  ".join(c.rjust(w[k]) if k > 1 else c.ljust(w[k]) for k, c in enumerate(r))
                for r in [head, *rows]]
        return out

    def to_json(self) -> dict:
        """JSON-able figures (per model: windows, diverged, per-joint q / qd RMS, on all and on the common windows)."""
        def one(s: WindowScore) -> dict:
            return {"windows": s.windows, "diverged": s.diverged, "samples": s.samples,
                    "q_rms_mrad": [float(v) for v in s.q_rms_mrad], "dq_rms_mrad_s": [float(v) for v in s.dq_rms_mrad_s],
                    "q_pooled_mrad": s.q_pooled_mrad, "dq_pooled_mrad_s": s.dq_pooled_mrad_s}
        return {"title": self.title, "models": {lab: {"all": one(a), "common": one(c)}
                                                for lab, a, c in zip(self.labels, self.every, self.common)}}


def compare_on_windows(title: str, rollouts: Sequence[RunRollout], runs: Sequence[Run],
                       windows: Sequence[np.ndarray], labels: Sequence[str]) -> WindowComparison:
    """Score the rollouts' candidates (``labels``, in candidate order) on ``runs`` cut into ``windows`` ((W, 2) per
    run), on every window and on the windows where every candidate stayed finite."""
    every = tuple(score_rollouts(rollouts, runs, windows, p) for p in range(len(labels)))
    keep = common_windows(every)
    common = tuple(score_rollouts(rollouts, runs, windows, p, keep) for p in range(len(labels)))
    return WindowComparison(title, tuple(labels), every, common)
