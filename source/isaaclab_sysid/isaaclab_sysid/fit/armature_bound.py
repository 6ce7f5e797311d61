"""The armature group's default search box: the robot config's physical bound per joint (issue 28, item 5).

Armature is a reflected rotor inertia ``J_m N^2``: a motor and gear can reflect only so much. A robot
config states each joint's bound (``armature_max`` [kg m^2], with ``armature_max_source``: the data
sheet's rotor inertia x gear ratio^2, or the rule it follows; ``configs/robots/*.toml``). Without
``--armature_bounds`` the fit searches ``[0, armature_max]`` per joint, so a value a motor cannot
reflect (0.5 kg m^2 on a Franka wrist) lies outside the box, and a fit that ends at the bound says so
(:class:`~isaaclab_sysid.objective.param_space.BoundHit` names the source). ``--armature_bounds LO HI`` is
used as given; a robot config without the bound keeps the generic default of
:data:`~isaaclab_sysid.objective.param_space.GROUPS`.
"""

from __future__ import annotations

from isaaclab_sysid.objective.param_space import GROUPS, GroupSpec
from isaaclab_sysid.robots.config import RobotConfig


def armature_spec(flag: tuple[float, float] | None, config: RobotConfig | None) -> GroupSpec:
    """The armature :class:`GroupSpec`: ``flag`` when given, else [0, the config's per-joint bound], else the default.

    Raises:
        ValueError: bad bounds (a flag with lower >= upper, non-finite values).
    """
    if flag is not None:
        return GroupSpec("armature", float(flag[0]), float(flag[1]))
    lo = GROUPS["armature"].default_bounds[0]
    if config is None or config.armature_max is None:
        return GroupSpec("armature", *GROUPS["armature"].default_bounds)
    arm = tuple(float(v) for v in config.armature_max)
    return GroupSpec("armature", lo, max(arm), arm, f"robot config {config.name}: {config.armature_max_source}")


def describe_armature(spec: GroupSpec) -> str:
    """One log line: the armature box and where it comes from."""
    if spec.joint_upper is None:
        return f"armature bounds [{spec.lower:g}, {spec.upper:g}] kg m^2 for every joint"
    return (f"armature bounds [{spec.lower:g}, upper per joint {' '.join(f'{v:g}' for v in spec.joint_upper)}] kg m^2 "
            f"({spec.joint_upper_source})")
