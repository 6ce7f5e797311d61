"""Atomic file output: write to a temporary file in the same folder, then rename.

A reader never sees a half-written file, and an interrupted writer leaves the
previous version in place.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _file_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file: 0666 less the process umask (read by creating a
    probe file, so the umask is never changed under other threads)."""
    fd, probe = tempfile.mkstemp(prefix=".umask.", suffix=".tmp")
    os.close(fd)
    try:
        os.unlink(probe)
        with open(probe, "w"):
            pass
        return os.stat(probe).st_mode & 0o777
    finally:
        if os.path.exists(probe):
            os.unlink(probe)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_path, _file_mode())  # mkstemp makes it 0600; an output file gets what open() would give
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (NaN/inf refused)."""
    atomic_write_text(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")
