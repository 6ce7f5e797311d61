"""Fit outputs, all written atomically: config.json and progress.csv (their names and the folder: fit/run_folder.py)."""

from __future__ import annotations

import csv
import io
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from isaaclab_sysid.fit.optimizer import GenerationRecord
from isaaclab_sysid.fit.run_folder import CONFIG_FILE, PROGRESS_FILE
from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.utils.atomic import atomic_write_json, atomic_write_text
from isaaclab_sysid.utils.json_io import jsonable

_PACKAGES = ("isaaclab_sysid", "numpy", "cma", "mujoco", "pin", "pandas", "tyro", "matplotlib", "isaaclab", "wandb")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_revision(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The checkout's commit and whether it has uncommitted changes (None outside git)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if rev.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def write_config(run_dir: str | Path, problem: Mapping[str, Any], job: Mapping[str, Any],
                 extra: Mapping[str, Any] | None = None) -> Path:
    """``config.json``: the problem (``ProblemRecord.to_dict``, read back by ``RunFolder.read_problem``), the job's
    options that are not the problem (``job``: the search and the outputs, for ``--resume``), package versions, git
    revision, Python, platform."""
    path = Path(run_dir) / CONFIG_FILE
    obj = {
        "problem": jsonable(dict(problem)),
        "job": jsonable(dict(job)),
        "packages": package_versions(),
        "git": git_revision(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": sys.argv,
        "created": datetime.now().isoformat(timespec="seconds"),
    }
    if extra:
        obj.update(jsonable(dict(extra)))
    atomic_write_json(path, obj)
    return path


def write_progress(run_dir: str | Path, history: Sequence[GenerationRecord], run_names: Sequence[str]) -> Path:
    """``progress.csv``: one row per generation (rewritten whole, atomically)."""
    path = Path(run_dir) / PROGRESS_FILE
    buf = io.StringIO()
    rows = [h.to_row(run_names) for h in history]
    fields = list(rows[0].keys()) if rows else ["iteration"]
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    atomic_write_text(path, buf.getvalue())
    return path

