"""The one JSON-safe conversion every output file goes through, and the one JSON reader."""

import json
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.utils.json_io import jsonable, read_json


def test_jsonable_numpy_paths_and_non_finite():
    obj = {1: np.arange(3), "t": (np.float64(0.5), np.int64(2), np.bool_(True)), "p": Path("a/b"),
           "bad": [float("nan"), np.float32(np.inf)], "m": np.eye(2)}
    out = jsonable(obj)
    assert out == {"1": [0, 1, 2], "t": [0.5, 2, True], "p": "a/b", "bad": [None, None], "m": [[1.0, 0.0], [0.0, 1.0]]}
    assert type(out["t"][1]) is int and type(out["t"][2]) is bool
    json.dumps(out, allow_nan=False)  # strict JSON


def test_read_json_names_the_file(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"a": 1}')
    assert read_json(p, "things") == {"a": 1}
    p.write_text("{not json")
    with pytest.raises(ValueError, match=r"x.json: cannot read things: Expecting property name"):
        read_json(p, "things")
    with pytest.raises(ValueError, match=r"missing.json: cannot read things: .*No such file"):
        read_json(tmp_path / "missing.json", "things")


def test_atomic_outputs_get_the_mode_a_plain_open_gives(tmp_path):
    """mkstemp makes 0600 files; a result file must be readable by whoever could read a plain open()'s file."""
    import os
    import stat

    from isaaclab_sysid.utils.atomic import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "out.json", "{}\n")
        (tmp_path / "plain.json").write_text("{}\n")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "out.json").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain.json").stat().st_mode) == 0o644
    assert not list(tmp_path.glob(".*tmp"))


def test_one_atomic_json_writer_writes_non_finite_as_null(tmp_path):
    """One atomic_write_json (utils/atomic.py), one NaN policy: numpy made plain, NaN/inf -> null, never refused."""
    from isaaclab_sysid.utils.atomic import atomic_write_json

    p = atomic_write_json(tmp_path / "x.json", {"a": np.float64(np.nan), "b": np.array([1.0, -np.inf]), "c": (1, 2)})
    assert p == tmp_path / "x.json"
    assert json.loads(p.read_text()) == {"a": None, "b": [1.0, None], "c": [1, 2]}
    assert "NaN" not in p.read_text() and "Infinity" not in p.read_text()
    import isaaclab_sysid.robots.identified as rb_io

    assert not hasattr(rb_io, "jsonable")  # robots/identified.py uses the shared writer, it has no copy of the policy
    assert rb_io.atomic_write_json is atomic_write_json
