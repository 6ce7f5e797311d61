"""Issue 28's wrist_1 study tools, without the UR10e data: the static-friction seed of the torque replay study and the
per-log joint-term refit of ``benchmarks/ur10e_friction_drift.py`` (recovers known terms from a synthetic log)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from isaaclab_sysid.jobs.ur10e_torque_study import FIT_GROUPS, STATIC_FIT_GROUPS, static_seed
from isaaclab_sysid.rigid_body.fit_seed import FitSeed
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.regressor import Regressor, RegressorOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ur10e_friction_drift  # noqa: E402


def test_static_seed_keeps_the_ls_sliding_friction():
    seed = FitSeed({"armature": np.array([0.3, 0.5]), "friction": np.array([2.0, 4.0]),
                    "viscous": np.array([3.0, 1.0])})
    assert static_seed(seed, FIT_GROUPS, 0.8) is seed  # Coulomb groups: the seed as it was
    s = static_seed(seed, STATIC_FIT_GROUPS, 0.8)
    assert "friction" not in s.values
    np.testing.assert_allclose(s.values["mu_static"], [2.5, 5.0])  # breakaway = sliding / ratio
    np.testing.assert_allclose(s.values["dynamic_ratio"] * s.values["mu_static"], [2.0, 4.0])
    np.testing.assert_allclose(static_seed(seed, STATIC_FIT_GROUPS).values["mu_static"], [2.0, 4.0])  # ratio 1
    for bad in (0.0, 1.2):
        with pytest.raises(ValueError, match="static_seed_ratio"):
            static_seed(seed, STATIC_FIT_GROUPS, bad)


def test_per_log_refit_recovers_one_joints_terms():
    robot = load_robot("ur10e")
    reg = Regressor(robot, RegressorOptions(coulomb_deadband=1e-3))
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 20.0, 0.02)[:, None]
    w = rng.uniform(0.3, 1.2, (1, robot.n_dof))
    q, qd, qdd = np.sin(w * t), w * np.cos(w * t), -(w**2) * np.sin(w * t)
    gains = np.linspace(8.0, 11.0, robot.n_dof)
    truth = reg.prior()
    j = robot.joint_names.index("wrist_1_joint")
    terms = {"armature": 0.4, "viscous": 3.0, "coulomb": 2.3, "offset": 0.2}
    for name, value in terms.items():
        truth[reg.term_slice(name).start + j] = value
    current = (reg.matrix(q, qd, qdd, gains) @ truth).reshape(-1, robot.n_dof)
    current += rng.normal(0.0, 0.01, current.shape)  # [A]
    log = SimpleNamespace(q=q, qd=qd, qdd=qdd, signals={"current": current})
    held = truth.copy()
    for name in terms:  # the common set is wrong on this joint's terms only
        held[reg.term_slice(name).start + j] *= 0.7
    out = ur10e_friction_drift.per_log_terms(reg, held, gains, log, j)
    for name, value in terms.items():
        assert abs(out[name] - value) < 4 * out[f"{name}_se"] + 1e-3, (name, out[name], value)
    assert out["rmse_own_A"] < 0.02 < out["rmse_ls_A"]
