"""Robot descriptions: one config -> MuJoCo model, Pinocchio model (and Isaac Lab asset)."""

from isaaclab_sysid.robots.config import RobotConfig, load_robot_config
from isaaclab_sysid.robots.overrides import InertialError, JointOverrides, LinkInertial, engine_ready, engine_violation
from isaaclab_sysid.robots.robot import Robot, load_robot

__all__ = [
    "InertialError",
    "JointOverrides",
    "LinkInertial",
    "Robot",
    "RobotConfig",
    "load_robot",
    "load_robot_config",
    "engine_ready",
    "engine_violation",
]
