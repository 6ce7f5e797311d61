"""Issue 13 item 7, reproduced for real: a delay bound so large that every replay diverges (``--delay_bounds 0 400``)
on a bundled run, through the CLI and the MuJoCo backend (no stub): exit status 4, one stderr line, no
``sysid_best_params.json``; and the same best candidate at a 2-tick delay does not diverge (the delay is the cause)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.fit.problem import build_problem
from isaaclab_sysid.paths import REAL_RUNS_DIR

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "sysid_franka_osc.py"
RUN = REAL_RUNS_DIR / "twin_chirp_low_fit.csv"  # the demo's task-space chirp, 1 kHz, 6 s


def test_delay_bound_400_diverges_exits_4_and_writes_no_result(tmp_path):
    env = dict(os.environ, PYTHONHASHSEED="0")
    r = subprocess.run([sys.executable, str(SCRIPT), "--runs", str(RUN), "--delay_bounds", "0", "400",
                        "--num_envs", "4", "--max_iter", "1", "--refine_iter", "0", "--seed", "0", "--no-plots",
                        "--out", str(tmp_path)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 4, r.stdout[-2000:] + r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert err[0].startswith("error: the best candidate diverged on at least one run (loss 1e+04)")
    assert "no sysid_best_params.json written" in err[0] and "--delay_bounds" in err[0]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert not (run_dir / "sysid_best_params.json").exists()
    assert not (run_dir / "report.md").exists() and not (run_dir / "eval_result.json").exists()
    with open(run_dir / "progress.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["n_diverged"]) == int(row["popsize"]) == 4  # every candidate diverged, as the issue reports
    ckpt = json.loads(max(run_dir.glob("checkpoint_*.json"), key=lambda p: p.stat().st_mtime).read_text())
    assert ckpt["best_diverged"] is True and ckpt["best_score"] >= 1e4
    delay = ckpt["best_params_decoded"]["motor_delay_steps"]
    assert delay > 100, delay  # the cube's centre region of [0, 400] ticks: a quarter second and more

    # the cause is the delay: the same candidate with a 2-tick delay replays without diverging
    problem = build_problem(RunFolder(run_dir).read_problem(), log=lambda s: None)
    x = np.asarray(ckpt["best_params"], dtype=float)
    X = np.stack([x, problem.space.with_delay(x, 2)])
    (ro,) = problem.backend.rollout(problem.space.to_batch(X), problem.runs)
    assert ro.diverged.tolist() == [True, False]
    assert np.isfinite(ro.q[1]).all() and not np.isfinite(ro.q[0]).all()
