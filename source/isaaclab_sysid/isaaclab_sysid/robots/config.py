"""Robot config files (``configs/robots/<name>.toml``): the one source of truth for an arm."""

from __future__ import annotations

import sysconfig
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from isaaclab_sysid.paths import ROBOT_CONFIGS_DIR

if TYPE_CHECKING:  # robots/servo_model.py is read lazily, by the configs that name a part
    from isaaclab_sysid.robots.servo_model import ServoModel
from isaaclab_sysid.utils.errors import UserError


class RobotConfigError(UserError, ValueError):
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
        arm: the arm this config describes, whatever it carries (a run's sidecar ``robot`` may name any config of
            the same arm: ``franka_panda`` and ``franka_panda_nohand`` are both the arm ``franka_panda``).
        end_effector: what the arm carries at its flange, in words (printed by every stage that builds the arm).
        remove_links: links removed from the URDF with everything below them (e.g. the Franka's hand and fingers).
        tool: a tool stated as mass, centre of mass and inertia at a link (the flange), or None.
        servo: (N,) the smart-servo family of each joint (``robots/servos.py``: ``xl330``, ``sts3215``), or None (the
            joints are not driven by a smart servo's voltage loop). Runs of controller ``servo`` need it.
        servo_model: (N,) the identified servo part of each joint (``robots/servo_model.py``; None on a joint without
            one), or None (no ``servo_model`` key). ``servo_model_paths``: the resolved files, in the same order.
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
    arm: str = ""
    end_effector: str = "as in the URDF"
    remove_links: tuple[str, ...] = ()
    tool: "Tool | None" = None
    servo: tuple[str, ...] | None = None
    servo_model: "tuple[ServoModel | None, ...] | None" = None
    servo_model_paths: tuple[Path | None, ...] | None = None

    def __post_init__(self) -> None:
        if not self.arm:
            object.__setattr__(self, "arm", self.name)

    @property
    def carries(self) -> str:
        """What the arm carries, in one line: the end effector, and the tool where one is stated."""
        return self.end_effector + (f"; tool {self.tool.words()}" if self.tool is not None else "")


@dataclass(frozen=True)
class Tool:
    """A tool rigidly fixed to a link (the flange), stated by its inertials (``[tool]`` of a robot config).

    Attributes:
        mass: [kg].
        com: (3,) centre of mass in the ``link`` frame [m].
        inertia: (3, 3) inertia about the centre of mass, ``link``-frame axes [kg m^2].
        link: the link it is fixed to.
        name: the URDF link the tool becomes.
    """

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[tuple[float, float, float], ...]
    link: str
    name: str = "sysid_tool"

    def words(self) -> str:
        c = ", ".join(f"{v:g}" for v in self.com)
        ev = sorted(float(v) for v in __import__("numpy").linalg.eigvalsh(self.inertia))
        return (f"{self.mass:g} kg at [{c}] m in {self.link}, principal moments "
                + " ".join(f"{v:.3g}" for v in ev) + " kg m^2")


def _tool(raw: dict, path: Path, default_link: str) -> Tool:
    """``[tool]``: mass [kg], com (3) [m], inertia: 3 (principal, about the com, link axes), 6
    (ixx iyy izz ixy ixz iyz) or 3x3 [kg m^2]; link (default the config's ee_link)."""
    import numpy as np

    from isaaclab_sysid.robots.overrides import LinkInertial, inertial_violation

    try:
        mass = float(raw["mass"])
        com = tuple(float(v) for v in raw.get("com", (0.0, 0.0, 0.0)))
        i = np.asarray(raw.get("inertia", (0.0, 0.0, 0.0)), dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise RobotConfigError(f"{path}: [tool] needs mass [kg], com (3) [m] and inertia [kg m^2]: {exc}") from None
    if i.shape == (3,):
        i = np.diag(i)
    elif i.shape == (6,):
        xx, yy, zz, xy, xz, yz = i
        i = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    if i.shape != (3, 3) or len(com) != 3:
        raise RobotConfigError(f"{path}: [tool] com must have 3 entries and inertia 3, 6 or 3x3")
    why = inertial_violation(LinkInertial(mass, np.asarray(com), i), engine_margin=True)
    if why is not None:
        raise RobotConfigError(f"{path}: [tool] is not a body the replay engines build: {why} (a point mass: give "
                               "small principal moments, e.g. the tool's size squared x its mass / 10)")
    return Tool(mass, com, tuple(tuple(float(v) for v in row) for row in i),  # type: ignore[arg-type]
                str(raw.get("link", default_link)), str(raw.get("name", "sysid_tool")))


def _raw_config(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """The TOML of ``path``, with ``extends = "<config>"`` resolved (the base's keys, this file's on top; the
    base's ``urdf`` resolved against the base's folder)."""
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise RobotConfigError(f"{path}: {exc}") from None
    if "extends" not in raw:
        return raw
    raw.setdefault("name", path.stem)
    base_path = _config_path(str(raw.pop("extends")), path.parent)
    if base_path.resolve() in seen:
        raise RobotConfigError(f"{path}: 'extends' loops back to {base_path}")
    base = _raw_config(base_path, (*seen, path.resolve()))
    if "urdf" in base and not str(base["urdf"]).startswith("example-robot-data:"):
        base["urdf"] = str(_resolve_urdf(str(base["urdf"]), base_path))
    if "servo_model" in base:  # the base's parts resolve against the base's folder
        base["servo_model"] = _resolved_parts(base["servo_model"], base_path)
    if "arm" not in raw:
        base.setdefault("arm", base.get("name"))
    return {**base, **raw}


def _config_path(name_or_path: str | Path, folder: Path | None = None) -> Path:
    path = Path(name_or_path)
    if path.suffix != ".toml":
        return ROBOT_CONFIGS_DIR / f"{name_or_path}.toml"
    if not path.is_absolute() and folder is not None and not path.is_file():
        path = folder / path
    if not path.is_file():
        raise RobotConfigError(f"robot config '{name_or_path}' not found")
    return path


def arm_variants(config: RobotConfig) -> list[Path]:
    """The configs under ``configs/robots/`` of the same arm as ``config`` (its own included), by name."""
    out = []
    for p in sorted(ROBOT_CONFIGS_DIR.glob("*.toml")):
        try:
            raw = _raw_config(p)
        except RobotConfigError:
            continue
        if str(raw.get("arm", raw.get("name"))) == config.arm:
            out.append(p)
    return out


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
    path = _config_path(name_or_path) if Path(name_or_path).suffix != ".toml" else Path(name_or_path)
    if not path.is_file():
        known = sorted(p.stem for p in ROBOT_CONFIGS_DIR.glob("*.toml"))
        raise RobotConfigError(f"robot config '{name_or_path}' not found (known: {', '.join(known)})")
    raw = _raw_config(path)
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
        arm=str(raw.get("arm", raw["name"])),
        end_effector=str(raw.get("end_effector", "as in the URDF")),
        remove_links=tuple(str(v) for v in raw.get("remove_links", ())),
        tool=None if "tool" not in raw else _tool(dict(raw["tool"]), path, str(raw["ee_link"])),
        **_servo_fields(raw, path, n),
    )


def _servo_fields(raw: dict, path: Path, n: int) -> dict:
    """``servo`` and ``servo_model``: the parts read, their families held against ``servo`` (which they state when
    the config does not)."""
    servo = _servo(raw, path, n)
    if "servo_model" not in raw:
        return {"servo": servo}
    from isaaclab_sysid.robots.servo_model import ServoModelFileError, read_servo_model

    files = _resolved_parts(raw["servo_model"], path)
    if len(files) == 1:
        files = files * n
    if len(files) != n:
        raise RobotConfigError(f"{path}: 'servo_model' has {len(files)} entries, expected 1 or {n} (\"\" for a joint "
                               "without a part)")
    cache: dict[str, object] = {}
    parts = []
    for f in files:
        if not f:
            parts.append(None)
            continue
        if f not in cache:
            try:
                cache[f] = read_servo_model(f)
            except ServoModelFileError as exc:  # names the part file and its key
                raise RobotConfigError(f"{path}: 'servo_model': {exc}") from None
        parts.append(cache[f])
    fams = [None if p is None else p.family for p in parts]
    if servo is None:
        if any(f is None for f in fams):
            raise RobotConfigError(f"{path}: 'servo_model' leaves a joint without a part and the config states no 'servo' "
                                   "family for it")
        servo = tuple(fams)  # type: ignore[arg-type]
    else:
        for j, (fam, stated) in enumerate(zip(fams, servo)):
            if fam is not None and fam != stated:
                raise RobotConfigError(f"{path}: 'servo_model' of joint {raw['joints'][j]!r} is a {fam} part "
                                       f"({files[j]}) but 'servo' says {stated}")
    return {"servo": servo, "servo_model": tuple(parts),
            "servo_model_paths": tuple(Path(f) if f else None for f in files)}


def _resolved_parts(val, config_file: Path) -> list[str]:
    """``servo_model``: one file for every joint or a list (``""``: no part); a relative path against the config's
    folder."""
    items = [val] if isinstance(val, str) else val
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise RobotConfigError(f"{config_file}: 'servo_model' must be a file name or a list of them")
    out = []
    for v in items:
        if not v:
            out.append("")
            continue
        p = Path(v).expanduser()
        if not p.is_absolute():
            p = config_file.parent / p
        if not p.is_file():
            raise RobotConfigError(f"{config_file}: 'servo_model': part file '{p}' does not exist")
        out.append(str(p))
    return out


def _servo(raw: dict, path: Path, n: int) -> tuple[str, ...] | None:
    """``servo``: one family name for every joint, or a list of N."""
    if "servo" not in raw:
        return None
    from isaaclab_sysid.robots.servos import SERVO_FAMILIES

    val = raw["servo"]
    names = [val] * n if isinstance(val, str) else list(val)
    if len(names) != n:
        raise RobotConfigError(f"{path}: 'servo' has {len(names)} entries, expected 1 or {n}")
    bad = [v for v in names if str(v).lower() not in SERVO_FAMILIES]
    if bad:
        raise RobotConfigError(f"{path}: 'servo': unknown family {bad[0]!r} (known: {', '.join(sorted(SERVO_FAMILIES))})")
    return tuple(str(v).lower() for v in names)
