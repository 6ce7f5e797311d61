"""Issue 46: the rigid-body step seeds the Gaz sigmoid friction law (rigid_body/friction_seed.py).

On the UR10e rigid-body twin (tests/rigid_body_twin.py: known inertials, armature, viscous and offsets) whose dry
friction is a known Gaz sigmoid instead of Coulomb, the LS (with its Coulomb column) is solved as the rigid-body step
does; the torque it attributes to friction (its Coulomb + viscous + offset + residual) is then fitted per joint and
must give back the truth's sigmoid, viscous and offset. A joint whose velocity never comes near 0 must be named as
weakly determined.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from isaaclab_sysid.rigid_body.estimate import ols
from isaaclab_sysid.rigid_body.friction_seed import fit_sigmoid, friction_torque, sigmoid_torque
from isaaclab_sysid.rigid_body.preprocess import Processed
from rigid_body_twin import fourier_trajectory, twin

#: the truth's sigmoid per joint: phi1 [N m] (UR10e-sized: Coulomb ~ phi1 / 2), phi2 [s/rad], phi3 [rad/s]
AMPLITUDE = np.array([12.0, 12.0, 6.0, 2.0, 2.0, 2.0])
SLOPE = np.array([8.0, 15.0, 25.0, 40.0, 20.0, 10.0])
OFFSET = np.array([0.02, -0.03, 0.01, -0.02, 0.03, 0.0])
#: the replay fit's boxes on the UR10e (jobs/ur10e_torque_study.BOUNDS: amplitude to 60 N m, viscous to 40; slope,
#: offset default)
BOUNDS = {"sigmoid_amplitude": (0.0, 60.0), "sigmoid_slope": (1.0, 100.0), "sigmoid_offset": (-0.1, 0.1),
          "viscous": (0.0, 40.0)}
NOISE = 0.2  # white torque noise [N m]


def _runs(reg, true, drift: float = 0.0) -> list[Processed]:
    """Three 30 s Fourier runs at 100 Hz, torque = rigid body + armature + viscous + offset + the sigmoid + noise;
    ``drift`` [rad/s] is added to the last joint's velocity (it then never stops)."""
    pi = true.copy()
    pi[reg.term_slice("coulomb")] = 0.0
    rng = np.random.default_rng(7)
    runs = []
    for seed in range(3):
        t, q, qd, qdd = fourier_trajectory(reg.n_dof, 3000, 0.01, seed=seed, harmonics=4, f0=0.1)
        q, qd = q.copy(), qd.copy()
        q[:, -1] += drift * t
        qd[:, -1] += drift
        tau = reg.predict(pi, q, qd, qdd) + sigmoid_torque(qd, AMPLITUDE, SLOPE, OFFSET)
        tau += NOISE * rng.standard_normal(tau.shape)
        runs.append(Processed(t=t, q=q, qd=qd, qdd=qdd, signals={"tau_J": tau}))
    return runs


def _ls_standard(reg, base, runs: list[Processed]) -> np.ndarray:
    """The rigid-body step's LS (base parameters, Coulomb column included) as a standard vector."""
    W = np.vstack([base.columns(reg.matrix(p.q, p.qd, p.qdd)) for p in runs])
    y = np.concatenate([p.signals["tau_J"].ravel() for p in runs])
    return base.to_standard(ols(W, y, reg.n_dof).theta)


def _show(seed) -> None:
    got = seed.values
    print("\nphi1 / truth " + " ".join(f"{x:.3f}" for x in got["sigmoid_amplitude"] / AMPLITUDE)
          + "\nphi2 / truth " + " ".join(f"{x:.3f}" for x in got["sigmoid_slope"] / SLOPE)
          + "\nphi3 - truth [rad/s] " + " ".join(f"{x:+.4f}" for x in got["sigmoid_offset"] - OFFSET)
          + "\nRMS [N m] sigmoid / LS Coulomb " + " ".join(f"{a:.3f}/{b:.3f}" for a, b in
                                                        zip(seed.rms_sigmoid, seed.rms_coulomb))
          + f"\nramp samples {seed.ramp_samples.tolist()}; weak {seed.weak}")


def test_the_sigmoid_step_is_exact_given_the_true_inertials():
    """The per-joint fit alone: with the truth's inertials and armature as the rigid-body model, the friction torque is
    the sigmoid + viscous + offset + noise, and the fit returns them to within the noise."""
    reg, _, true, _ = twin()
    runs = _runs(reg, true)
    seed = fit_sigmoid(friction_torque(reg, runs, true, "tau_J"), list(reg.robot.joint_names), BOUNDS)
    _show(seed)
    np.testing.assert_allclose(seed.values["sigmoid_amplitude"], AMPLITUDE, rtol=0.02)
    np.testing.assert_allclose(seed.values["sigmoid_slope"], SLOPE, rtol=0.05)
    np.testing.assert_allclose(seed.values["sigmoid_offset"], OFFSET, atol=0.002)
    np.testing.assert_allclose(seed.viscous, true[reg.term_slice("viscous")], rtol=0.05)
    np.testing.assert_allclose(seed.torque_offset, true[reg.term_slice("offset")], atol=0.03)
    assert np.all(seed.rms_sigmoid < 1.05 * NOISE), seed.rms_sigmoid
    assert not seed.weak, seed.weak


def test_the_rigid_body_step_recovers_a_sigmoid_twins_friction():
    """The rigid-body step end to end: the LS with its Coulomb column, then the sigmoid on what it attributes to
    friction. The LS's inertials took part of the sigmoid (sigmoid - Coulomb correlates with their columns), so the
    seed is close, not exact: amplitude within 20 %, slope within 35 %, offset within a tenth of the ramp's half
    width 2 / phi2; and it explains the friction torque far better than the LS's Coulomb does."""
    reg, base, true, _ = twin()
    names = list(reg.robot.joint_names)
    runs = _runs(reg, true)
    seed = fit_sigmoid(friction_torque(reg, runs, _ls_standard(reg, base, runs), "tau_J"), names, BOUNDS)
    _show(seed)
    got = seed.values
    np.testing.assert_allclose(got["sigmoid_amplitude"], AMPLITUDE, rtol=0.2)
    np.testing.assert_allclose(got["sigmoid_slope"], SLOPE, rtol=0.35)
    assert np.all(np.abs(got["sigmoid_offset"] - OFFSET) < 0.1 * 2.0 / SLOPE), got["sigmoid_offset"] - OFFSET
    assert np.all(seed.rms_sigmoid < seed.rms_coulomb), (seed.rms_sigmoid, seed.rms_coulomb)
    assert np.all(seed.rms_sigmoid[:3] < 0.7 * seed.rms_coulomb[:3]), (seed.rms_sigmoid, seed.rms_coulomb)
    # its own viscous is nearer the truth's than the LS's, which took the shallow sigmoids' near-linear part
    ls_visc = _ls_standard(reg, base, runs)[reg.term_slice("viscous")]
    err_seed, err_ls = (np.abs(v - true[reg.term_slice("viscous")]) for v in (seed.viscous, ls_visc))
    print(f"viscous error [N m s/rad] seed {np.round(err_seed, 3)}, LS {np.round(err_ls, 3)}")
    assert np.all(err_seed < err_ls), (err_seed, err_ls)
    assert not seed.weak, seed.weak


def test_a_joint_that_never_stops_is_named_weak():
    reg, _, true, _ = twin()
    names = list(reg.robot.joint_names)
    runs = _runs(reg, true, drift=4.0)
    assert min(float(np.abs(p.qd[:, -1]).min()) for p in runs) > 0.5
    seed = fit_sigmoid(friction_torque(reg, runs, true, "tau_J"), names, BOUNDS)
    assert list(seed.weak) == [names[-1]], seed.weak
    assert "little data near v = 0" in seed.weak[names[-1]]
    np.testing.assert_allclose(seed.values["sigmoid_amplitude"][:3], AMPLITUDE[:3], rtol=0.02)


def test_a_seed_without_its_runs_keeps_its_values_and_says_why(tmp_path):
    """An rb_params.json that records no identification runs: the LS values are seeded as before, the sigmoid is not,
    and the seed file says why."""
    from isaaclab_sysid.rigid_body.fit_seed import build_seed, sigmoid_start, write_seed
    from isaaclab_sysid.rigid_body.seed_cli import sigmoid_lines
    from isaaclab_sysid.robots.identified import RbParams

    names = ["j1", "j2"]
    std = {f"{j}.{t}": v for j in names for t, v in (("armature", 0.1), ("coulomb", 0.2), ("viscous", 0.3))}
    p = tmp_path / "rb_params.json"
    RbParams.write(p, {"robot": "ur10e", "output": {"signal": "tau_J", "unit": "N m"},
                       "base_parameters": {"names": ["a"], "qr": {"n_samples": 10, "seed": 0, "tol": 1e-8}},
                       "reconstruction": {"standard": std}})
    seed = build_seed(p, names)
    assert set(seed.values) == {"armature", "friction", "viscous"}
    np.testing.assert_allclose(seed.values["friction"], [0.2, 0.2])
    assert seed.sigmoid is None and "regressor" in seed.sigmoid_skipped
    body = json.loads(write_seed(tmp_path / "seed.json", seed).read_text())
    assert "sigmoid_amplitude" not in body["best_params_decoded"] and body["sigmoid_fit"]["skipped"]
    assert "not seeded" in sigmoid_lines(seed)[0]
    with pytest.raises(ValueError, match="holds no sigmoid"):
        sigmoid_start(seed)


def test_the_sigmoid_start_travels_beside_the_coulomb_model(tmp_path):
    """The seed file describes the Coulomb model (``--eval_params`` evaluates it: friction and the sigmoid together
    would be refused) and carries the sigmoid's start under ``law_starts``, which ``--x0`` takes for a sigmoid fit."""
    from types import SimpleNamespace

    from isaaclab_sysid.fit.problem import start_point
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.rigid_body.fit_seed import FitSeed, sigmoid_start, write_seed

    names = ("j1", "j2")
    sig_values = {"sigmoid_amplitude": np.array([3.0, 4.0]), "sigmoid_slope": np.array([20.0, 30.0]),
                  "sigmoid_offset": np.array([0.01, -0.02])}
    sig = SimpleNamespace(values=sig_values, to_json=lambda joints: {"joints": list(joints)},
                          start_values=lambda: {"viscous": np.array([0.25, 0.35])})
    values = {"armature": np.array([0.1, 0.2]), "friction": np.array([0.5, 0.6]), "viscous": np.array([0.3, 0.4])}
    seed = FitSeed(values, {k: "LS" for k in values}, [], None, sig, "", names)
    path = write_seed(tmp_path / "seed.json", seed)
    body = json.loads(path.read_text())
    assert set(body["best_params_decoded"]) == {"armature", "friction", "viscous"}
    assert body["law_starts"]["sigmoid"]["sigmoid_slope"] == [20.0, 30.0]
    coulomb = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous")}, 2, list(names))
    given = FitResult.read(str(path), space=coulomb, joint_names=list(names))  # --eval_params reads it as fit_job does
    evaluated = given.in_space(coulomb.restricted_to(given.decoded_json()))
    assert list(evaluated.space.group_names) == ["armature", "friction", "viscous"]

    bounds = {**{g: DEFAULT_BOUNDS[g] for g in ("armature", "viscous")}, "sigmoid_amplitude": (0.0, 10.0),
              "sigmoid_slope": (1.0, 100.0), "sigmoid_offset": (-0.1, 0.1)}
    space = ParamSpace.from_bounds(bounds, 2, list(names))
    lines: list[str] = []
    got = space.decode(start_point(str(path), space, log=lines.append))
    for g, v in sig_values.items():
        np.testing.assert_allclose(got[g], v)
    np.testing.assert_allclose(got["armature"], values["armature"])
    assert any("law_starts" in ln for ln in lines), lines
    lines.clear()
    np.testing.assert_allclose(coulomb.decode(start_point(str(path), coulomb, log=lines.append))["friction"], [0.5, 0.6])
    assert not lines, lines  # nothing dropped, nothing taken from law_starts

    # the sigmoid law's own start (--law sigmoid) is the model itself: no friction, the sigmoid in best_params_decoded
    own = json.loads(write_seed(tmp_path / "own.json", sigmoid_start(seed)).read_text())
    assert "friction" not in own["best_params_decoded"] and "law_starts" not in own
    assert own["best_params_decoded"]["sigmoid_amplitude"] == [3.0, 4.0]
