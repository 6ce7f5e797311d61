"""Contact runs: a run in the run format plus the contact force, read and written as files.

A contact run is three files beside each other:

* ``<stem>.csv`` + ``<stem>.json``: the run (``docs/data_format.md``; read by ``data.read_run``);
* ``<stem>_contact.csv``: one row per run row, columns ``t_s, fx, fy, fz`` (the force the
  surface exerts on the tool [N]) or ``t_s, fx, fy, fz, tx, ty, tz`` (an EE wrench; torques
  [N m] are read and not used); ``t_s`` must equal the run's time stamps;
* ``<stem>_contact.json``: what the test was, stated by the user::

    {"schema": "isaaclab_sysid.contact_run/1", "test": "press" | "impact",
     "normal": [0, 0, 1],            # surface normal, base frame, pointing out of the surface
     "frame": "base" | "ee",        # the frame the force columns are in (ee: rotated by the run's EE pose)
     "tip_offset": [0, 0, 0.12]}    # the tool's contact point in the EE frame [m]

Every problem is one line naming the file, the row and the column (or the key).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from isaaclab_sysid.data import Run, RunFormatError, read_run, write_run
from isaaclab_sysid.data.formats.text import read_text, to_comma_csv
from isaaclab_sysid.utils.atomic import atomic_path, atomic_write_json
from isaaclab_sysid.utils.errors import plain

CONTACT_SCHEMA = "isaaclab_sysid.contact_run/1"
TESTS = ("press", "impact")
FORCE_COLUMNS = ("fx", "fy", "fz")
WRENCH_COLUMNS = ("fx", "fy", "fz", "tx", "ty", "tz")


@dataclass(frozen=True)
class ContactTest:
    """The contact test's metadata.

    Attributes:
        test: ``press`` (slow, quasi-static) or ``impact`` (an approach at speed).
        normal: (3,) unit surface normal in the base frame (out of the surface).
        frame: ``base`` or ``ee``: the frame of the force columns.
        tip_offset: (3,) the tool's contact point in the EE frame [m].
    """

    test: str
    normal: np.ndarray
    frame: str = "base"
    tip_offset: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def to_json(self) -> dict:
        return {"schema": CONTACT_SCHEMA, "test": self.test, "normal": np.asarray(self.normal).tolist(),
                "frame": self.frame, "tip_offset": np.asarray(self.tip_offset).tolist()}


@dataclass
class ContactRun:
    """A run with its contact force.

    Attributes:
        run: the validated run; test: its metadata.
        force: (T, 3) force on the tool in the base frame [N] (rotated when ``frame`` is ``ee``).
        source: the contact CSV, if read from files.
    """

    run: Run
    test: ContactTest
    force: np.ndarray
    source: Path | None = None

    @property
    def name(self) -> str:
        """The run's file (or name), for messages."""
        return str(self.run.source or self.run.name)


def contact_paths(run_csv: str | Path) -> tuple[Path, Path]:
    """(contact CSV, contact sidecar) beside a run CSV."""
    p = Path(run_csv)
    return p.with_name(p.stem + "_contact.csv"), p.with_name(p.stem + "_contact.json")


def _vec3(raw: dict, key: str, file: str) -> np.ndarray:
    try:
        v = np.asarray(raw[key], dtype=float)
    except KeyError:
        raise RunFormatError(file, None, key, "missing (state it: the contact test's geometry is not in the log)") from None
    except (TypeError, ValueError):
        raise RunFormatError(file, None, key, f"must be 3 numbers, got {raw[key]!r}") from None
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise RunFormatError(file, None, key, f"must be 3 finite numbers, got {raw[key]!r}")
    return v


def parse_contact_sidecar(raw: object, file: str) -> ContactTest:
    """A :class:`ContactTest` from the decoded ``_contact.json`` (one-line errors naming the key)."""
    if not isinstance(raw, dict):
        raise RunFormatError(file, None, "-", "expected a JSON object")
    if raw.get("schema") != CONTACT_SCHEMA:
        raise RunFormatError(file, None, "schema", f"expected {CONTACT_SCHEMA!r}, got {raw.get('schema')!r}")
    test = raw.get("test")
    if test not in TESTS:
        raise RunFormatError(file, None, "test", f"must be one of {', '.join(TESTS)}, got {test!r}")
    frame = raw.get("frame", "base")
    if frame not in ("base", "ee"):
        raise RunFormatError(file, None, "frame", f"must be 'base' or 'ee', got {frame!r}")
    normal = _vec3(raw, "normal", file)
    norm = float(np.linalg.norm(normal))
    if abs(norm - 1.0) > 1e-3:
        raise RunFormatError(file, None, "normal", f"must be a unit vector (norm {norm:.4g})")
    return ContactTest(str(test), normal / norm, str(frame), _vec3(raw, "tip_offset", file))


def _read_force(path: Path, run: Run, frame: str) -> np.ndarray:
    file = str(path)
    if not path.is_file():
        raise RunFormatError(file, None, "-", "contact CSV not found (expected beside the run: <stem>_contact.csv)")
    text, _ = to_comma_csv(read_text(path, "contact CSV"), file)  # a byte-order mark, UTF-16, ';' or tab
    try:
        table = pd.read_csv(io.StringIO(text), skipinitialspace=True)
    except (ValueError, pd.errors.ParserError) as exc:
        raise RunFormatError(file, None, "-", f"unparseable CSV: {exc}") from None
    cols = [c.strip() for c in table.columns]
    want = ("t_s", *FORCE_COLUMNS) if len(cols) == 4 else ("t_s", *WRENCH_COLUMNS)
    if tuple(cols) != want:
        raise RunFormatError(file, 1, "-", f"columns must be {', '.join(('t_s', *FORCE_COLUMNS))} "
                                           f"(or {', '.join(('t_s', *WRENCH_COLUMNS))}); got {', '.join(cols)}")
    if len(table) != run.n_samples:
        raise RunFormatError(file, len(table) + 1, "t_s", f"{len(table)} rows, the run has {run.n_samples}")
    for c in want:
        vals = pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(vals))
        if bad.size:
            raise RunFormatError(file, int(bad[0]) + 2, c, f"not a finite number: {plain(table[c].iloc[bad[0]])}")
        table[c] = vals
    t = table["t_s"].to_numpy(dtype=float)
    off = np.abs(t - run.t) > 1e-9 * np.maximum(1.0, np.abs(run.t))
    if np.any(off):
        k = int(np.flatnonzero(off)[0])
        raise RunFormatError(file, k + 2, "t_s", f"{float(t[k])!r} differs from the run's time stamp {float(run.t[k])!r}")
    force = table[list(FORCE_COLUMNS)].to_numpy(dtype=float)
    if frame == "ee":
        from scipy.spatial.transform import Rotation

        force = Rotation.from_quat(run.ee_quat).apply(force)
    return force


def read_contact_run(run_csv: str | Path) -> ContactRun:
    """Read and validate a contact run (the run, ``<stem>_contact.csv`` and ``<stem>_contact.json``).

    Raises:
        RunFormatError: one line naming the file, row and column (or key) of the first problem.
    """
    run = read_run(run_csv)
    csv, side = contact_paths(run_csv)
    if not side.is_file():
        raise RunFormatError(str(side), None, "-", "contact sidecar not found (expected <stem>_contact.json)")
    try:
        raw = json.loads(read_text(side, "contact sidecar"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(str(side), None, "-", f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from None
    test = parse_contact_sidecar(raw, str(side))
    return ContactRun(run, test, _read_force(csv, run, test.frame), csv)


def write_contact_run(cr: ContactRun, run_csv: str | Path) -> Path:
    """Write the run, its contact force (base frame) and the contact sidecar atomically; returns the run CSV."""
    run_csv = Path(run_csv)
    write_run(cr.run, run_csv)
    csv, side = contact_paths(run_csv)
    data = np.column_stack([cr.run.t, cr.force])
    with atomic_path(csv) as tmp:
        np.savetxt(tmp, data, fmt="%.17g", delimiter=",", header=",".join(("t_s", *FORCE_COLUMNS)), comments="")
    atomic_write_json(side, {**cr.test.to_json(), "frame": "base"})
    return run_csv
