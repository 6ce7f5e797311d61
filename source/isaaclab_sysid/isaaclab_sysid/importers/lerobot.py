"""LeRobot datasets: ``meta/info.json`` (``fps``, feature names) and ``data/chunk-*/episode_*.parquet``; one run per episode.

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
    files = sorted(root.glob("data/chunk-*/episode_*.parquet"))
    if not files:
        raise RunFormatError(str(root / "data"), None, "-", "no data/chunk-*/episode_*.parquet files")
    needed = set(REQUIRED_COLUMNS) | {v[0] for v in sel.values() if not isinstance(v, str)}
    out: list[Streams] = []
    for f in files:
        try:
            table = pq.read_table(f)
        except Exception as exc:  # noqa: BLE001 - any pyarrow failure: an unreadable file
            raise RunFormatError(str(f), None, "-", f"not a readable parquet file ({type(exc).__name__}: {exc})") from None
        cols = set(table.column_names)
        for c in sorted(needed):
            if c not in cols:
                raise RunFormatError(str(f), None, c, f"missing column (feature {c} is needed; the file has "
                                     f"{', '.join(table.column_names)})")
        ep = np.asarray(table.column("episode_index").to_numpy(zero_copy_only=False))
        frame = (np.asarray(table.column("frame_index").to_numpy(zero_copy_only=False)) if "frame_index" in cols
                 else np.arange(table.num_rows))
        for e in np.unique(ep):
            rows = np.flatnonzero(ep == e)
            label = f"episode {int(e)} frame"
            arr = {}
            for sig, v in sel.items():
                if isinstance(v, str):
                    continue
                feature, idx, _ = v
                raw = table.column(feature).to_pylist()
                block = []
                for r in rows:
                    val = raw[r]
                    if val is None or len(val) <= max(idx):
                        raise RunFormatError(str(f), int(frame[r]), feature, f"{'missing' if val is None else len(val)} "
                                             f"value(s); components {max(idx) + 1} needed", row_label=label)
                    block.append([float(val[k]) for k in idx])
                arr[sig] = np.asarray(block, dtype=float)
                if sig in ("q", "targets") and convert is not None:
                    arr[sig] = convert(arr[sig])
            t = np.asarray(table.column("timestamp").to_numpy(zero_copy_only=False), dtype=float)[rows]
            notes = {"episode_index": int(e), "fps": float(fps)}
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
                name=f"{root.name}_episode_{int(e):06d}", file=str(f), row_label=label, rows=frame[rows], t=t,
                q=arr["q"], dq=arr["dq"], tau=arr["tau"], tau_J=None if sel["tau"] != "none" else arr["tau"].copy(),
                targets=arr["targets"], names=names, notes=notes,
            ))
    return out, float(fps)


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
