"""Identifiability table and pre-flight report on the MuJoCo replay backend (CI-sized)."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.excitation import MultibandSpec, anchor_pose, default_q_init, multiband
from isaaclab_sysid.excitation.cli import build_task_run
from isaaclab_sysid.excitation.identifiability import identifiability
from isaaclab_sysid.excitation.limits import DesignLimits
from isaaclab_sysid.excitation.multiband import MULTIBAND_AXES
from isaaclab_sysid.excitation.preflight import preflight
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend


@pytest.fixture(scope="module")
def panda():
    r = load_robot("franka_panda")
    q0 = default_q_init(r)
    return r, q0, *anchor_pose(r, q0)


def _run(panda, axes, duration=12.0, fade=2.0):
    r, q0, pos, quat = panda
    d = multiband(MultibandSpec(duration_s=duration, fade_s=fade, axes=axes), pos, quat)
    run, _, peaks = build_task_run(r, q0, d, DesignLimits(), "mb", 500, 30, None, None)
    return run, peaks


def test_translation_only_multiband_hides_j1_and_j5_friction(panda):
    """Seed 004: translation alone leaves base-yaw (j1) and wrist (j5) friction poorly observable."""
    r = panda[0]
    backend = MujocoBackend(r, ReplayOptions())
    tabs = {}
    for label, axes in (("trans", ("x", "y", "z")), ("full", MULTIBAND_AXES)):
        run, _ = _run(panda, axes)
        tabs[label] = identifiability(backend, [run], r.n_dof, groups=("friction", "viscous"))
    backend.close()
    ratio = {j: tabs["full"].value("friction", j).conditional / tabs["trans"].value("friction", j).conditional
             for j in range(1, 8)}
    # j1 and j5 friction: several times more observable with the rotation axes on ...
    assert ratio[1] > 3.0 and ratio[5] > 3.0, ratio
    # ... while joints the translation already drives gain little (j2, j4 around 1)
    assert ratio[2] < 2.0 and ratio[4] < 2.0, ratio


def test_preflight_report_numbers(panda):
    r = panda[0]
    run, peaks = _run(panda, MULTIBAND_AXES, duration=4.0, fade=1.0)
    rep = preflight(r, run, peaks=peaks, ident=False)
    n = rep.numbers
    assert np.isfinite(n["regressor_cond"]) and n["n_base_params"] == 43
    assert len(n["tau_peak_nm"]) == 7 and all(np.isfinite(n["tau_peak_nm"]))
    # gravity is carried by the joints: the shoulder (j2) and elbow (j4) carry far more than the wrist
    assert n["tau_peak_nm"][1] > 5 * n["tau_peak_nm"][6]
    assert all(0 < f < 1 for f in n["tau_limit_frac"])
    assert all(s >= 0 for s in n["tau_step_peak_nm"])
    assert 0.2 < n["tracking_ratio"] < 1.5
    # a tight warn fraction produces warnings naming the joint
    rep2 = preflight(r, run, peaks=peaks, ident=False, warn_frac=0.01)
    assert any("joint 2 predicted torque" in w for w in rep2.warnings)
    assert "cond(W_b)" in rep.format()
