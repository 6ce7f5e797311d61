"""Stale rows modelled, not absorbed: a 50 Hz row's state is a frame of unknown age.

A real arm's 50 Hz log (the Franka tooling's, seed 004) records in row k the
newest frame of a 100 Hz state stream, so the state is ``a`` ticks older than the
row's tick, ``a`` uniform in ``0 .. max_age`` (10 ms). Fitted as if fresh, that
age is absorbed into the delay and the armature (docs/fit.md). The
:class:`StateAgeBackend` wraps any backend: it samples the simulated trajectory at
every tick a row's state may come from and scores the row against the expectation
over the ages, ``E_a[s(t_k - a)]`` (the mean-square-optimal prediction of a row
whose age is random). 1 kHz logs (every tick, fresh) pass through unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, RunRollout
from isaaclab_sysid.timebase import TICK_HZ


@dataclasses.dataclass(frozen=True)
class StateAgeModel:
    """Row states are ``a`` ticks old, ``a`` uniform on the integers ``0 .. max_age_ticks`` (clipped at tick 0).

    Attributes:
        max_age_ticks: the oldest a row's state can be [ticks of 1 ms] (10 for a 100 Hz stream).
    """

    max_age_ticks: int

    def __post_init__(self) -> None:
        if self.max_age_ticks < 0:
            raise ValueError(f"state age must be >= 0 ticks, got {self.max_age_ticks}")

    def applies_to(self, run: Run) -> bool:
        """Whether the model changes how ``run`` is scored (rows below 1 kHz, a positive age)."""
        return self.max_age_ticks > 0 and not run.is_1khz

    def expand(self, run: Run) -> tuple[Run, np.ndarray]:
        """A run sampled at every tick a row's state may come from, and the (T, A + 1) rows of it per row.

        The expanded run is a 1 kHz-style run (``tick``/``setpoint_tick`` stamped) with
        the same setpoint schedule; only its time base is used by the replay.
        """
        rows = run.sample_ticks()
        ages = np.arange(self.max_age_ticks + 1)
        want = np.maximum(rows[:, None] - ages[None, :], 0)  # (T, A+1), as the twin clips at the first row
        ticks, index = np.unique(want, return_inverse=True)
        index = index.reshape(want.shape)
        sp_ticks, sp_values = run.setpoints()
        sp_of = np.searchsorted(sp_ticks, ticks, side="right") - 1
        sp_of = np.maximum(sp_of, 0)
        U, n = ticks.shape[0], run.n_dof
        z = np.zeros((U, n))
        values = sp_values[sp_of]
        kw: dict = dict(q_des=None, x_des=None, quat_des=None)
        if run.meta.controller == "joint_pd":
            kw["q_des"] = values
        else:
            kw["x_des"], kw["quat_des"] = values[:, :3], values[:, 3:7]
        meta = dataclasses.replace(run.meta, log_rate_hz=float(TICK_HZ), num_samples=U)
        dense = dataclasses.replace(
            run, meta=meta, t=ticks / TICK_HZ, q=z, dq=z, ee_pos=np.zeros((U, 3)), ee_quat=np.zeros((U, 4)), tau=z,
            tau_J=z, tick=ticks.astype(np.int64), setpoint_tick=sp_ticks[sp_of].astype(np.int64), **kw,
        )
        return dense, index

    @staticmethod
    def collapse(ro: RunRollout, index: np.ndarray) -> RunRollout:
        """The expected state per row: mean over the row's ages of the dense rollout (P, U, .) -> (P, T, .)."""

        def mean(a: np.ndarray) -> np.ndarray:
            return a[:, index, :].mean(axis=2)

        quat = mean(ro.ee_quat)
        quat = quat / np.maximum(np.linalg.norm(quat, axis=2, keepdims=True), 1e-300)
        return RunRollout(q=mean(ro.q), dq=mean(ro.dq), ee_pos=mean(ro.ee_pos), ee_quat=quat,
                          tau=ro.tau[:, index[:, 0], :], diverged=np.asarray(ro.diverged, dtype=bool).copy(), extra={})


class StateAgeBackend(ReplayBackend):
    """A backend whose rollouts of sub-1 kHz runs are scored at the rows' expected state age (see module docstring).

    Args:
        inner: the backend that simulates.
        model: the state-age model of the runs below 1 kHz.

    The contract's members are the inner backend's (``name``, ``supported_groups``, ``options``, the shooting
    windows, ``close``); it scores no loss itself (``scores_loss`` False: the rows are collapsed here, so a Ray
    backend inside it sends its states back). Members outside the contract (e.g. ``MujocoBackend.with_command``
    or the Ray backend's ``stats``) are the inner backend's too.
    """

    scores_loss = False

    def __init__(self, inner: ReplayBackend, model: StateAgeModel) -> None:
        self.inner = inner
        self.model = model
        self.name = inner.name
        self.supported_groups = inner.supported_groups
        self.options = inner.options

    def __getattr__(self, attr: str):
        return getattr(self.inner, attr)

    def windows_of(self, runs: Sequence[Run]) -> list[np.ndarray]:
        """The inner backend's shooting windows of ``runs`` (the rows keep their sample indices)."""
        return self.inner.windows_of(runs)

    def close(self) -> None:
        """Close the inner backend."""
        self.inner.close()

    def rollout(self, batch: CandidateBatch, runs: Sequence[Run], **kw) -> list[RunRollout]:
        """Roll out ``batch`` on ``runs``; rows of sub-1 kHz runs hold the state expected at their age."""
        expanded, index = [], []
        for r in runs:
            if self.model.applies_to(r):
                dense, idx = self.model.expand(r)
                expanded.append(dense)
                index.append(idx)
            else:
                expanded.append(r)
                index.append(None)
        outs = self.inner.rollout(batch, expanded, **kw)
        return [o if idx is None else self.model.collapse(o, idx) for o, idx in zip(outs, index)]
