"""Servo test benches as robots (issue 42): a pendulum of stated mass and length on one servo.

BAM's bench (Duclusaud et al., ICRA 2025): one servo whose output shaft carries a rigid arm with a mass at its
end; the angle is zero with the arm hanging down and positive counter-clockwise, so gravity's torque is
``-m g l sin(q)``. Here the arm is massless and the mass a small sphere (1 mm radius: its own inertia is
``2/5 m r^2``, 1e-5 of ``m l^2``, so the bench is BAM's point mass to that precision); the servo's rotor, horn
and gearbox inertia is the fitted armature. The bench becomes a URDF and a robot config like every arm, so the
MuJoCo, Pinocchio and Isaac Lab models are built from it the same way.

``configs/robots/bam_pendulum_xl330.toml`` is the bench of BAM's shared XL330 logs (0.49 kg at 0.1 m), written
by :func:`write_pendulum`; another header gets its own config in a folder the caller names.
"""

from __future__ import annotations

from pathlib import Path

from isaaclab_sysid.paths import ROBOT_CONFIGS_DIR
from isaaclab_sysid.robots.servos import servo_family
from isaaclab_sysid.utils.atomic import atomic_write_text
from isaaclab_sysid.utils.errors import UserError

#: The sphere radius of the pendulum's mass [m] (its own inertia 2/5 m r^2).
MASS_RADIUS_M = 1e-3
#: The joint's range [rad]: the bench turns less than half a turn either way.
JOINT_RANGE_RAD = 3.2
JOINT_NAME = "servo"
#: the armature bound of a bench's servo [kg m^2] and its source (the fit's default armature box)
ARMATURE_MAX = 0.05
ARMATURE_MAX_SOURCE = "BAM's armature box for the XL330 and MX servos (bam/dynamixel/actuator.py: 0.0001..0.05 kg m^2)"


class BenchError(UserError, ValueError):
    """A bench header that describes no pendulum (a mass or length that is not positive and finite)."""


def _fmt(v: float) -> str:
    return f"{v:.10g}"


def pendulum_name(mass_kg: float, length_m: float, family: str) -> str:
    """The robot config name of a bench (``bam_pendulum_xl330`` for BAM's shared bench, else with its numbers)."""
    fam = servo_family(family).name
    if (mass_kg, length_m) == SHIPPED.get(fam):
        return f"bam_pendulum_{fam}"
    return f"pendulum_{fam}_{_fmt(mass_kg)}kg_{_fmt(length_m)}m".replace(".", "p")


def pendulum_urdf(mass_kg: float, length_m: float) -> str:
    """The URDF text of a pendulum: ``base_link`` fixed, joint ``servo`` about +y, the mass at ``(0, 0, -length)``."""
    _check(mass_kg, length_m)
    i = 0.4 * mass_kg * MASS_RADIUS_M**2
    return f"""<?xml version="1.0"?>
<!-- A servo test bench (isaaclab_sysid.robots.bench): a {_fmt(mass_kg)} kg mass at {_fmt(length_m)} m on one servo. -->
<robot name="pendulum">
  <link name="base_link">
    <inertial><origin xyz="0 0 0"/><mass value="1.0"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="pendulum">
    <inertial><origin xyz="0 0 {_fmt(-length_m)}"/><mass value="{_fmt(mass_kg)}"/>
      <inertia ixx="{i:.10g}" iyy="{i:.10g}" izz="{i:.10g}" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="{JOINT_NAME}" type="revolute">
    <parent link="base_link"/><child link="pendulum"/><origin xyz="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="{-JOINT_RANGE_RAD}" upper="{JOINT_RANGE_RAD}" effort="10" velocity="100"/>
  </joint>
</robot>
"""


def pendulum_toml(name: str, urdf_file: str, mass_kg: float, length_m: float, family: str) -> str:
    """The robot config text of a pendulum bench (its URDF named relative to the config)."""
    fam = servo_family(family)
    return f"""# A servo test bench (isaaclab_sysid.robots.bench, docs/servo_arms.md): a {_fmt(mass_kg)} kg mass at
# {_fmt(length_m)} m from the axis of one {fam.name} servo; zero hangs down, positive is counter-clockwise
# (BAM's pendulum). Written by robots/bench.py: write_pendulum.
name = "{name}"
urdf = "{urdf_file}"
base_link = "base_link"
joints = ["{JOINT_NAME}"]
ee_link = "pendulum"
ee_offset = [0.0, 0.0, {_fmt(-length_m)}]   # m: the mass
locked_joints = {{}}
end_effector = "a {_fmt(mass_kg)} kg point mass at {_fmt(length_m)} m"
# The servo's own position loop does not compensate gravity: replays run with gravity.
gravity_compensated = false
servo = "{fam.name}"
# The armature (rotor, horn and gearbox inertia at the output) of a small servo: BAM's box.
armature_max = [{_fmt(ARMATURE_MAX)}]
armature_max_source = "{ARMATURE_MAX_SOURCE}"
"""


def write_pendulum(mass_kg: float, length_m: float, family: str, out_dir: Path | None = None) -> Path:
    """Write a bench's robot config and URDF (atomically) into ``out_dir`` (default ``configs/robots/``).

    Returns:
        The config's path.
    """
    name = pendulum_name(mass_kg, length_m, family)
    folder = Path(out_dir) if out_dir is not None else ROBOT_CONFIGS_DIR
    urdf_rel = f"urdf/{name}.urdf"
    atomic_write_text(folder / urdf_rel, pendulum_urdf(mass_kg, length_m))
    path = folder / f"{name}.toml"
    atomic_write_text(path, pendulum_toml(name, urdf_rel, mass_kg, length_m, family))
    return path


def pendulum_robot_config(mass_kg: float, length_m: float, family: str, out_dir: Path | None = None) -> str:
    """The robot config a bench header names: a shipped config's name, or the path of one written in ``out_dir``.

    Raises:
        BenchError: a mass or length that is not positive and finite, or a new bench without ``out_dir``.
        UnknownServoFamily: an unknown family.
    """
    _check(mass_kg, length_m)
    name = pendulum_name(mass_kg, length_m, family)
    if (ROBOT_CONFIGS_DIR / f"{name}.toml").is_file():
        return name
    if out_dir is None:
        raise BenchError(f"no robot config for a bench of {_fmt(mass_kg)} kg at {_fmt(length_m)} m ({family}): "
                         "name a folder to write it in")
    return str(write_pendulum(mass_kg, length_m, family, out_dir))


def _check(mass_kg: float, length_m: float) -> None:
    for what, v in (("mass", mass_kg), ("length", length_m)):
        try:
            ok = float(v) > 0 and float(v) < float("inf")
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise BenchError(f"bench {what} {v!r} is not a positive finite number")


#: The benches shipped under configs/robots/: family -> (mass [kg], length [m]).
SHIPPED: dict[str, tuple[float, float]] = {"xl330": (0.49, 0.1)}
