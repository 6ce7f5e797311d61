"""The fit CLI end to end with --backend isaaclab on CPU (small: one 1 s run fitted, one held out,
population 4, 2 generations). Needs the [isaaclab] extra; skipped without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("isaaclab", reason="the isaaclab backend needs the [isaaclab] extra")
pytest.importorskip("urdf_usd_converter", reason="the isaaclab backend needs the [isaaclab] extra")

from isaaclab_sysid.data import write_run  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.twin.params import TwinNoise, TwinParams  # noqa: E402
from isaaclab_sysid.twin.recorder import record_twin  # noqa: E402
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_fit_cli_runs_with_isaaclab_backend(tmp_path):
    robot = load_robot("franka_panda")
    pos, quat = robot.ee_pose(Q_READY)
    tp = TwinParams(robot="franka_panda", armature=np.full(7, 0.1), friction=np.full(7, 0.5), viscous=np.full(7, 0.3),
                    delay=1, torque_clamp=False, slew_limit=False, noise=TwinNoise(q_std=1e-4, dq_std=1e-3))
    csvs = []
    for kind, seed, name in (("chirp", 0, "fit"), ("multiband", 3, "held")):
        t, off = pose_offsets(kind, 1.0, 50.0, seed=seed)
        x, qu = task_targets(pos, quat, off)
        k = np.array([300.0] * 3 + [30.0] * 3)
        tgt = skeleton_run(robot, "task_impedance", t, np.hstack([x, qu]), k, 2 * np.sqrt(k), name=name)
        csv, _ = write_run(record_twin(robot, tgt, tp, seed=seed + 1), tmp_path / f"{name}.csv")
        csvs.append(str(csv))
    log_dir = tmp_path / "logs"
    cmd = [sys.executable, str(ROOT / "scripts" / "sysid_franka_osc.py"), "--runs", csvs[0], "--heldout", csvs[1],
           "--backend", "isaaclab", "--device", "cpu", "--num_envs", "4", "--max_iter", "2", "--refine_iter", "0", "--out", str(log_dir),
           "--no-plots", "--state_age_ms", "0",
           # no law step (issue 46, ninth pass): its forecasts on Newton made this the suite's slowest test (470 s in
           # CI with sigmoid,load,dahl; 501 s with stribeck too). This test is the CLI's plumbing on the isaaclab
           # backend; each law's Isaac Lab replay is covered by tests/test_isaaclab_backend.py and
           # tests/test_isaaclab_law_parity.py, the law step by tests/test_friction_law_auto.py
           "--auto_laws", "none"]
    # the timeout only guards against a hang: the run takes about 120 s on a quiet 2-core machine (330 s with the law
    # step) and passed 600 s under load 7-10 (a shared machine), which is no failure of the code
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800, env=dict(os.environ, PYTHONHASHSEED="0"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (run_dir,) = list(log_dir.iterdir())
    cfg = json.loads((run_dir / "config.json").read_text())
    assert cfg["problem"]["replay"]["backend"] == "isaaclab" and cfg["problem"]["replay"]["device"] == "cpu"
    best = json.loads((run_dir / "sysid_best_params.json").read_text())
    dec = best["best_params_decoded"]
    assert len(dec["armature"]) == 7 and np.isfinite(best["best_score"])
    ev = json.loads((run_dir / "eval_result.json").read_text())
    assert "held" in json.dumps(ev)
    assert (run_dir / "report.md").is_file()
