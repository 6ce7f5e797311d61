"""Sim-vs-real error metrics of one candidate on one run (report units: mrad, mrad/s, mm)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.loss import LossWeights, run_loss
from isaaclab_sysid.sim.interface import RunRollout


@dataclass
class RunMetrics:
    """Errors of one simulated candidate against one recorded run.

    Attributes:
        loss: the run's loss (unweighted by the run weight).
        q_rms_mrad: (N,) per-joint position RMS [mrad].
        dq_rms_mrad_s: (N,) per-joint velocity RMS [mrad/s].
        ee_rms_mm: RMS of the EE position error norm [mm].
        q_rms_all_mrad: RMS over all joints and samples [mrad].
        diverged: the simulation diverged (the other numbers are then meaningless).
    """

    loss: float
    q_rms_mrad: list[float]
    dq_rms_mrad_s: list[float]
    ee_rms_mm: float
    q_rms_all_mrad: float
    diverged: bool

    def to_dict(self) -> dict:
        return asdict(self)


def rms(a: np.ndarray, axis=None) -> np.ndarray:
    """Root mean square of ``a`` (over ``axis``, all entries by default)."""
    return np.sqrt(np.mean(np.square(a), axis=axis))


def rollout_metrics(ro: RunRollout, run: Run, i: int, weights: LossWeights = LossWeights()) -> RunMetrics:
    """Metrics of candidate ``i`` of a rollout against the recorded run."""
    loss, div = run_loss(ro, run, weights)
    with np.errstate(all="ignore"):
        eq = ro.q[i] - run.q
        edq = ro.dq[i] - run.dq
        ex = np.linalg.norm(ro.ee_pos[i] - run.ee_pos, axis=1)
        return RunMetrics(
            loss=float(loss[i]),
            q_rms_mrad=[float(v) for v in 1e3 * rms(eq, axis=0)],
            dq_rms_mrad_s=[float(v) for v in 1e3 * rms(edq, axis=0)],
            ee_rms_mm=float(1e3 * rms(ex)),
            q_rms_all_mrad=float(1e3 * rms(eq)),
            diverged=bool(div[i]),
        )


def rms_between_runs(a: Run, b: Run) -> dict:
    """Per-joint position RMS [mrad] (and overall) between two runs on the same time base.

    With two twins recorded from the same parameters and different noise seeds
    this is the noise floor a perfect fit cannot beat.
    """
    if a.q.shape != b.q.shape:
        raise ValueError(f"runs {a.name} and {b.name} have different shapes {a.q.shape} vs {b.q.shape}")
    d = a.q - b.q
    return {
        "q_rms_mrad": [float(v) for v in 1e3 * rms(d, axis=0)],
        "q_rms_all_mrad": float(1e3 * rms(d)),
        "dq_rms_mrad_s": [float(v) for v in 1e3 * rms(a.dq - b.dq, axis=0)],
        "ee_rms_mm": float(1e3 * rms(np.linalg.norm(a.ee_pos - b.ee_pos, axis=1))),
    }
