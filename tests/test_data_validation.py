"""Every reader fails closed: one test per bad-input kind, each naming file, row and column."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import make_run

from isaaclab_sysid.data import RunFormatError, read_run, read_runs_hdf5, write_run, write_runs_hdf5

REPO = Path(__file__).resolve().parents[1]


def _write(tmp_path, controller="task_impedance", rate=50.0, n=40):
    csv, side = write_run(make_run(controller, rate, n=n), tmp_path / "run.csv")
    return csv, side


def _edit_csv(csv: Path, fn) -> None:
    lines = csv.read_text().split("\n")
    if lines[-1] == "":
        lines.pop()
    fn(lines)
    csv.write_text("\n".join(lines) + "\n")


def _edit_cell(csv: Path, line_no: int, column: str, value: str) -> None:
    def fn(lines):
        cols = lines[0].split(",")
        fields = lines[line_no - 1].split(",")
        fields[cols.index(column)] = value
        lines[line_no - 1] = ",".join(fields)

    _edit_csv(csv, fn)


def _edit_sidecar(side: Path, fn) -> None:
    raw = json.loads(side.read_text())
    fn(raw)
    side.write_text(json.dumps(raw))


def _expect(exc: pytest.ExceptionInfo, file: Path, row, column: str) -> None:
    err = exc.value
    assert err.file == str(file)
    assert err.row == row
    assert err.column == column
    msg = str(err)
    assert "\n" not in msg
    assert str(file) in msg and f"column {column}" in msg
    assert (f"row {row}" if row is not None else "row -") in msg


def test_missing_column(tmp_path):
    csv, _ = _write(tmp_path)

    def drop(lines):
        cols = lines[0].split(",")
        k = cols.index("dq3")
        for i in range(len(lines)):
            f = lines[i].split(",")
            del f[k]
            lines[i] = ",".join(f)

    _edit_csv(csv, drop)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 1, "dq3")
    assert "missing column" in str(exc.value)


def test_extra_column(tmp_path):
    csv, _ = _write(tmp_path)

    def add(lines):
        lines[0] += ",bogus"
        for i in range(1, len(lines)):
            lines[i] += ",0"

    _edit_csv(csv, add)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 1, "bogus")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite(tmp_path, value):
    csv, _ = _write(tmp_path)
    _edit_cell(csv, 7, "dq2", value)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 7, "dq2")


def test_not_a_number(tmp_path):
    csv, _ = _write(tmp_path)
    _edit_cell(csv, 5, "tau4", "abc")
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 5, "tau4")


def test_empty_file(tmp_path):
    csv, _ = _write(tmp_path)
    csv.write_text("")
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 1, "-")
    assert "empty" in str(exc.value)


def test_truncated_last_line(tmp_path):
    csv, _ = _write(tmp_path, n=40)
    text = csv.read_text().rstrip("\n")
    last = text.split("\n")[-1].split(",")
    csv.write_text(text[: len(text) - len(",".join(last))] + ",".join(last[:10]))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    header = csv.read_text().split("\n")[0].split(",")
    _expect(exc, csv, 41, header[10])
    assert "truncated" in str(exc.value)


def test_non_monotonic_time(tmp_path):
    csv, _ = _write(tmp_path)
    _edit_cell(csv, 10, "t_s", "0.0")
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 10, "t_s")
    assert "before the previous" in str(exc.value)


def test_duplicated_time(tmp_path):
    csv, _ = _write(tmp_path)
    prev = csv.read_text().split("\n")[8].split(",")[0]
    _edit_cell(csv, 10, "t_s", prev)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 10, "t_s")
    assert "duplicated" in str(exc.value)


def test_gap_in_1khz_log(tmp_path):
    csv, side = _write(tmp_path, rate=1000.0, n=50)

    def drop_row(lines):
        del lines[21]  # drop file line 22

    _edit_csv(csv, drop_row)
    _edit_sidecar(side, lambda raw: raw.update(num_samples=49))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 22, "t_s")
    assert "gap" in str(exc.value)


def test_gap_in_1khz_tick_column(tmp_path):
    csv, _ = _write(tmp_path, rate=1000.0, n=50)
    line = csv.read_text().split("\n")[30 - 1].split(",")
    _edit_cell(csv, 30, "tick", str(int(float(line[1])) + 5))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 30, "tick")


def test_length_mismatch(tmp_path):
    csv, side = _write(tmp_path, n=40)
    _edit_sidecar(side, lambda raw: raw.update(num_samples=45))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 42, "t_s")
    assert "num_samples=45" in str(exc.value)


def test_wrong_joint_count(tmp_path):
    csv, _ = _write(tmp_path)

    def drop_joint7(lines):
        cols = lines[0].split(",")
        keep = [i for i, c in enumerate(cols) if not c.endswith("7")]
        for i in range(len(lines)):
            f = lines[i].split(",")
            lines[i] = ",".join(f[k] for k in keep)

    _edit_csv(csv, drop_joint7)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 1, "q7")
    assert "wrong joint count" in str(exc.value)


@pytest.mark.parametrize("q_init", [None, [0.0] * 6])
def test_bad_q_init(tmp_path, q_init):
    csv, side = _write(tmp_path)
    _edit_sidecar(side, lambda raw: raw.pop("q_init") if q_init is None else raw.update(q_init=q_init))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, side, None, "q_init")


@pytest.mark.parametrize("kp2", [0.0, -5.0, None])
def test_bad_gains(tmp_path, kp2):
    csv, side = _write(tmp_path)

    def edit(raw):
        if kp2 is None:
            raw["gains"].pop("kd")
        else:
            raw["gains"]["kp"][2] = kp2

    _edit_sidecar(side, edit)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, side, None, "gains.kd" if kp2 is None else "gains.kp[2]")


@pytest.mark.parametrize("column", ["ee_qw", "quat_des_w"])
def test_non_unit_quaternion(tmp_path, column):
    csv, _ = _write(tmp_path)
    _edit_cell(csv, 12, column, "3.0")
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 12, column)


def test_unknown_schema_version(tmp_path):
    csv, side = _write(tmp_path)
    _edit_sidecar(side, lambda raw: raw.update(schema_version=7))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, side, None, "schema_version")


def test_unknown_controller(tmp_path):
    csv, side = _write(tmp_path)
    _edit_sidecar(side, lambda raw: raw.update(controller="osc_magic"))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, side, None, "controller")


def test_degrees_logged_as_radians(tmp_path):
    csv, _ = _write(tmp_path)
    _edit_cell(csv, 9, "q4", str(np.rad2deg(-2.356)))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, csv, 9, "q4")
    assert "joint limits" in str(exc.value)


def test_missing_sidecar(tmp_path):
    csv, side = _write(tmp_path)
    side.unlink()
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _expect(exc, side, None, "-")


def test_hdf5_bad_value_names_run_row_column(tmp_path):
    path = tmp_path / "runs.h5"
    write_runs_hdf5([make_run("task_impedance", 50.0)], path)
    with h5py.File(path, "r+") as h5:
        name = next(iter(h5["runs"]))
        h5["runs"][name]["q3"][4] = np.nan
    with pytest.raises(RunFormatError) as exc:
        read_runs_hdf5(path)
    assert exc.value.file == f"{path}:/runs/{name}"
    assert exc.value.row == 5 and exc.value.column == "q3"


def test_validate_runs_cli(tmp_path):
    good, _ = write_run(make_run("joint_pd", 50.0), tmp_path / "good.csv")
    bad, _ = write_run(make_run("joint_pd", 50.0), tmp_path / "bad.csv")
    _edit_cell(bad, 3, "q1", "nan")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_runs.py"), str(good), str(bad)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 1
    assert f"OK {good}" in proc.stdout
    assert f"{bad}: row 3, column q1" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    ok = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_runs.py"), str(good)], capture_output=True, text=True
    )
    assert ok.returncode == 0
