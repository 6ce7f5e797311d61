"""LeRobot datasets: ``meta/info.json`` (``fps``, feature names, ``codebase_version``) and the data; one run per episode.

Two layouts, told apart by ``info.json``'s ``codebase_version``:

* **v2.x**: one parquet file per episode, ``data/chunk-*/episode_*.parquet``;
* **v3.0** (what LeRobot writes today): many episodes per file, ``data/chunk-*/file-*.parquet`` with an
  ``episode_index`` column, found through the episode table ``meta/episodes/chunk-*/file-*.parquet`` (one row per
  episode: ``episode_index``, ``length``, ``data/chunk_index``, ``data/file_index``, ``dataset_from_index``,
  ``dataset_to_index``, ...). Episodes come from that table, in episode order; a table that disagrees with the data
  (an episode's rows not where it says, a length mismatch, an episode in one and not the other) is refused in one
  line naming the file and the episode.

Both are read with the same mapping file and give the same runs (names ``<dataset>_episode_<i>``).

The mapping file's ``features`` section maps the robot's joints onto feature components by name
(docs/data_format.md); each entry is ``{feature: <feature key>, names: [...]}`` (names in the
robot's joint order, looked up in ``info.json``'s ``names`` of that feature)::

    features:
      q: {feature: observation.state, names: [j1, j2, ...]}
      dq: {feature: observation.velocity, names: [...]}   # or: dq: differentiate (central differences)
      tau: {feature: observation.effort, names: [...]}    # or: tau: none (not in the dataset: NaN)
      targets: {feature: action, names: [...]}            # joint_pd targets (task_impedance: x, y, z, qx, qy, qz, qw)

``names`` defaults to the mapping's ``joints`` (or the robot's joint names); a name the feature lacks is
looked up with LeRobot's ``.pos`` suffix too (``shoulder_pan`` -> ``shoulder_pan.pos``). Stamps are the
``timestamp`` column [s]; the grid is ``fps`` unless the mapping sets ``rate_hz``. Errors name the
parquet file, the episode and the frame index (or the column).

Servo arms (SO-100 / SO-101, docs/servo_arms.md) add three keys to ``features``::

    units: range_m100_100            # or one per joint: [range_m100_100, ..., range_0_100]
    calibration: so101_follower.json # LeRobot's calibration file (needed by the range units)
    state_age_ms: 5                  # the rows' state age 0..N ms (the bus read before each frame)

``units`` (default ``rad``) applies to ``q`` and ``targets`` (:mod:`.lerobot_units`: ``rad``, ``deg``,
``servo_deg`` = LeRobot's degrees, ``range_m100_100``, ``range_0_100``); every joint is converted to
radians about the middle of its calibrated range.

The import takes that middle as the robot URDF's joint zero: so for the SO-101 URDF (``so101_new_calib``, named
for LeRobot's calibration; not verified on a real arm), not for the SO-100 URDF, whose zeros are its CAD pose. A
robot in :data:`LEROBOT_ZERO_UNKNOWN` (``so100``) is refused in LeRobot's units: the offsets and directions
between the two conventions cannot be told from its URDF (docs/servo_arms.md section 1). Such a dataset is
imported in ``rad`` or ``deg`` once the user has converted it to the URDF's angles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.importers.common import ImportSpec, Streams, require
from isaaclab_sysid.importers.lerobot_units import NEEDS_CALIBRATION, UNITS, read_calibration, to_radians

REQUIRED_COLUMNS = ("timestamp", "episode_index")

#: LeRobot's own angle units: values about each joint's calibrated range middle (:mod:`.lerobot_units`).
LEROBOT_UNITS = ("servo_deg", "range_m100_100", "range_0_100")

#: Robot configs whose URDF zero is not LeRobot's (the calibrated range middle) and for which no conversion is
#: known: LeRobot's units are refused for them, with the reason (docs/servo_arms.md section 1).
LEROBOT_ZERO_UNKNOWN = {
    "so100": "LeRobot's SO-100 angles are about each calibrated range's middle while the so100 URDF's zeros are its "
             "CAD pose, and the offsets and directions between the two are not known without a real arm "
             "(docs/servo_arms.md section 1): convert the dataset to the URDF's angles and import it with units rad "
             "or deg",
}


def _feature_names(info: dict, key: str, file: str) -> list[str]:
    feats = info.get("features", {})
    if key not in feats:
        raise RunFormatError(file, None, f"features.{key}", f"no such feature (the dataset has {', '.join(feats)})")
    names = feats[key].get("names")
    if isinstance(names, dict):  # LeRobot v2: {"motors": [...]} / {"axes": [...]}
        names = next(iter(names.values()), None)
    if not isinstance(names, list):
        raise RunFormatError(file, None, f"features.{key}.names", "missing: the component names are needed to "
                             "match joints by name")
    return [str(n) for n in names]


def _select(spec: ImportSpec, info: dict, info_file: str, sig: str, default_feature: str | None, n: int,
            default_names: list[str]) -> tuple[str, list[int], list[str]] | str:
    entry = spec.features.get(sig)
    if isinstance(entry, str):
        return entry  # "differentiate" / "none"
    if entry is None:
        if default_feature is None:
            raise RunFormatError(spec.file, None, f"features.{sig}", "missing: {feature: ..., names: [...]} "
                                 + ("or differentiate" if sig == "dq" else "or none" if sig == "tau" else ""))
        entry = {}
    if not isinstance(entry, dict):
        raise RunFormatError(spec.file, None, f"features.{sig}", f"expected {{feature, names}}, got {entry!r}")
    feature = str(entry.get("feature", default_feature))
    names = entry.get("names", default_names)
    if not isinstance(names, list) or len(names) != n:
        raise RunFormatError(spec.file, None, f"features.{sig}.names", f"expected {n} names, got {names!r}")
    have = _feature_names(info, feature, info_file)
    names = [x if x in have or f"{x}.pos" not in have else f"{x}.pos" for x in names]  # LeRobot: <motor>.pos
    missing = [x for x in names if x not in have]
    if missing:
        raise RunFormatError(info_file, None, f"features.{feature}.names",
                             f"no component(s) {', '.join(map(str, missing))} (it has {', '.join(have)})")
    return feature, [have.index(x) for x in names], [f"{feature}[{x}]" for x in names]


def read_lerobot(path: str | Path, spec: ImportSpec, n_dof: int) -> tuple[list[Streams], float]:
    """Read every episode of a LeRobot dataset folder; returns the streams and the dataset's ``fps``.

    Raises:
        RunFormatError: a missing ``info.json`` key or feature, a parquet file without a needed column,
            an unreadable parquet file, a non-finite value (file, episode and frame index).
        ImportDependencyError: ``pyarrow`` is missing.
    """
    require("pyarrow", "lerobot")
    import pyarrow.parquet as pq

    root = Path(path)
    info_path = root / "meta" / "info.json"
    info_file = str(info_path)
    if not info_path.is_file():
        raise RunFormatError(info_file, None, "-", "not a LeRobot dataset (no meta/info.json)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(info_file, exc.lineno, f"char {exc.colno}", f"invalid JSON: {exc.msg}") from None
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0:
        raise RunFormatError(info_file, None, "fps", f"expected a positive number, got {fps!r}")
    unknown = set(spec.features) - {"q", "dq", "tau", "targets", "units", "calibration", "state_age_ms"}
    if unknown:
        raise RunFormatError(spec.file, None, f"features.{sorted(unknown)[0]}",
                             "unknown key (q, dq, tau, targets, units, calibration, state_age_ms)")
    joints = list(spec.joints) if spec.joints else None
    task = spec.controller == "task_impedance"
    n_t = 7 if task else n_dof
    sel = {}
    for sig, feat, n in (("q", "observation.state", n_dof), ("dq", None, n_dof), ("tau", None, n_dof),
                         ("targets", "action", n_t)):
        default_names = joints if (joints and n == n_dof and not (sig == "targets" and task)) else None
        if default_names is None:
            from isaaclab_sysid.robots import load_robot

            default_names = list(load_robot(spec.robot).joint_names) if n == n_dof else \
                ["x", "y", "z", "qx", "qy", "qz", "qw"]
        sel[sig] = _select(spec, info, info_file, sig, feat, n, default_names)
    if sel["dq"] not in ("differentiate",) and isinstance(sel["dq"], str):
        raise RunFormatError(spec.file, None, "features.dq", f"expected {{feature, names}} or differentiate, got {sel['dq']!r}")
    if isinstance(sel["tau"], str) and sel["tau"] != "none":
        raise RunFormatError(spec.file, None, "features.tau", f"expected {{feature, names}} or none, got {sel['tau']!r}")
    # the calibration file is keyed by the dataset's motor names (the q components, without LeRobot's ".pos")
    motors = [lab.split("[", 1)[1][:-1].removesuffix(".pos") for lab in sel["q"][2]]
    convert = _converters(spec, n_dof, task, motors)
    needed = set(REQUIRED_COLUMNS) | {v[0] for v in sel.values() if not isinstance(v, str)}
    version = str(info.get("codebase_version", "v2.1"))
    pieces = _v3_episodes(root, info, info_file, needed, pq) if version.startswith("v3") else _v2_episodes(root, needed, pq)
    out: list[Streams] = []
    for f, data, rows, e in pieces:
        label = f"episode {int(e)} frame"
        frame = data["frame_index"][rows] if "frame_index" in data else rows
        arr = {}
        for sig, v in sel.items():
            if isinstance(v, str):
                continue
            feature, idx, _ = v
            raw = data[feature]
            block = []
            for r, fr in zip(rows, frame):
                val = raw[r]
                if val is None or len(val) <= max(idx):
                    raise RunFormatError(str(f), int(fr), feature, f"{'missing' if val is None else len(val)} "
                                         f"value(s); components {max(idx) + 1} needed", row_label=label)
                block.append([float(val[k]) for k in idx])
            arr[sig] = np.asarray(block, dtype=float).reshape(len(rows), len(idx))
            if sig in ("q", "targets") and convert is not None:
                arr[sig] = convert(arr[sig])
        t = np.asarray(data["timestamp"], dtype=float)[rows]
        notes = {"episode_index": int(e), "fps": float(fps), "codebase_version": version}
        if convert is not None:
            notes["units"] = f"q and targets converted to rad from {spec.features.get('units')} (lerobot_units.py)"
        if sel["dq"] == "differentiate":
            arr["dq"] = np.gradient(arr["q"], t, axis=0) if len(t) > 1 else np.zeros_like(arr["q"])
            notes["dq"] = "not in the dataset: central differences of q"
        if sel["tau"] == "none":
            arr["tau"] = np.full_like(arr["q"], np.nan)
            notes["tau"] = "not in the dataset: NaN (unusable for rigid-body least squares)"
        names = {"time": ["timestamp"]}
        names.update({k: v[2] for k, v in sel.items() if not isinstance(v, str)})
        out.append(Streams(
            name=f"{root.name}_episode_{int(e):06d}", file=str(f), row_label=label, rows=np.asarray(frame), t=t,
            q=arr["q"], dq=arr["dq"], tau=arr["tau"], tau_J=None if sel["tau"] != "none" else arr["tau"].copy(),
            targets=arr["targets"], names=names, notes=notes,
        ))
    return out, float(fps)


#: The columns of a v3.0 episode table (``meta/episodes/chunk-*/file-*.parquet``) the import reads.
V3_EPISODE_COLUMNS = ("episode_index", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                      "dataset_to_index")
#: LeRobot v3.0's data file template (``info.json``'s ``data_path`` when it has none).
V3_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
#: One episode to read: (data file, its columns, the episode's row positions in that file, episode index).
Piece = tuple[Path, dict, np.ndarray, int]


def _read_parquet(f: Path, pq) -> Any:
    try:
        return pq.read_table(f)
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure: an unreadable file
        raise RunFormatError(str(f), None, "-", f"not a readable parquet file ({type(exc).__name__}: {exc})") from None


def _read_data_file(f: Path, needed: set[str], pq) -> dict:
    """A data file's columns: the numeric ones (episode_index, frame_index, index, timestamp) as arrays, the
    features as lists (a frame's vector each); a missing needed column is refused naming the file."""
    table = _read_parquet(f, pq)
    cols = set(table.column_names)
    for c in sorted(needed):
        if c not in cols:
            raise RunFormatError(str(f), None, c, f"missing column (feature {c} is needed; the file has "
                                 f"{', '.join(table.column_names)})")
    out: dict = {}
    for c in cols & (needed | {"frame_index", "index"}):
        col = table.column(c)
        if c in ("episode_index", "frame_index", "index", "timestamp"):
            out[c] = np.asarray(col.to_numpy(zero_copy_only=False))
        else:
            out[c] = col.to_pylist()
    return out


def _v2_episodes(root: Path, needed: set[str], pq) -> list[Piece]:
    """Codebase v2.x: one parquet file per episode (``data/chunk-*/episode_*.parquet``), files in name order."""
    files = sorted(root.glob("data/chunk-*/episode_*.parquet"))
    if not files:
        v3 = sorted(root.glob("data/chunk-*/file-*.parquet"))
        hint = (f" (it has {v3[0].relative_to(root)}: a v3.0 layout, but meta/info.json's codebase_version does not "
                "say v3.0)") if v3 else ""
        raise RunFormatError(str(root / "data"), None, "-", f"no data/chunk-*/episode_*.parquet files{hint}")
    out: list[Piece] = []
    for f in files:
        data = _read_data_file(f, needed, pq)
        ep = data["episode_index"]
        out += [(f, data, np.flatnonzero(ep == e), int(e)) for e in np.unique(ep)]
    return out


def _v3_episodes(root: Path, info: dict, info_file: str, needed: set[str], pq) -> list[Piece]:
    """Codebase v3.0: many episodes per data file, located by the episode table (``meta/episodes/``).

    Each episode's rows are where the table says: in the data file of its ``data/chunk_index`` and ``data/file_index``,
    at the dataset-wide row indices ``dataset_from_index`` .. ``dataset_to_index - 1`` (the ``index`` column, or the
    row's position in the data files concatenated in chunk and file order when there is none), ``length`` of them.

    Raises:
        RunFormatError: no episode table, a missing column, an episode listed twice, a data file the table names
            that is not there, or the table disagreeing with the data (an episode's rows not where the table says,
            a length mismatch, an episode in one and not the other): one line naming the file and the episode.
    """
    ep_files = sorted(root.glob("meta/episodes/chunk-*/file-*.parquet"))
    if not ep_files:
        raise RunFormatError(str(root / "meta" / "episodes"), None, "-", "no meta/episodes/chunk-*/file-*.parquet: a "
                             "v3.0 dataset's episode table is needed to find its episodes")
    table: dict[int, tuple[Path, dict[str, int]]] = {}
    for ef in ep_files:
        et = _read_parquet(ef, pq)
        for c in V3_EPISODE_COLUMNS:
            if c not in et.column_names:
                raise RunFormatError(str(ef), None, c, f"missing column of the episode table (it has "
                                     f"{', '.join(et.column_names)})")
        cols = {c: et.column(c).to_pylist() for c in V3_EPISODE_COLUMNS}
        for i in range(et.num_rows):
            rec = {c: cols[c][i] for c in V3_EPISODE_COLUMNS}
            e = rec["episode_index"]
            for c, v in rec.items():
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise RunFormatError(str(ef), i, c, f"expected an integer >= 0, got {v!r}", row_label="row")
            if e in table:
                other = "" if table[e][0] == ef else f" (also in {table[e][0]})"
                raise RunFormatError(str(ef), e, "episode_index", f"listed twice in the episode table{other}",
                                     row_label="episode")
            if rec["dataset_to_index"] - rec["dataset_from_index"] != rec["length"]:
                raise RunFormatError(str(ef), e, "length", f"{rec['length']} frames, but dataset_from_index "
                                     f"{rec['dataset_from_index']} .. dataset_to_index {rec['dataset_to_index']} spans "
                                     f"{rec['dataset_to_index'] - rec['dataset_from_index']}", row_label="episode")
            table[e] = (ef, rec)
    template = str(info.get("data_path") or V3_DATA_PATH)

    def data_path(rec: dict[str, int]) -> Path:
        try:
            return root / template.format(chunk_index=rec["data/chunk_index"], file_index=rec["data/file_index"])
        except (KeyError, IndexError, ValueError) as exc:
            raise RunFormatError(info_file, None, "data_path", f"{template!r} is not a v3.0 data path template "
                                 f"(chunk_index, file_index): {exc}") from None

    placed = {e: data_path(rec) for e, (_, rec) in table.items()}
    files = sorted(set(root.glob("data/chunk-*/file-*.parquet")) | set(placed.values()))
    for e, f in placed.items():
        if not f.is_file():
            raise RunFormatError(str(table[e][0]), e, "data/file_index", f"the table places it in {f.relative_to(root)}, "
                                 "which is not there", row_label="episode")
    datas: dict[Path, dict] = {}
    offset = 0
    for f in files:  # chunk, then file order: the dataset-wide row index of a file without an 'index' column
        data = _read_data_file(f, needed, pq)
        n = len(data["episode_index"])
        if "index" not in data:
            data["index"] = np.arange(offset, offset + n)
        offset += n
        datas[f] = data
        for e in np.unique(data["episode_index"]):
            e = int(e)
            if e not in table:
                raise RunFormatError(str(f), e, "episode_index", "in the data but not in the episode table "
                                     "(meta/episodes/)", row_label="episode")
            if placed[e] != f:
                raise RunFormatError(str(f), e, "episode_index", f"has rows in this file, but the episode table "
                                     f"places it in {placed[e].relative_to(root)}", row_label="episode")
    out: list[Piece] = []
    for e in sorted(table):
        ef, rec = table[e]
        f = placed[e]
        data = datas[f]
        rows = np.flatnonzero(data["episode_index"] == e)
        if len(rows) != rec["length"]:
            raise RunFormatError(str(f), e, "episode_index", f"{len(rows)} rows in the data, but the episode table "
                                 f"({ef.relative_to(root)}) says length {rec['length']}", row_label="episode")
        idx = np.asarray(data["index"])[rows]
        want = np.arange(rec["dataset_from_index"], rec["dataset_to_index"])
        if not np.array_equal(idx, want):
            k = int(np.flatnonzero(idx != want)[0])
            raise RunFormatError(str(f), e, "index", f"rows at dataset indices {int(idx[0])} .. {int(idx[-1])}, but the "
                                 f"episode table ({ef.relative_to(root)}) places it at {rec['dataset_from_index']} .. "
                                 f"{rec['dataset_to_index'] - 1} (first difference: frame {k}, index {int(idx[k])} "
                                 f"where {int(want[k])} is expected)", row_label="episode")
        out.append((f, data, rows, e))
    return out


def _converters(spec: ImportSpec, n_dof: int, task: bool, motors: list[str]):
    """The (T, N) -> (T, N) [rad] conversion of ``q`` and ``targets`` the mapping's ``units`` asks for (None: rad).

    Raises:
        RunFormatError: an unknown unit, a list of the wrong length, a range unit without ``calibration``,
            a state age that is not a whole number of ms, LeRobot's units for a robot in
            :data:`LEROBOT_ZERO_UNKNOWN` (the mapping file and key named).
    """
    age = spec.features.get("state_age_ms")
    if age is not None and (isinstance(age, bool) or not isinstance(age, int) or age < 0):
        raise RunFormatError(spec.file, None, "features.state_age_ms", f"expected an integer >= 0 [ms], got {age!r}")
    units = spec.features.get("units", "rad")
    if isinstance(units, str):
        units = [units] * n_dof
    if not isinstance(units, list) or len(units) != n_dof or any(u not in UNITS for u in units):
        raise RunFormatError(spec.file, None, "features.units",
                             f"expected one of {', '.join(UNITS)} or a list of {n_dof} of them, got {spec.features.get('units')!r}")
    if all(u == "rad" for u in units):
        return None
    if task:
        raise RunFormatError(spec.file, None, "features.units", "units apply to joint_pd (servo) datasets only")
    if any(u in LEROBOT_UNITS for u in units):
        from isaaclab_sysid.robots.config import load_robot_config

        name = load_robot_config(spec.robot).name
        if name in LEROBOT_ZERO_UNKNOWN:
            used = ", ".join(sorted(set(units) & set(LEROBOT_UNITS)))
            raise RunFormatError(spec.file, None, "features.units",
                                 f"{used} refused for robot {name}: {LEROBOT_ZERO_UNKNOWN[name]}")
    cal = None
    joints = motors
    if any(u in NEEDS_CALIBRATION for u in units):
        path = spec.features.get("calibration")
        if not isinstance(path, str):
            raise RunFormatError(spec.file, None, "features.calibration",
                                 f"missing: units {sorted(set(units) & set(NEEDS_CALIBRATION))} need LeRobot's calibration file")
        p = Path(path) if Path(path).is_absolute() else Path(spec.file).parent / path
        cal = read_calibration(p, joints)

    def convert(a: np.ndarray) -> np.ndarray:
        return np.stack([to_radians(a[:, j], units[j], None if cal is None else cal[joints[j]])
                         for j in range(n_dof)], axis=1)

    return convert
