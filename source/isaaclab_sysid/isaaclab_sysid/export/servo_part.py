"""A servo fit as a part (``robots/servo_model.py``) and the part as Isaac Lab's DC-motor actuator (issue 42).

:func:`servo_model_of`: the part file's record from a servo fit (``motor_kt`` and ``motor_r`` fitted) and its
intervals, for one joint (a bench fit has one).

:func:`dc_motor_params`: the exact mapping of the servo motor model (``sim/servo.servo_torque``) onto Isaac Lab's
``DCMotor`` (``isaaclab/actuators/actuator_pd.py``) at a register gain ``kp`` and supply ``V``. Below the duty clip
the firmware's duty is ``eg kp (q* - q)`` and the motor gives ``kt (duty V - kt dq) / R``, so

    tau = (kt V eg kp / R) (q* - q) - (kt^2 / R) dq           stiffness = kt V eg kp / R   [N m/rad]
                                                              damping   = kt^2 / R         [N m s/rad]

The duty clip ``|duty| <= max_pwm`` bounds the torque between ``S (-1 - dq / vlim)`` and ``S (1 - dq / vlim)`` with
``S = kt V max_pwm / R`` and ``vlim = V max_pwm / kt`` (``S / vlim = kt^2 / R``): ``DCMotor``'s torque-speed envelope
with ``saturation_effort = S`` and ``actuator_velocity_limit = vlim``. The firmware's current window keeps
``|duty V - kt dq| / R <= I_max``, i.e. ``|tau| <= kt I_max``: ``actuator_effort_limit = kt I_max`` (none without a
current limit). The servo clips to the current window first and to the duty second; ``DCMotor`` clips once to the
intersection of both bands. The two agree wherever the bands intersect, which is exactly
``|dq| <= vlim (1 + kt I_max / S)`` (``DCMotor``'s ``_vel_at_effort_lim``). Beyond it (the joint driven faster than
the motor's corner speed by an outside load) the servo applies the duty-clip torque and ``DCMotor`` the
continuous limit: :func:`dc_motor_holds` says where. Not a configuration at all: the torque-off phases (a runtime
signal: set the stiffness and damping to 0), the encoder offset (a shift of the goal), and the load-dependent friction
law (Isaac Lab applies a constant joint friction; refused by ``build.check_exported_law``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.intervals.combine import IntervalReport
from isaaclab_sysid.robots.servo_model import PART_LAWS, Estimate, ServoModel
from isaaclab_sysid.robots.servos import ServoFamily, servo_family
from isaaclab_sysid.sim.friction import law_of_groups
from isaaclab_sysid.sim.servo import MOTOR_GROUPS
from isaaclab_sysid.timebase import TICK_S
from isaaclab_sysid.utils.errors import UserError


class ServoPartError(UserError, ValueError):
    """A fit that is no servo fit, or a joint it does not have (one line)."""


def servo_model_of(result: FitResult, rep: IntervalReport | None, family: str, joint: str | None = None,
                   source: str = "") -> ServoModel:
    """The part of joint ``joint`` of a servo fit.

    Args:
        result: the fit (``motor_kt`` and ``motor_r`` fitted).
        rep: its intervals (None: the part records none, and says so).
        family: the joint's servo family (the fit's robot config ``servo``).
        joint: the joint (default: the fit's only one).
        source: the fit's result file, recorded in the part.

    A group the fit did not fit is written at the replay's nominal 0 with no interval and the note
    ``"not fitted"`` (the fit replayed it at 0, so that is the model the part holds).

    Raises:
        ServoPartError: no motor groups, an unknown joint, several joints and none named, a friction law whose
            parameters the fit does not all hold.
    """
    space = result.space
    missing = [g for g in MOTOR_GROUPS if g not in space.group_names]
    if missing:
        raise ServoPartError(f"the fit holds no servo motor model (missing {', '.join(missing)}): a servo part comes from "
                             "a fit of servo runs with --fit_groups auto or ...,motor_kt,motor_r (docs/servo_arms.md)")
    names = list(space.joint_names)
    if joint is None:
        if len(names) != 1:
            raise ServoPartError(f"the fit has {len(names)} joints ({', '.join(names)}): name the servo's joint "
                                 "(--servo_joint)")
        joint = names[0]
    if joint not in names:
        raise ServoPartError(f"the fit has no joint '{joint}' (its joints: {', '.join(names)})")
    j = names.index(joint)
    servo_family(family)
    law = law_of_groups(space.group_names)
    groups = PART_LAWS[law.name]
    absent = [g for g in groups if g not in space.group_names and g != "friction"]
    if absent:
        raise ServoPartError(f"the fit's {law.name} law leaves {', '.join(absent)} unfitted: the part would not hold the "
                             "law the fit replayed")
    chosen = rep.chosen() if rep is not None else None
    ivs = chosen.by_label() if chosen is not None else {}
    notes: list[str] = []
    if rep is None:
        notes.append("no intervals: the part records the fitted values only")

    def est(group: str) -> Estimate:
        if group not in space.group_names:
            return Estimate(0.0, None, None, "not fitted: the replay's nominal 0")
        per = space.group(group).per_joint
        v = float(np.asarray(result.values[group]).ravel()[j]) if per else float(result.values[group])
        iv = ivs.get(f"{group}[{joint}]" if per else group)
        if iv is None:
            return Estimate(v, None, None, "" if rep is None else "no interval computed")
        note = iv.note or ""
        if not iv.reliable:
            note = ("unreliable interval: " + note).strip()
        return Estimate(v, iv.lower, iv.upper, note)

    corr = _correlation(chosen, f"motor_kt[{joint}]", f"motor_r[{joint}]") if chosen is not None else None
    if corr is not None:
        notes.append(f"kt and R trade off: their correlation is {corr:+.3f} (draw them jointly, not independently, "
                     "where the correlation is near +-1)")
    mine = {e.label for e in space.entries() if e.joint in (None, joint)}
    notes += [f"{lab}: {why}" for lab, why in result.unreliable.items() if lab in mine]
    return ServoModel(family=servo_family(family).name, kt=est("motor_kt"), r=est("motor_r"), armature=est("armature"),
                      friction_law=law.name, friction={g: est(g) for g in groups}, viscous=est("viscous"),
                      delay=est("delay"), tick_s=TICK_S, level=0.95 if rep is None else float(rep.level),
                      interval_method="" if rep is None else rep.selected, source=source, joint=joint,
                      notes=tuple(notes))


def _correlation(chosen, a: str, b: str) -> float | None:
    c = chosen.correlation()
    if c is None or a not in chosen.cov_labels or b not in chosen.cov_labels:
        return None
    return float(c[chosen.cov_labels.index(a), chosen.cov_labels.index(b)])


# ------------------------------------------------------------------------------- Isaac Lab's DC motor
@dataclass(frozen=True)
class DcMotorParams:
    """Isaac Lab ``DCMotorCfg`` numbers of one servo at one register gain and supply.

    Attributes:
        stiffness: [N m/rad]; damping: [N m s/rad] (``DCMotorCfg.stiffness`` / ``damping``).
        saturation_effort: the stall torque at full duty [N m]; velocity_limit: the no-load speed at full duty
            [rad/s] (``actuator_velocity_limit``); effort_limit: ``kt I_max`` [N m] (``actuator_effort_limit``;
            inf: the family has no current limit).
        corner_velocity: the speed [rad/s] up to which the mapping is exact (inf without a current limit).
    """

    stiffness: float
    damping: float
    saturation_effort: float
    velocity_limit: float
    effort_limit: float
    corner_velocity: float


def dc_motor_params(fam: ServoFamily, kt: float, r: float, kp_register: float, supply_v: float | None = None) -> DcMotorParams:
    """The exact ``DCMotor`` numbers of the servo motor model (module docstring).

    Args:
        fam: the firmware facts; kt [N m/A]; r [Ohm]; kp_register: the position gain register the servo runs with.
        supply_v: the supply [V] (None: the family's nominal).
    """
    if not (kt > 0 and r > 0):
        raise ValueError("kt and R must be > 0")
    v = float(fam.vin_nominal_v if supply_v is None else supply_v)
    if not v > 0:
        raise ValueError(f"the supply voltage must be > 0, got {v}")
    sat = kt * v * fam.max_pwm / r
    vlim = v * fam.max_pwm / kt
    eff = math.inf if not fam.max_current_a else kt * fam.max_current_a
    return DcMotorParams(stiffness=kt * v * fam.error_gain * float(kp_register) / r, damping=kt * kt / r,
                         saturation_effort=sat, velocity_limit=vlim, effort_limit=eff,
                         corner_velocity=vlim * (1.0 + eff / sat))


def dc_motor_holds(p: DcMotorParams, dq: np.ndarray) -> np.ndarray:
    """Where ``DCMotor`` with ``p`` equals the servo model (torque on): ``|dq| <= corner_velocity``."""
    return np.abs(np.asarray(dq, dtype=float)) <= p.corner_velocity
