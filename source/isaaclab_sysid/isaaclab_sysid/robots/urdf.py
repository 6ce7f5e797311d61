"""URDF preprocessing shared by every model builder (one source of truth).

The URDF is reduced to what joint dynamics need: visual and collision geometry,
``<dynamics>``, transmissions and Gazebo tags are dropped (joint friction,
damping and armature come from :class:`JointOverrides`, never from the URDF);
locked joints become fixed joints at their lock value; link inertials can be
overridden.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping

import numpy as np
from scipy.spatial.transform import Rotation

from isaaclab_sysid.robots.config import RobotConfig, RobotConfigError
from isaaclab_sysid.robots.overrides import LinkInertial

_DROP_TAGS = ("visual", "collision")
_DROP_TOP = ("transmission", "gazebo", "mujoco")


def _vec(text: str | None, default: str = "0 0 0") -> np.ndarray:
    return np.array([float(v) for v in (text or default).split()], dtype=float)


def _fmt(v: np.ndarray) -> str:
    return " ".join(repr(float(x)) for x in v)


def _lock_joint(joint: ET.Element, value: float) -> None:
    """Turn a movable joint into a fixed one, frozen at ``value`` [rad or m]."""
    jtype = joint.get("type")
    origin = joint.find("origin")
    if origin is None:
        origin = ET.SubElement(joint, "origin")
    xyz = _vec(origin.get("xyz"))
    rot = Rotation.from_euler("xyz", _vec(origin.get("rpy")))
    axis_el = joint.find("axis")
    axis = _vec(axis_el.get("xyz") if axis_el is not None else None, "1 0 0")
    if value != 0.0:
        if jtype == "prismatic":
            xyz = xyz + rot.apply(axis * value)
        elif jtype in ("revolute", "continuous"):
            rot = rot * Rotation.from_rotvec(axis / np.linalg.norm(axis) * value)
        else:
            raise RobotConfigError(f"cannot lock joint '{joint.get('name')}' of type {jtype}")
    origin.set("xyz", _fmt(xyz))
    origin.set("rpy", _fmt(rot.as_euler("xyz")))
    joint.set("type", "fixed")
    for tag in ("axis", "limit", "mimic", "dynamics", "safety_controller", "calibration"):
        for el in joint.findall(tag):
            joint.remove(el)


def _set_inertial(link: ET.Element, inertial: LinkInertial) -> None:
    for el in link.findall("inertial"):
        link.remove(el)
    el = ET.SubElement(link, "inertial")
    ET.SubElement(el, "origin", xyz=_fmt(np.asarray(inertial.com)), rpy="0 0 0")
    ET.SubElement(el, "mass", value=repr(float(inertial.mass)))
    i = np.asarray(inertial.inertia, dtype=float)
    ET.SubElement(
        el,
        "inertia",
        ixx=repr(float(i[0, 0])), ixy=repr(float(i[0, 1])), ixz=repr(float(i[0, 2])),
        iyy=repr(float(i[1, 1])), iyz=repr(float(i[1, 2])), izz=repr(float(i[2, 2])),
    )


def _remove_subtrees(root: ET.Element, config: RobotConfig) -> set[str]:
    """Remove ``config.remove_links`` and every link below them, with the joints into them; returns the names."""
    if not config.remove_links:
        return set()
    names = {el.get("name") for el in root.findall("link")}
    for name in config.remove_links:
        if name not in names:
            raise RobotConfigError(f"{config.source}: remove_links: '{name}' is not a link of {config.urdf_path}")
    children: dict[str, list[tuple[ET.Element, str]]] = {}
    for joint in root.findall("joint"):
        children.setdefault(joint.find("parent").get("link"), []).append((joint, joint.find("child").get("link")))
    removed: set[str] = set()
    stack = list(config.remove_links)
    while stack:
        name = stack.pop()
        if name in removed:
            continue
        removed.add(name)
        stack.extend(child for _, child in children.get(name, ()))
    for joint in root.findall("joint"):
        if joint.find("child").get("link") in removed:
            if joint.get("name") in config.joints:
                raise RobotConfigError(f"{config.source}: remove_links removes the actuated joint '{joint.get('name')}'")
            root.remove(joint)
    for link in root.findall("link"):
        if link.get("name") in removed:
            root.remove(link)
    if config.ee_link in removed:
        raise RobotConfigError(f"{config.source}: ee_link '{config.ee_link}' is removed by remove_links")
    return removed


def _add_tool(root: ET.Element, config: RobotConfig, links: dict[str, ET.Element]) -> None:
    """The stated tool as a link fixed to ``tool.link`` (link frame = that link's frame; its inertial as stated)."""
    tool = config.tool
    if tool.link not in links:
        raise RobotConfigError(f"{config.source}: [tool] link '{tool.link}' is not a link of the arm")
    if tool.name in links:
        raise RobotConfigError(f"{config.source}: [tool] name '{tool.name}' is already a link")
    link = ET.SubElement(root, "link", name=tool.name)
    _set_inertial(link, LinkInertial(mass=tool.mass, com=np.asarray(tool.com), inertia=np.asarray(tool.inertia)))
    joint = ET.SubElement(root, "joint", name=f"{tool.name}_joint", type="fixed")
    ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(joint, "parent", link=tool.link)
    ET.SubElement(joint, "child", link=tool.name)


def reduced_urdf(
    config: RobotConfig,
    link_inertials: Mapping[str, LinkInertial] | None = None,
    mujoco_compiler: bool = False,
) -> str:
    """Return the reduced URDF text for ``config``.

    Args:
        config: the robot description.
        link_inertials: per-link-name inertial overrides (link frame).
        mujoco_compiler: add the ``<mujoco><compiler .../></mujoco>`` block MuJoCo's
            URDF importer reads (keep fixed bodies, no inertia balancing).
    """
    root = ET.parse(config.urdf_path).getroot()
    for tag in _DROP_TOP:
        for el in root.findall(tag):
            root.remove(el)
    links = {el.get("name"): el for el in root.findall("link")}
    for link in links.values():
        for tag in _DROP_TAGS:
            for el in link.findall(tag):
                link.remove(el)
    removed = _remove_subtrees(root, config)
    links = {n: el for n, el in links.items() if n not in removed}
    joints = {el.get("name"): el for el in root.findall("joint")}
    if config.tool is not None:
        _add_tool(root, config, links)
        links[config.tool.name] = root.findall("link")[-1]
    for name in config.joints:
        if name not in joints:
            raise RobotConfigError(f"{config.source}: joint '{name}' is not in {config.urdf_path}")
    for name, value in config.locked_joints.items():
        if name not in joints and removed:
            continue  # a joint below a removed link (the Franka's fingers without the hand)
        if name not in joints:
            raise RobotConfigError(f"{config.source}: locked joint '{name}' is not in {config.urdf_path}")
        _lock_joint(joints[name], value)
    for name, joint in joints.items():
        for el in joint.findall("dynamics"):
            joint.remove(el)
        if joint.get("type") not in ("fixed",) and name not in config.joints:
            raise RobotConfigError(
                f"{config.source}: URDF joint '{name}' is movable but neither in 'joints' nor in 'locked_joints'"
            )
    if config.ee_link not in links:
        raise RobotConfigError(f"{config.source}: ee_link '{config.ee_link}' is not in {config.urdf_path}")
    for name, inertial in (link_inertials or {}).items():
        if name not in links:
            raise RobotConfigError(f"inertial override for unknown link '{name}'")
        _set_inertial(links[name], inertial)
    if mujoco_compiler:
        mj = ET.SubElement(root, "mujoco")
        ET.SubElement(
            mj, "compiler", discardvisual="true", fusestatic="false", balanceinertia="false", strippath="false"
        )
    return ET.tostring(root, encoding="unicode")
