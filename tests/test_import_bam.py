"""BAM's servo test-bench logs into runs (issue 42), and the run format's servo controller and optional signals.

The 12 real XL330 logs in ``../shared/data/bam_xl330/raw`` import (skipped when that folder is not there); the grid
is BAM's own ``bam.process`` loop's to 1e-12; every bad log is one line naming file, entry and field, and nothing
is written (synthetic logs: these run everywhere).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.data.formats.csv_run import write_run
from isaaclab_sysid.data.formats.hdf5 import read_runs_hdf5, write_runs_hdf5
from isaaclab_sysid.data.reading import read_runs
from isaaclab_sysid.importers import import_runs
from isaaclab_sysid.importers.bam import read_bam_log
from isaaclab_sysid.robots.servos import SERVO_FAMILIES

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "bam_xl330" / "raw"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/data/bam_xl330/raw here")
LIFT_AND_DROP = "2026-01-15_10h28m17.json"


def quiet(_: str) -> None:
    pass


def bam_process(entries: list[dict], dt: float = 0.005) -> list[dict]:
    """BAM's own resampling loop (bam.process), as it is written there: the reference the importer must equal."""
    duration = entries[-1]["timestamp"]
    ts = np.arange(0.0, duration, dt)
    frame = 0
    out = []
    for t in ts:
        while t > entries[frame + 1]["timestamp"]:
            frame += 1
        e1, e2 = entries[frame], entries[frame + 1]
        new = {}
        for key in e1:
            if key == "timestamp":
                continue
            new[key] = e1[key] + (e2[key] - e1[key]) * (t - e1["timestamp"]) / (e2["timestamp"] - e1["timestamp"])
        new["torque_enable"] = new["torque_enable"] > 0.5
        new["timestamp"] = t
        out.append(new)
    return out


def synthetic_log(n: int = 60, mass: float = 0.49, length: float = 0.1, motor: str = "xl330", off_from: int | None = 40,
                  seed: int = 0) -> dict:
    """A BAM log of ``n`` entries at about 190 Hz, irregular, torque off from entry ``off_from``."""
    rng = np.random.default_rng(seed)
    t = 0.0035 + np.cumsum(rng.uniform(0.0045, 0.006, n)) - 0.005
    q = 0.3 * np.sin(2 * np.pi * 0.8 * t)
    load = rng.integers(-400, 400, n)
    entries = [{"position": float(q[i]), "speed": float(0.3 * 2 * np.pi * 0.8 * np.cos(2 * np.pi * 0.8 * t[i])),
                "load": int(load[i] % 65536), "input_volts": 7.3, "temp": 34, "timestamp": float(t[i]),
                "goal_position": float(q[i] + 0.05), "torque_enable": off_from is None or i < off_from}
               for i in range(n)]
    return {"mass": mass, "length": length, "kp": 200, "vin": 7.4, "motor": motor, "trajectory": "lift_and_drop",
            "entries": entries}


def write_log(folder: Path, name: str, log: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{name}.json"
    p.write_text(json.dumps(log))
    return p


# ------------------------------------------------------------------ the shared real logs
@needs_shared
def test_the_twelve_shared_logs_import_with_the_script(tmp_path):
    """The README's command: 12 runs, the shipped bench, kp as logged, kd 0, torque-off phases in lift_and_drop."""
    out = tmp_path / "runs"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_runs.py"), str(SHARED), "--format", "bam",
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "imported 12 run(s)" in proc.stdout
    runs = read_runs(sorted(out.glob("*.csv")))
    assert len(runs) == 12
    kps = []
    for r in runs:
        head = json.loads((SHARED / f"{r.name}.json").read_text())
        assert r.meta.controller == "servo" and r.meta.robot == "bam_pendulum_xl330"
        assert r.meta.kp.tolist() == [head["kp"]] and r.meta.kd.tolist() == [0.0]
        assert r.meta.control_rate_hz == 200 and r.meta.gravity_compensated is False
        assert r.torque_enable is not None and r.supply_v is not None and r.pwm is not None
        assert np.isnan(r.tau).all() and np.isnan(r.tau_J).all()
        np.testing.assert_array_equal(r.targets(), r.q_des)
        assert np.abs(r.pwm).max() <= 1.0 and 5.0 < r.supply_v.min() and r.supply_v.max() < 10.0
        imp = r.meta.summary["import"]
        assert imp["resampled"] is True and 150 < imp["raw_rate_hz"] < 300 and 0.003 < imp["max_gap_s"] < 0.01
        off = int((~r.torque_enable).sum())
        assert (off > 100) == (head["trajectory"] == "lift_and_drop"), (r.name, head["trajectory"], off)
        kps.append(head["kp"])
        # EE: the mass 0.1 m below the axis, turned by q about +y
        np.testing.assert_allclose(np.linalg.norm(r.ee_pos, axis=1), 0.1, atol=1e-12)
    assert sorted(kps) == [100] * 4 + [200] * 4 + [400] * 4


@needs_shared
def test_grid_equals_bams_own_loop(tmp_path):
    """Every field on BAM's points, to 1e-12 (the pwm from the signed load, BAM's loop on the same signed values)."""
    src = SHARED / LIFT_AND_DROP
    raw = json.loads(src.read_text())
    runs, _ = import_runs(src, "bam", None, None, log=quiet)
    run = runs[0]
    ref = bam_process(raw["entries"])
    assert run.n_samples == len(ref)
    np.testing.assert_allclose(run.t, [e["timestamp"] for e in ref], rtol=0, atol=1e-12)
    for field, key in (("q", "position"), ("dq", "speed"), ("q_des", "goal_position"), ("supply_v", "input_volts")):
        np.testing.assert_allclose(getattr(run, field)[:, 0], [e[key] for e in ref], rtol=0, atol=1e-12, err_msg=field)
    np.testing.assert_array_equal(run.torque_enable[:, 0], [e["torque_enable"] for e in ref])
    full = SERVO_FAMILIES["xl330"].pwm_full_scale
    signed = [{**e, "load": (e["load"] - 65536 if e["load"] >= 32768 else e["load"]) / full} for e in raw["entries"]]
    np.testing.assert_allclose(run.pwm[:, 0], [e["load"] for e in bam_process(signed)], rtol=0, atol=1e-12)
    assert run.t[0] == 0.0 and raw["entries"][0]["timestamp"] > 0  # the first row is extrapolated, as BAM does
    # written and read back: the same arrays (17 digits)
    write_run(run, tmp_path / "r.csv")
    back = read_run(tmp_path / "r.csv")
    for field in ("q", "dq", "q_des", "supply_v", "pwm", "torque_enable"):
        np.testing.assert_array_equal(getattr(back, field), getattr(run, field), err_msg=field)


# ------------------------------------------------------------------ synthetic logs: bad input, benches
def _no_torque_on(log):
    for e in log["entries"]:
        e["torque_enable"] = False


def _back_in_time(log):
    log["entries"][17]["timestamp"] = log["entries"][15]["timestamp"]


def _missing_field(log):
    del log["entries"][23]["goal_position"]


def _text_field(log):
    log["entries"][5]["position"] = "0.1"


def _missing_header(log):
    del log["length"]


def _text_header(log):
    log["kp"] = "high"


def _unknown_motor(log):
    log["motor"] = "mx106"


def _load_beyond_scale(log):
    log["entries"][9]["load"] = 900


@pytest.mark.parametrize("break_it, entry, field, words", [
    (_back_in_time, 17, "timestamp", "is not after entry 16"),
    (_missing_field, 23, "goal_position", "missing field"),
    (_text_field, 5, "position", "expected a finite number"),
    (_no_torque_on, None, "torque_enable", "no torque-on sample"),
    (_missing_header, None, "length", "missing header field"),
    (_text_header, None, "kp", "expected a positive number"),
    (_unknown_motor, None, "motor", "unknown servo family 'mx106'"),
    (_load_beyond_scale, 9, "load", "PWM full scale"),
])
def test_a_bad_log_is_one_line_and_nothing_is_written(tmp_path, break_it, entry, field, words):
    good = write_log(tmp_path / "logs", "a_good_one", synthetic_log())
    log = synthetic_log(seed=1)
    break_it(log)
    bad = write_log(tmp_path / "logs", "b_bad_one", log)
    out = tmp_path / "out"
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "logs", "bam", None, out, log=quiet)
    msg = str(exc.value)
    assert "\n" not in msg and words in msg, msg
    assert exc.value.file == str(bad) and exc.value.column == field and exc.value.row == entry, msg
    assert f"entry {entry if entry is not None else '-'}," in msg, msg
    assert not out.exists()
    assert read_bam_log(good).name == "a_good_one"


def test_the_script_refuses_a_bad_log_in_one_stderr_line(tmp_path):
    log = synthetic_log()
    _missing_field(log)
    bad = write_log(tmp_path / "logs", "bad", log)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_runs.py"), str(bad), "--format", "bam",
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert f"{bad}: entry 23, column goal_position: missing field" in proc.stderr, proc.stderr
    assert not out.exists()


def test_bam_takes_no_mapping_and_a_rate_that_divides_the_tick(tmp_path):
    src = write_log(tmp_path / "logs", "one", synthetic_log())
    with pytest.raises(RunFormatError, match="takes no mapping file"):
        import_runs(src, "bam", tmp_path / "map.yaml", None, log=quiet)
    with pytest.raises(RunFormatError, match="must divide 1000"):
        import_runs(src, "bam", None, None, log=quiet, rate_hz=300)
    runs, _ = import_runs(src, "bam", None, None, log=quiet, rate_hz=100)
    assert runs[0].meta.control_rate_hz == 100
    np.testing.assert_allclose(np.diff(runs[0].t), 0.01)


def test_benches_of_different_masses_in_one_folder(tmp_path):
    """The shipped bench by name; another bench's config and URDF written beside the runs, named by each sidecar."""
    write_log(tmp_path / "logs", "heavy", synthetic_log())
    write_log(tmp_path / "logs", "light", synthetic_log(mass=0.2, length=0.15, off_from=None))
    out = tmp_path / "out"
    runs, _ = import_runs(tmp_path / "logs", "bam", None, out, log=quiet)
    heavy, light = runs
    assert heavy.meta.robot == "bam_pendulum_xl330"
    assert Path(light.meta.robot).is_file() and Path(light.meta.robot).parent == (out / "robots").resolve()
    back = read_runs([out / "heavy.csv", out / "light.csv"])
    assert back[1].meta.robot == light.meta.robot and back[1].torque_enable.all()
    np.testing.assert_allclose(np.linalg.norm(back[1].ee_pos, axis=1), 0.15, atol=1e-12)
    assert (~back[0].torque_enable).sum() > 0


# ------------------------------------------------------------------ the run format's optional signals
def _servo_run(tmp_path):
    src = write_log(tmp_path / "logs", "servo_run", synthetic_log())
    return import_runs(src, "bam", None, None, log=quiet)[0][0]


def test_optional_signals_round_trip_csv_and_hdf5(tmp_path):
    run = _servo_run(tmp_path)
    csv, _ = write_run(run, tmp_path / "a.csv")
    header = csv.read_text().splitlines()[0].split(",")
    assert header[-3:] == ["torque_enable1", "supply_v1", "pwm1"] and "q_des1" in header
    write_runs_hdf5([run], tmp_path / "a.h5")
    for back in (read_run(csv), read_runs_hdf5(tmp_path / "a.h5")[0]):
        assert back.torque_enable.dtype == bool
        for field in ("torque_enable", "supply_v", "pwm", "q_des", "q"):
            np.testing.assert_array_equal(getattr(back, field), getattr(run, field), err_msg=field)
        assert back.meta.controller == "servo" and back.meta.kd.tolist() == [0.0]


def test_a_run_without_optional_signals_has_none(tmp_path):
    run = _servo_run(tmp_path)
    run.torque_enable = run.supply_v = run.pwm = None
    csv, _ = write_run(run, tmp_path / "b.csv")
    assert "pwm1" not in csv.read_text().splitlines()[0]
    back = read_run(csv)
    assert back.torque_enable is None and back.supply_v is None and back.pwm is None


@pytest.mark.parametrize("column, value, words", [
    ("torque_enable1", "2", "expected 0 or 1"),
    ("pwm1", "1.5", "in [-1, 1]"),
    ("supply_v1", "-1", ">= 0"),
])
def test_bad_optional_values_are_refused(tmp_path, column, value, words):
    csv, _ = write_run(_servo_run(tmp_path), tmp_path / "c.csv")
    lines = csv.read_text().splitlines()
    cols = lines[0].split(",")
    row = lines[5].split(",")
    row[cols.index(column)] = value
    lines[5] = ",".join(row)
    csv.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    assert exc.value.column == column and exc.value.row == 6 and words in str(exc.value)


def test_an_optional_signal_needs_every_joints_column_and_servo_kd_may_be_zero_only(tmp_path):
    csv, side = write_run(_servo_run(tmp_path), tmp_path / "d.csv")
    text = csv.read_text().replace("pwm1", "pwm2", 1)
    csv.write_text(text)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    assert exc.value.column == "pwm1" and "every joint" in str(exc.value)
    csv.write_text(text.replace("pwm2", "pwm1", 1))
    meta = json.loads(side.read_text())
    meta["controller"] = "joint_pd"  # a joint PD law's kd 0 is still refused
    side.write_text(json.dumps(meta))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    assert exc.value.column == "gains.kd[0]"
    meta["controller"], meta["gains"]["kd"] = "servo", [-1.0]
    side.write_text(json.dumps(meta))
    with pytest.raises(RunFormatError, match=">= 0"):
        read_run(csv)
