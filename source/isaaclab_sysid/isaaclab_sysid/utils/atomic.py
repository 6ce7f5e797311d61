"""Atomic file output: write to a temporary file in the same folder, then rename.

A reader never sees a half-written file, and an interrupted writer leaves the
previous version in place.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from isaaclab_sysid.utils.json_io import jsonable


def _new_temp(path: Path) -> Path:
    """Create an empty, unique temporary file beside ``path`` with the mode a plain ``open(path, "w")`` gives
    (0666 less the umask, applied by the kernel; ``mkstemp`` would make it 0600)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name beside {path}")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = _new_temp(path)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically; returns the path.

    The one JSON writer of the package, with one policy for non-finite numbers: ``obj`` goes through
    :func:`~isaaclab_sysid.utils.json_io.jsonable` first (numpy arrays and scalars, tuples and paths
    made plain), so NaN and +-inf are written as ``null`` (strict JSON has no NaN; a reader sees "no
    value"), never as the non-standard ``NaN``/``Infinity`` tokens and never refused.
    """
    atomic_write_text(path, json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n")
    return Path(path)
