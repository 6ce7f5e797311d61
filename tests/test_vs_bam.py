"""BAM's side of benchmarks/vs_bam.py (issue 42) on BAM's own XL330 bench logs.

BAM's published m1 and m3 parameters, scored through BAM's simulator as ``bam.mae`` scores them, give the figures
measured on the 12 shared logs (docs/benchmarks.md, "Issue 42: servos against BAM"); the setpoint follower gives its
577 mrad on the kp 400 logs; ``bam.process``'s resampling equals the importer's resampler (importers/bam.py), bit for bit; and the
benchmark at its CI size runs BAM's own fit (m3, 30 trials, a few seconds) and writes every figure. Skipped when BAM
(the ``[peers]`` extra) or the shared logs are absent.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.benchmarking import bam_peer as bp

ROOT = Path(__file__).resolve().parents[1]
RAW = bp.bam_xl330_dir() / "raw"
pytestmark = [
    pytest.mark.skipif(bp.bam_available() is not None, reason=str(bp.bam_available())),
    pytest.mark.skipif(not RAW.is_dir(), reason=f"BAM XL330 logs not found at {RAW} (set ISAACLAB_SYSID_SHARED)"),
]

#: measured (docs/benchmarks.md): mean position MAE [mrad] over all 12 logs and over the 4 kp 400 logs
M1_ALL, M1_KP400 = 68.414, 90.773
M3_ALL, M3_KP400 = 54.073, 73.488
SETPOINT_KP400 = 577.064
#: m3 on the kp 400 logs per trajectory kind [mrad]
M3_KP400_KIND = {"sin_sin": 70.240, "lift_and_drop": 81.113, "up_and_down": 94.319, "sin_time_square": 48.278}


@pytest.fixture(scope="module")
def processed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bam") / "processed"
    bp.resample_with_bam(RAW, out)
    return out


def test_resampling_is_bams_rule(processed):
    """bam.process's output equals the importer's resampler (importers/bam.bam_resample: linear interpolation on the 5 ms
    grid from 0, torque_enable > 0.5), exactly."""
    files = sorted(RAW.glob("*.json"))
    assert len(files) == 12 and sorted(p.name for p in processed.glob("*.json")) == [p.name for p in files]
    for f in files:
        raw = json.loads(f.read_text())
        theirs = json.loads((processed / f.name).read_text())
        mine = bp.resample_reference(raw)
        assert theirs["dt"] == bp.BAM_DT_S and len(theirs["entries"]) == len(mine["entries"]) >= 1190, f.name
        assert {k: v for k, v in theirs.items() if k != "entries"} == {k: v for k, v in mine.items() if k != "entries"}
        for key in ("timestamp", "position", "speed", "goal_position", "load", "input_volts", "temp"):
            a = np.array([e[key] for e in theirs["entries"]], dtype=float)
            b = np.array([e[key] for e in mine["entries"]], dtype=float)
            assert np.array_equal(a, b), (f.name, key)
        assert [e["torque_enable"] for e in theirs["entries"]] == [e["torque_enable"] for e in mine["entries"]]
        assert np.allclose(np.diff([e["timestamp"] for e in theirs["entries"]]), bp.BAM_DT_S)


def test_published_m1_m3_and_setpoint_mae(processed):
    logs = bp.read_logs(processed)
    infos = bp.log_infos(processed)
    assert [i.stem for i in infos] == [d["stem"] for d in logs]
    held = [i for i in infos if i.kp == 400]
    assert sorted(i.trajectory for i in held) == sorted(bp.TRAJECTORY_KINDS)
    every, kp400 = [i.stem for i in infos], [i.stem for i in held]
    pub = bp.published_params("xl330")
    assert tuple(pub) == bp.PUBLISHED_MODELS
    m1, m3 = bp.score_params(pub["m1"], logs), bp.score_params(pub["m3"], logs)
    for per_log, (all_, k400) in ((m1, (M1_ALL, M1_KP400)), (m3, (M3_ALL, M3_KP400))):
        assert 1000 * bp.mean_over(per_log, every) == pytest.approx(all_, abs=0.01)
        assert 1000 * bp.mean_over(per_log, kp400) == pytest.approx(k400, abs=0.01)
    kinds = bp.by_kind(m3, held)
    assert list(kinds) == list(bp.TRAJECTORY_KINDS)
    for k, v in M3_KP400_KIND.items():
        assert 1000 * kinds[k] == pytest.approx(v, abs=0.01), k
    sp = bp.setpoint_follower(logs)
    assert 1000 * bp.mean_over(sp, kp400) == pytest.approx(SETPOINT_KP400, abs=0.01)


def test_benchmark_ci_runs_bams_fit(tmp_path):
    """benchmarks/vs_bam.py --ci --no-ours: BAM's fit (m3, 30 trials) on kp 100+200, every column scored on kp 400."""
    out = tmp_path / "vs_bam.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vs_bam.py"), "--ci", "--no-ours",
                           "--work", str(tmp_path / "work"), "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Held-out logs (kp 400)" in proc.stdout and "per trajectory kind" in proc.stdout
    d = json.loads(out.read_text())
    cols = set(d["per_log_rad"])
    assert cols == {f"BAM {m}" for m in bp.PUBLISHED_MODELS} | {"setpoint", "BAM fit m3@30"}
    held = [lg["stem"] for lg in d["logs"] if lg["kp"] == 400]
    for name, per_log in d["per_log_rad"].items():
        assert len(per_log) == 12 and all(math.isfinite(v) and v > 0 for v in per_log.values()), name
        assert set(d["heldout_by_kind_rad"][name]) == set(bp.TRAJECTORY_KINDS), name
    assert d["heldout_mean_rad"]["BAM m3"] * 1000 == pytest.approx(M3_KP400, abs=0.01)
    (fit,) = d["bam_fits"]
    assert fit["model"] == "m3" and fit["trials"] == 30 and fit["wall_s"] > 0
    assert fit["params"]["model"] == "m3" and fit["params"]["actuator"] == "xl330"
    # the written file is what the fit scored at its last write (BAM writes at most every 0.2 s)
    assert fit["file_loss_rad"] == pytest.approx(fit["printed_best_rad"], rel=1e-9)
    assert 0 <= fit["written_at_trial"] <= 29
    assert math.isfinite(fit["file_loss_rad"]) and d["reference"] == "BAM m3"
    assert not any(s in held for s in (Path(p).stem for p in (tmp_path / "work" / "split" / "fit").glob("*.json")))
