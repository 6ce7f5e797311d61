"""Robot config files (``configs/robots/<name>.toml``): the one source of truth for an arm."""

from __future__ import annotations

import sysconfig
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from isaaclab_sysid.paths import ROBOT_CONFIGS_DIR


class RobotConfigError(ValueError):
    """A robot config file is missing, malformed or points at a missing URDF."""


@dataclass(frozen=True)
class RobotConfig:
    """Description of one arm.

    Attributes:
        name: short identifier used in run sidecars (``robot`` field).
        urdf_path: resolved path of the URDF with inertials.
        base_link: the fixed base link.
        joints: actuated joint names in order (the run columns q1..qN follow it).
        ee_link: link whose frame (plus ``ee_offset``) is the end-effector frame.
        ee_offset: (3,) translation of the EE frame in the ``ee_link`` frame [m].
        locked_joints: joints frozen at a value [rad or m] (e.g. the fingers).
        torque_limit: (N,) per-joint torque limit [N m], or None.
        torque_rate_limit: (N,) per-joint torque slew limit [N m/s], or None.
        gravity_compensated: True when the real controller cancels gravity
            itself, so replays run gravity-free by default.
        armature_max: (N,) physical upper bound of each joint's armature (reflected rotor inertia)
            [kg m^2], the fit's default armature bound, or None (the group's generic default).
        armature_max_source: where ``armature_max`` comes from (data sheet or the rule), said in reports.
        source: the config file this came from.
    """

    name: str
    urdf_path: Path
    base_link: str
    joints: tuple[str, ...]
    ee_link: str
    ee_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    locked_joints: dict[str, float] = field(default_factory=dict)
    torque_limit: tuple[float, ...] | None = None
    torque_rate_limit: tuple[float, ...] | None = None
    gravity_compensated: bool = True
    armature_max: tuple[float, ...] | None = None
    armature_max_source: str | None = None
    source: Path | None = None


def _resolve_urdf(spec: str, config_file: Path) -> Path:
    """Resolve the ``urdf`` entry: ``example-robot-data:<rel>`` or a path relative to the config."""
    if spec.startswith("example-robot-data:"):
        rel = spec.split(":", 1)[1]
        roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        for root in roots:
            cand = Path(root) / "cmeel.prefix" / "share" / "example-robot-data" / rel
            if cand.is_file():
                return cand
        raise RobotConfigError(
            f"{config_file}: URDF '{rel}' from example-robot-data not found; "
            "install it with `pip install example-robot-data`"
        )
    path = Path(spec)
    if not path.is_absolute():
        path = config_file.parent / path
    if not path.is_file():
        raise RobotConfigError(f"{config_file}: URDF file '{path}' does not exist")
    return path


def load_robot_config(name_or_path: str | Path) -> RobotConfig:
    """Load a robot config by name (``configs/robots/<name>.toml``) or by file path."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = ROBOT_CONFIGS_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in ROBOT_CONFIGS_DIR.glob("*.toml"))
        raise RobotConfigError(f"robot config '{name_or_path}' not found (known: {', '.join(known)})")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise RobotConfigError(f"{path}: {exc}") from None
    for key in ("name", "urdf", "base_link", "joints", "ee_link"):
        if key not in raw:
            raise RobotConfigError(f"{path}: missing key '{key}'")
    joints = tuple(raw["joints"])
    n = len(joints)

    def _vec(key: str) -> tuple[float, ...] | None:
        if key not in raw:
            return None
        val = tuple(float(v) for v in raw[key])
        if len(val) != n:
            raise RobotConfigError(f"{path}: '{key}' has {len(val)} entries, expected {n}")
        return val

    arm_max = _vec("armature_max")
    arm_src = raw.get("armature_max_source")
    if arm_max is not None and not all(0 < v < float("inf") for v in arm_max):
        raise RobotConfigError(f"{path}: 'armature_max' must hold finite values > 0 [kg m^2]")
    if (arm_max is None) != (arm_src is None):
        raise RobotConfigError(f"{path}: give 'armature_max' [kg m^2] and 'armature_max_source' (the data sheet or the "
                               "rule it comes from) together")
    offset = tuple(float(v) for v in raw.get("ee_offset", (0.0, 0.0, 0.0)))
    if len(offset) != 3:
        raise RobotConfigError(f"{path}: 'ee_offset' must have 3 entries")
    return RobotConfig(
        name=str(raw["name"]),
        urdf_path=_resolve_urdf(str(raw["urdf"]), path),
        base_link=str(raw["base_link"]),
        joints=joints,
        ee_link=str(raw["ee_link"]),
        ee_offset=offset,  # type: ignore[arg-type]
        locked_joints={str(k): float(v) for k, v in raw.get("locked_joints", {}).items()},
        torque_limit=_vec("torque_limit"),
        torque_rate_limit=_vec("torque_rate_limit"),
        gravity_compensated=bool(raw.get("gravity_compensated", True)),
        armature_max=arm_max,
        armature_max_source=None if arm_src is None else str(arm_src),
        source=path,
    )
