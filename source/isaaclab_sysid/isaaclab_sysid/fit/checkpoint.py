"""Atomic checkpoints that resume a fit exactly.

``checkpoint_<iter>.json`` holds the best parameters so far (the
:class:`~isaaclab_sysid.objective.result.FitResult` keys, readable by ``--eval_params``)
and ``resume_state``: the pickled :class:`~isaaclab_sysid.fit.state.FitState`
(the ``CMAEvolutionStrategy`` with its RNG, the history, the best-so-far and the
refinement's state), base64-encoded. Each file is written atomically, so a fit
killed at any moment leaves only complete checkpoints; resuming from the newest
one repeats the generations after it exactly as the uninterrupted fit ran them.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Callable
from pathlib import Path

from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.fit.state import FitState
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.json_io import jsonable

FORMAT_VERSION = 2


def checkpoint_path(log_dir: str | Path, iteration: int) -> Path:
    return RunFolder(Path(log_dir)).checkpoint(iteration)


def save_checkpoint(state: FitState, result: FitResult, log_dir: str | Path) -> Path:
    """Write ``checkpoint_<iter>.json`` (``iter`` = CMA-ES generations so far) atomically; returns its path."""
    it = state.cmaes.iteration
    path = checkpoint_path(log_dir, it)
    payload = {
        "format": "isaaclab_sysid.checkpoint",
        "format_version": FORMAT_VERSION,
        "iteration": it,
        **jsonable(result.to_json()),
        "resume_state": base64.b64encode(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii"),
    }
    atomic_write_json(path, payload)
    return path


def list_checkpoints(log_dir: str | Path) -> list[tuple[int, Path]]:
    """All ``checkpoint_<iter>.json`` in ``log_dir``, sorted by iteration."""
    return RunFolder(Path(log_dir)).checkpoints()


def load_state(path: str | Path) -> FitState:
    """The :class:`FitState` stored in a checkpoint."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    if "resume_state" not in d:
        raise ValueError(f"{path}: not a resumable checkpoint (no resume_state)")
    if d.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: checkpoint format {d.get('format_version')} (this version resumes format {FORMAT_VERSION})")
    state = pickle.loads(base64.b64decode(d["resume_state"]))
    if not isinstance(state, FitState):
        raise ValueError(f"{path}: resume_state is not a FitState")
    return state


def latest_state(log_dir: str | Path, log: Callable[[str], None] | None = None) -> tuple[FitState | None, Path | None]:
    """The newest readable checkpoint's state (None if there is none); ``log`` hears why a newer one was skipped."""
    for _, p in reversed(list_checkpoints(log_dir)):
        try:
            return load_state(p), p
        except (ValueError, OSError, pickle.UnpicklingError, EOFError, json.JSONDecodeError, AttributeError) as exc:
            if log is not None:
                log(f"skipping {p.name}: {exc}")
            continue
    return None, None
