"""BAM's servo test-bench logs (``better-actuator-models``, Rhoban/bam: one JSON file per trajectory) into runs.

A log is a header and the samples the recorder read from the servo, about 190 Hz with irregular stamps::

    {"mass": 0.49, "length": 0.1, "kp": 100, "vin": 7.4, "motor": "xl330", "trajectory": "lift_and_drop",
     "entries": [{"timestamp": 0.0035, "position": ..., "speed": ..., "goal_position": ..., "torque_enable": true,
                  "load": 65530, "input_volts": 7.3, "temp": 34}, ...]}

Each file becomes one run of controller ``servo`` (the servo's own firmware position loop; ``q_des`` = the goal
position; ``meta.kp`` the firmware gain in register units as logged, ``meta.kd`` 0: the XL330's position mode is P
only) on the pendulum bench the header describes (:func:`~isaaclab_sysid.robots.bench.pendulum_robot_config`; logs
of different benches may share a folder, each run names its robot).

The rows are put on an even grid exactly as BAM's own ``bam.process`` does, so that a score on these runs is on
BAM's points: ``t = arange(0, last timestamp, dt)``; every field linearly interpolated between the two entries that
bracket ``t`` (before the first entry: extrapolated from entries 0 and 1); ``torque_enable`` = the interpolated value
> 0.5. ``load`` (the present PWM as a raw uint16, 65535 = -1) is made signed and divided by the family's PWM full
scale *before* it is interpolated (BAM interpolates the raw register, which is wrong across zero; it is a diagnostic
here). ``input_volts`` is the row's supply voltage, ``temp`` goes to the summary; the torque is not recorded (NaN).

A bad file is refused in one line naming the file, the entry and the field, and nothing is written.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.run import ImpedanceLaw, Run, RunMeta
from isaaclab_sysid.importers.common import ImportReport, write_imported
from isaaclab_sysid.timebase import TICK_HZ

#: BAM's default grid (``bam.process --dt 0.005``) [Hz].
DEFAULT_RATE_HZ = 200.0
#: The header's numeric fields (all positive) and its string fields.
HEADER_NUMBERS = ("mass", "length", "kp", "vin")
HEADER_STRINGS = ("motor", "trajectory")
#: The fields every entry has (``torque_enable`` a bool, the rest numbers).
ENTRY_FIELDS = ("timestamp", "position", "speed", "goal_position", "torque_enable", "load", "input_volts", "temp")
#: The interpolated fields, in order (``pwm`` is the signed duty made from ``load``).
_LERP = ("position", "speed", "goal_position", "torque_enable", "pwm", "input_volts", "temp")
_UINT16 = 65536


@dataclass(frozen=True)
class BamLog:
    """One BAM log as read and checked (the raw entries, not yet resampled).

    Attributes:
        file: the JSON file (named in errors); name: the run name (the file's stem).
        mass_kg, length_m: the pendulum's mass [kg] and the distance of its centre from the axis [m].
        kp: the firmware position gain (register units); vin_v: the stated supply voltage [V].
        motor: the servo family key (``robots/servos.py``); trajectory: the trajectory's name.
        t: (M,) entry stamps [s], strictly increasing.
        fields: name -> (M,) values: ``position`` [rad], ``speed`` [rad/s], ``goal_position`` [rad],
            ``torque_enable`` (0/1), ``pwm`` (signed duty, a fraction), ``input_volts`` [V], ``temp`` [C].
    """

    file: str
    name: str
    mass_kg: float
    length_m: float
    kp: float
    vin_v: float
    motor: str
    trajectory: str
    t: np.ndarray
    fields: dict[str, np.ndarray]


def _err(file: str, entry: int | None, field: str, reason: str) -> RunFormatError:
    return RunFormatError(file, entry, field, reason, row_label="entry")


def _is_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def read_bam_log(path: str | Path) -> BamLog:
    """Read and check one BAM log (module docstring).

    Raises:
        RunFormatError: not JSON, a header field missing or not a positive number, an unknown motor family, no
            entries, an entry without a field or with a non-numeric one, stamps that do not increase, a ``load`` that
            is not a uint16 or beyond the family's full scale, a log whose torque is off in every entry (one line
            naming the file, the entry and the field).
    """
    from isaaclab_sysid.robots.servos import SERVO_FAMILIES

    p = Path(path)
    file = str(p)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(file, exc.lineno, f"char {exc.colno}", f"invalid JSON: {exc.msg}", row_label="line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _err(file, None, "-", f"cannot read the log ({type(exc).__name__}: {exc})") from None
    if not isinstance(raw, dict):
        raise _err(file, None, "-", "expected a JSON object (BAM's log: header fields and entries)")
    head: dict[str, Any] = {}
    for key in HEADER_NUMBERS:
        if key not in raw:
            raise _err(file, None, key, "missing header field (a BAM log states mass, length, kp, vin, motor, "
                       "trajectory)")
        if not _is_number(raw[key]) or raw[key] <= 0:
            raise _err(file, None, key, f"expected a positive number, got {raw[key]!r}")
        head[key] = float(raw[key])
    for key in HEADER_STRINGS:
        if key not in raw:
            raise _err(file, None, key, "missing header field (a BAM log states mass, length, kp, vin, motor, "
                       "trajectory)")
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise _err(file, None, key, f"expected a name, got {raw[key]!r}")
    motor = raw["motor"].strip().lower()
    if motor not in SERVO_FAMILIES:
        raise _err(file, None, "motor", f"unknown servo family {raw['motor']!r} (known: {', '.join(sorted(SERVO_FAMILIES))}; "
                   "robots/servos.py states each family's firmware gain and PWM scale)")
    full_scale = float(SERVO_FAMILIES[motor].pwm_full_scale)
    entries = raw.get("entries")
    if not isinstance(entries, list) or len(entries) < 2:
        n = len(entries) if isinstance(entries, list) else None
        raise _err(file, None, "entries", "missing" if entries is None else f"expected a list of at least 2 samples, "
                   f"got {n if n is not None else type(entries).__name__}")
    cols: dict[str, list[float]] = {k: [] for k in ENTRY_FIELDS}
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise _err(file, i, "-", f"expected an object, got {type(e).__name__}")
        for key in ENTRY_FIELDS:
            if key not in e:
                raise _err(file, i, key, "missing field")
            v = e[key]
            if key == "torque_enable":
                if not (isinstance(v, bool) or (isinstance(v, int) and v in (0, 1))):
                    raise _err(file, i, key, f"expected true or false, got {v!r}")
                v = float(v)
            elif not _is_number(v):
                raise _err(file, i, key, f"expected a finite number, got {v!r}")
            cols[key].append(float(v))
    arr = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    t = arr.pop("timestamp")
    back = np.flatnonzero(np.diff(t) <= 0)
    if back.size:
        i = int(back[0]) + 1
        raise _err(file, i, "timestamp", f"{float(t[i])!r} s is not after entry {i - 1}'s {float(t[i - 1])!r} s (stamps must increase)")
    if t[-1] <= 0:
        raise _err(file, len(t) - 1, "timestamp", f"the last stamp {float(t[-1])!r} s leaves no grid from 0 s")
    load = arr.pop("load")
    bad = np.flatnonzero((load < 0) | (load >= _UINT16) | (load != np.round(load)))
    if bad.size:
        i = int(bad[0])
        raise _err(file, i, "load", f"{float(load[i])!r}: expected the raw present-PWM register, an integer 0..65535")
    signed = np.where(load >= _UINT16 // 2, load - _UINT16, load)
    over = np.flatnonzero(np.abs(signed) > full_scale)
    if over.size:
        i = int(over[0])
        raise _err(file, i, "load", f"{int(load[i])} (signed {int(signed[i])}) is beyond the {motor}'s PWM full scale "
                   f"+-{full_scale:g}")
    arr["pwm"] = signed / full_scale
    if not arr["torque_enable"].any():
        raise _err(file, None, "torque_enable", "false in every entry: a torque-off log with no torque-on sample "
                   "says nothing about the servo's loop")
    return BamLog(file=file, name=p.stem, mass_kg=head["mass"], length_m=head["length"], kp=head["kp"],
                  vin_v=head["vin"], motor=motor, trajectory=raw["trajectory"].strip(), t=t, fields=arr)


def bam_grid(t_raw: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BAM's grid and bracketing entries: ``(ts, i1, i2)`` with ``ts = arange(0, t_raw[-1], dt)`` and each ``ts[k]``
    interpolated between entries ``i1[k]`` and ``i2[k] = i1[k] + 1`` (``bam.process``'s loop: the first pair with
    ``t <= t_raw[i2]``; entries 0 and 1 before the first stamp)."""
    ts = np.arange(0.0, float(t_raw[-1]), dt)
    i2 = np.maximum(np.searchsorted(t_raw, ts, side="left"), 1)
    return ts, i2 - 1, i2


def bam_resample(t_raw: np.ndarray, values: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(ts (T,), values on it (T,)) of (M,) ``values`` stamped ``t_raw`` (M,) [s], in ``bam.process``'s arithmetic
    and order of operations: ``v1 + (v2 - v1) * (t - t1) / (t2 - t1)``."""
    ts, i1, i2 = bam_grid(t_raw, dt)
    t1, t2 = t_raw[i1], t_raw[i2]
    v1, v2 = values[i1], values[i2]
    return ts, v1 + (v2 - v1) * (ts - t1) / (t2 - t1)


def bam_run(log: BamLog, robot, robot_ref: str, rate_hz: float = DEFAULT_RATE_HZ) -> tuple[Run, ImportReport]:
    """The run of one checked log on the bench ``robot`` (named ``robot_ref`` in the sidecar), on a ``rate_hz`` grid."""
    from isaaclab_sysid.robots.kinematics import ee_poses  # Pinocchio: only when a run is built

    dt = 1.0 / rate_hz
    # one interpolation per field, in bam.process's own arithmetic (the stamps' order of operations kept)
    res = {}
    for key in _LERP:
        ts, res[key] = bam_resample(log.t, log.fields[key], dt)
    if len(ts) < 2:
        raise _err(log.file, len(log.t) - 1, "timestamp", f"the log lasts {log.t[-1]:.4f} s: under 2 rows at {rate_hz:g} Hz")
    col = {k: np.ascontiguousarray(v[:, None]) for k, v in res.items()}
    q = col["position"]
    pos, quat = ee_poses(robot, q)
    enable = col["torque_enable"] > 0.5
    off = int((~enable).sum())
    gaps = np.diff(log.t)
    raw_rate = (len(log.t) - 1) / float(log.t[-1] - log.t[0])
    nan = np.full_like(q, np.nan)
    summary_import = {
        "format": "bam", "source": log.file, "rows_read": len(log.t), "rows_dropped": {}, "rate_hz": rate_hz,
        "resampled": True, "pieces": 1, "piece": 1, "t0_source_s": 0.0,
        "raw_rate_hz": raw_rate, "max_gap_s": float(gaps.max()), "min_gap_s": float(gaps.min()),
        "grid": (f"resampled as bam.process does: t = arange(0, {float(log.t[-1])!r}, {dt:g}) s, each field linearly "
                 "interpolated between the two entries bracketing t (before the first entry: extrapolated from "
                 "entries 0 and 1), torque_enable = interpolated value > 0.5"),
        "pwm": ("load (raw uint16, 65535 = -1) made signed and divided by the PWM full scale of the "
                f"{log.motor} ({_full_scale(log.motor):g}) before the interpolation (diagnostic)"),
        "supply_v": "input_volts, interpolated",
        "tau": "not recorded: NaN",
        "state_age": ("0 ms: each row's state is interpolated at the row's own instant from the reads around it (the "
                      "servo's read latency, not recorded, is left to the fitted delay)"),
        "temp_c": [float(log.fields["temp"].min()), float(log.fields["temp"].max())],
        "torque_off_rows": off,
        "ee": f"EE pose by forward kinematics at {robot.ee_frame}",
        "robot": (f"{robot_ref}: the pendulum bench of the log's header ({log.mass_kg:g} kg at {log.length_m:g} m, "
                  f"{log.motor}); logs of different benches may share a folder, each run names its own robot"),
    }
    meta = RunMeta(
        robot=robot_ref, controller="servo", control_rate_hz=rate_hz, log_rate_hz=rate_hz, num_samples=len(ts),
        q_init=q[0].copy(), anchor_pos=pos[0].copy(), anchor_quat=quat[0].copy(),
        kp=np.array([log.kp]), kd=np.array([0.0]), impedance=ImpedanceLaw(),
        gravity_compensated=bool(robot.config.gravity_compensated), state_age_ms=0,
        excitation={"kind": log.trajectory, "source": "BAM test bench (better-actuator-models)"},
        summary={
            "bench": {"mass_kg": log.mass_kg, "length_m": log.length_m, "motor": log.motor, "vin_v": log.vin_v,
                      "kp": log.kp, "trajectory": log.trajectory},
            "gains": (f"kp {log.kp:g} is the {log.motor}'s firmware position gain in register units as logged "
                      "(robots/servos.py: kp_unit); kd 0: BAM's logs state no D gain and BAM's model has none (the "
                      "XL330's position mode is P only)"),
            "import": summary_import,
        },
    )
    run = Run(
        name=log.name, meta=meta, t=ts, q=q, dq=col["speed"], ee_pos=pos, ee_quat=quat, tau=nan, tau_J=nan.copy(),
        q_des=col["goal_position"], torque_enable=enable, supply_v=col["input_volts"], pwm=col["pwm"],
    )
    report = ImportReport(source=log.file, format="bam", rows_read=len(log.t), dropped={}, rate_hz=rate_hz,
                          resampled=True, pieces=1, gaps_s=[],
                          notes={"raw_rate_hz": raw_rate, "max_gap_s": float(gaps.max()), "torque_off_rows": off})
    return run, report


def _full_scale(motor: str) -> float:
    from isaaclab_sysid.robots.servos import SERVO_FAMILIES

    return float(SERVO_FAMILIES[motor].pwm_full_scale)


def check_rate(rate_hz: float) -> float:
    """``rate_hz`` as a grid the 1 ms tick holds (it divides 1000 Hz); a one-line error otherwise."""
    if isinstance(rate_hz, bool) or not isinstance(rate_hz, (int, float)) or not 0 < rate_hz <= TICK_HZ or \
            abs(TICK_HZ / rate_hz - round(TICK_HZ / rate_hz)) > 1e-9:
        raise RunFormatError("--rate_hz", None, "rate_hz", f"{rate_hz!r} Hz must divide {TICK_HZ} Hz (200 = BAM's 5 ms)")
    return float(rate_hz)


def bam_files(src: str | Path) -> list[Path]:
    """The logs of ``src``: a ``.json`` file, or every ``*.json`` in a folder (name order)."""
    p = Path(src)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise RunFormatError(str(p), None, "-", "no such file or folder")
    files = sorted(p.glob("*.json"))
    if not files:
        raise RunFormatError(str(p), None, "-", "no *.json BAM logs in this folder")
    return files


def import_bam(src: str | Path, out: str | Path | None = None, rate_hz: float = DEFAULT_RATE_HZ,
               log: Callable[[str], None] = print) -> tuple[list[Run], list[ImportReport]]:
    """Read BAM logs (a file or a folder of them) into validated runs; write them to ``out`` all or nothing.

    Every file is read and checked before anything is built or written. A bench that is not shipped under
    ``configs/robots/`` gets its robot config and URDF written beside the runs (``<out>/robots/``, or a temporary
    folder when ``out`` is None) and the sidecar names that config's path.

    Args:
        src: a BAM JSON log or a folder of them.
        out: a folder (CSV + sidecar per run) or an ``.h5`` file; None: only return the runs.
        rate_hz: the grid [Hz] (default 200: BAM's 5 ms); must divide 1000.
        log: receives one line per log and per file written.
    Raises:
        RunFormatError: a bad log (file, entry, field), a bad rate.
    """
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.robots.bench import BenchError, pendulum_robot_config

    rate = check_rate(rate_hz)
    logs = [read_bam_log(f) for f in bam_files(src)]
    names = [g.name for g in logs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise RunFormatError(str(src), None, "-", f"two logs named {dup!r}: run names must be unique")
    robots: dict[tuple[float, float, str], tuple[str, Any]] = {}
    robot_dir: Path | None = None
    runs: list[Run] = []
    reports: list[ImportReport] = []
    for g in logs:
        key = (g.mass_kg, g.length_m, g.motor)
        if key not in robots:
            try:
                ref = pendulum_robot_config(g.mass_kg, g.length_m, g.motor)
            except BenchError:  # not shipped (the header's numbers were checked): written beside the runs
                if robot_dir is None:
                    robot_dir = _robot_dir(out)
                ref = str(Path(pendulum_robot_config(g.mass_kg, g.length_m, g.motor, robot_dir)).resolve())
            robots[key] = (ref, load_robot(ref))
        ref, robot = robots[key]
        run, rep = bam_run(g, robot, ref, rate)
        runs.append(run)
        reports.append(rep)
        log(f"{g.file}: {len(g.t)} entries at {rep.notes['raw_rate_hz']:.0f} Hz (largest gap "
            f"{rep.notes['max_gap_s'] * 1e3:.1f} ms), resampled onto {rate:g} Hz as bam.process does: {run.n_samples} "
            f"rows; kp {g.kp:g}, {g.trajectory}, torque off in {rep.notes['torque_off_rows']} rows; robot {ref}")
    if out is not None:
        for p in write_imported(runs, out):
            log(f"wrote {p}")
    return runs, reports


def _robot_dir(out: str | Path | None) -> Path:
    if out is None:
        return Path(tempfile.mkdtemp(prefix="bam_benches_"))
    o = Path(out)
    return (o.parent / f"{o.stem}_robots") if o.suffix in (".h5", ".hdf5") else o / "robots"
