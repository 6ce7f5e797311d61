"""The Franka sim-to-real tooling's run format (``schema_version: 2``), read as it is recorded.

Two kinds of log, each with a sidecar ``<stem>.json`` (docs/data_format.md, "Schema 2"):

* a **50 Hz CSV** ``<stem>.csv``: one row per Python tick, columns :func:`v2_columns`;
  row k holds the state observed just after target k was sent (tick ``20 k``), the
  target is held until row k+1;
* a **1 kHz ring log**: ``<stem>.csv`` with every controller tick (the same columns,
  then ``seq`` and ``target_idx``), ``<stem>_targets.csv`` (the setpoint schedule,
  :data:`TARGET_COLUMNS`, each setpoint stamped by the tick ``seq_effective`` it took
  effect) and the sidecar's ``ring_log`` block.

Both map onto the internal :class:`~isaaclab_sysid.data.run.Run` (``task_impedance``,
scalar gains ``kp_pos``/``kd_pos`` on x, y, z and ``kp_ori``/``kd_ori`` on the three
rotations). The sidecar does not record the control law, the EE point or the torque
limits: the run's ``meta.impedance`` is None and ``meta.unrecorded`` names them, so whoever
replays it must state them (the fit's ``--orientation_error``, ...). Extra sidecar keys
are ignored. :func:`write_franka_run` writes the format (tests, the twin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import REPLAY_FACTS, Run, RunMeta
from isaaclab_sysid.data.schema import EE_POS, EE_QUAT, QUAT_DES, QUAT_NORM_TOL, X_DES, joint_cols
from isaaclab_sysid.data.formats.csv_table import read_csv_table, run_files
from isaaclab_sysid.data.sidecar import _err, _number, _vector, sidecar_robot
from isaaclab_sysid.data.table import robot_limits, table_to_run
from isaaclab_sysid.data.validate import check_values
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.utils.atomic import atomic_path
from isaaclab_sysid.utils.errors import plain
from isaaclab_sysid.utils.json_io import jsonable

SCHEMA_VERSION = 2
SOURCE_FORMAT = "franka_tooling/2"
V2_EE_POS = ("x_x", "x_y", "x_z")
V2_EE_QUAT = ("quat_x", "quat_y", "quat_z", "quat_w")
V2_X_DES = ("x_des_x", "x_des_y", "x_des_z")
V2_DX_DES = ("dx_des_x", "dx_des_y", "dx_des_z")
V2_QUAT_DES = ("quat_des_x", "quat_des_y", "quat_des_z", "quat_des_w")
RING_COLUMNS = ("seq", "target_idx")
TARGET_COLUMNS = ("target_idx", "head", "seq_effective") + V2_X_DES + V2_QUAT_DES
#: a ring-log row's x_des / quat_des must equal its target's in ``_targets.csv`` to this [m, -]
SETPOINT_MATCH_TOL = 1e-6
#: schema-2 column -> the internal (schema-1) column it becomes, for error messages both ways
_TO_INTERNAL = dict(zip(V2_EE_POS + V2_EE_QUAT + V2_X_DES + V2_QUAT_DES, EE_POS + EE_QUAT + X_DES + QUAT_DES))
_TO_V2 = {v: k for k, v in _TO_INTERNAL.items()}
_TO_V2.update({"tick": "seq", "setpoint_tick": "target_idx"})


def v2_columns(n_dof: int, ring_log: bool) -> tuple[str, ...]:
    """The CSV header of a schema-2 log, in order (``ring_log``: the 1 kHz ring log)."""
    cols = ("t_s", "period_ms") + joint_cols("q", n_dof) + joint_cols("dq", n_dof) + V2_EE_POS + V2_EE_QUAT
    cols += V2_X_DES + V2_DX_DES + V2_QUAT_DES + joint_cols("tau", n_dof) + joint_cols("tau_J", n_dof)
    return cols + (RING_COLUMNS if ring_log else ())


def targets_path(csv_path: str | Path) -> Path:
    """``<stem>_targets.csv`` beside a ring log's ``<stem>.csv``."""
    p = Path(csv_path)
    return p.with_name(f"{p.stem}_targets.csv")


@dataclass(frozen=True)
class RingLogInfo:
    """The sidecar's ``ring_log`` block.

    Attributes:
        num_frames: rows of the ring-log CSV; seq_first, seq_last: its first and last ``seq``.
        num_targets: rows of ``<stem>_targets.csv``.
        gaps: (first, last) frame ranges lost (inclusive ``seq`` values).
        dropped_frames: frames lost in total; resets: ring-buffer resets.
        poll_hz: rate the ring buffer was drained at [Hz] (informative).
    """

    num_frames: int
    seq_first: int
    seq_last: int
    num_targets: int
    gaps: tuple[tuple[int, int], ...]
    dropped_frames: int
    resets: int
    poll_hz: float | None


@dataclass(frozen=True)
class Abort:
    """The sidecar's ``abort`` block: ``code`` 0 = the run completed."""

    code: int
    name: str
    value: Any
    time_s: float | None


# --------------------------------------------------------------------- sidecar
def _num(raw: Mapping, key: str, file: str, path: str) -> float:
    return _number(raw, key, file, path)


def _int(raw: Mapping, key: str, file: str, path: str, minimum: int | None = 0) -> int:
    v = raw.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or (minimum is not None and v < minimum):
        raise _err(file, path, f"expected an integer >= {minimum}, got {v!r}")
    return int(v)


def _vec(raw: Mapping, key: str, n: int, file: str) -> np.ndarray:
    return _vector(raw, key, n, file)  # type: ignore[arg-type]


def _ring_info(raw: Any, file: str) -> RingLogInfo:
    if not isinstance(raw, dict):
        raise _err(file, "ring_log", "expected an object or null")
    gaps_raw = raw.get("gaps", [])
    if not isinstance(gaps_raw, list):
        raise _err(file, "ring_log.gaps", "expected a list of [first, last] frame ranges")
    gaps = []
    for i, g in enumerate(gaps_raw):
        ok = isinstance(g, list) and len(g) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in g)
        if not ok or g[1] < g[0]:
            raise _err(file, f"ring_log.gaps[{i}]", f"expected [first, last] frame numbers, got {g!r}")
        gaps.append((int(g[0]), int(g[1])))
    resets = raw.get("resets", 0)
    if isinstance(resets, list):
        resets = len(resets)
    if isinstance(resets, bool) or not isinstance(resets, int) or resets < 0:
        raise _err(file, "ring_log.resets", f"expected a count (or a list of resets), got {resets!r}")
    poll = raw.get("poll_hz")
    if poll is not None and (isinstance(poll, bool) or not isinstance(poll, (int, float)) or not poll > 0):
        raise _err(file, "ring_log.poll_hz", f"expected a positive number or null, got {poll!r}")
    info = RingLogInfo(
        num_frames=_int(raw, "num_frames", file, "ring_log.num_frames", 2),
        seq_first=_int(raw, "seq_first", file, "ring_log.seq_first", None),
        seq_last=_int(raw, "seq_last", file, "ring_log.seq_last", None),
        num_targets=_int(raw, "num_targets", file, "ring_log.num_targets", 1),
        gaps=tuple(gaps),
        dropped_frames=_int(raw, "dropped_frames", file, "ring_log.dropped_frames") if "dropped_frames" in raw else 0,
        resets=int(resets),
        poll_hz=None if poll is None else float(poll),
    )
    if info.seq_last < info.seq_first:
        raise _err(file, "ring_log.seq_last", f"{info.seq_last} is before seq_first {info.seq_first}")
    return info


def _abort(raw: Any, file: str) -> Abort:
    if raw is None:
        return Abort(0, "", None, None)
    if not isinstance(raw, dict):
        raise _err(file, "abort", "expected an object {code, name, value, time_s} or null")
    code = _int(raw, "code", file, "abort.code", None)
    t = raw.get("time_s")
    if code != 0 and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)):
        raise _err(file, "abort.time_s", f"an aborted run needs the abort time [s], got {t!r}")
    return Abort(code, str(raw.get("name", "")), raw.get("value"), None if t is None else float(t))


def parse_v2_sidecar(
    raw: Any, file: str, n_dof: int, q_lower: np.ndarray, q_upper: np.ndarray
) -> tuple[RunMeta, RingLogInfo | None, Abort]:
    """Validate a schema-2 sidecar; returns the run's meta, its ring-log block (None: 50 Hz log) and abort.

    Extra keys are ignored. Raises :class:`RunFormatError` naming the key.
    """
    from isaaclab_sysid.data.schema import JOINT_LIMIT_SLACK

    if not isinstance(raw, dict):
        raise _err(file, "-", "sidecar must be a JSON object")
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise _err(file, "schema_version", f"expected {SCHEMA_VERSION}, got {raw.get('schema_version')!r}")
    rate = _num(raw, "control_rate_hz", file, "control_rate_hz")
    if rate <= 0 or rate > TICK_HZ or abs(TICK_HZ / rate - round(TICK_HZ / rate)) > 1e-9:
        raise _err(file, "control_rate_hz", f"{rate:g} Hz must divide {TICK_HZ} Hz (e.g. 50, 100, 1000)")
    controller = raw.get("controller", "")
    if not isinstance(controller, str):
        raise _err(file, "controller", f"expected the controller's name (a string), got {controller!r}")
    num = _int(raw, "num_samples", file, "num_samples", 1)
    if "duration_s" in raw:
        _num(raw, "duration_s", file, "duration_s")
    q_init = _vec(raw, "q_init", n_dof, file)
    bad = np.flatnonzero((q_init < q_lower - JOINT_LIMIT_SLACK) | (q_init > q_upper + JOINT_LIMIT_SLACK))
    if bad.size:
        i = int(bad[0])
        raise _err(file, f"q_init[{i}]", f"{q_init[i]:.4f} rad outside joint limits [{q_lower[i]:.4f}, {q_upper[i]:.4f}]")
    x_anchor = _vec(raw, "x_anchor", 3, file)
    q_anchor = _vec(raw, "q_anchor_xyzw", 4, file)
    if abs(np.linalg.norm(q_anchor) - 1.0) > QUAT_NORM_TOL:
        raise _err(file, "q_anchor_xyzw", f"not a unit quaternion (norm {np.linalg.norm(q_anchor):.4f})")
    args = raw.get("args")
    if not isinstance(args, dict):
        raise _err(file, "args", "missing (expected {\"kp_pos\", \"kp_ori\", \"kd_pos\", \"kd_ori\", ...})")
    gains = {}
    for key in ("kp_pos", "kp_ori", "kd_pos", "kd_ori"):
        gains[key] = _num(args, key, file, f"args.{key}")
        if gains[key] <= 0:
            raise _err(file, f"args.{key}", f"gain must be positive, got {gains[key]:g}")
    if "rate" in args and args["rate"] is not None:
        r = _num(args, "rate", file, "args.rate")
        if r != rate:
            raise _err(file, "args.rate", f"{r:g} Hz differs from control_rate_hz {rate:g} Hz")
    ring = None if raw.get("ring_log") is None else _ring_info(raw["ring_log"], file)
    abort = _abort(raw.get("abort"), file)
    summary = raw.get("summary", {})
    if summary is not None and not isinstance(summary, dict):
        raise _err(file, "summary", "expected an object")
    robot, stated = sidecar_robot(raw)
    mode = args.get("mode")
    meta = RunMeta(
        robot=robot,
        robot_stated=stated,
        controller="task_impedance",
        control_rate_hz=rate,
        log_rate_hz=float(TICK_HZ) if ring is not None else rate,
        num_samples=num,
        q_init=q_init,
        anchor_pos=x_anchor,
        anchor_quat=q_anchor,
        kp=np.array([gains["kp_pos"]] * 3 + [gains["kp_ori"]] * 3),
        kd=np.array([gains["kd_pos"]] * 3 + [gains["kd_ori"]] * 3),
        impedance=None,
        gravity_compensated=True,
        excitation={"kind": mode, "controller": controller} if mode is not None else {"controller": controller},
        summary=dict(summary or {}),
        schema_version=SCHEMA_VERSION,
        unrecorded=REPLAY_FACTS,
        source_format=SOURCE_FORMAT,
    )
    return meta, ring, abort


# ---------------------------------------------------------------------- tables
def _check_columns(columns: list[str], expected: tuple[str, ...], file: str, what: str) -> None:
    seen: set[str] = set()
    for c in columns:
        if c in seen:
            raise RunFormatError(file, 1, c, "duplicated column")
        seen.add(c)
    for c in expected:
        if c not in seen:
            raise RunFormatError(file, 1, c, f"missing column (a {what} needs it)")
    for c in columns:
        if c not in expected:
            raise RunFormatError(file, 1, c, f"unexpected column for a {what}")


def _stack(table: Mapping[str, np.ndarray], names: tuple[str, ...]) -> np.ndarray:
    return np.stack([table[c] for c in names], axis=1)


def _integers(table: Mapping[str, np.ndarray], col: str, file: str, row_of: int) -> np.ndarray:
    v = table[col]
    bad = np.flatnonzero(~np.isfinite(v) | (v != np.round(v)))
    if bad.size:
        raise RunFormatError(file, int(bad[0]) + row_of, col, f"not an integer: {plain(v[bad[0]])}")
    return v.astype(np.int64)


def _internal_table(t: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """Schema-2 columns renamed to the internal ones (the run's own setpoint columns for x_des/quat_des)."""
    out = {"t_s": t["t_s"]}
    for c in joint_cols("q", n) + joint_cols("dq", n) + joint_cols("tau", n) + joint_cols("tau_J", n):
        out[c] = t[c]
    for v2, internal in _TO_INTERNAL.items():
        out[internal] = t[v2]
    return out


def _checked(fn, file: str, *args, **kw) -> None:
    """Run a schema-1 value check on the renamed table; errors name the schema-2 column."""
    try:
        fn(*args, **kw)
    except RunFormatError as exc:
        raise RunFormatError(file, exc.row, _TO_V2.get(exc.column, exc.column), exc.reason) from None


# ---------------------------------------------------------------------- reader
def read_franka_run(csv_path: str | Path, sidecar_path: str | Path | None = None, *, admit_abort: bool = False) -> Run:
    """Read one schema-2 run (50 Hz or 1 kHz ring log); a ring log with gaps or resets is refused.

    Args:
        csv_path: ``<stem>.csv`` (a ring log's ``<stem>_targets.csv`` is found beside it).
        sidecar_path: the sidecar (default ``<stem>.json``).
        admit_abort: read a run with a non-zero ``abort.code``, truncated before its abort time.
    Raises:
        RunFormatError: one line naming file, row and column (or the sidecar key).
    """
    return read_franka_pieces(csv_path, sidecar_path, admit_abort=admit_abort, split_at_gaps=False)[0]


def read_franka_pieces(
    csv_path: str | Path,
    sidecar_path: str | Path | None = None,
    *,
    admit_abort: bool = False,
    split_at_gaps: bool = False,
) -> list[Run]:
    """Read a schema-2 run; with ``split_at_gaps`` a ring log is split at its gaps and resets.

    Each piece is a run named ``<stem>_part<i>`` (1-based) starting at its first row's q with zero
    velocity (the replay's start); pieces shorter than 2 rows are dropped. Without gaps the
    result is the one run named ``<stem>``.
    """
    csv_path, side, raw = run_files(csv_path, sidecar_path)
    file = str(csv_path)
    robot, _ = sidecar_robot(raw)
    n, q_lo, q_hi = robot_limits(robot, str(side))
    meta, ring, abort = parse_v2_sidecar(raw, str(side), n, q_lo, q_hi)
    kind = "1 kHz ring log (schema 2)" if ring is not None else f"{meta.control_rate_hz:g} Hz log (schema 2)"
    expected = v2_columns(n, ring is not None)
    _, t = read_csv_table(csv_path, lambda cols: _check_columns(cols, expected, file, kind))
    rows = len(t["t_s"])
    allow_nan = ("period_ms",) + joint_cols("tau_J", n)
    finite = {c: t[c] for c in expected if c not in allow_nan}
    for c, v in finite.items():
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            raise RunFormatError(file, int(bad[0]) + 2, c, f"non-finite value {v[bad[0]]}")
    tau_j = _stack(t, joint_cols("tau_J", n))
    nan_rows = np.isnan(tau_j).any(axis=1)
    if nan_rows.any() and not nan_rows.all():
        i = int(np.flatnonzero(nan_rows)[0] if not nan_rows[0] else np.flatnonzero(~nan_rows)[0])
        raise RunFormatError(file, i + 2, "tau_J1", "tau_J is NaN in some rows only (NaN is allowed only for "
                             "the whole column: a daemon before shm v3 did not send it)")
    if nan_rows.all():
        meta.summary = {**meta.summary, "tau_J": "not recorded (NaN: daemon before shm v3)"}
    if ring is None:
        if rows != meta.num_samples:
            raise RunFormatError(file, min(rows, meta.num_samples) + 2, "t_s",
                                 f"the log has {rows} rows but the sidecar says num_samples={meta.num_samples}")
        pieces = [(0, rows, None)]
    else:
        pieces = _ring_pieces(csv_path, str(side), t, ring, split_at_gaps)
    keep_rows = rows
    if abort.code != 0:
        t_ab = float(abort.time_s)  # type: ignore[arg-type]
        what = f"run aborted at t = {t_ab:g} s ({abort.name or 'code ' + str(abort.code)}, value {abort.value!r})"
        if not admit_abort:
            raise _err(str(side), "abort.code", f"{what}: refused; admit it truncated at the abort time with "
                       "--admit_aborted (fit) / admit_abort=True")
        keep_rows = int(np.searchsorted(t["t_s"], t_ab, side="left"))
        if keep_rows < 2:
            raise _err(str(side), "abort.time_s", f"{what}: fewer than 2 rows before the abort")
        meta.summary = {**meta.summary, "abort_truncated": {"code": abort.code, "name": abort.name,
                                                           "time_s": t_ab, "rows_kept": keep_rows, "rows": rows}}
    out: list[Run] = []
    for k, (lo, hi, sp) in enumerate(pieces):
        hi = min(hi, keep_rows)
        if hi - lo < 2:
            continue
        name = csv_path.stem if len(pieces) == 1 else f"{csv_path.stem}_part{k + 1}"
        sp = None if sp is None else sp[: hi - lo]
        out.append(_piece(t, meta, n, lo, hi, sp, q_lo, q_hi, file, name, csv_path, len(pieces) > 1))
    if not out:
        raise RunFormatError(file, 2, "t_s", "no piece of at least 2 rows to read")
    return out


def _ring_pieces(
    csv_path: Path, side: str, t: Mapping[str, np.ndarray], ring: RingLogInfo, split: bool
) -> list[tuple[int, int, np.ndarray]]:
    """Check a ring log against its sidecar and targets file; (first row, end row, setpoint seq per row) per piece."""
    file = str(csv_path)
    rows = len(t["t_s"])
    seq = _integers(t, "seq", file, 2)
    tidx = _integers(t, "target_idx", file, 2)
    if rows != ring.num_frames:
        raise RunFormatError(file, min(rows, ring.num_frames) + 2, "seq",
                             f"the log has {rows} rows but the sidecar says ring_log.num_frames={ring.num_frames}")
    if seq[0] != ring.seq_first:
        raise RunFormatError(file, 2, "seq", f"first seq {seq[0]} but the sidecar says ring_log.seq_first={ring.seq_first}")
    if seq[-1] != ring.seq_last:
        raise RunFormatError(file, rows + 1, "seq", f"last seq {seq[-1]} but the sidecar says ring_log.seq_last={ring.seq_last}")
    step = np.diff(seq)
    back = np.flatnonzero(step <= 0)
    if back.size:
        i = int(back[0]) + 1
        raise RunFormatError(file, i + 2, "seq", f"seq {seq[i]} does not follow {seq[i - 1]} (duplicated or backwards)")
    t_expect = (seq - ring.seq_first) / TICK_HZ
    off = np.flatnonzero(np.abs(t["t_s"] - t_expect) > 1e-6)
    if off.size:
        i = int(off[0])
        raise RunFormatError(file, i + 2, "t_s", f"{float(t['t_s'][i])!r} but (seq - seq_first) / 1000 = {float(t_expect[i])!r}")
    jumps = np.flatnonzero(step != 1)
    found = tuple((int(seq[i] + 1), int(seq[i + 1] - 1)) for i in jumps)
    if found != ring.gaps:
        row = int(jumps[0]) + 3 if jumps.size else 2
        raise RunFormatError(file, row, "seq", f"frames lost in the log {list(found)} differ from the sidecar's "
                             f"ring_log.gaps {[list(g) for g in ring.gaps]}")
    if (ring.gaps or ring.resets) and not split:
        lost = ", ".join(f"{a}-{b}" for a, b in ring.gaps) or "none"
        raise _err(side, "ring_log.gaps", f"ring log has {len(ring.gaps)} gap(s) (frames {lost}; "
                   f"{ring.dropped_frames} dropped) and {ring.resets} reset(s): refused; split it at them with "
                   "validate_runs.py --split_at_gaps --split_out DIR (or read_run_pieces(..., split_at_gaps=True))")
    if ring.resets and not ring.gaps:
        raise _err(side, "ring_log.resets", f"{ring.resets} reset(s) but no gaps: cannot locate them to split")
    # the targets file
    tpath = targets_path(csv_path)
    tfile = str(tpath)
    _, tg = read_csv_table(tpath, lambda cols: _check_columns(cols, TARGET_COLUMNS, tfile, "ring log's targets file"))
    k_count = len(tg["target_idx"])
    for c in TARGET_COLUMNS:
        bad = np.flatnonzero(~np.isfinite(tg[c]))
        if bad.size:
            raise RunFormatError(tfile, int(bad[0]) + 2, c, f"non-finite value {tg[c][bad[0]]}")
    if k_count != ring.num_targets:
        raise RunFormatError(tfile, min(k_count, ring.num_targets) + 2, "target_idx",
                             f"{k_count} targets but the sidecar says ring_log.num_targets={ring.num_targets}")
    idx = _integers(tg, "target_idx", tfile, 2)
    wrong = np.flatnonzero(idx != np.arange(k_count))
    if wrong.size:
        i = int(wrong[0])
        raise RunFormatError(tfile, i + 2, "target_idx", f"{idx[i]}: targets must be numbered 0, 1, 2, ... in order")
    _integers(tg, "head", tfile, 2)
    eff = _integers(tg, "seq_effective", tfile, 2)
    dec = np.flatnonzero(np.diff(eff) < 0)
    if dec.size:
        i = int(dec[0]) + 1
        raise RunFormatError(tfile, i + 2, "seq_effective", f"{eff[i]} is before the previous target's {eff[i - 1]}")
    norm = np.linalg.norm(_stack(tg, V2_QUAT_DES), axis=1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > QUAT_NORM_TOL)
    if bad.size:
        i = int(bad[0])
        raise RunFormatError(tfile, i + 2, "quat_des_w", f"non-unit quaternion (norm {norm[i]:.4f})")
    # rows -> targets
    out_of = np.flatnonzero((tidx < -1) | (tidx >= k_count))
    if out_of.size:
        i = int(out_of[0])
        raise RunFormatError(file, i + 2, "target_idx", f"{tidx[i]} is not a row of {tpath.name} (0..{k_count - 1}, or -1)")
    dec = np.flatnonzero(np.diff(tidx) < 0)
    if dec.size:
        i = int(dec[0]) + 1
        raise RunFormatError(file, i + 2, "target_idx", f"goes back from {tidx[i - 1]} to {tidx[i]}")
    has = tidx >= 0
    early = np.flatnonzero(has & (eff[np.maximum(tidx, 0)] > seq))
    if early.size:
        i = int(early[0])
        raise RunFormatError(file, i + 2, "target_idx", f"target {tidx[i]} takes effect at seq "
                             f"{eff[tidx[i]]}, after this row's seq {seq[i]}")
    for cols in (V2_X_DES, V2_QUAT_DES):
        row_v = _stack(t, cols)
        tgt_v = _stack(tg, cols)[np.maximum(tidx, 0)]
        diff = np.abs(row_v - tgt_v).max(axis=1) * has
        bad = np.flatnonzero(diff > SETPOINT_MATCH_TOL)
        if bad.size:
            i = int(bad[0])
            j = int(np.argmax(np.abs(row_v[i] - tgt_v[i])))
            raise RunFormatError(file, i + 2, cols[j], f"{float(row_v[i, j])!r} differs from target {tidx[i]} in "
                                 f"{tpath.name} ({float(tgt_v[i, j])!r})")
    # the setpoint columns of every row become the schedule's values (exact, from the targets file)
    for cols in (V2_X_DES, V2_QUAT_DES):
        tgt = _stack(tg, cols)
        for j, c in enumerate(cols):
            t[c][has] = tgt[tidx[has], j]  # type: ignore[index]
    sp_seq = np.where(has, eff[np.maximum(tidx, 0)], seq[0])
    bounds = [0, *(int(i) + 1 for i in jumps), rows]
    # a stamp before a piece's first row is moved to its start by Run.setpoints()
    return [(lo, hi, sp_seq[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _piece(
    t: Mapping[str, np.ndarray], meta: RunMeta, n: int, lo: int, hi: int, sp_seq: np.ndarray | None,
    q_lo: np.ndarray, q_hi: np.ndarray, file: str, name: str, source: Path, split: bool,
) -> Run:
    table = {c: v[lo:hi] for c, v in _internal_table(t, n).items()}
    m = replace(meta, num_samples=hi - lo, summary=dict(meta.summary))
    if split:
        m = replace(m, q_init=_stack(table, joint_cols("q", n))[0].copy())
        m.summary["split"] = {"piece_of": source.stem, "rows": [lo + 2, hi + 1]}
    allow_nan = joint_cols("tau_J", n)  # NaN in every row: a daemon before shm v3
    ring = sp_seq is not None
    if ring:
        table["tick"] = t["seq"][lo:hi]
        table["setpoint_tick"] = sp_seq.astype(np.float64)
    _checked(check_values, file, table, m, q_lo, q_hi, file, lo + 2, allow_nan, hi - lo)
    return table_to_run(table, m, n, name, source)


# ---------------------------------------------------------------------- writer
def _fmt_rows(cols: dict[str, np.ndarray]) -> str:
    data = np.stack([np.asarray(v, dtype=np.float64) for v in cols.values()], axis=1)
    lines = [",".join(cols)]
    lines += [",".join(format(float(x), ".17g") for x in row) for row in data]
    return "\n".join(lines) + "\n"


def write_franka_run(
    run: Run,
    csv_path: str | Path,
    *,
    controller: str = "python_multiband_excitation",
    abort: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> tuple[Path, ...]:
    """Write a ``task_impedance`` run in the Franka tooling's format (schema 2), atomically.

    A 50 Hz run becomes ``<stem>.csv`` + ``<stem>.json``; a 1 kHz run a ring log (``<stem>.csv``,
    ``<stem>_targets.csv``, ``<stem>.json``; ``t_s = (seq - seq_first) / 1000``). The law and EE
    point are not written (the format does not record them). ``dx_des`` is written as 0; a ring
    log's rows hold the setpoint in force (``Run.setpoints()``), the schedule is exact.

    Args:
        run: the run (kp/kd must be scalar per block: x, y, z equal and the rotations equal).
        csv_path: ``<stem>.csv``.
        controller: the sidecar's ``controller`` (the tooling's script name).
        abort: the sidecar's ``abort`` block (default: code 0).
        extra: more sidecar keys (the format allows keys a reader ignores).
    Returns:
        The paths written.
    """
    m = run.meta
    if m.controller != "task_impedance":
        raise ValueError("schema 2 holds task_impedance runs only")
    kp, kd = np.asarray(m.kp), np.asarray(m.kd)
    if np.ptp(kp[:3]) or np.ptp(kp[3:]) or np.ptp(kd[:3]) or np.ptp(kd[3:]):
        raise ValueError("schema 2 stores scalar gains (kp_pos, kp_ori, kd_pos, kd_ori); this run's differ per axis")
    csv_path = Path(csv_path)
    n, T = run.n_dof, run.n_samples
    cols: dict[str, np.ndarray] = {"t_s": run.t, "period_ms": np.full(T, 1000.0 / m.log_rate_hz)}
    for prefix, arr in (("q", run.q), ("dq", run.dq)):
        for j in range(n):
            cols[f"{prefix}{j + 1}"] = arr[:, j]
    for names, arr in ((V2_EE_POS, run.ee_pos), (V2_EE_QUAT, run.ee_quat), (V2_X_DES, run.x_des),
                       (V2_DX_DES, np.zeros((T, 3))), (V2_QUAT_DES, run.quat_des)):
        for j, c in enumerate(names):
            cols[c] = arr[:, j]  # type: ignore[index]
    for prefix, arr in (("tau", run.tau), ("tau_J", run.tau_J)):
        for j in range(n):
            cols[f"{prefix}{j + 1}"] = arr[:, j]
    side: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "ring_log": None, "controller": controller,
        "control_rate_hz": m.control_rate_hz, "duration_s": float(run.duration), "num_samples": T,
        "q_init": np.asarray(m.q_init).tolist(), "x_anchor": np.asarray(m.anchor_pos).tolist(),
        "q_anchor_xyzw": np.asarray(m.anchor_quat).tolist(),
        "args": {"kp_pos": float(kp[0]), "kp_ori": float(kp[3]), "kd_pos": float(kd[0]), "kd_ori": float(kd[3]),
                 "rate": m.control_rate_hz, "mode": m.excitation.get("kind")},
        "abort": dict(abort) if abort is not None else {"code": 0, "name": "none", "value": None, "time_s": None},
        "summary": m.summary,
    }
    files: dict[Path, str] = {}
    if run.is_1khz:
        tick = np.asarray(run.tick, dtype=np.int64)
        stamp = np.asarray(run.setpoint_tick, dtype=np.int64)
        first = np.ones(T, dtype=bool)
        first[1:] = stamp[1:] != stamp[:-1]
        tidx = np.cumsum(first) - 1
        sp_vals = np.concatenate([run.x_des, run.quat_des], axis=1)[first]  # type: ignore[list-item]
        k = int(first.sum())
        cols["t_s"] = (tick - tick[0]) / TICK_HZ  # the format's time base
        for j, c in enumerate(V2_X_DES + V2_QUAT_DES):  # each row holds the setpoint in force
            cols[c] = sp_vals[tidx, j]
        cols["seq"] = tick
        cols["target_idx"] = tidx
        tg = {"target_idx": np.arange(k), "head": np.arange(k) % 256, "seq_effective": stamp[first]}
        for j, c in enumerate(V2_X_DES + V2_QUAT_DES):
            tg[c] = sp_vals[:, j]
        files[targets_path(csv_path)] = _fmt_rows(tg)
        side["num_samples"] = k
        side["ring_log"] = {"num_frames": T, "seq_first": int(tick[0]), "seq_last": int(tick[-1]), "num_targets": k,
                            "gaps": [], "dropped_frames": 0, "resets": 0, "poll_hz": 100.0}
    side.update(dict(extra or {}))
    files[csv_path] = _fmt_rows(cols)
    import json

    files[csv_path.with_suffix(".json")] = json.dumps(jsonable(side), indent=2, allow_nan=False) + "\n"
    with ExitStack() as stack:  # every file is renamed into place only once all are written
        tmps = {p: stack.enter_context(atomic_path(p)) for p in files}
        for p, text in files.items():
            tmps[p].write_text(text, encoding="utf-8")
    return tuple(files)
