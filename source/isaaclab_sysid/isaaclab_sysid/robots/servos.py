"""Smart-servo families: how each firmware turns a position error into a PWM duty (issue 42, docs/servo_arms.md).

A smart servo (Dynamixel, Feetech) is a voltage-controlled DC motor behind a gearbox, closed in a position loop
by its own firmware. The firmware computes a PWM duty from the position error and its register gain ``kp``; the
motor's winding resistance ``R`` and torque constant ``kt`` turn the applied voltage into a current and a torque,
less the back-EMF:

    duty   = clip(error_gain * kp * (q* - q_enc), -max_pwm, max_pwm)     (with a current limit: see below)
    tau_m  = kt (duty * V - kt * dq) / R                                  [N m at the output shaft]

With a firmware current limit ``I_max`` the duty is first kept in the window that holds
``|(duty V - kt dq) / R| <= I_max``, then clipped to ``max_pwm`` (the battery wins): BAM's model
(``bam/actuator.py: VoltageControlledActuator.compute_control``). A torque-off phase applies no motor torque.

Every number here is stated with its source; ``kt``, ``R`` (and the friction) are what a fit identifies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from isaaclab_sysid.utils.errors import UserError


@dataclass(frozen=True)
class ServoFamily:
    """The fixed firmware facts of one servo family.

    Attributes:
        name: the family key (``xl330``, ``sts3215``), as BAM logs and robot configs name it.
        error_gain: duty per (rad x register kp): ``duty = error_gain * kp * error[rad]`` [1/rad].
        max_pwm: largest duty magnitude the firmware applies (1 = the full supply voltage).
        max_current_a: firmware current limit [A], or None (no limiter modelled).
        pwm_full_scale: register counts of the present-PWM (load) reading at duty 1.
        vin_nominal_v: nominal supply voltage [V], used where a run records none.
        kp_unit: what the register gain ``kp`` is, in words.
        source: where these numbers come from.
        not_modelled: firmware behaviour this family has that the replay does not model, in words ("" if none).
    """

    name: str
    error_gain: float
    max_pwm: float
    max_current_a: float | None
    pwm_full_scale: float
    vin_nominal_v: float
    kp_unit: str
    source: str
    not_modelled: str = ""

    def duty(self, kp: float, error_rad: float) -> float:
        """The unclipped duty of register gain ``kp`` at a position error [rad]."""
        return self.error_gain * kp * error_rad


_XL330_COUNTS_PER_REV = 4096
_XL330_KP_DIVISOR = 256
_XL330_PWM_LIMIT = 885

SERVO_FAMILIES: dict[str, ServoFamily] = {
    "xl330": ServoFamily(
        name="xl330",
        error_gain=(_XL330_COUNTS_PER_REV / (2 * math.pi)) / (_XL330_KP_DIVISOR * _XL330_PWM_LIMIT),
        max_pwm=1.0,
        max_current_a=1.75,
        pwm_full_scale=_XL330_PWM_LIMIT,
        vin_nominal_v=7.4,
        kp_unit="Position P Gain register (duty counts = kp / 256 x error in encoder counts)",
        source="BAM (better-actuator-models 1.0.2, bam/dynamixel/actuator.py: XL330Actuator): 4096 counts/rev, "
               "kp divisor 256 (observed; the e-manual says 128), PWM limit 885, firmware current limit 1.75 A",
    ),
    "sts3215": ServoFamily(
        name="sts3215",
        error_gain=0.166,
        max_pwm=0.97,
        max_current_a=None,
        pwm_full_scale=1000.0,
        vin_nominal_v=7.4,
        kp_unit="P coefficient register",
        source="BAM (better-actuator-models 1.0.2, bam/feetech/actuator.py: STS3215Actuator): error gain 0.166 and "
               "max duty 0.97 measured with an oscilloscope; present load in 0.1 % of full duty",
        not_modelled="the firmware's target-velocity limiter (BAM fits a max_velocity for it)",
    ),
}


class UnknownServoFamily(UserError, ValueError):
    """A servo family with no stated firmware mapping."""


def servo_family(name: str) -> ServoFamily:
    """The family ``name`` (case-insensitive).

    Raises:
        UnknownServoFamily: not in :data:`SERVO_FAMILIES` (the message lists the known ones).
    """
    key = str(name).strip().lower()
    if key not in SERVO_FAMILIES:
        raise UnknownServoFamily(f"unknown servo family '{name}' (known: {', '.join(sorted(SERVO_FAMILIES))})")
    return SERVO_FAMILIES[key]
