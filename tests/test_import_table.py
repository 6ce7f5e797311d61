"""The table importer (CSV / Parquet with a column map): exact when on the grid, repairs stated, bad input refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.importers import import_runs
from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.robots import load_robot

N = 7
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
POS = [f"pos_{i}" for i in range(N)]
VEL = [f"vel_{i}" for i in range(N)]
EFF = [f"eff_{i}" for i in range(N)]
CMD = [f"cmd_{i}" for i in range(N)]
TGT = [f"tgt_{i}" for i in range(N)]


def source(n: int = 60, rate: float = 100.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t_ms = np.arange(n) * 1000.0 / rate + 12345.0
    d = {"stamp_ms": t_ms, "note": ["x"] * n}
    q = Q0 + 0.1 * np.sin(np.arange(n)[:, None] * 0.05 + np.arange(N)) + 1e-4 * rng.standard_normal((n, N))
    for name, arr in ((POS, q), (VEL, rng.standard_normal((n, N))), (EFF, rng.standard_normal((n, N))),
                      (CMD, rng.standard_normal((n, N))), (TGT, q + 0.01)):
        for j, c in enumerate(name):
            d[c] = arr[:, j]
    return pd.DataFrame(d)


def mapping(tmp: Path, **over) -> Path:
    m = {"robot": "franka_panda", "controller": "joint_pd", "rate_hz": 100,
         "gains": {"kp": [60, 60, 60, 60, 25, 15, 6], "kd": [5, 5, 5, 5, 2, 1.5, 0.6]},
         "columns": {"time": "stamp_ms", "time_unit": "ms", "q": POS, "dq": VEL, "tau": CMD, "tau_J": EFF,
                     "q_des": TGT}}
    m.update(over)
    p = tmp / "map.yaml"
    p.write_text(yaml.safe_dump(m))
    return p


def _csv(tmp: Path, df: pd.DataFrame, name: str = "log.csv") -> Path:
    p = tmp / name
    df.to_csv(p, index=False, float_format="%.17g")
    return p


def test_on_grid_import_equals_the_source(tmp_path):
    df = source()
    runs, reps = import_runs(_csv(tmp_path, df), "table", mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    assert len(runs) == 1 and not reps[0].resampled
    run = read_run(tmp_path / "out" / "log.csv")
    np.testing.assert_array_equal(run.q, df[POS].to_numpy())
    np.testing.assert_array_equal(run.dq, df[VEL].to_numpy())
    np.testing.assert_array_equal(run.tau, df[CMD].to_numpy())
    np.testing.assert_array_equal(run.tau_J, df[EFF].to_numpy())
    np.testing.assert_array_equal(run.q_des, df[TGT].to_numpy())
    np.testing.assert_allclose(run.t, (df["stamp_ms"].to_numpy() - 12345.0) / 1000.0, atol=1e-12)
    assert run.meta.control_rate_hz == 100 and run.meta.controller == "joint_pd"
    np.testing.assert_array_equal(run.meta.q_init, run.q[0])
    pos, quat = load_robot("franka_panda").ee_pose(run.q[7])
    np.testing.assert_allclose(run.ee_pos[7], pos, atol=1e-12)
    assert run.meta.summary["import"]["rows_read"] == 60 and run.meta.summary["import"]["resampled"] is False


def test_parquet_equals_csv(tmp_path):
    pytest.importorskip("pyarrow")
    df = source()
    df.to_parquet(tmp_path / "log.parquet")
    a, _ = import_runs(tmp_path / "log.parquet", "table", mapping(tmp_path), None, log=lambda s: None)
    b, _ = import_runs(_csv(tmp_path, df), "table", mapping(tmp_path), None, log=lambda s: None)
    for f in ("t", "q", "dq", "tau", "tau_J", "q_des"):
        np.testing.assert_array_equal(getattr(a[0], f), getattr(b[0], f))


def test_irregular_stamps_stale_rows_and_gaps(tmp_path):
    df = source(80)
    n = len(df)
    jitter = np.random.default_rng(3).uniform(-3.0, 3.0, n)
    jitter[0] = 0.0
    df["stamp_ms"] = df["stamp_ms"] + jitter
    lin = 0.2 + 0.5 * (df["stamp_ms"] - 12345.0) / 1000.0  # linear in time: interpolation is exact
    df["pos_2"] = lin
    stale = df.iloc[[10]].copy()
    stale["stamp_ms"] += 1.0  # the logger re-sent row 10 with a new stamp: state not refreshed
    dup = df.iloc[[20]].copy()  # the same row twice
    df2 = pd.concat([df.iloc[:11], stale, df.iloc[11:21], dup, df.iloc[21:]], ignore_index=True)
    lines: list[str] = []
    runs, reps = import_runs(_csv(tmp_path, df2), "table", mapping(tmp_path, max_gap_s=0.05), None, log=lines.append)
    rep = reps[0]
    assert rep.resampled and rep.dropped["stale (state repeated)"] == 1 and rep.dropped["repeated (same stamp)"] == 1
    assert "82 rows read" in lines[0] and "1 stale" in lines[0]
    run = runs[0]
    np.testing.assert_allclose(run.q[:, 2], 0.2 + 0.5 * run.t, atol=1e-12)
    np.testing.assert_allclose(np.diff(run.t), 0.01, atol=1e-12)
    # a duplicated stamp with different values is refused
    bad = df2.copy()
    bad.loc[5, "stamp_ms"] = bad.loc[4, "stamp_ms"]
    with pytest.raises(RunFormatError) as exc:
        import_runs(_csv(tmp_path, bad), "table", mapping(tmp_path, max_gap_s=0.05), None, log=lambda s: None)
    assert (exc.value.row, exc.value.column) == (7, "stamp_ms") and "duplicated stamp" in str(exc.value)
    # a gap longer than the limit: refused, or split on request
    gap = source(60)
    gap.loc[30:, "stamp_ms"] += 200.0
    with pytest.raises(RunFormatError) as exc:
        import_runs(_csv(tmp_path, gap), "table", mapping(tmp_path, max_gap_s=0.05), None, log=lambda s: None)
    assert exc.value.row == 32 and "gap of 210.0 ms" in str(exc.value) and "on_gap: split" in str(exc.value)
    runs, reps = import_runs(_csv(tmp_path, gap), "table", mapping(tmp_path, max_gap_s=0.05, on_gap="split"),
                             tmp_path / "split", log=lambda s: None)
    assert [r.name for r in runs] == ["log_part1", "log_part2"] and reps[0].gaps_s == [pytest.approx(0.21)]
    assert read_run(tmp_path / "split" / "log_part2.csv").n_samples == 30


def test_bad_tables_and_mappings(tmp_path):
    df = source()
    csv = _csv(tmp_path, df.drop(columns=["vel_3"]))
    with pytest.raises(RunFormatError) as exc:
        import_runs(csv, "table", mapping(tmp_path), None, log=lambda s: None)
    assert (exc.value.file, exc.value.row, exc.value.column) == (str(csv), 1, "vel_3")
    bad = df.astype({"pos_1": object})
    bad.loc[9, "pos_1"] = "12,5"
    csv = tmp_path / "bad.csv"
    bad.to_csv(csv, index=False, float_format="%.17g")
    with pytest.raises(RunFormatError) as exc:
        import_runs(csv, "table", mapping(tmp_path), None, log=lambda s: None)
    assert (exc.value.row, exc.value.column) in ((11, "pos_1"), (11, "pos_2"))  # the comma splits the field
    bad = df.copy()
    bad.loc[4, "vel_0"] = np.nan
    with pytest.raises(RunFormatError) as exc:
        import_runs(_csv(tmp_path, bad), "table", mapping(tmp_path), None, log=lambda s: None)
    assert (exc.value.row, exc.value.column) == (6, "vel_0") and "non-finite" in str(exc.value)
    bad = df.copy()
    bad.loc[8, "stamp_ms"] = bad.loc[6, "stamp_ms"]
    with pytest.raises(RunFormatError) as exc:
        import_runs(_csv(tmp_path, bad), "table", mapping(tmp_path), None, log=lambda s: None)
    assert (exc.value.row, exc.value.column) == (10, "stamp_ms") and "before the previous" in str(exc.value)
    for over, key in (({"rate_hz": 300}, "rate_hz"), ({"gains": {"kp": [0] * 7, "kd": [1] * 7}}, "gains.kp[0]"),
                      ({"controller": "osc"}, "controller"), ({"extra_key": 1}, "extra_key")):
        m = mapping(tmp_path, **over)
        with pytest.raises(RunFormatError) as exc:
            import_runs(_csv(tmp_path, df), "table", m, None, log=lambda s: None)
        assert (exc.value.file, exc.value.column) == (str(m), key), str(exc.value)


def test_nothing_written_when_a_run_is_invalid(tmp_path):
    df = source()
    df.loc[30, "pos_3"] = 5.0  # outside the joint limits: the validating reader refuses it
    out = tmp_path / "out"
    with pytest.raises(RunFormatError) as exc:
        import_runs(_csv(tmp_path, df), "table", mapping(tmp_path), out, log=lambda s: None)
    assert exc.value.column == "q4"
    assert not list(out.glob("*.csv")) and not list(out.glob("*.json")) and not list(out.glob(".importing_*"))


def test_cli(tmp_path):
    csv = _csv(tmp_path, source())
    cmd = [sys.executable, str(REPO_ROOT / "scripts" / "import_runs.py"), str(csv), "--format", "table",
           "--mapping", str(mapping(tmp_path)), "--out", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "60 rows read, dropped: none; 100 Hz (stamps already on the grid)" in proc.stdout
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)  # the run exists: not overwritten
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not overwriting" in proc.stderr


def test_missing_optional_dependency_names_the_extra():
    from isaaclab_sysid.importers.common import ImportDependencyError, require

    with pytest.raises(ImportDependencyError) as exc:
        require("rosbags_not_installed_here", "rosbag2")
    msg = str(exc.value)
    assert "\n" not in msg and '".[import]"' in msg and "--format rosbag2" in msg
