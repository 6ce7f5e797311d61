"""Loader for the real UR10e logs and the authors' published parameters.

The logs (``shared/data/ur10e``) were recorded by the authors of
``shamilmamedov/dynamic_calibration``. Each CSV has no header and 31 columns:
time [s], q1..q6 [rad], qd1..qd6 [rad/s], motor currents i1..i6 [A], desired
currents [A], desired torques [N m]. Two early runs (2019-09-27) have only the
first 19 columns. One run ends in a truncated last line (no newline), which is
dropped and counted in :attr:`UR10eLog.dropped_last_row`.

The authors' model (their ``regressorWithMotorDynamics`` and
``frictionRegressor``) is, per joint j::

    k_j * i_j = (Y_rb(q, qd, qdd) pi_rgd)_j + Ia_j qdd_j + Fv_j qd_j + Fc_j sign(qd_j) + F0_j

with ``pi_rgd`` ordered per link as (Ixx, Ixy, Ixz, Iyy, Iyz, Izz, hx, hy, hz, m),
the inertia about the link-frame origin, ``h = m c``; the link frames are the
URDF joint frames, which are also Pinocchio's. :func:`published_parameters`
maps them onto this package's regressor columns.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.data.formats.text import decode_text
from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.utils.errors import UserError

N_JOINTS = 6
N_COLUMNS = 31
N_COLUMNS_SHORT = 19
#: (first column, end column, |bound|, what): plausibility limits of the UR10e signals.
_PLAUSIBLE = (
    (1, 7, 2 * np.pi + 0.2, "joint position [rad]"),
    (7, 13, 10.0, "joint velocity [rad/s]"),
    (13, 19, 100.0, "motor current [A]"),
)


class UR10eDataError(UserError, ValueError):
    """A UR10e log or parameter file is malformed (the message names file, row, column; a user error: exit 2)."""


def _text(path: Path) -> str:
    """The file's text (a byte-order mark, UTF-16: :mod:`.text`); an undecodable file as :class:`UR10eDataError`."""
    try:
        return decode_text(path.read_bytes(), str(path))
    except RunFormatError as exc:
        raise UR10eDataError(str(exc)) from None


def shared_dir() -> Path:
    """The shared data folder: ``$ISAACLAB_SYSID_SHARED`` or ``REPO_ROOT.parent / "shared"``."""
    env = os.environ.get("ISAACLAB_SYSID_SHARED")
    return Path(env) if env else REPO_ROOT.parent / "shared"


def ur10e_dir() -> Path:
    """The UR10e data folder inside :func:`shared_dir` (may not exist)."""
    return shared_dir() / "data" / "ur10e"


@dataclass(frozen=True)
class UR10eLog:
    """One UR10e log, arrays over T samples.

    Attributes:
        path: source file.
        t: (T,) time [s] (as logged; may be irregular).
        q: (T, 6) joint positions [rad].
        qd: (T, 6) joint velocities [rad/s] (as logged by the controller).
        current: (T, 6) measured motor currents [A].
        current_des: (T, 6) desired currents [A], or None in a 19-column file.
        tau_des: (T, 6) desired torques [N m], or None in a 19-column file.
        dropped_last_row: True if a truncated final line (no newline) was dropped.
        dropped_head_rows: corrupt rows dropped at the start (``max_corrupt_head_rows``).
    """

    path: Path
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    current: np.ndarray
    current_des: np.ndarray | None
    tau_des: np.ndarray | None
    dropped_last_row: bool = False
    dropped_head_rows: int = 0


def load_ur10e_csv(path: str | Path, max_corrupt_head_rows: int = 0) -> UR10eLog:
    """Read and validate one UR10e CSV (31 or 19 columns, no header).

    Args:
        path: the CSV.
        max_corrupt_head_rows: opt-in repair of a corrupt block at the start of the
            file (two of the real logs begin with ~20 rows of garbage packets): rows
            up to the last implausible one are dropped when that row is within the
            first ``max_corrupt_head_rows`` rows; the count is in
            :attr:`UR10eLog.dropped_head_rows`. 0 (default): any bad row is refused.

    Raises:
        UR10eDataError: naming the file, 1-based row and column of the first problem.
    """
    path = Path(path)
    if not path.is_file():
        raise UR10eDataError(f"{path}: no such file")
    text = _text(path)
    a, width, dropped = _fast_parse(text)
    if a is None:
        a, width, dropped = _careful_parse(path, text)
    head = _corrupt_head(a, max_corrupt_head_rows) if max_corrupt_head_rows > 0 else 0
    return _validated(path, a, width, dropped, head)


def _row_ok(a: np.ndarray) -> np.ndarray:
    """(T,) True where every signal of a row is finite and within its plausibility bound."""
    ok = np.all(np.isfinite(a), axis=1)
    for lo, hi, bound, _ in _PLAUSIBLE:
        ok &= np.all(np.abs(a[:, lo:hi]) <= bound, axis=1)
    return ok


def _corrupt_head(a: np.ndarray, limit: int) -> int:
    """Rows to drop at the start: through the last implausible row (or time step
    backwards) found within the first ``limit`` rows; 0 when the head is clean."""
    head = 0
    while True:
        seg = a[head:]
        bad = np.flatnonzero(~_row_ok(seg[:limit]))
        back = np.flatnonzero(np.diff(seg[: limit + 1, 0]) < 0)
        last = max(bad.max() if bad.size else -1, back.max() + 1 if back.size else -1)
        if last < 0 or head + last + 1 > limit:
            return head
        head += last + 1


def _fast_parse(text: str) -> tuple[np.ndarray | None, int, bool]:
    """numpy parse of a well-formed file (None if anything is irregular)."""
    dropped = False
    body = text
    if not text.endswith("\n"):
        last_nl = text.rfind("\n")
        first = text[: text.find("\n")] if "\n" in text else text
        if last_nl >= 0 and text[last_nl + 1 :].count(",") != first.count(","):
            body, dropped = text[: last_nl + 1], True
    try:
        a = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2)
    except ValueError:
        return None, 0, False
    if a.shape[1] not in (N_COLUMNS, N_COLUMNS_SHORT) or not np.all(np.isfinite(a)):
        return None, 0, False
    return a, a.shape[1], dropped


def _careful_parse(path: Path, text: str) -> tuple[np.ndarray, int, bool]:
    """Line-by-line parse that names the row and column of the first problem."""
    rows: list[list[float]] = []
    lines = text.splitlines()
    dropped = False
    width = None
    for r, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        cells = line.strip().split(",")
        if width is None:
            if len(cells) not in (N_COLUMNS, N_COLUMNS_SHORT):
                raise UR10eDataError(
                    f"{path}: row {r}: expected {N_COLUMNS} (or {N_COLUMNS_SHORT}) columns, found {len(cells)}"
                )
            width = len(cells)
        if len(cells) != width:
            if r == len(lines) and not text.endswith("\n"):
                dropped = True  # truncated final line
                break
            raise UR10eDataError(f"{path}: row {r}: expected {width} columns, found {len(cells)}")
        vals = []
        for c, cell in enumerate(cells, start=1):
            try:
                v = float(cell)
            except ValueError:
                raise UR10eDataError(f"{path}: row {r}, column {c}: not a number: {cell!r}") from None
            if not np.isfinite(v):
                raise UR10eDataError(f"{path}: row {r}, column {c}: non-finite value {cell!r}")
            vals.append(v)
        rows.append(vals)
    return np.asarray(rows), width or 0, dropped


def _validated(path: Path, a: np.ndarray, width: int, dropped: bool, head: int = 0) -> UR10eLog:
    a = a[head:]
    if a.ndim != 2 or a.shape[0] < 10:
        raise UR10eDataError(f"{path}: only {a.shape[0] if a.ndim == 2 else 0} rows; need at least 10")
    for lo, hi, bound, what in _PLAUSIBLE:
        block = np.abs(a[:, lo:hi]) > bound
        if block.any():
            r, c = np.argwhere(block)[0]
            raise UR10eDataError(
                f"{path}: row {head + r + 1}, column {lo + c + 1}: {what} {a[r, lo + c]:g} outside +-{bound:g}"
            )
    t = a[:, 0]
    bad = np.flatnonzero(np.diff(t) < 0)
    if bad.size:
        raise UR10eDataError(f"{path}: row {head + bad[0] + 2}, column 1: time goes backwards ({t[bad[0]]} -> {t[bad[0] + 1]})")
    return UR10eLog(
        path=path,
        t=t,
        q=a[:, 1:7],
        qd=a[:, 7:13],
        current=a[:, 13:19],
        current_des=a[:, 19:25] if width == N_COLUMNS else None,
        tau_des=a[:, 25:31] if width == N_COLUMNS else None,
        dropped_last_row=dropped,
        dropped_head_rows=head,
    )


@dataclass(frozen=True)
class PublishedParameters:
    """The authors' identified UR10e parameters, in their own units.

    Attributes:
        drive_gains: (6,) current-to-torque gains [N m / A].
        rotor_inertia: (6,) reflected rotor inertia (armature) [kg m^2].
        friction: (6, 3) per joint (Fv [N m s/rad], Fc [N m], F0 [N m]).
        pi_rgd: (6, 10) per link (Ixx, Ixy, Ixz, Iyy, Iyz, Izz, hx, hy, hz, m), origin-referred.
    """

    drive_gains: np.ndarray
    rotor_inertia: np.ndarray
    friction: np.ndarray
    pi_rgd: np.ndarray

    def pinocchio_pi(self) -> np.ndarray:
        """(6, 10) link parameters in Pinocchio's order (m, mcx, mcy, mcz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz)."""
        p = self.pi_rgd
        return np.stack([p[:, 9], p[:, 6], p[:, 7], p[:, 8], p[:, 0], p[:, 1], p[:, 3], p[:, 2], p[:, 4], p[:, 5]], axis=1)


def _parse_vector(path: Path, text: str, name: str, size: int) -> np.ndarray:
    m = re.search(rf"^{name}\s*=\s*\[([^\]]*)\]", text, flags=re.M)
    if m is None:
        raise UR10eDataError(f"{path}: no '{name} = [...]' line")
    line = text[: m.start()].count("\n") + 1
    try:
        v = np.array([float(x) for x in m.group(1).split()])
    except ValueError as exc:
        raise UR10eDataError(f"{path}: row {line}: '{name}' has a non-number: {exc}") from None
    if v.size != size:
        raise UR10eDataError(f"{path}: row {line}: '{name}' has {v.size} values, expected {size}")
    return v


def load_published_parameters(path: str | Path) -> PublishedParameters:
    """Parse ``UR10E_parameters.txt`` (drvGains, pi_drvs, pi_frcn, pi_rgd)."""
    path = Path(path)
    if not path.is_file():
        raise UR10eDataError(f"{path}: no such file")
    text = _text(path)
    return PublishedParameters(
        drive_gains=_parse_vector(path, text, "drvGains", 6),
        rotor_inertia=_parse_vector(path, text, "pi_drvs", 6),
        friction=_parse_vector(path, text, "pi_frcn", 18).reshape(6, 3),
        pi_rgd=_parse_vector(path, text, "pi_rgd", 60).reshape(6, 10),
    )


def list_runs(folder: str | Path) -> list[Path]:
    """Sorted CSV files in ``folder``."""
    return sorted(Path(folder).glob("*.csv"))


def is_fourier_unloaded(path: Path) -> bool:
    """True for the Fourier excitation runs without payload (``*harm*``, not ``*Load*``)."""
    name = Path(path).name
    return "harm" in name and "load" not in name.lower()
