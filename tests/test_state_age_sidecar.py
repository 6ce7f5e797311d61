"""The state-age model stated by a schema-1 sidecar ("state_age"), and which model the fit applies (flag, sidecar, refusal)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import make_run

from isaaclab_sysid.data import RunFormatError, read_run, read_runs_hdf5, write_run, write_runs_hdf5
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.fit.state_age_source import resolve_state_age
from isaaclab_sysid.paths import REAL_RUNS_DIR

RUN_50HZ = REAL_RUNS_DIR / "twin_heldout_multiband_50hz.csv"


def _with_sidecar_key(tmp_path, value, src=RUN_50HZ, name="aged"):
    """A copy of a bundled run whose sidecar has ``state_age = value`` (key absent when value is ...)."""
    side = json.loads(src.with_suffix(".json").read_text())
    if value is not ...:
        side["state_age"] = value
    csv = tmp_path / f"{name}.csv"
    csv.write_bytes(src.read_bytes())
    csv.with_suffix(".json").write_text(json.dumps(side))
    return csv


def test_sidecar_states_the_age_and_it_round_trips(tmp_path):
    run = read_run(_with_sidecar_key(tmp_path, {"model": "uniform", "max_ms": 10}))
    assert run.meta.state_age_ms == 10 and not run.is_1khz
    assert read_run(_with_sidecar_key(tmp_path, {"max_ms": 0}, name="fresh")).meta.state_age_ms == 0  # model defaults
    assert read_run(_with_sidecar_key(tmp_path, None, name="null")).meta.state_age_ms is None
    assert read_run(RUN_50HZ).meta.state_age_ms is None  # absent: not stated
    csv, side = write_run(run, tmp_path / "out" / "again.csv")
    assert json.loads(side.read_text())["state_age"] == {"model": "uniform", "max_ms": 10}
    assert read_run(csv).meta.state_age_ms == 10
    h5 = write_runs_hdf5([run], tmp_path / "runs.h5")
    assert read_runs_hdf5(h5)[0].meta.state_age_ms == 10
    _, side = write_run(read_run(RUN_50HZ), tmp_path / "out" / "plain.csv")
    assert "state_age" not in json.loads(side.read_text())  # not stated stays not stated


@pytest.mark.parametrize("value, key, words", [
    (10, "state_age", "expected an object"),
    ({"model": "gaussian", "max_ms": 10}, "state_age.model", "unknown state-age model 'gaussian'"),
    ({"model": "uniform", "max_ms": -1}, "state_age.max_ms", "integer number of ms >= 0"),
    ({"model": "uniform", "max_ms": 2.5}, "state_age.max_ms", "integer number of ms >= 0"),
    ({"model": "uniform", "max_ms": True}, "state_age.max_ms", "integer number of ms >= 0"),
    ({"model": "uniform"}, "state_age.max_ms", "got None"),
    ({"model": "uniform", "max_ms": 10, "rate_hz": 100}, "state_age.rate_hz", "unknown key"),
])
def test_bad_state_age_refused_naming_the_key(tmp_path, value, key, words):
    csv = _with_sidecar_key(tmp_path, value)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    msg = str(exc.value)
    assert "\n" not in msg and "aged.json" in msg and key in msg and words in msg, msg


def test_positive_age_on_a_1khz_log_refused(tmp_path):
    src = REAL_RUNS_DIR / "twin_heldout_multiband.csv"
    with pytest.raises(RunFormatError, match="state_age.max_ms.*below 1 kHz only"):
        read_run(_with_sidecar_key(tmp_path, {"model": "uniform", "max_ms": 10}, src=src, name="khz"))
    assert read_run(_with_sidecar_key(tmp_path, {"model": "uniform", "max_ms": 0}, src=src, name="khz0")).is_1khz


def _slow(name: str, age: int | None, schema: int = 1):
    r = make_run("task_impedance", 50.0, n=40)
    return dataclasses.replace(r, name=name, meta=dataclasses.replace(r.meta, state_age_ms=age, schema_version=schema))


def test_sidecar_age_applies_and_says_so():
    lines: list[str] = []
    assert resolve_state_age(None, [_slow("a", 10), _slow("b", 10)], lines.append) == 10
    assert len(lines) == 1 and "a, b" in lines[0] and "0..10 ms" in lines[0] and "from the sidecars" in lines[0]
    lines.clear()
    assert resolve_state_age(None, [_slow("a", 0)], lines.append) == 0
    assert "fresh" in lines[0] and "from the sidecar " in lines[0]


def test_flag_overrides_the_sidecar_and_says_so():
    lines: list[str] = []
    assert resolve_state_age(0, [_slow("a", 10), _slow("b", None)], lines.append) == 0
    assert "--state_age_ms" in lines[0] and "overrides the sidecar state_age of a (10 ms)" in lines[0]
    lines.clear()
    assert resolve_state_age(10, [_slow("a", 10)], lines.append) == 10
    assert "the sidecars state the same" in lines[0]
    lines.clear()
    assert resolve_state_age(5, [_slow("a", None)], lines.append) == 5 and "overrides" not in lines[0]


def test_unstated_or_conflicting_ages_refused():
    with pytest.raises(FitError) as exc:
        resolve_state_age(None, [_slow("a", 10), _slow("b", None)])
    msg = str(exc.value)
    assert "b (50 Hz)" in msg and "a (" not in msg and "--state_age_ms N" in msg and '"state_age"' in msg
    with pytest.raises(FitError, match="schema-2 sidecar does not record its state stream's rate"):
        resolve_state_age(None, [_slow("v2", None, schema=2)])
    with pytest.raises(FitError, match=r"different state ages \(a: 10 ms, b: 20 ms\).*--state_age_ms N"):
        resolve_state_age(None, [_slow("a", 10), _slow("b", 20)])
    with pytest.raises(FitError, match=">= 0"):
        resolve_state_age(-1, [_slow("a", 10)])


def test_1khz_runs_need_no_age():
    lines: list[str] = []
    fast = make_run("task_impedance", 1000.0, n=40)
    assert resolve_state_age(None, [fast], lines.append) is None
    assert resolve_state_age(10, [fast], lines.append) == 10  # passed through: the model leaves 1 kHz runs alone
    assert lines == []
