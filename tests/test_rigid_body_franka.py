"""Franka runs in the project's run format -> identify_rigid_body.py --runs, on the simulated twin.

Twin runs (joint_pd Fourier excitation, 1 kHz, noise, Coulomb friction, 2-tick delay) with
known perturbed link inertials; libfranka-like tau_J = the twin's acted torque + g(q) of
the true inertials (Pinocchio), see tests/rigid_body_franka_twin.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import load_script
from isaaclab_sysid.rigid_body import pipeline
from isaaclab_sysid.rigid_body.base_params import compute_base_parameters
from isaaclab_sysid.rigid_body.cli import IdentifyArgs, main_from_args
from isaaclab_sysid.robots.identified import load_nominal
from isaaclab_sysid.rigid_body.options import PipelineOptions, RigidBodyError
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.robots.regressor import Regressor, RegressorOptions
from isaaclab_sysid.data import read_runs
from isaaclab_sysid.rigid_body.runs_input import process_run
from isaaclab_sysid.rigid_body.seed_cli import SeedArgs
from isaaclab_sysid.rigid_body.seed_cli import main_from_args as seed_main
from rigid_body_franka_twin import PARAMS, write_franka_runs


@pytest.fixture(scope="module")
def franka(tmp_path_factory):
    folder = tmp_path_factory.mktemp("franka_runs")
    paths, nominal, truth = write_franka_runs(folder, seeds=(1, 2, 3), duration=14.0)
    out = tmp_path_factory.mktemp("franka_out")
    args = IdentifyArgs(
        out=out, runs=tuple(paths[:2]), heldout=(paths[2],), dt=0.01, cutoff_hz=5.0,
        audit_uniform=200, audit_dense=100, audit_grid=2, seeds=(0,), no_plots=True,
    )
    assert main_from_args(args) == 0
    return paths, nominal, truth, out


def test_franka_runs_identify_base_parameters_and_torque(franka):
    paths, nominal, truth, out = franka
    body = json.loads((out / "rb_params.json").read_text())
    assert body["robot"] == "franka_panda"  # from the runs' sidecars
    assert body["output"]["signal"] == "tau_J" and body["output"]["unit"] == "N m"
    reg = Regressor(nominal, RegressorOptions(coulomb_deadband=1e-3))
    base = compute_base_parameters(reg, 300, 0)
    assert body["base_parameters"]["n_base"] == base.rank == 69
    theta = np.array(body["estimate"]["theta"])
    pi_true = Regressor(truth).prior()
    for term, v in (("armature", PARAMS.armature), ("viscous", PARAMS.viscous), ("coulomb", PARAMS.friction)):
        pi_true[reg.term_slice(term)] = v
    pb = base.to_base(pi_true)
    # the purely inertial base parameters (no joint term in the group): the large ones within 5 %
    inert = np.array([base.independent[i] < 10 * reg.n_dof and not np.any(base.beta[i][base.dependent >= 10 * reg.n_dof])
                      for i in range(base.rank)])
    big = inert & (np.abs(pb) > 0.05 * np.abs(pb[inert]).max())
    assert big.sum() >= 6
    np.testing.assert_allclose(theta[big], pb[big], rtol=0.05)
    # held-out torque: LS as good as the true parameters (noise + friction-model floor), far better than the URDF
    run = read_runs([paths[2]])[0]
    p = process_run(run, PreprocessOptions(dt=0.01, cutoff_hz=5.0))
    W = reg.matrix(p.q, p.qd, p.qdd)
    meas = p.signals["tau_J"]

    def rmse(pi):
        return np.sqrt(np.mean((meas - (W @ pi).reshape(-1, reg.n_dof)) ** 2, axis=0))

    r_ls = np.array(body["validation"]["rmse_pooled"]["LS (base)"])
    r_sdp = np.array(body["validation"]["rmse_pooled"]["SDP (standard)"])
    r_true = rmse(pi_true)
    r_urdf = rmse(np.concatenate([reg.prior()[: 10 * reg.n_dof], pi_true[10 * reg.n_dof :]]))
    np.testing.assert_allclose(r_ls, rmse(base.to_standard(theta)), rtol=1e-6)
    assert np.mean(r_ls) <= 1.2 * np.mean(r_true) and np.mean(r_sdp) <= 1.2 * np.mean(r_true)
    assert np.mean(r_ls) < 0.2 * np.mean(r_urdf)
    print(f"\nheld-out tau_J RMSE [N m]: LS {np.round(r_ls, 3)}, SDP {np.round(r_sdp, 3)}, true {np.round(r_true, 3)}, "
          f"URDF inertials {np.round(r_urdf, 3)}")
    # the reconstruction: physical, consistent, and the override loads into the robot
    rec = body["reconstruction"]
    assert body["audit_reconstructed"]["passed"] and min(rec["link_min_eig"]) > 0
    assert rec["consistency"]["p_value_hac_cov"] > 0.01
    inert_files = load_nominal(out / "nominal_inertials.json")
    robot2 = nominal.with_inertials(inert_files)
    assert set(inert_files) == set(nominal.link_names) and robot2.n_dof == 7
    # the replay fit's --nominal gives each moving body the file's inertials, the hand merged into link 7 once
    from isaaclab_sysid.arm_model import ArmModel
    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.fit.problem import build_robot
    from isaaclab_sysid.data import read_run

    fit_robot = build_robot(FitArgs.build(real_csv=[str(paths[0])], nominal=str(out / "nominal_inertials.json")).problem,
                            [read_run(paths[0])])
    bodies = ArmModel(fit_robot).body_inertials()
    for link, li in inert_files.items():
        assert bodies[link].mass == pytest.approx(li.mass, rel=1e-9, abs=1e-12), link


def test_franka_runs_instrumental_variables(franka, tmp_path, capsys):
    """--method iv: the instrument is the regressor of each run's commanded q_des. On these
    runs (tau_J measured, so no closed-loop bias to remove) it must still recover the twin:
    large inertial base parameters within 5 %, held-out torque near OLS's."""
    paths, nominal, truth, out = franka
    args = IdentifyArgs(
        out=tmp_path / "iv", runs=tuple(paths[:2]), heldout=(paths[2],), dt=0.01, cutoff_hz=5.0, method="iv",
        audit_uniform=200, audit_dense=100, audit_grid=2, seeds=(0,), no_plots=True,
    )
    assert main_from_args(args) == 0
    iv = json.loads((tmp_path / "iv" / "rb_params.json").read_text())
    ls = json.loads((out / "rb_params.json").read_text())
    assert iv["estimate"]["method"] == "iv"
    reg = Regressor(nominal, RegressorOptions(coulomb_deadband=1e-3))
    base = compute_base_parameters(reg, 300, 0)
    pb = base.to_base(Regressor(truth).prior())
    inert = np.array([base.independent[i] < 10 * reg.n_dof and not np.any(base.beta[i][base.dependent >= 10 * reg.n_dof])
                      for i in range(base.rank)])
    big = inert & (np.abs(pb) > 0.05 * np.abs(pb[inert]).max())
    theta_iv, theta_ls = np.array(iv["estimate"]["theta"]), np.array(ls["estimate"]["theta"])
    print(f"\nlarge inertial base parameters, max relative error: IV {np.max(np.abs(theta_iv[big] / pb[big] - 1)):.3f}, "
          f"OLS {np.max(np.abs(theta_ls[big] / pb[big] - 1)):.3f}")
    np.testing.assert_allclose(theta_iv[big], pb[big], rtol=0.05)
    r_iv = np.array(iv["validation"]["rmse_pooled"]["LS (base)"])
    r_ls = np.array(ls["validation"]["rmse_pooled"]["LS (base)"])
    assert np.mean(r_iv) <= 1.2 * np.mean(r_ls), (r_iv, r_ls)
    capsys.readouterr()
    # the UR10e logs have no desired positions: a one-line refusal, not a traceback
    assert main_from_args(IdentifyArgs(out=tmp_path / "u", method="iv", no_plots=True)) == 2
    assert "q_des" in capsys.readouterr().err


def test_franka_runs_bad_input(franka, tmp_path, capsys):
    paths, *_ = franka
    bad = tmp_path / "bad.csv"
    lines = Path(paths[0]).read_text().splitlines()
    lines[5] = lines[5].replace(",", ",x", 1)
    bad.write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.json").write_text(Path(paths[0]).with_suffix(".json").read_text())
    assert main_from_args(IdentifyArgs(out=tmp_path / "o", runs=(bad,), no_plots=True)) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "row" in err
    assert main_from_args(IdentifyArgs(out=tmp_path / "o", runs=(paths[0],), robot="ur10e", no_plots=True)) == 2
    assert "7 joints" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_run_without_its_torque_is_refused_naming_file_and_column(franka, tmp_path, capsys):
    """A log whose tau_J column is NaN in every row (a source that did not record it) is refused before any work."""
    import pandas as pd

    paths, *_ = franka
    df = pd.read_csv(paths[0])
    df["tau_J4"] = np.nan
    bad = tmp_path / "no_tau_J.csv"
    df.to_csv(bad, index=False)
    (tmp_path / "no_tau_J.json").write_text(Path(paths[0]).with_suffix(".json").read_text())
    assert main_from_args(IdentifyArgs(out=tmp_path / "o", runs=(bad,), no_plots=True)) == 2
    err = capsys.readouterr().err
    assert "no_tau_J.csv" in err and "tau_J4" in err and "--torque_signal tau" in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--sdp-covariance", "bad"], "--sdp-covariance"),
        (["--method", "lsq"], "--method"),
        (["--sdp-mode", "tight"], "--sdp-mode"),
        (["--seeds"], "--seeds"),
        (["--audit-uniform", "0"], "--audit-uniform"),
        (["--prior-rel-std", "0"], "--prior-rel-std"),
        (["--hac-lag-s", "-1"], "--hac-lag-s"),
        (["--mass-lower-factor", "1.2", "--mass-upper-factor", "1.1"], "--mass-lower-factor"),
        (["--torque_signal", "tau_ext"], "--torque_signal"),
        (["--dt", "0"], "--dt"),
        (["--drive-gains", "1", "1"], "--drive-gains"),
    ],
)
def test_cli_refuses_a_bad_flag_before_any_work(franka, tmp_path, capsys, flags, named):
    """Through the script: a bad flag is one line naming it, exit status 2, nothing read or written."""
    paths, *_ = franka
    script = load_script("identify_rigid_body")
    out = tmp_path / "o"
    assert script.main(["--runs", str(paths[0]), "--out", str(out), *flags]) == 2
    printed = capsys.readouterr().err
    assert printed.startswith(f"error: {named}") and printed.count("\n") == 1, printed
    assert not out.exists()


def test_identify_validates_every_option_before_building_a_regressor(franka, monkeypatch):
    """identify() checks its options and inputs first: the base-parameter QR (the first
    regressor build) is never reached with a bad option, an IV run without instruments
    or a reference of the wrong size."""
    paths, nominal, *_ = franka

    def no_work(*_a, **_k):
        raise AssertionError("an expensive step ran before the options were checked")

    monkeypatch.setattr(pipeline, "compute_base_parameters", no_work)
    reg = Regressor(nominal, RegressorOptions(coulomb_deadband=1e-3))
    p = process_run(read_runs([paths[0]])[0], PreprocessOptions(dt=0.01, cutoff_hz=5.0))
    data = pipeline.IdentificationData(reg, [p], {}, signal="tau_J", unit="N m")
    for bad, named in (
        (PipelineOptions(sdp_covariance="white"), "--sdp-covariance"),
        (PipelineOptions(audit_seeds=()), "--seeds"),
        (PipelineOptions(prior_weight=float("nan")), "--prior-weight"),
        (PipelineOptions(base_samples=1), "base_samples"),
        (PipelineOptions(method="iv"), "--method iv"),
    ):
        with pytest.raises(RigidBodyError, match=named):
            pipeline.identify(data, bad)
    wrong = pipeline.ReferenceModel(np.zeros(3))
    with pytest.raises(RigidBodyError, match="reference 'x'"):
        pipeline.identify(pipeline.IdentificationData(reg, [p], {}, "tau_J", "N m", reference={"x": wrong}))
    with pytest.raises(RigidBodyError, match="no signal 'current'"):
        pipeline.identify(pipeline.IdentificationData(reg, [p], {}))


def test_mass_intervals_from_a_real_rb_params(franka):
    """The export reads link-mass intervals from a real rb_params.json. On a fixed-base arm no
    link mass is a base parameter by itself (each enters only in combinations), so every mass
    gets an unbounded interval with a warning naming the link, never a made-up range, and its
    value is the SDP reconstruction's."""
    from isaaclab_sysid.export.masses import mass_intervals

    _, _, _, out = franka
    rb = json.loads((out / "rb_params.json").read_text())
    links = rb["link_inertials"]["links"]
    alone = [g for g in rb["base_parameters"]["groups"] if len(g["terms"]) == 1 and g["terms"][0][0].endswith(".m")]
    ivs, rho, warns = mass_intervals(out / "rb_params.json")
    assert {iv.joint for iv in ivs} == set(links)
    assert not alone and not any(iv.identifiable for iv in ivs)
    for iv in ivs:
        assert iv.lower is None and iv.upper is None
        assert iv.value == pytest.approx(float(links[iv.joint]["mass"]))
        assert any(iv.label in w and "not identifiable" in w for w in warns)
    assert rho is None or rho > 0


def test_seed_fit_from_rb_params_starts_the_replay_near_the_twin(franka, tmp_path, capsys):
    """seed_fit.py turns the LS joint terms into a --x0 file; replaying the twin's held-out run
    from that start is far closer to the recording than the default 'low' start."""
    from isaaclab_sysid.evaluate.metrics import rollout_metrics
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.fit.problem import start_point
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    paths, nominal, truth, out = franka
    seed_path = tmp_path / "seed.json"
    assert load_script("seed_fit").main(["--rb-params", str(out / "rb_params.json"), "--out", str(seed_path)]) == 0
    assert "motor_delay_steps: not seeded" in capsys.readouterr().out
    assert seed_main(SeedArgs(rb_params=out / "rb_params.json", out=tmp_path / "x.json", delay=-1)) == 2
    assert capsys.readouterr().err.startswith("error: --delay must be >= 0")
    seed = json.loads(seed_path.read_text())["best_params_decoded"]
    assert "motor_delay_steps" not in seed
    arm, fric, visc = (np.array(seed[k]) for k in ("armature", "friction", "viscous"))
    print(f"\nseed / truth: armature {np.round(arm / PARAMS.armature, 2)}, friction {np.round(fric / PARAMS.friction, 2)}, "
          f"viscous {np.round(visc / PARAMS.viscous, 2)}")
    np.testing.assert_allclose(arm, PARAMS.armature, rtol=0.25)
    np.testing.assert_allclose(fric, PARAMS.friction, rtol=0.25)
    np.testing.assert_allclose(visc, PARAMS.viscous, rtol=1.0)
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)
    x_low, x_seed = start_point("low", space), start_point(str(seed_path), space)
    assert x_seed[space.slice("delay")] == x_low[space.slice("delay")]  # not in the file: the default start
    dec_low, dec_seed = space.decode(x_low), space.decode(x_seed)
    np.testing.assert_allclose(dec_seed["armature"], arm, rtol=1e-9)
    batch = space.batch_from_decoded({g: np.stack([dec_low[g], dec_seed[g]]) for g in space.group_names}, 2)
    run = read_runs([paths[2]])[0]
    be = MujocoBackend(truth, ReplayOptions())
    try:
        ro = be.rollout(batch, [run])[0]
    finally:
        be.close()
    q_low, q_seed = (rollout_metrics(ro, run, i).q_rms_all_mrad for i in (0, 1))
    print(f"held-out replay q RMS: 'low' start {q_low:.2f} mrad, seed {q_seed:.2f} mrad")
    assert q_seed < 0.5 * q_low
