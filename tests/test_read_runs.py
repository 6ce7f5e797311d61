"""Issue 25: one reader of a list of runs (CSV + sidecar or HDF5, names unique) and one stated default robot."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import make_run

from isaaclab_sysid.data import DEFAULT_ROBOT, RunFormatError, read_run, read_runs, unstated_robot_note, write_run, write_runs_hdf5


def test_csv_and_hdf5_in_one_list_in_order(tmp_path):
    a = replace(make_run("joint_pd", 50.0), name="a")
    b = replace(make_run("task_impedance", 1000.0), name="b")
    c = replace(make_run("joint_pd", 1000.0), name="c")
    csv, _ = write_run(a, tmp_path / "a.csv")
    h5 = write_runs_hdf5([b, c], tmp_path / "bc.h5")
    runs = read_runs([csv, h5])
    assert [r.name for r in runs] == ["a", "b", "c"]


def test_refusals_name_the_file(tmp_path):
    a = replace(make_run("joint_pd", 50.0), name="a")
    csv, side = write_run(a, tmp_path / "a.csv")
    write_run(a, tmp_path / "other" / "a.csv")
    with pytest.raises(RunFormatError, match="share the name 'a'"):
        read_runs([csv, tmp_path / "other" / "a.csv"], what="--real_csv")
    with pytest.raises(RunFormatError, match="2 sidecars given for 1 --real_csv files"):
        read_runs([csv], [side, side], what="--real_csv")
    h5 = write_runs_hdf5([a], tmp_path / "a.h5")
    with pytest.raises(RunFormatError, match="HDF5 file: its runs carry their sidecars"):
        read_runs([h5], [side])


def test_a_sidecar_without_robot_is_read_as_the_stated_default_and_says_so(tmp_path):
    run = make_run("joint_pd", 50.0)
    csv, side = write_run(run, tmp_path / "r.csv")
    stated = read_run(csv)
    assert stated.meta.robot_stated and unstated_robot_note([stated]) is None
    raw = json.loads(side.read_text())
    del raw["robot"]
    side.write_text(json.dumps(raw))
    back = read_run(csv)
    assert back.meta.robot == DEFAULT_ROBOT and not back.meta.robot_stated
    note = unstated_robot_note([stated, back])
    assert note is not None and "r: the sidecar names no robot" in note and DEFAULT_ROBOT in note and "--robot" in note
