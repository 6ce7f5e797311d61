"""What every importer shares: the mapping file, the repair (stale rows, even grid, gaps) and the output.

An importer reads its source into :class:`Streams` (stamps, joint states, torques and the
setpoint in force at each stamp, with where each row came from); :func:`assemble_runs` repairs
and validates them into runs of the project's schema 1 (docs/data_format.md, "Importers"):

* a row whose state repeats the previous row's (a logger that re-sent its last sample) is
  dropped and counted; a duplicated stamp with different values, or a stamp that goes back,
  is refused;
* irregular stamps are put on an even grid at ``rate_hz`` (states interpolated linearly, the
  setpoint zero-order held); rows already on the grid (every stamp within 0.1 % of a period of it)
  are kept as they are (exact values, at the grid's times);
* a gap longer than ``max_gap_s`` splits the run (``on_gap: split``) or is refused (default);
* EE pose from the joint angles by forward kinematics at the robot config's EE point.

What was done is recorded in each run's ``summary.import`` and returned as an :class:`ImportReport`.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.formats.text import read_text
from isaaclab_sysid.data.run import REPLAY_FACTS, ImpedanceLaw, Run, RunMeta
from isaaclab_sysid.data.schema import CONTROLLERS, JOINT_SPACE_CONTROLLERS
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.utils.errors import UserError, plain

FORMATS = ("rosbag2", "mcap", "lerobot", "table", "bam")
EXTRA = "import"  # pip install -e ".[import]"
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: stamps within this fraction of a grid period of the grid are on it (float32 stamps, clock rounding)
ON_GRID_TOL = 1e-3


class ImportDependencyError(UserError, RuntimeError):
    """An optional package an importer needs is missing (the message names the extra; a user error: exit 2)."""


def require(module: str, fmt: str):
    """Import ``module`` or fail with one line naming the ``[import]`` extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportDependencyError(f"--format {fmt} needs the Python package '{module.split('.')[0]}': "
                                    f"pip install -e \".[{EXTRA}]\" (or pip install {module.split('.')[0]})") from None


# ------------------------------------------------------------------ mapping file
@dataclass(frozen=True)
class ImportSpec:
    """The mapping file (YAML): what the source does not say, and the names that differ.

    Attributes:
        file: the mapping file (named in errors).
        robot: robot config name; controller: ``joint_pd``, ``task_impedance`` or ``servo``.
        kp, kd: the real controller's gains (N each for joint_pd and servo, 6 for task_impedance).
        rate_hz: the even grid [Hz] (divides 1000), or None for the source's own rate (LeRobot ``fps``).
        max_gap_s: a longer gap between stamps splits or refuses the run [s] (default 1.5 grid periods).
        on_gap: ``"refuse"`` (default) or ``"split"``.
        gravity_compensated: the real controller cancelled gravity (default true).
        joints: the source's name of each robot joint, in the robot's order (default the robot's names).
        columns, topics, features: the format's own section (table columns, bag topics, LeRobot features).
    """

    file: str
    robot: str
    controller: str
    kp: np.ndarray
    kd: np.ndarray
    rate_hz: float | None
    max_gap_s: float | None
    on_gap: str
    gravity_compensated: bool
    joints: tuple[str, ...] | None
    columns: dict[str, Any] = field(default_factory=dict)
    topics: dict[str, Any] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)


_KEYS = {"robot", "controller", "gains", "rate_hz", "max_gap_s", "on_gap", "gravity_compensated", "joints",
         "columns", "topics", "features"}


def _spec_err(file: str, key: str, reason: str) -> RunFormatError:
    return RunFormatError(file, None, key, reason)


def load_import_spec(path: str | Path, n_dof_of=None) -> ImportSpec:
    """Read and check a mapping file; errors name the file and key (one line).

    Args:
        path: the YAML file.
        n_dof_of: callable robot name -> joint count (default: load the robot config).
    """
    import yaml

    file = str(path)
    p = Path(path)
    if not p.is_file():
        raise _spec_err(file, "-", "mapping file not found")
    try:
        raw = yaml.safe_load(read_text(p, "mapping file"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RunFormatError(file, None if mark is None else mark.line + 1, "-", f"invalid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise _spec_err(file, "-", "expected a mapping (key: value lines)")
    for k in raw:
        if k not in _KEYS:
            raise _spec_err(file, str(k), f"unknown key (known: {', '.join(sorted(_KEYS))})")
    robot = str(raw.get("robot", "franka_panda"))
    if n_dof_of is None:
        from isaaclab_sysid.data.table import robot_limits

        n_dof = robot_limits(robot, file)[0]
    else:
        n_dof = n_dof_of(robot)
    controller = raw.get("controller")
    if controller not in CONTROLLERS:
        raise _spec_err(file, "controller", f"expected one of {', '.join(CONTROLLERS)}, got {controller!r}")
    gains = raw.get("gains")
    joint = controller in JOINT_SPACE_CONTROLLERS
    n_gain = n_dof if joint else 6
    unknown = gains == "unknown" and joint  # a servo arm (LeRobot): the fit's kp / kd find them
    if unknown:
        gains = {"kp": [None] * n_gain, "kd": [None] * n_gain}
    if not isinstance(gains, dict):
        raise _spec_err(file, "gains", "missing: the real controller's {kp: [...], kd: [...]}"
                        + (" or unknown (a servo arm: fit --groups kp kd)" if joint else ""))
    kk = {}
    for key in ("kp", "kd"):
        v = gains.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = [v] * n_gain
        if not isinstance(v, list) or len(v) != n_gain:
            raise _spec_err(file, f"gains.{key}", f"expected {n_gain} numbers (or one for all), got {v!r}")
        if unknown:
            kk[key] = np.full(n_gain, np.nan)  # unstated (sidecar: null; sim/servo.py)
            continue
        zero_ok = controller == "servo" and key == "kd"  # a P-only firmware loop (the XL330's position mode)
        for i, x in enumerate(v):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 or \
                    (x == 0 and not zero_ok):
                raise _spec_err(file, f"gains.{key}[{i}]",
                                f"gain must be a {'number >= 0' if zero_ok else 'positive number'}, got {x!r}")
        kk[key] = np.asarray(v, dtype=float)
    rate = raw.get("rate_hz")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0 or rate > TICK_HZ or \
                abs(TICK_HZ / rate - round(TICK_HZ / rate)) > 1e-9:
            raise _spec_err(file, "rate_hz", f"{rate!r} Hz must divide {TICK_HZ} Hz (e.g. 50, 100, 500, 1000)")
        rate = float(rate)
    gap = raw.get("max_gap_s")
    if gap is not None and (isinstance(gap, bool) or not isinstance(gap, (int, float)) or not gap > 0):
        raise _spec_err(file, "max_gap_s", f"expected a positive number of seconds, got {gap!r}")
    on_gap = raw.get("on_gap", "refuse")
    if on_gap not in ("refuse", "split"):
        raise _spec_err(file, "on_gap", f"expected refuse or split, got {on_gap!r}")
    joints = raw.get("joints")
    if joints is not None:
        if not isinstance(joints, list) or len(joints) != n_dof or not all(isinstance(j, str) for j in joints):
            raise _spec_err(file, "joints", f"expected the source's {n_dof} joint names in the robot's order")
        joints = tuple(joints)
    sections = {}
    for key in ("columns", "topics", "features"):
        v = raw.get(key, {})
        if not isinstance(v, dict):
            raise _spec_err(file, key, "expected a mapping")
        sections[key] = dict(v)
    return ImportSpec(file, robot, controller, kk["kp"], kk["kd"], rate, None if gap is None else float(gap),
                      on_gap, bool(raw.get("gravity_compensated", True)), joints, **sections)


# ------------------------------------------------------------------ the streams
@dataclass
class Streams:
    """One source recording, as read: T rows in stamp order of arrival.

    Attributes:
        name: run name (file stem, episode name).
        file: the source file (named in errors); row_label: what a row is there (``"row"``,
            ``"topic /joint_states index"``); rows: (T,) the row number of each row in the source.
        t: (T,) stamps [s]; q, dq, tau: (T, N); tau_J: (T, N) or None (then the ``tau`` copy, recorded).
        targets: (T, D) the setpoint in force at each row (q* for joint_pd; x*, quat* xyzw for task_impedance).
        names: signal -> the source's column name of each component (errors name them).
        notes: what the reader itself did (e.g. messages it skipped), copied to the report.
    """

    name: str
    file: str
    row_label: str
    rows: np.ndarray
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    tau_J: np.ndarray | None
    targets: np.ndarray
    names: dict[str, Sequence[str]]
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class ImportReport:
    """What an import did, per source recording (printed by the script, kept in each sidecar)."""

    source: str
    format: str
    rows_read: int
    dropped: dict[str, int]
    rate_hz: float
    resampled: bool
    pieces: int
    gaps_s: list[float]
    notes: dict[str, Any]

    def line(self) -> str:
        dropped = ", ".join(f"{v} {k}" for k, v in self.dropped.items() if v) or "none"
        gaps = f", split at {len(self.gaps_s)} gap(s) of {', '.join(f'{g * 1e3:.0f} ms' for g in self.gaps_s)}" \
            if self.gaps_s else ""
        grid = "resampled onto an even grid" if self.resampled else "stamps already on the grid"
        return (f"{self.source}: {self.rows_read} rows read, dropped: {dropped}; {self.rate_hz:g} Hz ({grid})"
                f"{gaps}; {self.pieces} run(s)")


def _err(s: Streams, i: int, column: str, reason: str) -> RunFormatError:
    return RunFormatError(s.file, int(s.rows[i]), column, reason, row_label=s.row_label)


def _check_finite(s: Streams) -> None:
    sigs = {"time": s.t[:, None], "q": s.q, "dq": s.dq, "tau": s.tau, "targets": s.targets}
    if s.tau_J is not None:
        sigs["tau_J"] = s.tau_J
    for sig, arr in sigs.items():
        if sig in ("tau", "tau_J") and np.isnan(arr).all():
            continue  # a torque the source does not have (tau: none): NaN in every row
        bad = np.argwhere(~np.isfinite(arr))
        if bad.size:
            i, j = (int(v) for v in bad[0])
            names = s.names.get(sig, [sig])
            raise _err(s, i, names[j] if j < len(names) else sig, f"non-finite value {arr[i, j]}")


def assemble_runs(s: Streams, spec: ImportSpec, robot, fmt: str, rate_hz: float | None = None) -> tuple[list[Run], ImportReport]:
    """Repair and validate one recording into runs (module docstring); nothing is written here.

    Args:
        s: the recording; spec: the mapping; robot: the :class:`~isaaclab_sysid.robots.Robot`.
        fmt: the importer's format name (recorded); rate_hz: the grid when the mapping gives none.
    Raises:
        RunFormatError: naming the source file, its row (topic/episode index) and column.
    """
    rate = spec.rate_hz or rate_hz
    if rate is None:
        raise _spec_err(spec.file, "rate_hz", f"missing: the even grid to put {s.file} on [Hz] (e.g. the setpoint rate)")
    if len(s.t) < 2:
        raise RunFormatError(s.file, None, "-", f"{len(s.t)} row(s): a run needs at least 2", row_label=s.row_label)
    _check_finite(s)
    period = 1.0 / rate
    dt = np.diff(s.t)
    back = np.flatnonzero(dt < 0)
    if back.size:
        i = int(back[0]) + 1
        raise _err(s, i, s.names.get("time", ["time"])[0], f"stamp {plain(s.t[i])} is before the previous {plain(s.t[i - 1])}")
    parts = [s.q, s.dq] + [a for a in (s.tau, s.tau_J) if a is not None and not np.isnan(a).all()]
    state = np.concatenate(parts, axis=1)
    same_state = np.concatenate([[False], np.all(state[1:] == state[:-1], axis=1)])
    same_target = np.concatenate([[False], np.all(s.targets[1:] == s.targets[:-1], axis=1)])
    dup = np.concatenate([[False], dt == 0])
    clash = np.flatnonzero(dup & ~(same_state & same_target))
    if clash.size:
        i = int(clash[0])
        raise _err(s, i, s.names.get("time", ["time"])[0], f"duplicated stamp {plain(s.t[i])} with different values")
    repeated = dup & same_state & same_target
    stale = ~dup & same_state  # the state was not refreshed: the row repeats the previous one
    keep = ~(repeated | stale)
    dropped = {"repeated (same stamp)": int(repeated.sum()), "stale (state repeated)": int(stale.sum())}
    idx = np.flatnonzero(keep)
    t = s.t[idx]
    max_gap = spec.max_gap_s if spec.max_gap_s is not None else 1.5 * period
    gaps = np.flatnonzero(np.diff(t) > max_gap + 1e-12)
    if gaps.size and spec.on_gap == "refuse":
        i = int(idx[gaps[0] + 1])
        raise _err(s, i, s.names.get("time", ["time"])[0],
                   f"gap of {(t[gaps[0] + 1] - t[gaps[0]]) * 1e3:.1f} ms (limit {max_gap * 1e3:g} ms): refused; "
                   f"set on_gap: split in {Path(spec.file).name} to split the run there, or raise max_gap_s")
    bounds = [0, *(int(g) + 1 for g in gaps), len(idx)]
    runs: list[Run] = []
    resampled = False
    short = 0
    t_origin = float(s.t[0])
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        rows = idx[lo:hi]
        tt = s.t[rows]
        n_grid = int(math.floor((tt[-1] - tt[0]) / period + ON_GRID_TOL)) + 1
        if n_grid < 2:
            short += len(rows)
            continue
        grid = tt[0] + np.arange(n_grid) * period
        on_grid = len(rows) == n_grid and np.all(np.abs(tt - grid) <= ON_GRID_TOL * period)
        if on_grid:  # the rows as they are, at the grid's times
            pick = {"q": s.q[rows], "dq": s.dq[rows], "tau": s.tau[rows], "targets": s.targets[rows],
                    "tau_J": None if s.tau_J is None else s.tau_J[rows]}
        else:
            resampled = True

            def lin(a: np.ndarray) -> np.ndarray:
                return np.stack([np.interp(grid, tt, a[rows, j]) for j in range(a.shape[1])], axis=1)

            hold = np.searchsorted(tt, grid + 1e-9 * period, side="right") - 1
            pick = {"q": lin(s.q), "dq": lin(s.dq), "tau": lin(s.tau), "targets": s.targets[rows][hold],
                    "tau_J": None if s.tau_J is None else lin(s.tau_J)}
        name = s.name if len(bounds) == 2 else f"{s.name}_part{k + 1}"
        runs.append(_make_run(name, grid - t_origin, pick, spec, robot, rate))
    dropped["in pieces shorter than 2 grid rows"] = short
    if not runs:
        raise RunFormatError(s.file, None, "-", "no stretch of at least 2 grid rows between gaps", row_label=s.row_label)
    notes = dict(s.notes)
    if s.tau_J is None:
        notes["tau_J"] = "not in the source: the commanded torque tau is copied into tau_J"
    report = ImportReport(source=s.file, format=fmt, rows_read=len(s.t), dropped=dropped, rate_hz=rate,
                          resampled=bool(resampled), pieces=len(runs),
                          gaps_s=[float(t[g + 1] - t[g]) for g in gaps], notes=notes)
    for i, r in enumerate(runs):
        r.meta.summary["import"] = {"format": fmt, "source": s.file, "rows_read": report.rows_read,
                                    "rows_dropped": dropped, "rate_hz": rate, "resampled": report.resampled,
                                    "pieces": len(runs), "piece": i + 1, "t0_source_s": t_origin,
                                    "ee": f"EE pose by forward kinematics at {robot.ee_frame}", **notes}
    return runs, report


def _make_run(name: str, t: np.ndarray, a: Mapping[str, np.ndarray | None], spec: ImportSpec, robot, rate: float) -> Run:
    from isaaclab_sysid.robots.kinematics import ee_poses  # Pinocchio: only when a run is built

    q = np.ascontiguousarray(a["q"])
    pos, quat = ee_poses(robot, q)
    targets = np.asarray(a["targets"], dtype=float)
    task = spec.controller == "task_impedance"
    tau = np.ascontiguousarray(a["tau"])
    # a task-space controller's law, EE point and limits are not in these sources: the fit must be told
    meta = RunMeta(
        robot=spec.robot, controller=spec.controller, control_rate_hz=rate, log_rate_hz=rate, num_samples=len(t),
        q_init=q[0].copy(), anchor_pos=pos[0].copy(), anchor_quat=quat[0].copy(), kp=spec.kp.copy(), kd=spec.kd.copy(),
        impedance=None if task else ImpedanceLaw(), gravity_compensated=spec.gravity_compensated, excitation={},
        summary={}, unrecorded=REPLAY_FACTS if task else (),
    )
    return Run(
        name=name, meta=meta, t=np.asarray(t, dtype=float), q=q, dq=np.ascontiguousarray(a["dq"]), ee_pos=pos,
        ee_quat=quat, tau=tau, tau_J=tau.copy() if a["tau_J"] is None else np.ascontiguousarray(a["tau_J"]),
        q_des=None if task else targets, x_des=targets[:, :3] if task else None,
        quat_des=targets[:, 3:7] if task else None,
    )


# ------------------------------------------------------------------ output
def write_imported(runs: Sequence[Run], out_dir: str | Path) -> list[Path]:
    """Write runs as CSV + sidecar into ``out_dir`` (or one HDF5 file when it ends in ``.h5``), all or nothing.

    Every file is written into a temporary folder and read back with the validating reader first; only
    when all are valid are they moved into place. Run names must be unique and not exist there yet.
    """
    from isaaclab_sysid.data.formats.csv_run import read_run, write_run
    from isaaclab_sysid.data.formats.hdf5 import read_runs_hdf5, write_runs_hdf5

    out = Path(out_dir)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"two imported runs share a name: {names}")
    if out.suffix in (".h5", ".hdf5"):
        if out.exists():
            raise FileExistsError(f"{out} exists already; not overwriting")
        tmp = out.with_name(f".{out.name}.importing")
        write_runs_hdf5(runs, tmp)
        try:
            read_runs_hdf5(tmp)
        except Exception:
            tmp.unlink()
            raise
        tmp.replace(out)
        return [out]
    out.mkdir(parents=True, exist_ok=True)
    clash = [n for n in names if (out / f"{n}.csv").exists() or (out / f"{n}.json").exists()]
    if clash:
        raise FileExistsError(f"{out} already holds run(s) {', '.join(clash)}; not overwriting")
    staging = Path(tempfile.mkdtemp(prefix=".importing_", dir=out))
    try:
        for r in runs:
            csv, _ = write_run(r, staging / f"{r.name}.csv")
            read_run(csv)
        written = []
        for r in runs:
            for suffix in (".csv", ".json"):
                (staging / f"{r.name}{suffix}").replace(out / f"{r.name}{suffix}")
                written.append(out / f"{r.name}{suffix}")
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)
