"""The friction-law family (sim/friction.py): every law replayed by the native loop exactly as the plain-Python
reference specifies it, the limits where a law is another, and the refusals (docs/friction.md)."""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.data.run import ImpedanceLaw
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.fit.problem import check_record
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.sim.friction import LAWS, batch_law, expand_law_aliases, law_of_groups
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, UnsupportedParameterError, check_supported
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.reference import reference_replay

from test_replay_engine import N, step_run, task_run

ARM, VISC, FC = 0.1, 0.2, 0.4

#: one parameter set per law, per joint (N,) each, chosen so that every term acts on the test runs
LAW_CASES = {
    "stribeck": dict(mu_static=np.full(N, 0.9), dynamic_ratio=np.full(N, FC / 0.9),
                     stribeck_velocity=np.linspace(0.03, 0.08, N), stribeck_shape=np.linspace(0.8, 2.6, N)),
    "sigmoid": dict(sigmoid_amplitude=np.linspace(0.3, 1.2, N), sigmoid_slope=np.linspace(5.0, 18.0, N),
                    sigmoid_offset=np.linspace(-0.04, 0.04, N)),
    "load": dict(friction=np.full(N, FC), load_friction_motor=np.linspace(0.02, 0.2, N),
                 load_friction_external=np.linspace(0.15, 0.01, N)),
    "dahl": dict(friction=np.full(N, FC), presliding_stiffness=np.linspace(50.0, 400.0, N)),
}


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


def law_batch(name: str, p: int = 1) -> CandidateBatch:
    kw = {g: np.tile(v, (p, 1)) for g, v in LAW_CASES[name].items()}
    if "friction" not in kw and name != "stribeck" and name != "sigmoid":
        kw["friction"] = np.full((p, N), FC)
    return CandidateBatch(armature=np.full((p, N), ARM), viscous=np.full((p, N), VISC),
                          delay=np.full(p, 2, dtype=int), **kw)


def reference_of(robot, run, name, opts=None):
    b = law_batch(name)
    law, table = batch_law(b, N, (opts or ReplayOptions()).stribeck_velocity)
    fc = np.full(N, FC) if name != "sigmoid" else np.zeros(N)
    return reference_replay(robot, run, JointOverrides(np.full(N, ARM), fc, np.full(N, VISC)), 2, opts,
                            friction_law=(law, table[0]))


@pytest.mark.parametrize("name", list(LAW_CASES))
def test_every_law_replays_as_the_reference_specifies_joint_pd(robot, name):
    run = step_run(robot, amp=0.3)
    be = MujocoBackend(robot, n_threads=1)
    out = be.rollout(law_batch(name), [run])[0]
    be.close()
    ref = reference_of(robot, run, name)
    assert not out.diverged[0]
    np.testing.assert_allclose(out.q[0], ref["q"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(out.dq[0], ref["dq"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(out.tau[0], ref["tau"], rtol=0, atol=1e-7)


@pytest.mark.parametrize("name", ["stribeck", "load", "dahl", "sigmoid"])
@pytest.mark.parametrize("gravity", [False, True])
def test_every_law_replays_as_the_reference_specifies_task_impedance(robot, name, gravity):
    run = task_run(robot, duration=0.5, law=ImpedanceLaw(), scale=2.0)
    opts = ReplayOptions(gravity=gravity, torque_clamp=True)
    be = MujocoBackend(robot, opts, n_threads=1)
    out = be.rollout(law_batch(name), [run])[0]
    be.close()
    ref = reference_of(robot, run, name, opts)
    assert not out.diverged[0]
    np.testing.assert_allclose(out.q[0], ref["q"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(out.ee_pos[0], ref["ee_pos"], rtol=0, atol=1e-9)


def test_each_law_moves_the_arm_and_reduces_to_coulomb_at_its_limit(robot):
    run = step_run(robot, amp=0.3)
    be = MujocoBackend(robot, n_threads=1)
    coulomb = CandidateBatch(armature=np.full((1, N), ARM), viscous=np.full((1, N), VISC), delay=np.full(1, 2),
                             friction=np.full((1, N), FC))
    base = be.rollout(coulomb, [run])[0].q[0]
    for name in LAW_CASES:  # every law's numbers change the motion
        assert np.max(np.abs(be.rollout(law_batch(name), [run])[0].q[0] - base)) > 1e-5, name
    # Stribeck with Fs = Fc, whatever its shape; the load law with no load terms: Coulomb
    flat = CandidateBatch(armature=coulomb.armature, viscous=coulomb.viscous, delay=coulomb.delay,
                          mu_static=np.full((1, N), FC), dynamic_ratio=np.ones((1, N)),
                          stribeck_shape=np.full((1, N), 1.3))
    np.testing.assert_allclose(be.rollout(flat, [run])[0].q[0], base, rtol=0, atol=1e-12)
    unloaded = CandidateBatch(armature=coulomb.armature, viscous=coulomb.viscous, delay=coulomb.delay,
                              friction=coulomb.friction, load_friction_motor=np.zeros((1, N)),
                              load_friction_external=np.zeros((1, N)))
    np.testing.assert_allclose(be.rollout(unloaded, [run])[0].q[0], base, rtol=0, atol=1e-10)
    # a stiffer Dahl bristle creeps less: it comes closer to Coulomb friction (stick, then slide at Fc)
    def dahl_gap(sigma0: float) -> float:
        b = CandidateBatch(armature=coulomb.armature, viscous=coulomb.viscous, delay=coulomb.delay,
                           friction=coulomb.friction, presliding_stiffness=np.full((1, N), sigma0))
        return float(np.max(np.abs(be.rollout(b, [run])[0].q[0] - base)))
    assert dahl_gap(1500.0) < 0.5 * dahl_gap(100.0)
    be.close()


def test_candidates_of_one_batch_run_independently(robot):
    """P candidates of one law in one call replay exactly as each alone (the Dahl state is per job)."""
    run = step_run(robot, amp=0.3)
    be = MujocoBackend(robot, n_threads=2)
    b = law_batch("dahl", 3)
    b.presliding_stiffness = b.presliding_stiffness * np.array([[0.5], [1.0], [2.0]])
    out = be.rollout(b, [run])[0]
    for i in range(3):
        np.testing.assert_array_equal(be.rollout(b.take([i]), [run])[0].q[0], out.q[i])
    be.close()


def test_one_law_per_batch_and_refusals():
    assert law_of_groups(["armature", "friction"]).name == "coulomb"
    assert law_of_groups(["mu_static", "stribeck_shape"]).name == "stribeck"
    with pytest.raises(ValueError, match="one friction law"):
        law_of_groups(["sigmoid_amplitude", "load_friction_motor"])
    with pytest.raises(ValueError, match="same dry friction"):
        law_of_groups(["friction", "sigmoid_amplitude"])
    with pytest.raises(ValueError, match="needs mu_static"):
        batch_law(CandidateBatch(friction=None, stribeck_shape=np.ones((1, N))), N)
    with pytest.raises(ValueError, match="needs sigmoid_slope"):
        batch_law(CandidateBatch(sigmoid_amplitude=np.ones((1, N))), N)
    with pytest.raises(ValueError, match="sigmoid_slope must be > 0"):
        batch_law(CandidateBatch(sigmoid_amplitude=np.ones((1, N)), sigmoid_slope=np.zeros((1, N))), N)
    with pytest.raises(ValueError, match="must be >= 0"):
        batch_law(CandidateBatch(friction=np.ones((1, N)), load_friction_motor=-np.ones((1, N))), N)
    for law in LAWS.values():  # each says how it acts
        assert law.acts_as in ("constraint", "force") and law.equation and law.why


def test_fit_groups_take_law_names_and_refuse_incomplete_laws():
    assert expand_law_aliases(["armature", "load", "viscous", "delay"]) == [
        "armature", "friction", "load_friction_motor", "load_friction_external", "viscous", "delay"]
    args = FitArgs()
    args.runs.real_csv = ["run.csv"]
    args.params.fit_groups = "armature,sigmoid,viscous,delay"
    assert args.params.groups() == ["armature", "sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset", "viscous",
                                    "delay"]
    for groups, msg in (("armature,friction,sigmoid", "same dry friction"),
                        ("armature,presliding_stiffness", "needs friction"),
                        ("armature,friction,stribeck_shape", "needs mu_static"),
                        ("armature,load,dahl", "one friction law")):
        args.params.fit_groups = groups
        with pytest.raises(FitError, match=msg):
            check_record(args.problem)


def test_backends_without_a_law_refuse_it_in_one_line():
    """The Isaac Lab backend runs every law (tests/test_isaaclab_backend.py; the load law from Newton's inverse
    dynamics); what it cannot represent (the servo motor model's groups) is refused, one line."""
    backend = pytest.importorskip("isaaclab_sysid.sim.isaaclab_backend.backend")
    supported = backend.IsaacLabBackend.supported_groups
    for name in ("stribeck", "sigmoid", "dahl", "load"):
        check_supported(law_batch(name), supported, "isaaclab")
    with pytest.raises(UnsupportedParameterError) as exc:
        check_supported(CandidateBatch(motor_kt=np.full((1, N), 0.5)), supported, "isaaclab")
    assert "\n" not in str(exc.value) and "cannot represent" in str(exc.value)


def test_exports_refuse_a_law_they_would_reduce():
    """What is fitted is what the simulator runs: an export that cannot apply the fitted law refuses, one line."""
    from isaaclab_sysid.export.build import ExportError, check_exported_law
    from isaaclab_sysid.objective.param_space import ParamSpace

    def space(*groups):
        return ParamSpace.from_bounds({g: (0.0, 1.0) if g != "sigmoid_slope" else (1.0, 10.0) for g in groups}, N)

    for target in ("isaaclab", "usd", "mjcf"):
        check_exported_law(space("armature", "friction", "viscous"), target)
        check_exported_law(space("armature", "mu_static", "dynamic_ratio"), target)
    # the Isaac Lab module's actuator applies every law (tests/test_isaaclab_law_parity.py), the load-dependent one on
    # Newton only; the MJCF driver applies every law (test below); the USD variant holds joint friction levels only
    for groups in (("sigmoid_amplitude", "sigmoid_slope"), ("friction", "presliding_stiffness"),
                   ("mu_static", "stribeck_shape"), ("friction", "load_friction_motor")):
        check_exported_law(space("armature", *groups), "isaaclab")
        check_exported_law(space("armature", *groups), "isaaclab", "newton")
    with pytest.raises(ExportError, match="load friction law.*Newton only.*Coriolis") as exc:
        check_exported_law(space("armature", "friction", "load_friction_motor"), "isaaclab", "physx")
    assert "\n" not in str(exc.value)
    refused = [("usd", ("sigmoid_amplitude", "sigmoid_slope"), "sigmoid"),
               ("usd", ("friction", "load_friction_motor"), "load"),
               ("usd", ("friction", "presliding_stiffness"), "dahl"),
               ("usd", ("mu_static", "stribeck_shape"), "Stribeck shape")]
    for target, groups, law in refused:
        with pytest.raises(ExportError, match=law) as exc:
            check_exported_law(space("armature", *groups), target)
        assert "\n" not in str(exc.value)


@pytest.mark.parametrize("name", list(LAW_CASES))
def test_the_mjcf_export_replays_every_law_as_the_fit_does(robot, name, tmp_path):
    """What is fitted is what MuJoCo runs: the exported MJCF file, driven by plain MuJoCo (export/mjcf.py's driver),
    replays each law on a joint-PD and a task-impedance run as the fit's native loop does."""
    from isaaclab_sysid.export import mjcf
    from isaaclab_sysid.objective.loss import LossWeights
    from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
    from isaaclab_sysid.objective.result import FitResult

    b = law_batch(name)
    groups = [g for g in ("armature", *LAW_CASES[name], "friction", "viscous", "delay") if getattr(b, g) is not None]
    groups = list(dict.fromkeys(groups))
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in groups}, N, robot.joint_names)
    values = {g: (np.asarray(getattr(b, g))[0] if g != "delay" else int(b.delay[0])) for g in groups}
    x = space.normalize(values)
    res = FitResult.from_search(space, x, 0.0, run_names=["a"], weighted_loss=np.zeros(1), traj_weights=np.ones(1),
                                loss_weights=LossWeights(), backend="mujoco")
    opts = ReplayOptions()
    fit = mjcf.fitted_joints(res, N, opts.stribeck_velocity)
    assert fit.law == name
    path = mjcf.write_mjcf(tmp_path / f"{name}.xml", robot, fit, opts)
    runs = [step_run(robot, amp=0.3), task_run(robot, duration=0.5, scale=2.0)]
    check = mjcf.check_mjcf(path, robot, res, runs, opts)
    assert check.passed and check.worst < 1e-9, check.lines()
    assert mjcf.read_facts(mujoco_model(path)).law == name


def mujoco_model(path):
    import mujoco

    return mujoco.MjModel.from_xml_path(str(path))


def test_the_static_score_test_does_not_apply_beside_another_law():
    """The adequacy verdict's static-friction score test rewrites friction as mu_static: beside the load or Dahl law
    (which read friction too) that would be two laws, so it does not apply (it crashed the fit job's verdict)."""
    from isaaclab_sysid.evaluate.friction_score import augmented_space
    from isaaclab_sysid.objective.param_space import ParamSpace

    for extra in ("load_friction_motor", "presliding_stiffness"):
        space = ParamSpace.from_bounds({"armature": (0, 1), "friction": (0, 1), extra: (1, 2)}, N)
        assert augmented_space(space) is None
    assert augmented_space(ParamSpace.from_bounds({"armature": (0, 1), "friction": (0, 1)}, N)) is not None
