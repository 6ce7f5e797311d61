"""Column table <-> :class:`Run`, and the robot facts validation needs."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import Run, RunMeta
from isaaclab_sysid.data.schema import (
    EE_POS,
    EE_QUAT,
    JOINT_SPACE_CONTROLLERS,
    OPTIONAL_SIGNALS,
    QUAT_DES,
    X_DES,
    expected_columns,
    joint_cols,
)
from isaaclab_sysid.timebase import TICK_HZ


@lru_cache(maxsize=16)
def _limits(robot: str) -> tuple[int, tuple[float, ...], tuple[float, ...]]:
    from isaaclab_sysid.robots import load_robot

    r = load_robot(robot)
    return r.n_dof, tuple(r.q_lower), tuple(r.q_upper)


def robot_limits(robot: str, file: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(N, q_lower (N,), q_upper (N,)) of the sidecar's robot; unknown robots name the sidecar key."""
    try:
        n, lo, hi = _limits(robot)
    except Exception as exc:  # noqa: BLE001 - any config failure is a bad 'robot' value
        raise RunFormatError(file, None, "robot", f"cannot load robot config {robot!r}: {exc}") from None
    return n, np.array(lo), np.array(hi)


def _cols(table: dict[str, np.ndarray], names: tuple[str, ...]) -> np.ndarray:
    return np.stack([table[c] for c in names], axis=1)


def optional_signals(run: Run) -> tuple[str, ...]:
    """The :data:`~isaaclab_sysid.data.schema.OPTIONAL_SIGNALS` ``run`` carries (its array is not None), in order."""
    return tuple(sig for sig in OPTIONAL_SIGNALS if getattr(run, sig) is not None)


def table_to_run(table: dict[str, np.ndarray], meta: RunMeta, n_dof: int, name: str, source: Path | None) -> Run:
    """Assemble a :class:`Run` from validated columns (an optional signal's columns absent: its array is None)."""
    is_1khz = meta.log_rate_hz == TICK_HZ
    opt = {sig: _cols(table, joint_cols(sig, n_dof)) if f"{sig}1" in table else None for sig in OPTIONAL_SIGNALS}
    if opt["torque_enable"] is not None:
        opt["torque_enable"] = opt["torque_enable"] > 0.5  # validated 0/1
    joint = meta.controller in JOINT_SPACE_CONTROLLERS
    return Run(
        name=name,
        meta=meta,
        t=table["t_s"].copy(),
        q=_cols(table, joint_cols("q", n_dof)),
        dq=_cols(table, joint_cols("dq", n_dof)),
        ee_pos=_cols(table, EE_POS),
        ee_quat=_cols(table, EE_QUAT),
        tau=_cols(table, joint_cols("tau", n_dof)),
        tau_J=_cols(table, joint_cols("tau_J", n_dof)),
        q_des=_cols(table, joint_cols("q_des", n_dof)) if joint else None,
        x_des=_cols(table, X_DES) if meta.controller == "task_impedance" else None,
        quat_des=_cols(table, QUAT_DES) if meta.controller == "task_impedance" else None,
        tick=table["tick"].astype(np.int64) if is_1khz else None,
        setpoint_tick=table["setpoint_tick"].astype(np.int64) if is_1khz else None,
        source=source,
        **opt,
    )


def run_to_table(run: Run) -> dict[str, np.ndarray]:
    """Column name -> (T,) float64 values, in the format's column order."""
    n = run.n_dof
    cols = expected_columns(n, run.meta.controller, run.is_1khz, optional_signals(run))
    parts: dict[str, np.ndarray] = {"t_s": run.t}
    if run.is_1khz:
        parts["tick"] = run.tick  # type: ignore[assignment]
        parts["setpoint_tick"] = run.setpoint_tick  # type: ignore[assignment]
    for prefix, arr in (("q", run.q), ("dq", run.dq), ("tau", run.tau), ("tau_J", run.tau_J)):
        for j in range(n):
            parts[f"{prefix}{j + 1}"] = arr[:, j]
    for names, arr in ((EE_POS, run.ee_pos), (EE_QUAT, run.ee_quat)):
        for j, c in enumerate(names):
            parts[c] = arr[:, j]
    if run.meta.controller in JOINT_SPACE_CONTROLLERS:
        for j in range(n):
            parts[f"q_des{j + 1}"] = run.q_des[:, j]  # type: ignore[index]
    else:
        for names, arr in ((X_DES, run.x_des), (QUAT_DES, run.quat_des)):
            for j, c in enumerate(names):
                parts[c] = arr[:, j]  # type: ignore[index]
    for sig in optional_signals(run):
        arr = getattr(run, sig)
        for j in range(n):
            parts[f"{sig}{j + 1}"] = arr[:, j]
    return {c: np.asarray(parts[c], dtype=np.float64) for c in cols}
