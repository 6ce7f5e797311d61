"""The CLI end to end on the MuJoCo backend with short twin runs: outputs, bad input,
--eval_params, and SIGKILL + --resume reproducing an uninterrupted fit exactly."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "sysid_franka_osc.py"

twin_recorder = pytest.importorskip("isaaclab_sysid.twin.recorder")
from isaaclab_sysid.data import write_run  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.twin.params import TwinNoise, TwinParams  # noqa: E402
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets  # noqa: E402


@pytest.fixture(scope="module")
def twin_csvs(tmp_path_factory):
    """Three short twin runs (2 chirps to fit, a multiband held out) as CSV + sidecar."""
    d = tmp_path_factory.mktemp("twin")
    robot = load_robot("franka_panda")
    pos, quat = robot.ee_pose(Q_READY)
    tp = TwinParams(robot="franka_panda", armature=np.full(7, 0.1), friction=np.full(7, 0.5), viscous=np.full(7, 0.3),
                    delay=1, torque_clamp=False, slew_limit=False, noise=TwinNoise(q_std=1e-4, dq_std=1e-3))
    paths = []
    for kind, kp, seed, name in (("chirp", 200, 0, "c200"), ("chirp", 500, 0, "c500"), ("multiband", 500, 3, "mb")):
        t, off = pose_offsets(kind, 1.5, 50.0, seed=seed)
        x, qu = task_targets(pos, quat, off)
        k = np.array([kp] * 3 + [kp / 10] * 3, dtype=float)
        tgt = skeleton_run(robot, "task_impedance", t, np.hstack([x, qu]), k, 2 * np.sqrt(k), name=name)
        run = twin_recorder.record_twin(robot, tgt, tp, seed=seed + 1)
        csv, _ = write_run(run, d / f"{name}.csv")
        paths.append(str(csv))
    return paths


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300, **kw)


def _fit_args(twin_csvs, log_dir, iters=6, extra=()):
    c200, c500, mb = twin_csvs
    return ["--runs", c200, "--runs", c500, "--heldout", mb, "--num_envs", 8, "--max_iter", iters,
            "--seed", 3, "--save_interval", 2, "--out", log_dir, "--state_age_ms", 0, *extra]


def test_help_states_every_flag_with_units():
    out = _cli("--help").stdout
    for flag in ("--runs", "--real_sidecar", "--heldout", "--traj_weights", "--num_envs", "--max_iter", "--sigma",
                 "--seed", "--backend", "--fit_groups", "--armature_bounds", "--friction_bounds", "--viscous_bounds",
                 "--delay_bounds", "--w_q", "--w_dq", "--w_x", "--save_interval", "--out", "--resume",
                 "--eval_params", "--nominal", "--wandb", "--headless"):
        assert flag in out, flag
    flat = re.sub(r"[\s\u2502]+", " ", out)  # the help's box layout wraps lines anywhere
    for unit in ("kg m^2", "N m s/rad", "ticks", "rad/s"):
        assert unit in flat, unit


def test_bad_run_file_stops_before_simulation(tmp_path, twin_csvs):
    bad = tmp_path / "bad.csv"
    lines = Path(twin_csvs[0]).read_text().splitlines()
    fields = lines[5].split(",")
    fields[3] = "oops"
    lines[5] = ",".join(fields)
    bad.write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.json").write_text(Path(twin_csvs[0]).with_suffix(".json").read_text())
    log_dir = tmp_path / "logs"
    r = _cli("--runs", twin_csvs[1], "--runs", bad, "--out", log_dir, "--state_age_ms", 0)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "bad.csv" in err[0] and "row 6" in err[0]
    assert not log_dir.exists()  # nothing simulated, nothing written


def test_fit_outputs_and_eval_params(tmp_path, twin_csvs):
    log_dir = tmp_path / "logs"
    # CMA-ES generations asked for (the fast default stops after its probe on these twins: issue 26)
    r = _cli(*_fit_args(twin_csvs, log_dir, iters=3, extra=["--traj_weights", "1.0,1.5", "--strategy", "cmaes"]))
    assert r.returncode == 0, r.stderr
    (run_dir,) = list(log_dir.iterdir())
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[gen")]
    assert len(lines) == 3 and "w*L of best: c200" in lines[0] and "diverged" in lines[0]
    for f in ("config.json", "progress.csv", "checkpoint_2.json", "checkpoint_3.json", "sysid_best_params.json",
              "eval_result.json", "eval_rollout_c200.csv", "eval_rollout_mb.csv", "report.md", "report.html",
              "convergence.png", "real_vs_sim_mb.png", "rms_per_joint.png"):
        assert (run_dir / f).is_file(), f
    cfg = json.loads((run_dir / "config.json").read_text())
    assert cfg["job"]["search"]["num_envs"] == 8 and cfg["packages"]["cma"] and "commit" in cfg["git"]
    assert cfg["robot"] == "franka_panda"
    res = json.loads((run_dir / "sysid_best_params.json").read_text())
    dec = res["best_params_decoded"]
    assert len(dec["armature"]) == 7 and isinstance(dec["motor_delay_steps"], int)
    assert len(res["best_params"]) == 22 and np.array(res["cma"]["C"]).shape == (22, 22)
    assert res["traj_weights"] == [1.0, 1.5]
    # labels carry the robot's joint names (export needs no guessing)
    assert res["param_space"]["joint_names"][0] == "panda_joint1"
    assert res["param_space"]["labels"][0] == "armature[panda_joint1]"
    md = (run_dir / "report.md").read_text()
    assert "Held-out" in md and "## Model adequacy" in md and res["adequacy"]["verdict"] in md

    r = _cli("--runs", twin_csvs[2], "--eval_params", run_dir / "checkpoint_2.json", "--out", tmp_path / "ev",
             "--state_age_ms", 0)
    assert r.returncode == 0, r.stderr
    assert "q RMS panda_joint1 [mrad]" in r.stdout and "EE RMS [mm]" in r.stdout and "baseline" in r.stdout
    (ev_dir,) = list((tmp_path / "ev").iterdir())
    ev = json.loads((ev_dir / "eval_result.json").read_text())
    assert set(ev["runs"]["mb"]) == {"baseline", "fitted"}
    import pandas as pd

    roll = pd.read_csv(ev_dir / "eval_rollout_mb.csv")
    real = pd.read_csv(twin_csvs[2])
    np.testing.assert_array_equal(roll["t_s"].to_numpy(), real["t_s"].to_numpy())


def test_flags_that_cannot_apply_are_refused(tmp_path, twin_csvs):
    for extra, flag in ((["--device", "cuda:0"], "--device"), (["--num_envs", "1"], "--num_envs"),
                        (["--save_interval", "0"], "--save_interval"), ([], "--state_age_ms"),
                        (["--state_age_ms", "0", "--fit_groups", "armature,friction,mu_static"], "--fit_groups")):
        r = _cli("--runs", twin_csvs[0], "--out", tmp_path / "x", *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert flag in line
    assert not (tmp_path / "x").exists()


def test_a_fit_whose_best_candidate_diverged_exits_nonzero_and_writes_no_result(tmp_path, twin_csvs, monkeypatch, capsys):
    """Every candidate diverging (e.g. --delay_bounds 0 400 on the demo runs) is an error, not a result."""
    import isaaclab_sysid.fit.problem as problem
    from isaaclab_sysid.jobs.fit_job import FitArgs, main_from_args

    real = problem.make_backend

    from isaaclab_sysid.sim.interface import ReplayBackend

    class Diverging(ReplayBackend):
        def __init__(self, inner):
            self.inner, self.name, self.supported_groups = inner, inner.name, inner.supported_groups
            self.options = inner.options

        def rollout(self, batch, runs, **kw):
            outs = self.inner.rollout(batch, runs, **kw)
            for o in outs:
                o.diverged[:] = True
            return outs

    monkeypatch.setattr(problem, "make_backend", lambda *a, **k: Diverging(real(*a, **k)))
    args = FitArgs.build(real_csv=[twin_csvs[1]], num_envs=4, max_iter=1, refine_iter=0, log_dir=str(tmp_path / "logs"),
                         state_age_ms=0, plots=False, quiet=True)
    assert main_from_args(args) == 4
    assert "diverged" in capsys.readouterr().err
    (run_dir,) = list((tmp_path / "logs").iterdir())
    assert not (run_dir / "sysid_best_params.json").exists() and not (run_dir / "report.md").exists()


def test_sigkill_then_resume_matches_uninterrupted(tmp_path, twin_csvs):
    ref_dir = tmp_path / "ref"
    r = _cli(*_fit_args(twin_csvs, ref_dir, iters=7, extra=["--no_plots", "--strategy", "cmaes"]))  # generations
    assert r.returncode == 0, r.stderr
    (ref_run,) = list(ref_dir.iterdir())

    kill_dir = tmp_path / "killed"
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *map(str, _fit_args(twin_csvs, kill_dir, iters=7, extra=["--no_plots", "--strategy", "cmaes"]))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    deadline = time.time() + 240
    run_dir = None
    while time.time() < deadline:
        dirs = list(kill_dir.iterdir()) if kill_dir.exists() else []
        if dirs and (dirs[0] / "checkpoint_2.json").exists():
            run_dir = dirs[0]
            break
        time.sleep(0.05)
    assert run_dir is not None, "no checkpoint appeared"
    time.sleep(0.3)  # somewhere inside generation 3 or 4
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run_dir / "sysid_best_params.json").exists()

    r = _cli("--resume", run_dir)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stdout
    a = json.loads((ref_run / "sysid_best_params.json").read_text())
    b = json.loads((run_dir / "sysid_best_params.json").read_text())
    assert a == b
    pa = (ref_run / "progress.csv").read_text().splitlines()
    pb = (run_dir / "progress.csv").read_text().splitlines()
    strip = lambda rows: [",".join(x for i, x in enumerate(r.split(",")) if i != 8) for r in rows]  # noqa: E731 (drop wall_s)
    assert strip(pa) == strip(pb)
