"""Excitation design: multiband and chirp task-space designs, optimized Fourier joint-space
designs, IK to joint space, target runs, regressor conditioning, identifiability and
the pre-flight report. See docs/excitation.md."""

from isaaclab_sysid.excitation.anchor import Q_HOME_PANDA, anchor_pose, default_q_init
from isaaclab_sysid.excitation.chirp import ChirpSpec, chirp
from isaaclab_sysid.excitation.limits import DesignLimitError, DesignLimits
from isaaclab_sysid.excitation.multiband import MultibandSpec, multiband
from isaaclab_sysid.excitation.taskspace import TaskDesign

__all__ = [
    "ChirpSpec",
    "DesignLimitError",
    "DesignLimits",
    "MultibandSpec",
    "Q_HOME_PANDA",
    "TaskDesign",
    "anchor_pose",
    "chirp",
    "default_q_init",
    "multiband",
]
