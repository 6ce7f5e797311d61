"""Issue 46 item 4, the proof that a fit lands in Isaac Lab as fitted: the exported module's actuator, applied in a
kit-less Isaac Lab environment on CPU Newton (``export/parity.py``), replays the held-out run of a small twin within
0.01 mrad RMS of the fit's own replay (the native MuJoCo loop at the fitted values) for the Stribeck law with a fitted
shape exponent (and the fit's --stribeck_velocity), the Gaz sigmoid, the Dahl law, BAM's load-dependent law (its
budget from every env's gravity and Coriolis torque, Newton's inverse dynamics) and the Coulomb law the module
already carried; the law is no no-op at that tolerance, and the load law's Coriolis term is no no-op either. The export goes the user's way: a fit folder, its intervals,
``export/build.export``, the written module loaded by path.

Then the randomization: the ``friction_law`` term draws every law number per env inside its exported range and over
it, and a reset zeroes the Dahl bristle state.

Needs the [isaaclab] extra (skipped without it). The twin's law numbers are its truth (benchmarks/friction_laws.py),
written as the fit's values (the parity holds the export to the fit's replay of whatever values the fit holds); the
full-size figures: ``python benchmarks/isaaclab_law_parity.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("isaaclab", reason="the parity replay needs Isaac Lab (pip install -e '.[isaaclab]')")
pytest.importorskip("urdf_usd_converter", reason="the parity replay needs the [isaaclab] extra")

import numpy as np  # noqa: E402

from isaaclab_sysid.export.mjcf import fit_rollouts  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import isaaclab_law_parity as bench  # noqa: E402  (the law twins' fit folders, exported the user's way)

#: the issue's bar: the exported actuator within 0.01 mrad RMS of the fit's replay
Q_RMS_TOL = bench.Q_RMS_BAR  # rad


def law_fit(tmp, law: str, heldout_s: float = 1.5):
    """The fit folder of ``law``'s twin exported (benchmarks/isaaclab_law_parity.py): its context and module path."""
    return bench.exported(Path(tmp), law, heldout_s=heldout_s)


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


@pytest.mark.parametrize("law", ["stribeck", "sigmoid", "dahl", "load", "coulomb"])
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
        assert bench.coulomb_effect(ctx, runs, ref) > 20 * Q_RMS_TOL
    if law == "load":  # every number of the law has its randomization range; the budget's Coriolis term is exact:
        # dropping it (g(q) only, what Isaac Lab's articulation data alone gives) moves q several times the error
        assert set(mod.EVENT_TERMS["friction_law"]["params"]["ranges"]) == set(mod.LAW_FIELDS["load"])
        no_coriolis = bench.without_coriolis(mod, robot, runs, options, ref)
        print(f"load without its Coriolis term: q RMS {no_coriolis * 1e6:.3f} urad")
        assert no_coriolis > 4 * row.rms, (no_coriolis, row.rms)


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
    fixed = mod.make_events_cfg(randomize_friction_law=False)  # binds, draws nothing
    assert fixed.friction_law.params["ranges"] == {} and mod.make_events_cfg().friction_law.params["ranges"]
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
    vs = bench.fit_values("stribeck")[1]  # not fitted: the fit's --stribeck_velocity, from its config.json
    assert vs != 0.05 and next(r for r in report.rows if r.label == "stribeck_velocity[panda_joint1]").fitted == vs


def test_load_budget_per_env_is_the_bias_torque_law(robot, tmp_path):
    """A load export in an 8-env kit-less Newton env under gravity, its law numbers drawn per env at every reset: after
    each step, every env's budget (the actuator's, and the joint friction Newton holds) is Fc + |k_e tau_ext - k_m
    tau_motor| with tau_ext = -qfrc_bias of MuJoCo's model of the arm at that env's state at the step's start and
    tau_motor the actuator's applied effort: the per-env rows of Newton's inverse dynamics are each env's own."""
    import mujoco
    import torch
    from isaaclab.envs import ManagerBasedEnv
    from isaaclab.sim import SimulationContext

    from isaaclab_sysid.export.check import _env_cfg, load_export_module
    from isaaclab_sysid.robots.overrides import JointOverrides

    _ctx, module = law_fit(tmp_path, "load", heldout_s=0.5)
    mod = load_export_module(module)
    E = 8
    cfg = _env_cfg(mod, robot, E, 1, mod.PHYSICS_DT, 5, "cpu", "reset")
    cfg.sim.gravity = (0.0, 0.0, -9.81)  # the task's own gravity: no carried gravity
    if SimulationContext.instance() is not None:
        SimulationContext.clear_instance()
    env = ManagerBasedEnv(cfg)
    m = robot.build_mujoco(JointOverrides(), gravity=True)
    d = mujoco.MjData(m)
    gen = torch.Generator().manual_seed(0)
    try:
        art = env.scene[mod.ASSET_NAME]
        act = art.actuators["sysid_arm"]
        ranges = mod.EVENT_TERMS["friction_law"]["params"]["ranges"]
        assert set(ranges) == {"coulomb_friction", "load_friction_motor", "load_friction_external"}
        worst, spread = 0.0, 0.0
        for _ in range(2):
            env.reset()
            for f, per_joint in ranges.items():  # drawn per env inside the exported ranges
                for k, j in enumerate(mod.JOINT_NAMES):
                    col = act.law_params[f][:, k].cpu().numpy()
                    assert per_joint[j][0] - 1e-12 <= col.min() and col.max() <= per_joint[j][1] + 1e-12, (f, j)
            for _ in range(6):
                q = art.data.joint_pos.torch.double().cpu().numpy().copy()
                qd = art.data.joint_vel.torch.double().cpu().numpy().copy()
                env.step(4.0 * (torch.rand(E, robot.n_dof, generator=gen) - 0.5))
                p = {f: v.cpu().numpy() for f, v in act.law_params.items()}
                tau_motor = act.applied_effort.double().cpu().numpy()
                want = np.empty((E, robot.n_dof))
                for e in range(E):
                    d.qpos[:], d.qvel[:] = q[e], qd[e]
                    mujoco.mj_forward(m, d)
                    want[e] = p["coulomb_friction"][e] + np.abs(p["load_friction_external"][e] * -d.qfrc_bias
                                                                - p["load_friction_motor"][e] * tau_motor[e])
                got = act.friction_budget.cpu().numpy()
                worst = max(worst, float(np.abs(got - want).max()))
                spread = max(spread, float(np.ptp(want, axis=0).max()))
                np.testing.assert_allclose(art.data.joint_friction_coeff.torch.cpu().numpy(), got, rtol=1e-6, atol=1e-7)
        print(f"\nload budget per env vs MuJoCo's qfrc_bias: max |diff| {worst:.2e} N m (spread across envs {spread:.3f})")
        assert worst < 1e-4 and spread > 1e3 * worst
    finally:
        env.close()
        if SimulationContext.instance() is not None:
            SimulationContext.clear_instance()


@pytest.mark.parametrize("law,controller,heldout_s", [("coulomb", "task_impedance", 3.0), ("sigmoid", "joint_pd", 2.5)])
def test_exported_actuator_carries_the_task_and_the_real_controllers_limits(law, controller, heldout_s, robot,
                                                                            tmp_path):
    """A task-impedance run (the task computes the impedance law from the articulation's state and sends it as
    efforts; the exported actuator delays them and adds the law) and a joint-PD run, each from a twin whose controller
    clamps and slews (benchmarks/isaaclab_law_parity.py's LIMITS, reached by these runs) and a fit that replays so:
    the export carries the clamp (``actuator_effort_limit``) and the slew limit (``TORQUE_RATE_LIMIT``; a Coulomb fit
    then runs Isaac Lab's actuator path) and replays the held-out run within 0.01 mrad RMS of the fit's replay; either
    limit dropped moves the fit's replay far more than that, and so does the law. Every law under both controllers,
    with and without the limits: ``python benchmarks/isaaclab_law_parity.py [--limits]``."""
    from isaaclab_sysid.export.check import load_export_module, module_needs_lab_actuators
    from isaaclab_sysid.export.parity import parity

    ctx, module = bench.exported(Path(tmp_path), law, heldout_s=heldout_s, controller=controller, limits=True)
    mod = load_export_module(module)
    limit, rate = bench.LIMITS
    assert [mod.ACTUATOR_VALUES["actuator_effort_limit"][j] for j in mod.JOINT_NAMES] == list(limit)
    assert [mod.TORQUE_RATE_LIMIT[j] for j in mod.JOINT_NAMES] == list(rate) * len(limit)
    assert module_needs_lab_actuators(mod)
    problem = ctx.problem()
    runs, options = list(problem.heldout), problem.backend.options
    assert options.torque_clamp and options.slew_limit and runs[0].meta.controller == controller
    ref = [q for q, _ in fit_rollouts(problem.robot, ctx.result, runs, options)]
    (row,) = parity(mod, problem.robot, runs, options, ref)
    effect = bench.limits_effect(ctx, runs, ref)
    print(f"\n{law} {controller} + limits: exported - fit q RMS {row.rms * 1e6:.3f} urad (max {row.q_max * 1e6:.2f}); "
          f"the fit's replay without its clamp {effect['no_clamp'] * 1e6:.0f} urad, without its slew limit "
          f"{effect['no_slew'] * 1e6:.0f} urad")
    assert np.ptp(ref[0], axis=0).max() > 0.05, "the run must move the arm"
    assert np.isfinite(row.q_exported).all() and row.rms < Q_RMS_TOL, row.q_rms
    assert min(effect.values()) > max(10 * Q_RMS_TOL, 50 * row.rms), effect  # each limit acts on this run
    if law != "coulomb":
        assert bench.coulomb_effect(ctx, runs, ref) > 20 * Q_RMS_TOL
    else:  # check_export.py's read-back on Isaac Lab's actuator path, where the slew limit puts a Coulomb fit: the
        # delay from the delay buffer, its latency probed through the clamp and the slew limit
        from isaaclab_sysid.export.check import check_module

        report = check_module(mod, robot, num_envs=16, resets=4, decimation=2, seed=1)
        assert report.ok and report.latency_ok, report.failures + [f"{r.label}: {r.failures}" for r in report.rows
                                                                   if r.failures]
