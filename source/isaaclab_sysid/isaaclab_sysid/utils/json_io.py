"""JSON in and out: values made JSON-safe, and files read with a one-line error."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy arrays and scalars, tuples and paths turned into plain JSON values;
    mapping keys become strings and NaN/inf become None (null)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def read_json(path: str | Path, what: str) -> Any:
    """The parsed JSON of ``path``.

    Raises:
        ValueError: ``"<path>: cannot read <what>: <reason>"`` when the file is missing or not JSON.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read {what}: {exc}") from None
