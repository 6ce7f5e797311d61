"""Checks on a run's table (header and values); each failure names file, row and column."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import RunMeta
from isaaclab_sysid.data.schema import (
    EE_QUAT,
    JOINT_LIMIT_SLACK,
    OPTIONAL_SIGNALS,
    QUAT_DES,
    QUAT_NORM_TOL,
    expected_columns,
)
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.utils.errors import plain

_Q_COL = re.compile(r"^q(\d+)$")
_OPTIONAL_COL = re.compile(rf"^({'|'.join(OPTIONAL_SIGNALS)})\d+$")
#: a PWM duty may exceed [-1, 1] by this much (rounding of a register reading)
PWM_TOL = 1e-9


def optional_in_header(columns: Sequence[str]) -> tuple[str, ...]:
    """The optional signals (:data:`~isaaclab_sysid.data.schema.OPTIONAL_SIGNALS`) with a column in ``columns``."""
    seen = {m.group(1) for c in columns if (m := _OPTIONAL_COL.match(c))}
    return tuple(sig for sig in OPTIONAL_SIGNALS if sig in seen)


def check_header(columns: Sequence[str], meta: RunMeta, n_dof: int, file: str, header_row: int | None) -> None:
    """Refuse a header with the wrong joint count, missing or extra columns.

    The optional signals (``torque_enable``, ``supply_v``, ``pwm``: 1..N each) are all of a signal's N columns or none.
    """
    n_q = sum(1 for c in columns if _Q_COL.match(c))
    if n_q != n_dof:
        raise RunFormatError(
            file, header_row, f"q{min(n_q, n_dof) + 1}",
            f"wrong joint count: the log has {n_q} joint columns, robot '{meta.robot}' has {n_dof}",
        )
    optional = optional_in_header(columns)
    expected = expected_columns(n_dof, meta.controller, meta.log_rate_hz == TICK_HZ, optional)
    seen = set()
    for c in columns:
        if c in seen:
            raise RunFormatError(file, header_row, c, "duplicated column")
        seen.add(c)
    for c in expected:
        if c not in seen:
            opt = _OPTIONAL_COL.match(c)
            if opt:
                raise RunFormatError(file, header_row, c, f"missing column ({opt.group(1)} is in the header: every joint "
                                     f"needs its column, {opt.group(1)}1..{n_dof})")
            kind = "1 kHz" if meta.log_rate_hz == TICK_HZ else f"{meta.control_rate_hz:g} Hz"
            raise RunFormatError(file, header_row, c, f"missing column (a {kind} {meta.controller} log needs it)")
    for c in columns:
        if c not in expected:
            raise RunFormatError(file, header_row, c, f"unexpected column for a {meta.controller} log")


def check_values(
    table: dict[str, np.ndarray],
    meta: RunMeta,
    q_lower: np.ndarray,
    q_upper: np.ndarray,
    file: str,
    row_of: int,
    allow_nan: Collection[str] = (),
    num_samples: int | None = None,
) -> None:
    """Refuse NaN/inf, bad time stamps, gaps, length mismatch, joint-limit and quaternion errors.

    Args:
        table: column name -> (T,) values.
        meta: the validated sidecar.
        q_lower, q_upper: (N,) joint limits [rad].
        file: name used in error messages.
        row_of: row number of sample 0 (2 in a CSV with a header line).
        allow_nan: columns that may be NaN in every row (a torque signal the logger did not have); NaN in
            some rows only, and inf, are still refused.
        num_samples: the row count the sidecar states (default ``meta.num_samples``).
    """
    cols = list(table)
    n_rows = len(table["t_s"])
    for c in cols:
        vals = table[c]
        if c in allow_nan and np.isnan(vals).all():
            continue
        bad = np.flatnonzero(~np.isfinite(vals))
        if bad.size:
            part = " (NaN is allowed only in every row: a signal the logger did not have)" if c in allow_nan else ""
            raise RunFormatError(file, int(bad[0]) + row_of, c, f"non-finite value {plain(table[c][bad[0]])}{part}")
    want = meta.num_samples if num_samples is None else num_samples
    if n_rows != want:
        raise RunFormatError(
            file, min(n_rows, want) + row_of, "t_s",
            f"the log has {n_rows} rows but the sidecar says num_samples={want}",
        )
    t = table["t_s"]
    dt = np.diff(t)
    dup = np.flatnonzero(dt == 0)
    if dup.size:
        raise RunFormatError(file, int(dup[0]) + 1 + row_of, "t_s", f"duplicated time stamp {plain(t[dup[0]])}")
    back = np.flatnonzero(dt < 0)
    if back.size:
        i = int(back[0]) + 1
        raise RunFormatError(file, i + row_of, "t_s", f"time stamp {plain(t[i])} is before the previous {plain(t[i - 1])}")
    period = 1.0 / meta.log_rate_hz
    gap = np.flatnonzero(dt > 1.5 * period)
    if gap.size:
        i = int(gap[0]) + 1
        kind = "1 kHz" if meta.log_rate_hz == TICK_HZ else f"{meta.log_rate_hz:g} Hz"
        raise RunFormatError(
            file, i + row_of, "t_s", f"gap of {dt[i - 1] * 1e3:.1f} ms in a {kind} log (expected {period * 1e3:g} ms)"
        )
    if meta.log_rate_hz == TICK_HZ:
        for c in ("tick", "setpoint_tick"):
            frac = np.flatnonzero(table[c] != np.round(table[c]))
            if frac.size:
                raise RunFormatError(file, int(frac[0]) + row_of, c, f"not an integer: {plain(table[c][frac[0]])}")
        tick = table["tick"]
        jump = np.flatnonzero(np.diff(tick) != 1)
        if jump.size:
            i = int(jump[0]) + 1
            raise RunFormatError(
                file, i + row_of, "tick", f"gap in a 1 kHz log: tick {int(tick[i])} follows {int(tick[i - 1])}"
            )
        sp = table["setpoint_tick"]
        ahead = np.flatnonzero(sp > tick)
        if ahead.size:
            i = int(ahead[0])
            raise RunFormatError(file, i + row_of, "setpoint_tick", f"{int(sp[i])} is after the row's tick {int(tick[i])}")
        dec = np.flatnonzero(np.diff(sp) < 0)
        if dec.size:
            i = int(dec[0]) + 1
            raise RunFormatError(file, i + row_of, "setpoint_tick", "setpoint stamps go backwards")
    n = len(q_lower)
    for j in range(n):
        q = table[f"q{j + 1}"]
        out = np.flatnonzero((q < q_lower[j] - JOINT_LIMIT_SLACK) | (q > q_upper[j] + JOINT_LIMIT_SLACK))
        if out.size:
            i = int(out[0])
            raise RunFormatError(
                file, i + row_of, f"q{j + 1}",
                f"{q[i]:.4f} rad outside joint limits [{q_lower[j]:.4f}, {q_upper[j]:.4f}] (degrees logged as radians?)",
            )
    _check_optional(table, n, file, row_of)
    quats = [EE_QUAT] + ([QUAT_DES] if meta.controller == "task_impedance" else [])
    for names in quats:
        norm = np.sqrt(sum(table[c] ** 2 for c in names))
        bad = np.flatnonzero(np.abs(norm - 1.0) > QUAT_NORM_TOL)
        if bad.size:
            i = int(bad[0])
            raise RunFormatError(file, i + row_of, names[-1], f"non-unit quaternion (norm {norm[i]:.4f})")


def _check_optional(table: dict[str, np.ndarray], n: int, file: str, row_of: int) -> None:
    """The optional signals' values: ``torque_enable`` 0 or 1, ``supply_v`` >= 0 [V], ``pwm`` in [-1, 1]."""
    for j in range(n):
        for sig, bad_of, what in (
            ("torque_enable", lambda v: (v != 0) & (v != 1), "expected 0 or 1 (the motor applied torque)"),
            ("supply_v", lambda v: v < 0, "a supply voltage [V] must be >= 0"),
            ("pwm", lambda v: np.abs(v) > 1 + PWM_TOL, "a PWM duty must be in [-1, 1] (a fraction of full duty)"),
        ):
            col = f"{sig}{j + 1}"
            if col not in table:
                continue
            bad = np.flatnonzero(bad_of(table[col]))
            if bad.size:
                i = int(bad[0])
                raise RunFormatError(file, i + row_of, col, f"{plain(table[col][i])}: {what}")
