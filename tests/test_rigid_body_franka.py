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
from isaaclab_sysid.rigid_body.base_params import compute_base_parameters
from isaaclab_sysid.rigid_body.io import load_nominal
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.rigid_body.regressor import Regressor, RegressorOptions
from isaaclab_sysid.rigid_body.runs_input import process_run, read_runs
from conftest import load_script
from rigid_body_franka_twin import PARAMS, write_franka_runs



def _cli():
    return load_script("identify_rigid_body")


@pytest.fixture(scope="module")
def franka(tmp_path_factory):
    folder = tmp_path_factory.mktemp("franka_runs")
    paths, nominal, truth = write_franka_runs(folder, seeds=(1, 2, 3), duration=14.0)
    out = tmp_path_factory.mktemp("franka_out")
    cli = _cli()
    args = cli.Args(
        out=out, runs=tuple(paths[:2]), heldout=(paths[2],), dt=0.01, cutoff_hz=5.0,
        audit_uniform=200, audit_dense=100, audit_grid=2, seeds=(0,), no_plots=True,
    )
    assert cli.main(args) == 0
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


def test_franka_runs_instrumental_variables(franka, tmp_path, capsys):
    """--method iv: the instrument is the regressor of each run's commanded q_des. On these
    runs (tau_J measured, so no closed-loop bias to remove) it must still recover the twin:
    large inertial base parameters within 5 %, held-out torque near OLS's."""
    paths, nominal, truth, out = franka
    cli = _cli()
    args = cli.Args(
        out=tmp_path / "iv", runs=tuple(paths[:2]), heldout=(paths[2],), dt=0.01, cutoff_hz=5.0, method="iv",
        audit_uniform=200, audit_dense=100, audit_grid=2, seeds=(0,), no_plots=True,
    )
    assert cli.main(args) == 0
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
    assert cli.main(cli.Args(out=tmp_path / "u", method="iv", no_plots=True)) == 2
    assert "q_des" in capsys.readouterr().out


def test_franka_runs_bad_input(franka, tmp_path, capsys):
    paths, *_ = franka
    cli = _cli()
    bad = tmp_path / "bad.csv"
    lines = Path(paths[0]).read_text().splitlines()
    lines[5] = lines[5].replace(",", ",x", 1)
    bad.write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.json").write_text(Path(paths[0]).with_suffix(".json").read_text())
    assert cli.main(cli.Args(out=tmp_path / "o", runs=(bad,), no_plots=True)) == 2
    err = capsys.readouterr().out
    assert "bad.csv" in err and "row" in err
    assert cli.main(cli.Args(out=tmp_path / "o", runs=(paths[0],), robot="ur10e", no_plots=True)) == 2
    assert "7 joints" in capsys.readouterr().out


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
    from isaaclab_sysid.fit.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.fit.pipeline import start_point
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    paths, nominal, truth, out = franka
    cli = load_script("seed_fit")
    seed_path = tmp_path / "seed.json"
    assert cli.main(cli.Args(rb_params=out / "rb_params.json", out=seed_path)) == 0
    assert "motor_delay_steps: not seeded" in capsys.readouterr().out
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
