"""The typed records the rigid-body stage reads back: ``rb_params.json`` (``RbParams``) and the joint fit's
``sysid_best_params.json`` read through ``FitResult.read`` by CLIE's ``--joint-fit``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.rigid_body.clie.starts import joint_start_from_fit
from isaaclab_sysid.rigid_body.fit_seed import joint_terms_from_rb_params
from isaaclab_sysid.robots.identified import RbParams, RbParamsError
from isaaclab_sysid.rigid_body.options import RigidBodyError

NAMES = [f"j{i + 1}" for i in range(3)]


def _result(groups, values) -> FitResult:
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in groups}, 3, NAMES)
    x = space.normalize(values)
    return FitResult(space, x, space.decode(x), 1.0, ["r"], np.ones(1), np.ones(1))


def test_a_static_friction_fit_starts_coulomb_friction_at_its_dynamic_level(tmp_path):
    vals = {"armature": np.array([0.1, 0.2, 0.3]), "viscous": np.array([0.5, 0.4, 0.3]), "delay": 2,
            "mu_static": np.array([1.0, 2.0, 3.0]), "dynamic_ratio": np.array([0.5, 0.25, 0.8])}
    res = _result(("armature", "viscous", "delay", "mu_static", "dynamic_ratio"), vals)
    RunFolder(tmp_path).write_result(res)
    start = joint_start_from_fit(tmp_path, NAMES)  # a fit folder
    np.testing.assert_allclose(start.friction, res.values["mu_static"] * res.values["dynamic_ratio"])
    np.testing.assert_allclose(start.armature, res.values["armature"])
    assert start.delay == 2 and "dynamic level" in start.source
    assert joint_start_from_fit(tmp_path / "sysid_best_params.json", NAMES, delay=5).delay == 5


def test_a_seed_file_and_a_missing_group_read_as_before(tmp_path):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"best_params_decoded": {"armature": [0.1] * 3, "friction": [0.2] * 3,
                                                        "viscous": [0.3] * 3, "motor_delay_steps": 1}}))
    start = joint_start_from_fit(seed, NAMES)
    np.testing.assert_allclose(start.friction, [0.2] * 3)
    assert start.delay == 1 and start.source == str(seed)
    seed.write_text(json.dumps({"best_params_decoded": {"armature": [0.1] * 3, "motor_delay_steps": 1}}))
    with pytest.raises(RigidBodyError, match="friction"):
        joint_start_from_fit(seed, NAMES)
    with pytest.raises(RigidBodyError, match="a folder without"):
        joint_start_from_fit(tmp_path, NAMES)


def test_rb_params_reads_typed_and_names_what_a_reader_lacks(tmp_path):
    p = tmp_path / "rb_params.json"
    std = {f"{j}.{t}": v for j in NAMES for t, v in (("armature", 0.1), ("coulomb", -0.2), ("viscous", 0.3))}
    RbParams.write(p, {"robot": "toy", "output": {"signal": "tau_J", "unit": "N m"},
                       "base_parameters": {"names": ["a"], "qr": {"n_samples": 10, "seed": 0, "tol": 1e-8}},
                       "reconstruction": {"standard": std}})
    rb = RbParams.read(p)
    assert (rb.robot, rb.unit, rb.qr.n_samples, rb.base_names) == ("toy", "N m", 10, ("a",))
    assert json.loads(p.read_text())["schema"].startswith("isaaclab_sysid.rb_params")
    with pytest.raises(RbParamsError, match="estimate.cov_hac"):
        rb.need("robot", "cov_hac")
    values, clipped, src = joint_terms_from_rb_params(p, NAMES)
    assert clipped == [f"friction[{j}]" for j in NAMES] and np.all(values["friction"] == 0.0)
    assert "tau_J [N m]" in src
    p.write_text("[1, 2]")
    with pytest.raises(RbParamsError, match="not a JSON object"):
        RbParams.read(p)
