"""The fitted joint physics as a selectable USD physics variant of the arm's asset.

Isaac Lab 3.0 ships robots whose USD carries a ``Physics`` variant set (the
SO-101's SysID variant for Newton, the Franka's ``physx`` / ``mujoco`` variants)
and selects one with ``UsdFileCfg(variants={"Physics": ...})``.
:func:`write_physics_variant` writes that for a fit:

* ``<robot>.usdc``: the arm's own asset (``sim/isaaclab_backend/asset.py``: the
  reduced URDF with the fit's link inertials, converted by ``urdf-usd-converter``), copied;
* ``<robot>_sysid.usda``: a layer whose default prim references it and carries the
  variant set ``Physics`` with ``asset`` (nothing overridden: the asset's own joint
  physics) and ``sysid`` (selected by default), which overrides on every fitted
  joint prim:

  | physics | armature | Coulomb friction | viscous | drive |
  |---|---|---|---|---|
  | ``newton`` | ``newton:armature`` [kg m^2] | ``newton:friction`` [N m] | ``newton:damping`` [N m s/deg] | ``DriveAPI:angular``: force drive, stiffness 0, damping 0, ``maxForce`` = the joint's torque limit [N m] |
  | ``physx`` | ``physxJointAxis:angular:armature`` | ``...:staticFrictionEffort`` and ``...:dynamicFrictionEffort`` [N m] (PhysX 5) | ``...:viscousFrictionCoefficient`` [N m s/deg] | same |

  Rotational damping is authored per degree, as both schemas define it (Newton's
  importer and PhysX multiply it by 180/pi); the drive has zero gains because the
  fit identified the joint physics under an explicit torque (the delay and the
  controller live in the actuator config, which USD does not carry). A position
  servo's fit (``kp``, ``kd``: the SO-101) authors its fitted gains as the drive's
  stiffness and damping instead, per degree (``kp x pi/180`` N m/deg, ``kd x pi/180``
  N m s/deg): the servo is part of the arm. That drive is the simulator's implicit
  PD without the bus delay; the delayed explicit servo is the actuator config's.

Newton has one Coulomb level: a static/dynamic fit (``mu_static``,
``dynamic_ratio`` != 1) is refused for ``newton``. PhysX before Isaac Sim 5 reads
``physxJoint:jointFriction``, a unitless coefficient no torque maps to: not written.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import numpy as np

from isaaclab_sysid.robots.robot import Robot

#: the variant set and its variants (Isaac Lab's convention: ``UsdFileCfg(variants={"Physics": "sysid"})``)
VARIANT_SET = "Physics"
ASSET_VARIANT = "asset"
SYSID_VARIANT = "sysid"
PHYSICS = ("newton", "physx")
_PER_DEG = math.pi / 180.0  # N m s/rad -> N m s/deg


def joint_values(values: Mapping[str, np.ndarray], joint_names: list[str], physics: str) -> dict[str, dict[str, float]]:
    """Per joint: ``armature``, ``friction`` (static) and ``dynamic_friction`` [N m], ``viscous`` [N m s/rad] of a fit's
    decoded values (groups ``armature``, ``friction`` or ``mu_static`` + ``dynamic_ratio``, ``viscous``).

    Raises:
        ValueError: unknown physics, or a static/dynamic friction fit for Newton.
    """
    if physics not in PHYSICS:
        raise ValueError(f"physics must be one of {PHYSICS}, got {physics!r}")
    out: dict[str, dict[str, float]] = {j: {} for j in joint_names}
    arr = {g: np.asarray(v, dtype=float).reshape(-1) for g, v in values.items() if g != "delay"}
    for k, j in enumerate(joint_names):
        if "armature" in arr:
            out[j]["armature"] = float(arr["armature"][k])
        if "mu_static" in arr:
            fs = float(arr["mu_static"][k])
            ratio = float(arr["dynamic_ratio"][k]) if "dynamic_ratio" in arr else 1.0
            if physics == "newton" and abs(ratio - 1.0) > 1e-9:
                raise ValueError("the fit has static and dynamic friction (dynamic_ratio != 1) but Newton has one Coulomb "
                                 "level: write the variant with --physics physx, or fit 'friction'")
            out[j]["friction"], out[j]["dynamic_friction"] = fs, ratio * fs
        elif "friction" in arr:
            out[j]["friction"] = out[j]["dynamic_friction"] = float(arr["friction"][k])
        if "viscous" in arr:
            out[j]["viscous"] = float(arr["viscous"][k])
        for g in ("kp", "kd"):  # a position servo's fitted gains [N m/rad, N m s/rad]
            if g in arr:
                out[j][g] = float(arr[g][k])
    return out


def _joint_prims(stage, root, joint_names: list[str]) -> dict[str, object]:
    from pxr import Usd, UsdPhysics

    found = {}
    for prim in Usd.PrimRange(root):
        if prim.IsA(UsdPhysics.RevoluteJoint) and prim.GetName() in joint_names:
            found[prim.GetName()] = prim
    missing = [j for j in joint_names if j not in found]
    if missing:
        raise ValueError(f"the asset has no revolute joint prims {missing}")
    return found


def _author(prim, vals: Mapping[str, float], tau_max: float, physics: str) -> None:
    from pxr import Sdf, UsdPhysics

    def put(name: str, v: float) -> None:
        prim.CreateAttribute(name, Sdf.ValueTypeNames.Float, custom=False).Set(float(v))

    if physics == "newton":
        if "armature" in vals:
            put("newton:armature", vals["armature"])
        if "friction" in vals:
            put("newton:friction", vals["friction"])
        if "viscous" in vals:
            put("newton:damping", vals["viscous"] * _PER_DEG)
    else:
        prim.AddAppliedSchema("PhysxJointAxisAPI:angular")
        pre = "physxJointAxis:angular:"
        if "armature" in vals:
            put(pre + "armature", vals["armature"])
        if "friction" in vals:
            put(pre + "staticFrictionEffort", vals["friction"])
            put(pre + "dynamicFrictionEffort", vals.get("dynamic_friction", vals["friction"]))
        if "viscous" in vals:
            put(pre + "viscousFrictionCoefficient", vals["viscous"] * _PER_DEG)
    drive = UsdPhysics.DriveAPI.Apply(prim, "angular")
    drive.CreateTypeAttr("force")
    drive.CreateStiffnessAttr(float(vals.get("kp", 0.0) * _PER_DEG))  # per degree, as the schema defines it
    drive.CreateDampingAttr(float(vals.get("kd", 0.0) * _PER_DEG))
    drive.CreateMaxForceAttr(float(tau_max))


def write_physics_variant(robot: Robot, values: Mapping[str, np.ndarray], out_dir: str | Path, physics: str = "newton",
                          source: str | None = None, asset_usd: str | Path | None = None) -> Path:
    """Write ``<robot>.usdc`` and ``<robot>_sysid.usda`` (see module docstring) into ``out_dir``; returns the layer.

    Args:
        robot: the fitted arm (its asset, joint names and torque limits).
        values: the fit's decoded values per group (``FitResult.values``: (N,) arrays in joint order).
        physics: ``newton`` or ``physx`` (which attributes the variant authors).
        source: recorded in the layer's metadata (e.g. the fit's ``sysid_best_params.json``).
        asset_usd: the arm's USD (default: ``robot_usd(robot)``, converted on first use).

    Raises:
        ValueError: see :func:`joint_values`; ImportError: no ``pxr`` (the ``[isaaclab]`` extra).
    """
    from pxr import Usd

    from isaaclab_sysid.sim.isaaclab_backend.asset import robot_usd

    names = list(robot.joint_names)
    per_joint = joint_values(values, names, physics)
    base = Path(asset_usd) if asset_usd is not None else robot_usd(robot)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    asset = out / f"{robot.name}{base.suffix}"
    tmp_asset = asset.with_name(f".{asset.name}.tmp")
    shutil.copy2(base, tmp_asset)
    tmp_asset.replace(asset)

    base_stage = Usd.Stage.Open(str(asset))
    root = base_stage.GetDefaultPrim()
    if not root:
        raise ValueError(f"{base}: the asset has no default prim")
    rel_joints = {j: p.GetPath().MakeRelativePath(root.GetPath()) for j, p in _joint_prims(base_stage, root, names).items()}

    layer_path = out / f"{robot.name}_sysid.usda"
    tmp_layer = layer_path.with_name(f".{layer_path.stem}.tmp.usda")
    stage = Usd.Stage.CreateNew(str(tmp_layer))
    stage.SetMetadata("metersPerUnit", base_stage.GetMetadata("metersPerUnit"))
    stage.SetMetadata("upAxis", base_stage.GetMetadata("upAxis"))
    stage.GetRootLayer().customLayerData = {"isaaclab_sysid": {
        "source": source or "", "created": datetime.now().isoformat(timespec="seconds"), "physics": physics,
        "units": "armature kg m^2, friction N m, damping N m s/deg (= N m s/rad x pi/180), maxForce N m"}}
    prim = stage.DefinePrim(root.GetPath(), root.GetTypeName())
    prim.GetReferences().AddReference(f"./{asset.name}")
    stage.SetDefaultPrim(prim)
    vset = prim.GetVariantSets().AddVariantSet(VARIANT_SET)
    vset.AddVariant(ASSET_VARIANT)
    vset.AddVariant(SYSID_VARIANT)
    vset.SetVariantSelection(SYSID_VARIANT)
    tau_max = np.asarray(robot.tau_max, dtype=float)
    with vset.GetVariantEditContext():
        for k, j in enumerate(names):
            jp = stage.OverridePrim(prim.GetPath().AppendPath(rel_joints[j]))
            _author(jp, per_joint[j], tau_max[k], physics)
    stage.GetRootLayer().Save()
    del stage
    Path(tmp_layer).replace(layer_path)  # same folder: the relative reference stays valid
    return layer_path
