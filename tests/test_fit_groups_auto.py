"""Issue 26, item 3: ``--fit_groups auto`` picks the friction model the fit runs ask for, says why, and keeps a
Coulomb fit bit-identical where they do not ask for static friction.

Twins: the benchmark twin's joint PD run (benchmarking/peers.py, 1 s at 1 kHz, noise on every input), once with
Stribeck friction whose static level is twice the Coulomb level (the data ask for static friction), once with
plain Coulomb friction (static level = Coulomb level: they do not).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")

from isaaclab_sysid.benchmarking.peers import twin  # noqa: E402
from isaaclab_sysid.data import write_run  # noqa: E402
from isaaclab_sysid.jobs.fit_args import FIT_GROUPS_DEFAULT, FitArgs  # noqa: E402
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import RESULT_FILE  # noqa: E402
from isaaclab_sysid.jobs.fit_job import run_fit  # noqa: E402
from isaaclab_sysid.fit.run_folder import MODEL_CHOICE_FILE as CHOICE_FILE
from isaaclab_sysid.jobs.model_choice import static_groups  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.twin.demo import joint_target  # noqa: E402
from isaaclab_sysid.twin.recorder import record_twin  # noqa: E402

SECONDS = 1.0
FLAGS = dict(num_envs=8, max_iter=3, refine_iter=6, refine_delay_neighbours=1, plots=False, quiet=True,
             fast_probe_generations=0)


def _runs(tmp_path, static_over_coulomb: float) -> str:
    robot = load_robot("franka_panda")
    p = twin()
    p = replace(p, static_friction=static_over_coulomb * np.asarray(p.friction))
    run = record_twin(robot, joint_target(robot, SECONDS, 40, "fit_a"), p, seed=0, log_rate_hz=1000.0)
    csv, _ = write_run(run, tmp_path / "fit_a.csv")
    return str(csv)


def coulomb_floor_ratio(out) -> float:
    """The Coulomb fit's residual over the white noise, from the log line of its evidence (fast_path.json)."""
    return float(json.loads((out / "fast_path.json").read_text())["floor_ratio"])


def _fit(csv: str, logs, **kw):
    lines: list[str] = []
    out = run_fit(FitArgs.build(real_csv=[csv], log_dir=str(logs), **FLAGS, **kw), log=lines.append)
    return out, FitResult.read(out / RESULT_FILE), lines


def test_auto_is_the_default():
    assert FitArgs().params.fit_groups == "auto" and FitArgs().params.auto


def test_static_friction_chosen_where_the_joints_stick(tmp_path):
    csv = _runs(tmp_path, 2.0)
    out, res, lines = _fit(csv, tmp_path / "logs")
    choice = json.loads((out / CHOICE_FILE).read_text())
    said = [s for s in lines if s.startswith("--fit_groups auto ->")]
    print("\n" + "\n".join(said + [s for s in lines if s.startswith("static-friction refit")]))
    assert choice["static"], choice
    assert choice["chosen"] == static_groups(choice["coulomb_groups"])
    # the log says what it chose and why: each joint's z, the loss ratio
    assert said and "score test z" in said[0] and "threshold" in said[0] and "static refit loss" in said[0]
    assert choice["joints"] or choice["loss_static"] <= 0.9 * choice["loss_coulomb"]
    # the linear forecast that decided to run the refit is close to what the refit found
    assert choice["predicted_gain"] == pytest.approx(1 - choice["loss_static"] / choice["loss_coulomb"], abs=0.1)
    assert list(res.space.group_names) == ["armature", "mu_static", "dynamic_ratio", "viscous", "delay"]
    coulomb = FitResult.read(out / "coulomb" / RESULT_FILE)
    assert list(coulomb.space.group_names) == ["armature", "friction", "viscous", "delay"]
    # the refit starts at the Coulomb model in the static coordinates: it can only lower the loss
    assert res.best_score < coulomb.best_score
    # the static fit finds a static peak (ratio below 1), and its residual reaches the noise where Coulomb's did not
    assert min(res.by_joint("dynamic_ratio").values()) < 0.9
    assert res.adequacy.residual_over_floor < 1.5 < coulomb_floor_ratio(out)
    assert "friction model" in (out / "report.md").read_text()


def test_coulomb_kept_and_unchanged_where_no_joint_sticks(tmp_path):
    csv = _runs(tmp_path, 1.0)
    out, res, lines = _fit(csv, tmp_path / "auto", fit_groups="auto")
    choice = json.loads((out / CHOICE_FILE).read_text())
    print("\n" + "\n".join(s for s in lines if s.startswith("--fit_groups auto ->")))
    assert not choice["static"] and choice["z"] is not None, choice
    assert max(choice["z"]) < choice["threshold"]
    # the Gauss-Newton forecast from the score test's Jacobian is under half the margin: no refit was run
    assert choice["predicted_gain"] < 0.05 and choice["loss_static"] is None
    assert not (out / "coulomb").exists() and not (out / "static_friction").exists()
    _, plain, _ = _fit(csv, tmp_path / "plain", fit_groups=FIT_GROUPS_DEFAULT)
    np.testing.assert_array_equal(res.best_x, plain.best_x)  # auto costs nothing and changes nothing here
    assert res.best_score == plain.best_score


def test_an_auto_fit_resumes_to_the_same_answer(tmp_path):
    csv = _runs(tmp_path, 2.0)
    out, res, _ = _fit(csv, tmp_path / "logs", fit_groups="auto")
    (out / RESULT_FILE).unlink()  # as if interrupted after both searches' last checkpoints
    lines: list[str] = []
    again = run_fit(FitArgs.build(real_csv=[csv], resume=str(out), quiet=True), log=lines.append)
    assert again == out and any("static_friction" in s and "resuming" in s for s in lines), lines[:8]
    back = FitResult.read(out / RESULT_FILE)
    assert list(back.space.group_names) == list(res.space.group_names)
    np.testing.assert_array_equal(back.best_x, res.best_x)
