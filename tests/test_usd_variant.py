"""The fitted joint physics as a USD physics variant: written, opened with pxr, selected, loaded in Newton and read back.

Needs pxr, Newton and urdf-usd-converter (the [isaaclab] extra); skipped without them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pxr", reason="the USD variant needs pxr (pip install -e '.[isaaclab]')")
pytest.importorskip("newton", reason="loading the variant needs Newton (the [isaaclab] extra)")
pytest.importorskip("urdf_usd_converter", reason="the arm's USD needs urdf-usd-converter (the [isaaclab] extra)")

from pxr import Usd  # noqa: E402

from isaaclab_sysid.export.usd_variant import ASSET_VARIANT, SYSID_VARIANT, VARIANT_SET, write_physics_variant  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402

VALUES = {"armature": np.linspace(0.1, 0.4, 7), "friction": np.linspace(0.2, 0.8, 7), "viscous": np.linspace(0.3, 1.0, 7),
          "delay": np.array(3)}


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


@pytest.fixture(scope="module")
def layer(robot, tmp_path_factory):
    return write_physics_variant(robot, VALUES, tmp_path_factory.mktemp("usd"), source="test")


def _newton_joints(stage, names):
    """Newton's model of the stage (Isaac Lab's schema resolvers), per named joint: armature, friction, damping,
    drive stiffness/damping and effort limit."""
    import newton
    from newton.usd import SchemaResolverMjc, SchemaResolverNewton, SchemaResolverPhysx

    b = newton.ModelBuilder()
    b.add_usd(stage, schema_resolvers=[SchemaResolverNewton(), SchemaResolverPhysx(), SchemaResolverMjc()])
    m = b.finalize(device="cpu")
    labels, qd = list(m.joint_label), m.joint_qd_start.numpy()
    idx = [qd[next(k for k, lab in enumerate(labels) if lab.endswith("/" + j))] for j in names]
    get = lambda a: a.numpy()[idx].astype(float)  # noqa: E731
    return {"armature": get(m.joint_armature), "friction": get(m.joint_friction), "viscous": get(m.joint_damping),
            "ke": get(m.joint_target_ke), "kd": get(m.joint_target_kd), "effort": get(m.joint_effort_limit)}


def test_selected_variant_loads_the_fitted_physics_in_newton(robot, layer):
    stage = Usd.Stage.Open(str(layer))
    vset = stage.GetDefaultPrim().GetVariantSet(VARIANT_SET)
    assert vset.GetVariantNames() == [ASSET_VARIANT, SYSID_VARIANT] and vset.GetVariantSelection() == SYSID_VARIANT
    vset.SetVariantSelection(SYSID_VARIANT)
    got = _newton_joints(stage, robot.joint_names)
    for g in ("armature", "friction", "viscous"):  # viscous authored per degree, read per radian
        np.testing.assert_allclose(got[g], VALUES[g], rtol=1e-6)
    np.testing.assert_array_equal(got["ke"], 0.0)
    np.testing.assert_array_equal(got["kd"], 0.0)
    np.testing.assert_allclose(got["effort"], robot.tau_max, rtol=1e-6)
    # the other variant is the asset's own physics: the selection is what carries the fit
    vset.SetVariantSelection(ASSET_VARIANT)
    base = _newton_joints(stage, robot.joint_names)
    assert np.all(base["armature"] == 0.0) and np.all(base["friction"] == 0.0)


def test_physx_variant_authors_friction_efforts_and_newton_refuses_two_levels(robot, tmp_path):
    vals = {"armature": VALUES["armature"], "mu_static": np.full(7, 1.0), "dynamic_ratio": np.full(7, 0.8),
            "viscous": VALUES["viscous"]}
    p = write_physics_variant(robot, vals, tmp_path, physics="physx")
    stage = Usd.Stage.Open(str(p))
    prim = stage.GetPrimAtPath(stage.GetDefaultPrim().GetPath().AppendPath("Physics/panda_joint2"))
    assert "PhysxJointAxisAPI:angular" in prim.GetMetadata("apiSchemas").ApplyOperations([])  # not a registered schema here
    a = lambda n: prim.GetAttribute(f"physxJointAxis:angular:{n}").Get()  # noqa: E731
    assert a("staticFrictionEffort") == pytest.approx(1.0) and a("dynamicFrictionEffort") == pytest.approx(0.8)
    assert a("viscousFrictionCoefficient") == pytest.approx(VALUES["viscous"][1] * math.pi / 180, rel=1e-6)
    with pytest.raises(ValueError, match="Newton has one Coulomb level"):
        write_physics_variant(robot, vals, tmp_path / "n", physics="newton")


def test_isaaclab_spawns_the_variant(robot, layer):
    """What a user writes: UsdFileCfg(usd_path=layer, variants={"Physics": "sysid"}); read back from the solver."""
    pytest.importorskip("isaaclab", reason="needs Isaac Lab")
    import isaaclab.sim as sim_utils
    import torch
    from isaaclab.actuators import ImplicitActuatorCfg
    from isaaclab.assets import ArticulationCfg
    from isaaclab.envs import ManagerBasedEnv, ManagerBasedEnvCfg
    from isaaclab.envs.mdp import JointEffortActionCfg, joint_pos
    from isaaclab.managers import ObservationGroupCfg, ObservationTermCfg
    from isaaclab.scene import InteractiveSceneCfg
    from isaaclab.sim import SimulationCfg, SimulationContext
    from isaaclab.utils import configclass

    from isaaclab_sysid.sim.isaaclab_backend.readback import joint_physics
    from isaaclab_sysid.sim.isaaclab_backend.scene import physics_cfg

    names = list(robot.joint_names)
    q0 = 0.5 * (robot.q_lower + robot.q_upper)

    @configclass
    class Actions:
        effort = JointEffortActionCfg(asset_name="robot", joint_names=names)

    scene = InteractiveSceneCfg(num_envs=2, env_spacing=2.0)
    scene.robot = ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(usd_path=str(layer), variants={VARIANT_SET: SYSID_VARIANT}),
        init_state=ArticulationCfg.InitialStateCfg(joint_pos=dict(zip(names, map(float, q0)))),
        actuators={"usd": ImplicitActuatorCfg(joint_names_expr=names, stiffness=None, damping=None)})
    obs = ObservationGroupCfg()
    obs.q = ObservationTermCfg(func=joint_pos)
    if SimulationContext.instance() is not None:
        SimulationContext.clear_instance()
    env = ManagerBasedEnv(ManagerBasedEnvCfg(
        sim=SimulationCfg(dt=0.001, device="cpu", gravity=(0.0, 0.0, 0.0), physics=physics_cfg()), scene=scene,
        decimation=1, observations={"policy": obs}, actions=Actions(), seed=0))
    try:
        env.step(torch.zeros(2, 7))
        jp = joint_physics(names, 2)
        for g in ("armature", "friction", "viscous"):
            np.testing.assert_allclose(getattr(jp, g), np.tile(VALUES[g], (2, 1)), rtol=1e-6)
    finally:
        env.close()
        SimulationContext.clear_instance()
