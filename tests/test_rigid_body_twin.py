"""Twin recovery: base parameters inside their 2-sigma intervals, covariance = Monte-Carlo spread."""

from __future__ import annotations

import numpy as np
import pytest
from isaaclab_sysid.rigid_body.estimate import (
    estimate,
    instrumental_variables,
    ols,
    ols_batch,
    total_least_squares,
    wls,
)
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, preprocess
from rigid_body_twin import closed_loop_run, fourier_trajectory, twin

N_DRAWS = 200


@pytest.fixture(scope="module")
def setup():
    reg, base, true, prior = twin()
    _, q, qd, qdd = fourier_trajectory(reg.n_dof, T=600, dt=0.05, seed=1)
    Wb = base.columns(reg.matrix(q, qd, qdd))
    return reg, base, true, Wb


def test_base_parameter_count_and_grouping(setup):
    reg, base, true, Wb = setup
    # 36 inertial + 4 armature (two group with link inertias) + 3 x 6 friction/offset
    assert base.rank == 58
    assert np.linalg.matrix_rank(Wb) == base.rank
    # the full regressor is explained by the base columns: W pi == W_b pi_b for any pi
    _, q, qd, qdd = fourier_trajectory(reg.n_dof, T=50, dt=0.1, seed=7)
    W = reg.matrix(q, qd, qdd)
    pi = np.random.default_rng(0).normal(size=reg.n_params)
    np.testing.assert_allclose(W @ pi, base.columns(W) @ base.to_base(pi), atol=1e-8 * np.abs(W @ pi).max())
    groups = {g["name"].split(" ")[0]: g for g in base.groups()}
    assert "shoulder_link.Izz" in [t[0] for g in groups.values() for t in g["terms"]]
    assert "shoulder_link.m" in base.unidentifiable()


def test_ols_coverage_and_monte_carlo(setup):
    reg, base, true, Wb = setup
    pib = base.to_base(true)
    clean = Wb @ pib
    sigma = 0.3
    rng = np.random.default_rng(2024)
    Y = clean[:, None] + rng.normal(0, sigma, (clean.size, N_DRAWS))
    thetas, stds = ols_batch(Wb, Y)
    # the batch solver is the same estimator as ols()
    one = ols(Wb, Y[:, 0], reg.n_dof)
    np.testing.assert_allclose(one.theta, thetas[0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(one.std, stds[0], rtol=1e-8)
    inside = np.abs(thetas - pib) <= 2 * stds
    coverage = float(np.mean(inside))
    assert coverage >= 0.90, coverage
    # covariance formula vs the spread over repeated noise draws
    ratio = np.std(thetas, axis=0, ddof=1) / np.mean(stds, axis=0)
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio
    # unbiased: mean estimate within 4.5 standard errors of the truth
    se = np.mean(stds, axis=0) / np.sqrt(N_DRAWS)
    assert np.all(np.abs(np.mean(thetas, axis=0) - pib) < 4.5 * se)
    print(f"OLS 2-sigma coverage {coverage:.3f}; MC/formula std ratio {ratio.min():.2f}..{ratio.max():.2f}")


def test_wls_per_joint_noise_coverage(setup):
    reg, base, true, Wb = setup
    pib = base.to_base(true)
    clean = Wb @ pib
    sig = np.array([0.8, 0.8, 0.4, 0.05, 0.05, 0.05])
    rng = np.random.default_rng(7)
    n_s = clean.size // 6
    Y = clean[:, None] + (rng.normal(size=(n_s, 6, N_DRAWS)) * sig[None, :, None]).reshape(-1, N_DRAWS)
    w = np.tile(1.0 / sig, n_s)
    th_w, sd_w = ols_batch(Wb * w[:, None], Y * w[:, None])
    coverage = float(np.mean(np.abs(th_w - pib) <= 2 * sd_w))
    assert coverage >= 0.90, coverage
    ratio = np.std(th_w, axis=0, ddof=1) / np.mean(sd_w, axis=0)
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio
    # wls() (two-step, noise estimated per joint) matches the known-weight solution
    r = wls(Wb, Y[:, 0], reg.n_dof)
    assert np.all(np.abs(r.theta - th_w[0]) < 0.5 * sd_w[0])
    np.testing.assert_allclose(r.std, sd_w[0], rtol=0.25)
    # weighting by the per-joint noise tightens the estimate
    _, sd_o = ols_batch(Wb, Y[:, :20])
    assert np.median(np.mean(sd_w, 0) / np.mean(sd_o, 0)) < 0.9
    print(f"WLS 2-sigma coverage {coverage:.3f}; MC/formula std ratio {ratio.min():.2f}..{ratio.max():.2f}")


def test_iv_and_tls_and_dispatch(setup):
    reg, base, true, Wb = setup
    pib = base.to_base(true)
    rng = np.random.default_rng(3)
    y = Wb @ pib + rng.normal(0, 0.3, Wb.shape[0])
    r_iv = instrumental_variables(Wb, y, Wb, reg.n_dof)  # Z = W reduces to OLS
    np.testing.assert_allclose(r_iv.theta, ols(Wb, y, reg.n_dof).theta, rtol=1e-6, atol=1e-8)
    r_tls = total_least_squares(Wb, y, reg.n_dof)
    assert np.mean(np.abs(r_tls.theta - pib) <= 3 * r_tls.std) > 0.8
    with pytest.raises(ValueError, match="instrument"):
        estimate(Wb, y, reg.n_dof, "iv")
    with pytest.raises(ValueError, match="unknown method"):
        estimate(Wb, y, reg.n_dof, "normal_equations")
    with pytest.raises(np.linalg.LinAlgError, match="rank deficient"):
        ols(reg.matrix(*[np.zeros((20, 6))] * 3), np.zeros(120), 6)


def test_iv_removes_the_closed_loop_bias(setup):
    """Seed 000 L.C.3 on the twin: under feedback the actuator disturbance drives the
    acceleration, so OLS on the measured motion is biased and its intervals miss; the instrument built from the reference trajectory is not
    correlated with the disturbance, and IV's intervals cover."""
    reg, base, true, prior = twin()
    true = true.copy()
    true[reg.term_slice("coulomb")] = 0.0  # smooth dynamics for the explicit integrator
    ctrl = prior.copy()  # the controller's model: URDF links, joint terms 20 % low
    for term in ("armature", "viscous", "offset"):
        ctrl[reg.term_slice(term)] = 0.8 * true[reg.term_slice(term)]
    pib = base.to_base(true)
    z_ols, z_iv = [], []
    for seed in range(3):
        ref, meas, tau = closed_loop_run(reg, true, ctrl, seed)
        assert np.sqrt(np.mean((meas[0] - ref[0]) ** 2)) < 0.01  # it tracks (mrad), yet:
        W, Z, y = base.columns(reg.matrix(*meas)), base.columns(reg.matrix(*ref)), tau.ravel()
        r_ols, r_iv = ols(W, y, reg.n_dof), estimate(W, y, reg.n_dof, "iv", Z=Z)
        z_ols.append((r_ols.theta - pib) / r_ols.std)
        z_iv.append((r_iv.theta - pib) / r_iv.std)
    z_ols, z_iv = np.abs(np.array(z_ols)), np.abs(np.array(z_iv))
    assert np.median(z_ols) > 2.5 and np.mean(z_ols <= 2) < 0.5, np.median(z_ols)
    assert np.median(z_iv) < 1.0 and np.mean(z_iv <= 2) >= 0.9, np.median(z_iv)


def test_preprocessing_end_to_end_twin():
    """Irregular 94 Hz stamps + sensor noise -> filtered derivatives -> LS predicts held-out torque."""
    reg, base, true, _ = twin()
    rng = np.random.default_rng(5)
    fine_t, q, qd, qdd = fourier_trajectory(reg.n_dof, T=12000, dt=0.002, seed=11, f0=0.05)
    tau = reg.predict(true, q, qd, qdd)
    idx = np.sort(rng.choice(fine_t.size, size=fine_t.size // 5, replace=False))
    t_log = fine_t[idx]
    q_log = q[idx] + rng.normal(0, 1e-5, (idx.size, 6))
    tau_log = tau[idx] + rng.normal(0, 0.3, (idx.size, 6))
    p = preprocess(t_log, q_log, {"tau": tau_log}, PreprocessOptions(dt=0.02, cutoff_hz=3.0), source="twin")
    assert p.record["time_axis"]["raw_dt_max_s"] > 2 * p.record["time_axis"]["raw_dt_min_s"]
    # derivatives of the filtered positions match the analytic ones
    qd_true = np.column_stack([np.interp(p.t, fine_t, qd[:, j]) for j in range(6)])
    assert np.sqrt(np.mean((p.qd - qd_true) ** 2)) < 0.02 * np.sqrt(np.mean(qd_true**2))
    W = base.columns(reg.matrix(p.q, p.qd, p.qdd))
    r = ols(W, p.signals["tau"].ravel(), 6)
    _, qv, qdv, qddv = fourier_trajectory(reg.n_dof, T=500, dt=0.04, seed=99, f0=0.05)
    pred = base.columns(reg.matrix(qv, qdv, qddv)) @ r.theta
    truth = reg.predict(true, qv, qdv, qddv).ravel()
    assert np.sqrt(np.mean((pred - truth) ** 2)) < 0.05 * np.sqrt(np.mean(truth**2))


def test_preprocess_bad_input_messages():
    t = np.arange(100) * 0.01
    t[50] = t[48]
    with pytest.raises(ValueError, match=r"runX: row 51: time goes backwards"):
        preprocess(t, np.zeros((100, 2)), source="runX")
    q = np.zeros((100, 2))
    tau = np.zeros((100, 2))
    tau[7, 1] = np.nan
    with pytest.raises(ValueError, match=r"runY: signal 'tau' row 8, column 2: non-finite"):
        preprocess(np.arange(100) * 0.01, q, {"tau": tau}, PreprocessOptions(trim_s=0.05), source="runY")


def test_hac_covariance_matches_spread_of_correlated_noise(setup):
    """Filtered logs have time-correlated residuals: the OLS formula then understates the spread, HAC does not."""
    import scipy.signal
    from isaaclab_sysid.rigid_body.estimate import hac_covariance

    reg, base, true, Wb = setup
    clean = Wb @ base.to_base(true)
    T = Wb.shape[0] // reg.n_dof
    rng = np.random.default_rng(11)
    # white noise: HAC ~ OLS
    y = clean + rng.normal(0, 0.3, clean.size)
    r = ols(Wb, y, reg.n_dof)
    hac = np.sqrt(np.diag(hac_covariance(Wb, y - Wb @ r.theta, reg.n_dof, lags=10)))
    assert 0.85 < np.median(hac / r.std) < 1.1
    # AR(1) noise per joint, rho = 0.9 (correlation time ~ 10 samples)
    rho, n = 0.9, 40
    e = scipy.signal.lfilter([np.sqrt(1 - rho**2)], [1, -rho], rng.normal(0, 0.3, (n, T, reg.n_dof)), axis=1)
    Y = clean[:, None] + e.reshape(n, -1).T
    thetas, stds = ols_batch(Wb, Y)
    bread = r.cov / r.sigma2  # (W^T W)^-1, shared by every draw
    hacs = np.array([
        np.sqrt(np.diag(hac_covariance(Wb, Y[:, k] - Wb @ thetas[k], reg.n_dof, lags=30, segments=[T], bread=bread)))
        for k in range(n)
    ])
    spread = np.std(thetas, axis=0, ddof=1)
    r_ols, r_hac = np.median(spread / stds.mean(0)), np.median(spread / hacs.mean(0))
    assert r_ols > 2.0 and 0.8 < r_hac < 1.3, (r_ols, r_hac)
    with pytest.raises(ValueError, match="segments"):
        hac_covariance(Wb, y, reg.n_dof, 5, segments=[T - 1])
    print(f"AR(1) rho 0.9: MC spread / OLS std {r_ols:.2f}, / HAC std {r_hac:.2f}")
