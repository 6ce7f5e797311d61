"""Issue 46 item 4, the proof that a fit lands in Isaac Lab as fitted: the exported module's actuator, applied in a
kit-less Isaac Lab environment on CPU Newton (``export/parity.py``), replays the held-out run of a small twin within
0.01 mrad RMS of the fit's own replay (the native MuJoCo loop at the fitted values) for the Stribeck law with a fitted
shape exponent (and the fit's --stribeck_velocity), the Gaz sigmoid and the Dahl law, and the Coulomb law the module
already carried; the law is no no-op at that tolerance. The export goes the user's way: a fit folder, its intervals,
``export/build.export``, the written module loaded by path.

Then the randomization: the ``friction_law`` term draws every law number per env inside its exported range and over
it, and a reset zeroes the Dahl bristle state.

Needs the [isaaclab] extra (skipped without it). The twin's law numbers are its truth, written as the fit's values
(the parity holds the export to the fit's replay of whatever values the fit holds).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("isaaclab", reason="the parity replay needs Isaac Lab (pip install -e '.[isaaclab]')")
pytest.importorskip("urdf_usd_converter", reason="the parity replay needs the [isaaclab] extra")

from isaaclab_sysid.export.build import FitContext, export, intervals_for  # noqa: E402
from isaaclab_sysid.export.mjcf import fit_rollouts  # noqa: E402
from isaaclab_sysid.export.ranges import RangePolicy  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.sim.interface import CandidateBatch  # noqa: E402
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend  # noqa: E402
from isaaclab_sysid.twin.demo import joint_target  # noqa: E402
from isaaclab_sysid.twin.params import TwinNoise, TwinParams  # noqa: E402
from isaaclab_sysid.twin.recorder import record_twin  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_export_mjcf import _fit_dir  # noqa: E402  (a fit folder with given values, as the fit writes it)

#: the issue's bar: the exported actuator within 0.01 mrad RMS of the fit's replay
Q_RMS_TOL = 1e-5  # rad
ARMATURE = np.array([0.18, 0.22, 0.12, 0.15, 0.04, 0.06, 0.03])
VISCOUS = np.array([0.6, 0.9, 0.5, 0.7, 0.2, 0.25, 0.15])
COULOMB = np.array([0.35, 1.2, 0.6, 0.9, 0.3, 0.35, 0.2])
DELAY = 2
#: each law's numbers (benchmarks/friction_laws.py's twins): the Coulomb level it reads, its groups
LAWS = {
    "stribeck": (None, {"mu_static": 1.6 * COULOMB, "dynamic_ratio": np.full(7, 1 / 1.6),
                        "stribeck_shape": np.full(7, 1.3)}),
    "sigmoid": (None, {"sigmoid_amplitude": np.array([0.546, 0.872, 0.641, 1.279, 0.839, 0.303, 0.565]),
                       "sigmoid_slope": np.array([5.12, 9.07, 10.14, 5.59, 8.35, 17.13, 10.34]),
                       "sigmoid_offset": np.array([0.040, 0.026, -0.046, 0.036, 0.026, -0.021, 0.004])}),
    "dahl": (COULOMB, {"presliding_stiffness": np.array([150.0, 300.0, 200.0, 250.0, 80.0, 100.0, 60.0])}),
    "coulomb": (COULOMB, {}),
}


def law_fit(tmp, law: str, heldout_s: float = 1.5):
    """A fit folder of ``law`` (twin runs recorded with that law, the law's numbers as the fitted values), exported."""
    robot = load_robot("franka_panda")
    fc, groups = LAWS[law]
    truth = {k: v for k, v in groups.items()}
    if law == "stribeck":  # the twin's Stribeck velocity: the fit's default --stribeck_velocity (0.05 rad/s)
        truth["stribeck_velocity"] = np.full(7, 0.05)
    friction = fc if fc is not None else (COULOMB if law == "stribeck" else np.zeros(7))  # the level the law reads
    tp = TwinParams(robot="franka_panda", armature=ARMATURE, friction=friction, viscous=VISCOUS,
                    delay=DELAY, friction_model=law, law_params=truth if law != "coulomb" else None, torque_clamp=False,
                    slew_limit=False, noise=TwinNoise(q_std=2e-4, dq_std=2e-3, actuator_tau_std=0.02))
    fit_run = record_twin(robot, joint_target(robot, 1.0, 1, "joint_fit"), tp, seed=1)
    held = record_twin(robot, joint_target(robot, heldout_s, 7, "joint_heldout"), tp, seed=3)
    values = {"armature": ARMATURE, "viscous": VISCOUS, "delay": DELAY, **groups}
    if fc is not None:
        values["friction"] = fc
    d = _fit_dir(tmp, "franka_panda", values, ",".join(["armature", "viscous", "delay", *sorted(set(values) - {
        "armature", "viscous", "delay"})]), [fit_run], [held])
    ctx = FitContext.load(d)
    rep = intervals_for(ctx, log=lambda _s: None, omitted=False, basins=False)
    paths, _warns = export(ctx, tmp / "export", rep, RangePolicy(), physics="newton")
    return ctx, paths["module"]


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


@pytest.mark.parametrize("law", ["stribeck", "sigmoid", "dahl", "coulomb"])
def test_exported_actuator_replays_the_heldout_run_as_the_fit(law, robot, tmp_path):
    from isaaclab_sysid.export.check import load_export_module
    from isaaclab_sysid.export.parity import parity

    ctx, module = law_fit(tmp_path, law)
    mod = load_export_module(module)
    assert mod.FRICTION_LAW["name"] == law
    problem = ctx.problem()
    runs, options = list(problem.heldout), problem.backend.options
    ref = [q for q, _ in fit_rollouts(robot, ctx.result, runs, options)]
    (row,) = parity(mod, robot, runs, options, ref)
    print(f"\n{law} {row.run}: exported actuator - fit replay, q RMS {row.rms * 1e6:.3f} urad (per joint "
          f"{np.round(row.q_rms * 1e6, 3)}), max {row.q_max * 1e6:.2f} urad over {len(ref[0])} samples")
    assert np.ptp(ref[0], axis=0).max() > 0.05, "the run must move the arm"
    assert np.isfinite(row.q_exported).all() and row.rms < Q_RMS_TOL, row.q_rms
    if law != "coulomb":  # the law is no no-op at this tolerance: Coulomb friction in its place moves q far more
        n = robot.n_dof
        one = np.ones((1, n))
        b = CandidateBatch(armature=ARMATURE * one, viscous=VISCOUS * one, friction=COULOMB * one, delay=np.array([DELAY]))
        mj = MujocoBackend(robot, options, n_threads=1)
        try:
            q_c = mj.rollout(b, runs)[0].q[0]
        finally:
            mj.close()
        assert np.sqrt(np.mean((q_c - ref[0]) ** 2)) > 20 * Q_RMS_TOL


def test_friction_law_terms_draw_each_env_inside_the_ranges_and_reset_the_bristles(robot, tmp_path):
    """A Dahl export in a 16-env kit-less Newton env with its events in reset mode: every reset draws Fc and sigma0
    per env inside their exported ranges and over them; after steps with motion the bristle state is non-zero, a
    reset zeroes it; the joint's native friction stays 0 (the law is the whole dry friction)."""
    import torch
    from isaaclab.envs import ManagerBasedEnv
    from isaaclab.managers import EventTermCfg, SceneEntityCfg
    from isaaclab.sim import SimulationContext

    from isaaclab_sysid.export.check import _env_cfg, _rest_at_target, load_export_module, spread_tolerance

    _ctx, module = law_fit(tmp_path, "dahl", heldout_s=0.5)
    mod = load_export_module(module)
    cfg = _env_cfg(mod, robot, 16, 2, mod.PHYSICS_DT, 3, "cpu", "reset")
    cfg.sim.use_newton_actuators = False
    # a task's reset leaves the arm at rest: Isaac Lab computes the actuators once more from that state at reset
    cfg.events.rest = EventTermCfg(func=_rest_at_target, mode="reset", params={"asset_cfg": SceneEntityCfg(mod.ASSET_NAME)})
    if SimulationContext.instance() is not None:
        SimulationContext.clear_instance()
    env = ManagerBasedEnv(cfg)
    try:
        art = env.scene[mod.ASSET_NAME]
        act = art.actuators["sysid_arm"]
        assert type(act).__name__ == "SysidFrictionActuator" and act._asset is art  # bound by the friction_law term
        fitted = {f: np.array([mod.FRICTION_LAW["params"][f][j] for j in mod.JOINT_NAMES]) for f in act.law_params}
        for f, v in fitted.items():  # before any reset: every env at the fitted law
            np.testing.assert_allclose(act.law_params[f].cpu().numpy(), np.tile(v, (16, 1)), rtol=1e-15)
        ranges = mod.EVENT_TERMS["friction_law"]["params"]["ranges"]
        assert set(ranges) == {"coulomb_friction", "presliding_stiffness"}
        draws = {f: [] for f in ranges}
        for _ in range(4):
            env.reset()
            for f in ranges:
                draws[f].append(act.law_params[f].cpu().numpy().copy())
            assert float(act.bristle.abs().max()) == 0.0
            for _ in range(5):
                env.step(torch.full((16, robot.n_dof), 2.0))  # 2 N m on every joint: the arm moves
            assert float(act.bristle.abs().max()) > 0.0
        q = spread_tolerance(64)
        for f, per_joint in ranges.items():
            got = np.concatenate(draws[f])
            for k, j in enumerate(mod.JOINT_NAMES):
                lo, hi = per_joint[j]
                col = got[:, k]
                assert lo - 1e-12 <= col.min() and col.max() <= hi + 1e-12, (f, j)
                assert col.min() < lo + q * (hi - lo) and col.max() > hi - q * (hi - lo), (f, j)
                assert mod.SAMPLED_RANGES[f"{'friction' if f == 'coulomb_friction' else f}[{j}]"] == pytest.approx((lo, hi))
        assert float(art.data.joint_friction_coeff.torch.abs().max()) == 0.0
    finally:
        env.close()
        if SimulationContext.instance() is not None:
            SimulationContext.clear_instance()


def test_check_export_reads_a_stribeck_export_back(robot, tmp_path):
    """scripts/check_export.py's read-back on a Stribeck export (Isaac Lab's actuator path): every law number starts at
    the fitted one and is drawn inside its range and over it at every reset; armature, viscous and the delay as for a
    Coulomb export, the latency included."""
    from isaaclab_sysid.export.check import check_module, load_export_module

    _ctx, module = law_fit(tmp_path, "stribeck", heldout_s=0.5)
    report = check_module(load_export_module(module), robot, num_envs=16, resets=4, decimation=2, seed=4)
    print("\n" + report.table())
    assert report.ok, report.failures + [f"{r.label}: {r.failures}" for r in report.rows if r.failures]
    labels = {r.label for r in report.rows}
    joints = list(robot.joint_names)
    for g in ("mu_static", "dynamic_ratio", "stribeck_shape", "stribeck_velocity", "armature", "viscous"):
        assert {f"{g}[{j}]" for j in joints} <= labels
    assert "delay" in labels and report.latency_ok
    assert next(r for r in report.rows if r.label == "stribeck_velocity[panda_joint1]").fitted == 0.05  # not fitted
