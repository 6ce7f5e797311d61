"""Optimized Fourier design vs a single sinusoid; limits; rest at the ends (CI-sized optimization)."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.excitation import default_q_init
from isaaclab_sysid.excitation.conditioning import base_columns, condition_number
from isaaclab_sysid.excitation.fourier import FourierSpec, optimize_fourier, single_sinusoid, trajectory_condition
from isaaclab_sysid.excitation.limits import PANDA_DDQ_MAX, DesignLimitError
from isaaclab_sysid.robots import load_robot

SMALL = FourierSpec(n_harmonics=3, max_iter=10, restarts=1, n_cond_samples=40, n_limit_samples=200)


@pytest.fixture(scope="module")
def panda():
    return load_robot("franka_panda")


@pytest.fixture(scope="module")
def optimized(panda):
    return optimize_fourier(panda, default_q_init(panda), SMALL)


def test_base_columns_of_the_panda(panda):
    assert len(base_columns(panda)) == 43  # the Panda's 43 base inertial parameters (gravity included)


def test_optimized_condition_number_10x_below_single_sinusoid(panda, optimized):
    q0 = default_q_init(panda)
    c_opt = trajectory_condition(panda, optimized)
    c_single = trajectory_condition(panda, single_sinusoid(panda, q0, SMALL))
    assert c_opt * 10 <= c_single, (c_opt, c_single)


def test_fourier_respects_limits_and_rests_at_the_ends(panda, optimized):
    q0 = default_q_init(panda)
    t = np.linspace(0, 1 / SMALL.f_base_hz, 5001)
    q, dq, ddq = optimized.evaluate(t)
    assert np.all(q >= panda.q_lower + SMALL.joint_margin_rad - 1e-6)
    assert np.all(q <= panda.q_upper - SMALL.joint_margin_rad + 1e-6)
    assert np.all(np.abs(dq) <= SMALL.speed_frac * panda.v_max * (1 + 1e-3))
    assert np.all(np.abs(ddq) <= SMALL.acc_frac * PANDA_DDQ_MAX * (1 + 1e-3))
    for k in (0, -1):
        np.testing.assert_allclose(q[k], q0, atol=1e-9)
        np.testing.assert_allclose(dq[k], 0, atol=1e-9)
        np.testing.assert_allclose(ddq[k], 0, atol=1e-9)


def test_fourier_refuses_a_start_outside_its_limits(panda):
    q0 = default_q_init(panda)
    q0[3] = panda.q_upper[3] - 0.01
    with pytest.raises(DesignLimitError, match="joint 4"):
        optimize_fourier(panda, q0, SMALL)


def test_condition_number_is_inf_for_a_motionless_design(panda):
    q = np.tile(default_q_init(panda), (20, 1))
    z = np.zeros_like(q)
    assert condition_number(panda, q, z, z) == float("inf")
