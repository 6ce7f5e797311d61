"""The armature's default box is the robot config's physical bound per joint (issue 28, item 5).

A motor and gear reflect at most ``J_m N^2``; the config states that bound (``armature_max`` with its source),
the fit searches inside it unless ``--armature_bounds`` is given, and a fit that ends at it says so.
"""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.fit.problem import build_space
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.jobs.fit_job import run_fit
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.config import RobotConfigError, load_robot_config
from isaaclab_sysid.paths import ROBOT_CONFIGS_DIR


def test_the_config_bound_is_the_default_box_and_a_flag_overrides_it():
    franka = load_robot("franka_panda")
    cfg = franka.config
    # 0.02 s^2 x the torque limit (Franka publishes no rotor inertia): a wrist cannot reflect 0.5 kg m^2
    assert np.allclose(cfg.armature_max, 0.02 * np.asarray(cfg.torque_limit)) and "rule" in cfg.armature_max_source
    assert max(cfg.armature_max[4:]) < 0.5
    space = build_space(FitArgs.build(real_csv=["x.csv"]).problem, franka.joint_names, cfg)
    hi = space.bounds()[1][space.slice("armature")]
    assert np.allclose(hi, cfg.armature_max)
    assert np.allclose(space.decode(np.ones(space.dim))["armature"], cfg.armature_max)
    x = space.normalize({"armature": np.array([0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.5]), "friction": 0.1, "viscous": 0.1,
                         "delay": 1})
    hits = [h for h in space.at_bounds(x) if h.group == "armature"]
    assert [h.joint for h in hits] == ["panda_joint7"] and hits[0].bound == pytest.approx(0.24)
    assert "physical bound" in hits[0].describe() and "franka_panda" in hits[0].describe()
    # the per-joint box is recorded with the result (sysid_best_params.json's param_space) and read back
    again = ParamSpace.from_description(space.describe())
    assert np.allclose(again.bounds()[1], space.bounds()[1])
    assert again.group("armature").joint_upper_source == space.group("armature").joint_upper_source
    # an explicit flag is used as given; a config without the bound keeps the generic default
    flag = build_space(FitArgs.build(real_csv=["x.csv"], armature_bounds=(0.0, 1.0)).problem, franka.joint_names, cfg)
    assert np.allclose(flag.bounds()[1][flag.slice("armature")], 1.0)
    assert np.allclose(build_space(FitArgs.build(real_csv=["x.csv"]).problem, franka.joint_names).bounds()[1][:7], 0.5)
    ur = load_robot_config("ur10e")
    assert np.allclose(ur.armature_max, 0.02 * np.asarray(ur.torque_limit), rtol=0.02)


def test_a_bound_without_its_source_is_refused(tmp_path):
    text = (ROBOT_CONFIGS_DIR / "franka_panda.toml").read_text()
    bad = "\n".join(ln for ln in text.splitlines() if not ln.startswith("armature_max_source"))
    p = tmp_path / "franka_no_source.toml"
    p.write_text(bad)
    with pytest.raises(RobotConfigError, match="armature_max_source"):
        load_robot_config(p)
    p.write_text(text.replace("armature_max = [1.74,", "armature_max = [-1.0,"))
    with pytest.raises(RobotConfigError, match="finite values > 0"):
        load_robot_config(p)


def test_a_fit_that_wants_more_than_the_bound_says_so(tmp_path):
    """The torque twin's joint 7 has 0.03 kg m^2 of armature; a config that allows 0.01 there: the fit ends at the
    bound and the result names it as the physical bound, with the config's source."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_torque_replay import _args, _write_twin

    text = (ROBOT_CONFIGS_DIR / "franka_panda.toml").read_text()
    cfg = tmp_path / "franka_panda.toml"
    cfg.write_text(text.replace("armature_max = [1.74, 1.74, 1.74, 1.74, 0.24, 0.24, 0.24]",
                                "armature_max = [1.74, 1.74, 1.74, 1.74, 0.24, 0.24, 0.01]")
                   )
    fit_csv, held_csv, _ = _write_twin(load_robot("franka_panda"), tmp_path, fit_s=4.0)
    args = _args(fit_csv, held_csv, tmp_path / "out", robot=str(cfg))
    args.params.armature_bounds = None  # the default: the config's box
    lines: list[str] = []
    out = run_fit(args, log=lines.append)
    assert any("armature bounds [0, upper per joint" in ln and "0.01" in ln for ln in lines)
    res = FitResult.read(out / "sysid_best_params.json")
    hits = [h for h in res.at_bounds() if h.group == "armature"]
    assert [h.joint for h in hits] == ["panda_joint7"], [h.describe() for h in hits]
    assert "physical bound" in hits[0].describe()
