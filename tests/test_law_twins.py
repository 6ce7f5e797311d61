"""twin/law_twins.py (issue 46): the friction-law matrix's servo and 50 Hz twins carry what a real recording does."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")

from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.twin.demo import joint_target  # noqa: E402
from isaaclab_sysid.twin.law_twins import SERVO_COUNT, STALE_MS, matrix_noise, record_law_twin  # noqa: E402
from isaaclab_sysid.twin.params import TwinParams  # noqa: E402

ARM = np.array([0.18, 0.22, 0.12, 0.15, 0.04, 0.06, 0.03])


def _params(controller: str, rate: float) -> TwinParams:
    return TwinParams(robot="franka_panda", armature=ARM, friction=np.full(7, 0.3), viscous=np.full(7, 0.5), delay=2,
                      torque_clamp=False, slew_limit=False, noise=matrix_noise(controller, rate))


def test_servo_50hz_twin_is_logged_as_a_servo_arm_logs_it():
    robot = load_robot("franka_panda")
    tgt = joint_target(robot, 1.0, 40)
    run = record_law_twin(robot, tgt, _params("servo", 50.0), "servo", 50.0, seed=1)
    assert run.meta.log_rate_hz == 50.0 and run.meta.state_age_ms == STALE_MS
    assert run.meta.gravity_compensated is False
    assert np.all(np.isnan(run.tau)) and np.all(np.isnan(run.tau_J))
    steps = run.q / SERVO_COUNT
    assert np.allclose(steps, np.round(steps), atol=1e-6)  # on the encoder's grid
    assert np.allclose(run.dq, np.gradient(run.q, run.t, axis=0))


def test_franka_controllers_keep_torque_and_1khz_rows_are_fresh():
    robot = load_robot("franka_panda")
    tgt = joint_target(robot, 0.5, 40)
    fast = record_law_twin(robot, tgt, _params("joint_pd", 1000.0), "joint_pd", 1000.0, seed=1)
    assert fast.meta.log_rate_hz == 1000.0 and fast.meta.state_age_ms is None and np.all(np.isfinite(fast.tau))
    assert matrix_noise("joint_pd", 1000.0).stale_max_ms == 0 and matrix_noise("joint_pd", 50.0).stale_max_ms == STALE_MS
    with pytest.raises(ValueError, match="30 Hz log needs a 30 Hz target"):
        record_law_twin(robot, tgt, _params("joint_pd", 30.0), "joint_pd", 30.0, seed=1)
    with pytest.raises(ValueError, match="controller"):
        matrix_noise("torque", 50.0)
