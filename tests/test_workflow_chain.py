"""The design's chain on the product's own data: identify_rigid_body.py (defaults) -> seed_fit.py -> the replay
fit with ``--nominal`` and ``--x0``, then ``--eval_params`` on the fit's folder; each step as the user runs it
(the scripts in a subprocess), small budgets.

Franka: the bundled twin runs in data/real_runs/ (the twin keeps the robot config's inertials, so the config's
link masses are the truth). UR10e: the real logs in the shared data (skipped without them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.arm_model import ArmModel, with_body_inertials
from isaaclab_sysid.robots.identified import NominalFileError, load_nominal
from isaaclab_sysid.data.formats.ur10e import ur10e_dir
from isaaclab_sysid.robots import load_robot

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "real_runs"
FIT_RUNS = (RUNS / "twin_joint_multisine_fit.csv", RUNS / "twin_chirp_low_fit.csv")
SMALL_AUDIT = ("--audit-uniform", 200, "--audit-dense", 100, "--audit-grid", 2, "--seeds", 0, "--no-plots")
UR10E = ur10e_dir()


def _script(name: str, *args, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED="0", MPLBACKEND="Agg")
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _error_line(proc: subprocess.CompletedProcess) -> str:
    """The one ``error: ...`` line a refused command prints (stdout or stderr)."""
    assert proc.returncode != 0, proc.stdout[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    return lines[0]


@pytest.fixture(scope="module")
def franka_rb(tmp_path_factory):
    """identify_rigid_body.py with its defaults (only the audit made small) on the two bundled fit runs."""
    rb = tmp_path_factory.mktemp("rb") / "franka"
    out = _ok(_script("identify_rigid_body.py", "--runs", *FIT_RUNS, *SMALL_AUDIT, "--out", rb))
    return rb, out


def test_identify_defaults_read_gravity_from_the_sidecars_and_give_the_twins_masses(franka_rb):
    rb, out = franka_rb
    assert "tau_J excludes gravity: " in out and "recorded by the twin" in out
    assert "verdict: usable" in out
    body = json.loads((rb / "nominal_inertials.json").read_text())
    assert body["verdict"]["usable"] is True and body["meta"]["robot"] == "franka_panda"
    robot = load_robot("franka_panda")
    truth = ArmModel(robot).body_inertials()  # the twin keeps the config's inertials (hand merged into link 7)
    got = load_nominal(rb / "nominal_inertials.json")
    assert set(got) == set(truth)
    for name, li in truth.items():
        assert abs(got[name].mass / li.mass - 1) < 0.10, (name, got[name].mass, li.mass)
    # every engine takes it: the per-link overrides pass the margin and MuJoCo compiles them
    with_body_inertials(robot, got).build_mujoco()


def test_chain_identify_seed_fit_then_eval_on_the_fit_folder(franka_rb, tmp_path):
    rb, _ = franka_rb
    seed = tmp_path / "seed.json"
    _ok(_script("seed_fit.py", "--rb_params", rb / "rb_params.json", "--out", seed))
    logs = tmp_path / "fits"
    out = _ok(_script("sysid_franka_osc.py", "--runs", FIT_RUNS[1], "--nominal", rb / "nominal_inertials.json",
                      "--x0", seed, "--strategy", "cmaes", "--max_iter", 1, "--num_envs", 4, "--refine_iter", 0,
                      "--no_plots", "--quiet", "--out", logs))
    fits = [p for p in logs.iterdir() if (p / "sysid_best_params.json").is_file()]
    assert len(fits) == 1, out[-2000:]
    cfg = json.loads((fits[0] / "config.json").read_text())
    assert "nominal_inertials.json" in json.dumps(cfg)
    # the folder the fit printed stands for its sysid_best_params.json; --nominal takes the identify --out folder
    _ok(_script("sysid_franka_osc.py", "--eval_params", fits[0], "--runs", FIT_RUNS[1], "--nominal", rb,
                "--no_plots", "--out", logs))
    assert any(p.name.endswith("_eval") and (p / "eval_result.json").is_file() for p in logs.iterdir())


def test_eval_params_folder_without_result_is_one_clear_line(tmp_path):
    line = _error_line(_script("sysid_franka_osc.py", "--eval_params", tmp_path, "--runs", FIT_RUNS[1],
                               "--out", tmp_path / "logs"))
    assert str(tmp_path) in line and "sysid_best_params.json" in line and "Errno" not in line


def test_a_flag_that_contradicts_the_sidecar_is_refused_with_both_values(tmp_path):
    line = _error_line(_script("identify_rigid_body.py", "--runs", *FIT_RUNS, "--tau-includes-gravity",
                               *SMALL_AUDIT, "--out", tmp_path / "rb"))
    assert "--tau-includes-gravity" in line and str(FIT_RUNS[0].relative_to(ROOT)) in line
    assert "excludes gravity" in line and "gravity_compensated: true" in line
    assert not (tmp_path / "rb").exists()


def _copy_runs(folder: Path, edit) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for csv in FIT_RUNS:
        shutil.copy(csv, folder / csv.name)
        side = json.loads(csv.with_suffix(".json").read_text())
        edit(side)
        (folder / csv.name).with_suffix(".json").write_text(json.dumps(side))
        out.append(folder / csv.name)
    return out


def test_a_silent_file_needs_the_flag(tmp_path):
    runs = _copy_runs(tmp_path / "runs", lambda s: s["summary"].pop("recorder"))  # no longer says it is the twin
    line = _error_line(_script("identify_rigid_body.py", "--runs", *runs, *SMALL_AUDIT, "--out", tmp_path / "rb"))
    assert str(runs[0]) in line and "--tau-includes-gravity" in line and "--no-tau-includes-gravity" in line
    out = _ok(_script("identify_rigid_body.py", "--runs", *runs, "--no-tau-includes-gravity", *SMALL_AUDIT,
                      "--out", tmp_path / "rb"))
    assert "tau_J excludes gravity: --no-tau-includes-gravity (the files do not say)" in out


def test_a_rejected_estimate_is_a_verdict_and_the_fit_refuses_its_file(tmp_path):
    # files that say their tau_J holds gravity when it does not: the estimate the issue saw (p ~ 1e-91)
    runs = _copy_runs(tmp_path / "runs", lambda s: s["summary"].update(includes_gravity={"tau_J": True}))
    rb = tmp_path / "rb"
    out = _ok(_script("identify_rigid_body.py", "--runs", *runs, *SMALL_AUDIT, "--out", rb))
    assert "verdict: REJECTED" in out and "gravity in the signal" in out and "wrong robot" in out
    assert "friction model" in out
    body = json.loads((rb / "nominal_inertials.json").read_text())
    assert body["verdict"]["usable"] is False and body["verdict"]["likely_causes"]
    assert json.loads((rb / "rb_params.json").read_text())["verdict"]["usable"] is False
    with pytest.raises(NominalFileError, match="marked not to be used"):
        load_nominal(rb / "nominal_inertials.json")
    line = _error_line(_script("sysid_franka_osc.py", "--eval_params", rb / "nominal_inertials.json",
                               "--runs", FIT_RUNS[1], "--nominal", rb, "--out", tmp_path / "logs"))
    assert str(rb / "nominal_inertials.json") in line and "--admit_rejected_nominal" in line
    # forced: read, and still something every engine takes
    robot = load_robot("franka_panda")
    with_body_inertials(robot, load_nominal(rb / "nominal_inertials.json", admit_rejected=True)).build_mujoco()


def test_an_engine_invalid_link_is_refused_on_reading_naming_link_moments_and_file(franka_rb, tmp_path):
    rb, _ = franka_rb
    rb_params = json.loads((rb / "rb_params.json").read_text())
    from isaaclab_sysid.robots.identified import save_nominal
    from isaaclab_sysid.robots.regressor import Regressor

    # the SDP's own link 7 (hand merged in) as the earlier writer wrote it: its link less the hand fails A + B >= C
    reg = Regressor(load_robot("franka_panda"))
    pi = np.array([rb_params["reconstruction"]["standard"][n] for n in reg.param_names])
    bad = save_nominal(tmp_path / "old_nominal.json", reg.link_inertials(pi))
    line = _error_line(_script("sysid_franka_osc.py", "--eval_params", rb / "nominal_inertials.json",
                               "--runs", FIT_RUNS[1], "--nominal", bad, "--out", tmp_path / "logs"))
    assert str(bad) in line and "panda_link7" in line and "principal moments" in line and "A + B >= C" in line
    assert "--backend" not in line


@pytest.mark.skipif(not (UR10E / "identification_data").is_dir(),
                    reason=f"UR10e shared data not found at {UR10E} (set ISAACLAB_SYSID_SHARED)")
def test_ur10e_chain_identify_seed_torque_replay_eval(tmp_path):
    rb = tmp_path / "rb"
    out = _ok(_script("identify_rigid_body.py", *SMALL_AUDIT, "--out", rb))
    assert "verdict: usable" in out
    robot = load_robot("ur10e")
    got, truth = load_nominal(rb / "nominal_inertials.json"), ArmModel(robot).body_inertials()
    with_body_inertials(robot, got).build_mujoco()
    for name in ("upper_arm_link", "forearm_link"):  # the big identifiable links: near the URDF (docs/rigid_body.md)
        assert abs(got[name].mass / truth[name].mass - 1) < 0.25, (name, got[name].mass)
    seed = tmp_path / "seed.json"
    _ok(_script("seed_fit.py", "--rb_params", rb / "rb_params.json", "--out", seed))
    data = UR10E
    _ok(_script("sysid_franka_osc.py", "--replay", "torque", "--log_format", "ur10e", "--torque_signal", "current",
                "--drive_gains", 10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232, "--torque_includes_gravity",
                "--window_s", 0.5, "--eval_params", seed, "--nominal", rb,
                "--runs", data / "validation_data" / "ur-20_01_17-p1.csv",
                "--no_plots", "--out", tmp_path / "logs"))
