"""Excitation designs: spectra, fades, limits, target runs (CI-sized)."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.data import read_run
from isaaclab_sysid.excitation import (
    ChirpSpec, DesignLimitError, DesignLimits, MultibandSpec, anchor_pose, chirp, default_q_init, multiband,
)
from isaaclab_sysid.excitation.cli import build_task_run
from isaaclab_sysid.excitation.design_io import write_target
from isaaclab_sysid.robots import load_robot


@pytest.fixture(scope="module")
def panda():
    r = load_robot("franka_panda")
    q0 = default_q_init(r)
    pos, quat = anchor_pose(r, q0)
    return r, q0, pos, quat


def _fit_tones(t, x, freqs):
    cols = [np.ones_like(t)]
    for f in freqs:
        cols += [np.sin(2 * np.pi * f * t), np.cos(2 * np.pi * f * t)]
    a = np.stack(cols, 1)
    coef, *_ = np.linalg.lstsq(a, x, rcond=None)
    return coef, x - a @ coef


def test_multiband_spectrum_is_exactly_the_configured_tones(panda):
    _, _, pos, quat = panda
    spec = MultibandSpec(seed=3)
    d = multiband(spec, pos, quat)
    freqs = np.array(d.description["frequencies_hz"])
    amps = np.array(d.description["tone_amplitudes"])
    assert len(np.unique(freqs)) == 18  # a different frequency on every axis
    for b, (lo, hi) in enumerate(spec.bands_hz):
        assert np.all((freqs[:, b] >= lo) & (freqs[:, b] <= hi))
    plateau = (d.t >= spec.fade_s) & (d.t <= spec.duration_s - spec.fade_s)
    for i in range(6):
        coef, resid = _fit_tones(d.t[plateau], d.offsets.v[plateau, i], freqs[i])
        fitted = np.hypot(coef[1::2], coef[2::2])
        np.testing.assert_allclose(fitted, amps[i], rtol=1e-9, atol=1e-12)
        assert np.max(np.abs(resid)) < 1e-10  # nothing but the three tones
        np.testing.assert_allclose(amps[i], spec.amplitude[i] * np.minimum(1, 0.35 / freqs[i]))
        # the whole-run FFT peaks sit at the configured tones
        nfft = 1 << 18
        f = np.fft.rfftfreq(nfft, 1e-3)
        spec_i = np.abs(np.fft.rfft(d.offsets.v[:, i], nfft))
        peak = f[np.argmax(spec_i)]
        assert np.min(np.abs(freqs[i] - peak)) < 0.02


def test_chirp_sweeps_exactly_the_band(panda):
    _, _, pos, quat = panda
    for band, (f0, f1) in (("low", (0.1, 0.7)), ("high", (0.7, 3.0))):
        d = chirp(ChirpSpec(band=band), pos, quat)
        s = ChirpSpec(band=band).resolved()
        assert (s.f_start_hz, s.f_end_hz) == pytest.approx((f0, f1)) and d.t[-1] == pytest.approx(s.duration_s)
        # on the plateau the signal is amp * taper(f) * sin(phase): check against the closed form
        plateau = (d.t > s.ramp_up_s) & (d.t < d.duration - s.ramp_down_s)
        k = (f1 - f0) / s.duration_s
        f = f0 + k * d.t  # the sweep's instantaneous frequency, written out here (the package has no copy of it)
        phase = 2 * np.pi * (f0 * d.t + 0.5 * k * d.t**2)
        for i in range(6):
            ref = s.amplitude[i] * (0.7 / f) ** s.amp_taper_exp * np.sin(phase + i * np.pi / 3)
            np.testing.assert_allclose(d.offsets.v[plateau, i], ref[plateau], atol=1e-12)
        # spectral content: > 99 % of the energy lies inside the band (+- envelope leakage)
        nfft = 1 << 16
        fr = np.fft.rfftfreq(nfft, 1e-3)
        p = np.abs(np.fft.rfft(d.offsets.v[:, 2], nfft)) ** 2
        inside = (fr >= f0 - 0.15) & (fr <= f1 + 0.15)
        assert p[inside].sum() / p.sum() > 0.99


@pytest.mark.parametrize("kind", ["multiband", "chirp_low", "chirp_high"])
def test_fades_start_and_end_at_start_pose_at_rest(panda, kind):
    _, _, pos, quat = panda
    d = multiband(MultibandSpec(), pos, quat) if kind == "multiband" else chirp(ChirpSpec(band=kind[6:]), pos, quat)
    for k in (0, -1):
        assert np.max(np.abs(d.offsets.v[k])) < 1e-12
        assert np.max(np.abs(d.offsets.d[k])) < 1e-12
        np.testing.assert_allclose(d.position()[k], pos, atol=1e-12)
        assert abs(abs(np.dot(d.quat()[k], quat)) - 1) < 1e-12
    # velocity of the reference is continuous (no jump anywhere): max step per tick is small
    assert np.max(np.abs(np.diff(d.offsets.d, axis=0))) < 0.1


def test_target_run_round_trip_and_ends_at_q_init(panda, tmp_path):
    r, q0, pos, quat = panda
    d = multiband(MultibandSpec(duration_s=4.0, fade_s=1.0), pos, quat)
    run, jref, _ = build_task_run(r, q0, d, DesignLimits(), "mb", 200, 20, None, None)
    np.testing.assert_allclose(jref.q[0], q0, atol=1e-9)
    np.testing.assert_allclose(jref.q[-1], q0, atol=1e-6)
    assert np.max(np.abs(jref.dq[[0, -1]])) < 1e-9
    csv, side = write_target(run, tmp_path)
    back = read_run(csv)
    assert back.is_1khz and back.meta.log_rate_hz == 1000 and back.meta.control_rate_hz == 50
    ticks, vals = back.setpoints()
    assert np.all(np.diff(ticks) == 20)
    # --control-rate-hz reaches the run: setpoints held 10 ticks at 100 Hz
    run100, _, _ = build_task_run(r, q0, d, DesignLimits(), "mb", 200, 20, None, None, control_rate_hz=100.0)
    assert run100.meta.control_rate_hz == 100 and np.all(np.diff(run100.setpoints()[0]) == 10)
    np.testing.assert_allclose(vals[:, :3], d.position()[ticks], atol=1e-12)
    np.testing.assert_allclose(back.meta.kp, [200, 200, 200, 20, 20, 20])
    np.testing.assert_allclose(back.meta.kd, 2 * np.sqrt(back.meta.kp))
    np.testing.assert_allclose(back.ee_pos, d.position(), atol=1e-5)  # FK of the IK reference


def test_generator_refuses_a_design_beyond_its_limits(panda):
    r, q0, pos, quat = panda
    d = multiband(MultibandSpec(duration_s=4.0, fade_s=1.0), pos, quat)
    with pytest.raises(DesignLimitError, match="ee_speed_m_s"):
        build_task_run(r, q0, d, DesignLimits(max_ee_speed_m_s=0.05), "mb", 200, 20, None, None)
    with pytest.raises(DesignLimitError, match="max_translation_m"):
        big = multiband(MultibandSpec(duration_s=4.0, fade_s=1.0, amplitude=(0.3, 0.3, 0.3, 0, 0, 0)), pos, quat)
        build_task_run(r, q0, big, DesignLimits(), "mb", 200, 20, None, None)
    # joint limits: a start posture near joint 4's upper limit and a large z motion
    q_edge = q0.copy()
    q_edge[3] = r.q_upper[3] - 0.08
    p2, qu2 = anchor_pose(r, q_edge)
    d2 = multiband(MultibandSpec(duration_s=4.0, fade_s=1.0, amplitude=(0.0, 0.0, 0.2, 0, 0, 0)), p2, qu2)
    with pytest.raises((DesignLimitError, RuntimeError), match="joint|IK"):
        build_task_run(r, q_edge, d2, DesignLimits(), "edge", 200, 20, None, None)


def test_designs_within_given_limits_respect_them(panda):
    r, q0, pos, quat = panda
    lim = DesignLimits(max_ee_speed_m_s=0.6, max_ee_acc_m_s2=5.0, joint_margin_rad=0.05)
    d = multiband(MultibandSpec(duration_s=4.0, fade_s=1.0), pos, quat)
    run, jref, peaks = build_task_run(r, q0, d, lim, "mb", 200, 20, None, None)
    assert peaks["ee_speed_m_s"] <= 0.6 and peaks["ee_acc_m_s2"] <= 5.0
    assert np.all(jref.q >= r.q_lower + 0.05) and np.all(jref.q <= r.q_upper - 0.05)


def test_bad_specs_are_refused_clearly(panda):
    _, _, pos, quat = panda
    with pytest.raises(ValueError, match="unknown multiband axes"):
        multiband(MultibandSpec(axes=("x", "roll")), pos, quat)
    with pytest.raises(ValueError, match="band must be"):
        chirp(ChirpSpec(band="mid"), pos, quat)
    with pytest.raises(ValueError, match="fades"):
        multiband(MultibandSpec(duration_s=3.0, fade_s=2.0), pos, quat)
