"""The noise floor measured from two repeats (--noise_floor_from): formula, refusals, and the verdict using it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import make_run

from isaaclab_sysid.data import read_run
from isaaclab_sysid.evaluate.adequacy import Adequacy, assess
from isaaclab_sysid.evaluate.metrics import rms_between_runs
from isaaclab_sysid.evaluate.noise_floor import (
    NotRepeatsError,
    check_repeats,
    repeat_noise_floor,
    resolve_noise_floor,
)
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.paths import REAL_RUNS_DIR
from isaaclab_sysid.sim.interface import RunRollout
from isaaclab_sysid.twin.demo import DEMO_HELDOUT, DEMO_REPEAT


def _repeat(run, sigma: float, seed: int, name: str):
    """A repeat of ``run``: the same excitation, q with independent white noise of std ``sigma`` [rad]."""
    rng = np.random.default_rng(seed)
    return dataclasses.replace(run, name=name, source=f"/data/{name}.csv", q=run.q + sigma * rng.standard_normal(run.q.shape))


def _pair(sigma=2e-4, n=20000):
    base = make_run("task_impedance", 1000.0, n=n, seed=1)
    return _repeat(base, sigma, 10, "a"), _repeat(base, sigma, 11, "b")


def test_floor_is_each_runs_noise_per_joint_and_pooled():
    """Two repeats with independent noise of std sigma: the floor is sigma (RMS of the difference / sqrt 2), not sqrt(2) sigma."""
    a, b = _pair(sigma=2e-4)
    f = repeat_noise_floor([(a, b)])
    assert f.source == "repeats" and f.files == [("/data/a.csv", "/data/b.csv")]
    assert len(f.per_joint_mrad) == 7
    np.testing.assert_allclose(f.per_joint_mrad, 0.2, rtol=0.03)  # 20000 samples: ~0.5 % sampling error
    assert f.pooled_mrad == pytest.approx(0.2, rel=0.02)
    between = rms_between_runs(a, b)
    assert f.pooled_mrad == pytest.approx(between["q_rms_all_mrad"] / np.sqrt(2), rel=1e-12)
    np.testing.assert_allclose(f.per_joint_mrad, np.asarray(between["q_rms_mrad"]) / np.sqrt(2), rtol=1e-12)
    assert "RMS(q_A - q_B) / sqrt(2)" in f.method and "20000 rows x 7 joints" in f.method


def test_pairs_pool_by_rows():
    a, b = _pair(sigma=1e-4, n=4000)
    c = _repeat(make_run("task_impedance", 1000.0, n=12000, seed=2), 3e-4, 12, "c")
    d = _repeat(make_run("task_impedance", 1000.0, n=12000, seed=2), 3e-4, 13, "d")
    f = repeat_noise_floor([(a, b), (c, d)])
    expect = np.sqrt((4000 * 0.1**2 + 12000 * 0.3**2) / 16000)  # pooled over all rows of both pairs
    assert f.pooled_mrad == pytest.approx(expect, rel=0.03)
    assert "2 repeat pair(s)" in f.method


@pytest.mark.parametrize("change, words", [
    (lambda r: dataclasses.replace(r, meta=dataclasses.replace(r.meta, kp=r.meta.kp * 2)), "gains kp"),
    (lambda r: dataclasses.replace(r, x_des=r.x_des + np.where(np.arange(len(r.t))[:, None] == 700, 1e-3, 0.0)),
     "component 1 differs by 0.001"),
    (lambda r: dataclasses.replace(r, meta=dataclasses.replace(r.meta, controller="joint_pd")), "controller"),
    (lambda r: dataclasses.replace(r, tick=r.tick + np.where(np.arange(len(r.t)) >= 5, 1, 0)), "row 7 is at tick"),
])
def test_not_repeats_refused_naming_both_files(change, words):
    a, b = _pair(n=1200)
    with pytest.raises(NotRepeatsError) as exc:
        check_repeats(a, change(b))
    msg = str(exc.value)
    assert "\n" not in msg and "/data/a.csv" in msg and "/data/b.csv" in msg and words in msg, msg


def test_other_length_same_file_and_identical_q_refused():
    a, b = _pair(n=1200)
    short = dataclasses.replace(b, **{k: getattr(b, k)[:1000] for k in
                                      ("t", "q", "dq", "ee_pos", "ee_quat", "tau", "tau_J", "x_des", "quat_des",
                                       "tick", "setpoint_tick")})
    with pytest.raises(NotRepeatsError, match="1200 vs 1000 rows"):
        check_repeats(a, short)
    with pytest.raises(NotRepeatsError, match="the same run twice"):
        check_repeats(a, a)
    twin = dataclasses.replace(a, name="copy", source="/data/copy.csv")
    with pytest.raises(NotRepeatsError, match="identical q in every row"):
        repeat_noise_floor([(a, twin)])


def test_bundled_repeats_and_flag_errors(tmp_path):
    """The demo's held-out run and its repeat (1 kHz, other noise seed): the floor from the files, one-line errors."""
    held, rep = REAL_RUNS_DIR / f"{DEMO_HELDOUT}.csv", REAL_RUNS_DIR / f"{DEMO_REPEAT}.csv"
    lines: list[str] = []
    f = resolve_noise_floor(None, [(str(held), str(rep))], log=lines.append)
    between = rms_between_runs(read_run(held), read_run(rep))["q_rms_all_mrad"]
    assert f.pooled_mrad == pytest.approx(between / np.sqrt(2), rel=1e-12)
    assert 0.02 < f.pooled_mrad < 0.2  # the twin's encoder noise and quantization, not a model error
    assert len(lines) == 1 and "noise floor" in lines[0] and DEMO_REPEAT in lines[0]
    assert resolve_noise_floor(None, []) is None
    assert resolve_noise_floor(0.1, []).source == "given"
    with pytest.raises(FitError, match="not both"):
        resolve_noise_floor(0.1, [(str(held), str(rep))])
    other = REAL_RUNS_DIR / "twin_heldout_multiband_50hz.csv"
    with pytest.raises(FitError) as exc:
        resolve_noise_floor(None, [(str(held), str(other))])
    assert str(held) in str(exc.value) and str(other) in str(exc.value) and "log rate" in str(exc.value)
    with pytest.raises(FitError, match="--noise_floor_from: .*missing.csv"):
        resolve_noise_floor(None, [(str(held), str(tmp_path / "missing.csv"))])


def test_flag_parses_and_round_trips_config():
    args = FitArgs.build(noise_floor_from=[("a.csv", "b.csv"), ("c.csv", "d.csv")])
    assert args.output.noise_floor_from == [("a.csv", "b.csv"), ("c.csv", "d.csv")]
    back = FitArgs.from_dict(json.loads(json.dumps(args.to_dict())))
    assert [tuple(p) for p in back.output.noise_floor_from] == [("a.csv", "b.csv"), ("c.csv", "d.csv")]


def _rollout(q: np.ndarray) -> RunRollout:
    T, N = q.shape
    qq = np.stack([q, q])  # candidate 0 (nominal) and 1 (fitted)
    return RunRollout(q=qq, dq=np.zeros_like(qq), ee_pos=np.zeros((2, T, 3)), ee_quat=np.tile([0, 0, 0, 1.0], (2, T, 1)),
                      tau=np.zeros_like(qq), diverged=np.zeros(2, dtype=bool))


def test_verdict_uses_the_repeat_floor_and_says_where_it_came_from(tmp_path):
    """A fit residual of 0.3 mrad: adequate against a 0.2 mrad repeat floor, misfit against a 0.1 mrad one."""
    run = make_run("task_impedance", 1000.0, n=3000, seed=4)
    rng = np.random.default_rng(5)
    sim = run.q - 3e-4 * rng.standard_normal(run.q.shape)  # residual white, 0.3 mrad
    for sigma, verdict in ((2e-4, "adequate"), (1e-4, "misfit")):
        floor = repeat_noise_floor([_pair(sigma=sigma, n=6000)])
        a = assess([run], [_rollout(sim)], 1, noise_floor_mrad=floor)
        assert a.floor_source == "repeats" and a.floor_mrad == floor.pooled_mrad
        assert a.residual_over_floor == pytest.approx(0.3 / floor.pooled_mrad, rel=0.03)
        assert a.verdict == verdict, a.messages
        assert a.floor_per_joint_mrad == floor.per_joint_mrad and a.floor_files == [["/data/a.csv", "/data/b.csv"]]
        assert any(m.startswith("noise floor") and "repeat pair" in m for m in a.messages)
        if verdict == "misfit":
            assert any("the noise floor measured from the repeats" in m for m in a.messages)
        back = Adequacy.from_json(json.loads(json.dumps(a.to_json())))
        assert back.floor_method == floor.method and back.floor_source == "repeats"
    est = assess([run], [_rollout(sim)], 1)  # no floor given: the white-noise estimate says how it was made
    assert est.floor_source == "estimated" and "diff(e)" in est.floor_method and len(est.floor_per_joint_mrad) == 7
    old = est.to_json()
    for k in ("floor_per_joint_mrad", "floor_method", "floor_files"):
        old.pop(k)
    assert Adequacy.from_json(old).floor_method == ""  # files written before these keys still read


def test_cli_measures_the_floor_from_repeats(tmp_path):
    """The real CLI: a bad pair stops before any fit (exit 2); a good pair's floor is the verdict's, said in the JSON."""
    import os
    import subprocess
    import sys

    from isaaclab_sysid.paths import REPO_ROOT

    held, rep = REAL_RUNS_DIR / f"{DEMO_HELDOUT}.csv", REAL_RUNS_DIR / f"{DEMO_REPEAT}.csv"
    base = [sys.executable, str(REPO_ROOT / "scripts" / "sysid_franka_osc.py"), "--runs",
            str(REAL_RUNS_DIR / "twin_chirp_low_fit.csv"), "--num_envs", "4", "--max_iter", "1", "--refine_iter", "0",
            "--no-plots", "--quiet"]
    env = dict(os.environ, PYTHONHASHSEED="0")
    other = REAL_RUNS_DIR / "twin_joint_multisine_fit.csv"
    bad = subprocess.run([*base, "--out", str(tmp_path / "bad"), "--noise_floor_from", str(held), str(other)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert str(held) in bad.stderr and str(other) in bad.stderr and "not repeats" in bad.stderr
    assert not (tmp_path / "bad").exists()
    ok = subprocess.run([*base, "--out", str(tmp_path / "ok"), "--noise_floor_from", str(held), str(rep)],
                        capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]
    (run_dir,) = list((tmp_path / "ok").iterdir())
    a = json.loads((run_dir / "sysid_best_params.json").read_text())["adequacy"]
    expect = resolve_noise_floor(None, [(str(held), str(rep))], log=lambda s: None)
    assert a["floor_source"] == "repeats" and a["floor_mrad"] == pytest.approx(expect.pooled_mrad, rel=1e-12)
    assert a["floor_files"] == [[str(held), str(rep)]] and "sqrt(2)" in a["floor_method"]
    assert "measured from 1 repeat pair" in (run_dir / "report.md").read_text()
