"""Generate a Python module of Isaac Lab configs from the fit, its intervals and ranges.

The module imports only Isaac Lab (and torch, which Isaac Lab requires) and holds
every number as a literal, so it can be copied into a task package. Its code is
``export/templates/sysid_dr_isaaclab.py`` copied verbatim (``export/emit.py``); this
module works out the numbers of its data block. It defines:

* ``FITTED``, ``INTERVALS``, ``RANGES``, ``SAMPLED_RANGES``: plain dicts (also read
  back by tests with ``ast``). ``SAMPLED_RANGES`` is what the event terms actually
  draw each number from (label -> (lower, upper)); with ``viscous="independent"``
  it equals ``RANGES``;
* ``PHYSICS`` (``newton`` or ``physx``), ``PHYSICS_DT`` and ``check_physics_dt(sim_dt)``;
* ``make_actuator_cfg(stiffness=0.0, damping=0.0, randomize_delay=True)``: one
  ``DelayedPDActuatorCfg`` over the arm's joints with per-joint ``armature``,
  ``friction`` (the Coulomb friction effort, N m; ``dynamic_friction`` the same level on
  PhysX), ``viscous_friction``, and ``min_delay``/``max_delay`` in physics steps (the
  delay range, or the fitted delay twice). Gains default to 0: with a torque controller
  (task impedance) computing efforts in the environment, the explicit actuator passes
  the effort through its delay buffer, as the replay does;
  A position servo's fit (groups ``kp``, ``kd``: the SO-101) sets the gains to the fitted kp, kd
  (``ACTUATOR_VALUES["stiffness"]``, ``["damping"]``: ``DelayedPDActuator`` delays the position
  target, as the servo's bus does) and ``actuator_effort_limit`` to the servo's torque limit;
* the real controller's limits as the fit's replay applied them: a fit that clamped the commanded torque
  (``--torque_clamp``/``--torque_limit``) sets ``actuator_effort_limit`` to that clamp; a fit with a slew limit
  (``--slew_limit``/``--torque_rate_limit``) writes ``TORQUE_RATE_LIMIT`` [N m/s], and ``make_actuator_cfg``
  returns ``SysidFrictionActuatorCfg`` (whose ``SysidFrictionActuator`` limits the effort's change per physics step
  before the clip; Isaac Lab's actuator path, ``needs_lab_actuators()``), the Coulomb law included;
* a fit with a friction law beyond Coulomb (``FRICTION_LAW``: Stribeck with its shape exponent, the
  Gaz sigmoid, Dahl, BAM's load-dependent law; docs/friction.md): ``make_actuator_cfg`` returns the module's
  ``SysidFrictionActuatorCfg`` instead (the same PD, delay and limits; Isaac Lab's actuator
  path, ``sim.use_newton_actuators = False``), whose ``SysidFrictionActuator`` applies the law
  every physics step: the Stribeck budget written as the joint's Coulomb friction (the native
  term, exact: Newton's joint friction is MuJoCo's ``frictionloss``), the load budget likewise from the
  actuator's effort and every env's gravity and Coriolis torque (Newton's inverse dynamics,
  ``ArticulationView.eval_inverse_dynamics_passive``; Newton only), the sigmoid's and Dahl's
  torque added to the effort (Dahl's bristle state per env, zeroed at reset); one
  ``randomize_friction_law`` term (``friction_law``) binds the actuator to the articulation and
  draws each law number from its range (cut to the number's domain, recorded in
  ``SAMPLED_RANGES``); the law's numbers leave the joint terms;
* ``apply_to(articulation_cfg)``: the articulation config with that actuator;
* a servo motor model's fit (groups ``motor_kt``, ``motor_r``; controller ``servo``; any law but the load-dependent
  one: ``build.check_exported_law``): ``SERVO_MOTOR`` (the families' firmware facts and the fitted kt, R per joint),
  ``servo_motor_values(kp_register, supply_v)`` (the exact ``DCMotor`` numbers, export/servo_part.py) and
  ``make_servo_motor_cfg(kp_register, supply_v)``: the module's ``SysidServoMotor`` (Isaac Lab's ``DCMotor``
  envelope behind ``DelayedPDActuator``'s target delay; with a friction law beyond Coulomb its
  ``SysidServoMotorWithLaw``, which adds the law's torque after the clip), with the fitted joint properties; per joint one
  ``randomize_servo_motor`` term (kt and R each drawn from its range, every DC-motor number recomputed from them);
  ``make_actuator_cfg`` refuses (a PD actuator would be a reduced model);
* a servo fit: per joint one stock ``mdp.randomize_actuator_gains`` term (kp and kd each drawn
  from its exported range, ``operation="abs"``);
* ``EVENT_TERMS`` (name -> function, joints or bodies, parameters: plain data) and
  ``SysidEventsCfg``: one ``EventTermCfg`` field per entry, mode ``startup``, and
  ``make_events_cfg(mode="startup", randomize_delay=True)`` (the same terms in
  another mode, e.g. ``reset`` to redraw at every reset).

Joint terms, by ``viscous``:

* ``independent`` (what ``scripts/export_dr.py`` writes by default): per joint one
  term of the module's own ``randomize_joint_dynamics``, which draws the armature,
  the Coulomb friction and the viscous friction each uniformly from its own range
  (``operation="abs"``), so every randomized number stays inside its exported range
  and covers all of it;
* ``envelope`` / ``coulomb``: per joint one stock ``mdp.randomize_joint_parameters``
  term. Isaac Lab applies its one ``friction_distribution_params`` to the static,
  dynamic and viscous friction together: under ``scale`` each is multiplied by
  the same factor from its default (the actuator config's fitted value), so the
  factor range is [min(lo_c/c, lo_v/v), max(hi_c/c, hi_v/v)] (``envelope``: both
  ranges covered, and the viscous one can be exceeded) or the Coulomb range alone
  (``coulomb``). A fitted value of 0 cannot be scaled: that joint's friction term
  uses ``add`` with the Coulomb range's offsets (the same offsets reach the viscous
  coefficient), and an armature of 0 gets its own ``abs`` term.

The delay: on the Lab actuator path (PhysX, or Newton with
``use_newton_actuators=False``) ``DelayedPDActuator`` draws a delay per env in
[min_delay, max_delay] at every reset. Newton's native actuators (Isaac Lab's
default on Newton) author ``delay_steps = max_delay`` for every env and ignore
``min_delay``; the module's ``randomize_actuator_delay`` term (``actuator_delay``)
draws the per-env delay there and writes it to the actuator (a no-op on the Lab
path). The delay is in physics steps of ``sim.dt``, whatever the env's decimation
(the actuator runs once per physics step).

Physics (``physics``): the fitted friction is a torque [N m]. Newton (MJWarp's
``dof_frictionloss``) and PhysX 5 (``PxJointFrictionParams``: static and dynamic
friction efforts, Isaac Sim >= 5) take it as such. PhysX before Isaac Sim 5 takes a
unitless coefficient that scales the spatial force through the joint: no torque
maps to it, so the module refuses to build the actuator there. The load-dependent law is written for
Newton only (``export/build.py: check_exported_law``): its budget needs every env's Coriolis torque,
which Newton's inverse dynamics gives and Isaac Lab's articulation data does not (it gives the gravity
torque only); on PhysX no parity replay of it exists here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from datetime import datetime

from isaaclab_sysid.export.emit import Literal, module_source
from isaaclab_sysid.export.record import DelayRow, DrRecord, SpanRow
from isaaclab_sysid.sim.friction import law_of_groups
from isaaclab_sysid.timebase import TICK_S

#: the generated module's template (export/templates/)
TEMPLATE = "sysid_dr_isaaclab"
#: joint-term styles (see module docstring)
VISCOUS_MODES = ("independent", "envelope", "coulomb")
#: physics backends the export writes for
PHYSICS = ("newton", "physx")

#: one event term of the generated module's EVENT_TERMS: (name, {"func", "joint_names" | "body_names", "params"})
Term = tuple[str, dict]
#: label -> (lower, upper) an event term draws the number from
Sampled = dict[str, tuple[float, float]]

#: the friction laws the generated actuator applies (``SysidFrictionActuator``; Coulomb: the joint's native friction):
#: per law, the actuator field of each of its numbers -> (the fit's group, its value where the fit leaves the group
#: out: None = the group is required, "stribeck_velocity" = the fit's --stribeck_velocity)
LAW_FIELDS: dict[str, dict[str, tuple[str, object]]] = {
    "coulomb": {},
    "stribeck": {"static_friction": ("mu_static", None), "dynamic_ratio": ("dynamic_ratio", 1.0),
                 "stribeck_velocity": ("stribeck_velocity", "stribeck_velocity"), "stribeck_shape": ("stribeck_shape", 2.0)},
    "sigmoid": {"sigmoid_amplitude": ("sigmoid_amplitude", None), "sigmoid_slope": ("sigmoid_slope", None),
                "sigmoid_offset": ("sigmoid_offset", 0.0)},
    "dahl": {"coulomb_friction": ("friction", None), "presliding_stiffness": ("presliding_stiffness", None)},
    "load": {"coulomb_friction": ("friction", None), "load_friction_motor": ("load_friction_motor", 0.0),
             "load_friction_external": ("load_friction_external", 0.0)},
}
#: each actuator field's domain: a randomization range is cut to it (the template's LAW_DOMAINS)
LAW_DOMAINS = {"static_friction": (0.0, math.inf), "dynamic_ratio": (0.0, 1.0), "stribeck_velocity": (1e-6, math.inf),
               "stribeck_shape": (1e-6, math.inf), "sigmoid_amplitude": (0.0, math.inf),
               "sigmoid_slope": (1e-6, math.inf), "sigmoid_offset": (-math.inf, math.inf),
               "coulomb_friction": (0.0, math.inf), "presliding_stiffness": (0.0, math.inf),
               "load_friction_motor": (0.0, math.inf), "load_friction_external": (0.0, math.inf)}


def record_law(record: DrRecord) -> str:
    """The friction law of a record's fitted groups (sim/friction.py), by name.

    Raises:
        ValueError: a law the Isaac Lab actuator does not apply, or groups of two laws.
    """
    name = law_of_groups(record.fitted).name
    if name not in LAW_FIELDS:
        raise ValueError(f"the {name} friction law has no Isaac Lab actuator (export/build.py: check_exported_law)")
    return name


def law_groups(law: str) -> tuple[str, ...]:
    """The fit's groups the actuator of ``law`` carries (they leave the joint terms for the ``friction_law`` term)."""
    return tuple(g for g, _ in LAW_FIELDS[law].values())


def friction_law_literal(record: DrRecord, stribeck_velocity: float | None = None) -> dict:
    """``FRICTION_LAW`` of the generated module: ``{"name": law}``, and for a law beyond Coulomb its ``params``
    (``SysidFrictionActuatorCfg`` field -> joint -> value, SI units: docs/friction.md).

    Args:
        stribeck_velocity: the fit's ``--stribeck_velocity`` [rad/s] (a Stribeck fit that leaves the group out).

    Raises:
        ValueError: the law needs a group the fit does not hold, or a Stribeck fit without its velocity.
    """
    law = record_law(record)
    if law == "coulomb":
        return {"name": law}
    joints = list(record.joint_names)
    params: dict[str, dict[str, float]] = {}
    for fld, (group, default) in LAW_FIELDS[law].items():
        if group in record.fitted:
            vals = [float(v) for v in record.fitted[group]]
        elif default is None:
            raise ValueError(f"the {law} friction law's export needs the fitted '{group}' group")
        elif default == "stribeck_velocity":
            if stribeck_velocity is None or not stribeck_velocity > 0:
                raise ValueError("a Stribeck fit without the stribeck_velocity group needs the fit's --stribeck_velocity "
                                 "(its config.json) to be exported")
            vals = [float(stribeck_velocity)] * len(joints)
        else:
            vals = [float(default)] * len(joints)
        params[fld] = dict(zip(joints, vals))
    return {"name": law, "params": params}


def _friction_law_terms(record: DrRecord, lit: dict) -> tuple[list[Term], Sampled]:
    """A law beyond Coulomb: one ``randomize_friction_law`` term (always: it binds the actuator to the articulation),
    drawing each law number with a range from that range cut to the number's domain (what SAMPLED_RANGES records)."""
    law = lit["name"]
    if law == "coulomb":
        return [], {}
    ranges: dict[str, dict[str, tuple[float, float]]] = {}
    sampled: Sampled = {}
    for fld, (group, _) in LAW_FIELDS[law].items():
        for jk, j in enumerate(record.joint_names):
            lab = _label(record, group, jk)
            r = record.range_of(lab)
            if r is None:
                continue
            lo_d, hi_d = LAW_DOMAINS[fld]
            cut = (max(r[0], lo_d), min(r[1], hi_d))
            ranges.setdefault(fld, {})[j] = cut
            sampled[lab] = cut
    return [("friction_law", {"func": "randomize_friction_law",
                              "params": {"group_name": "sysid_arm", "ranges": ranges}})], sampled


def friction_term_params(c: float, v: float, rc: tuple[float, float] | None, rv: tuple[float, float] | None,
                         viscous: str = "envelope") -> tuple[str, tuple[float, float]] | None:
    """(operation, distribution params) of one joint's stock friction randomization, or None (no range)."""
    if rc is None and rv is None:
        return None
    if c > 0 and rc is not None:
        lo, hi = rc[0] / c, rc[1] / c
        if viscous == "envelope" and rv is not None and v > 0:
            lo, hi = min(lo, rv[0] / v), max(hi, rv[1] / v)
        return "scale", (max(lo, 0.0), hi)
    if rc is not None:
        return "add", (rc[0] - c, rc[1] - c)
    # Coulomb fixed/unknown range but viscous has one
    if v > 0 and rv is not None:
        return "scale", (max(rv[0] / v, 0.0), rv[1] / v)
    return None


def delay_steps(delay: DelayRow | None, physics_dt: float) -> tuple[int, int, int]:
    """(fitted, lowest, highest) delay in physics steps of ``physics_dt`` [s] from the record's delay (1 ms ticks).

    Raises:
        ValueError: a delay (fitted or a range end) is not a whole number of physics steps.
    """
    if delay is None:
        return 0, 0, 0
    ticks = [float(delay.value_ticks)]
    rng = delay.range_ticks
    if rng is not None:
        ticks += [float(rng[0]), float(rng[1])]
    steps = []
    for t in ticks:
        x = t * TICK_S / physics_dt
        if abs(x - round(x)) > 1e-6:
            nz = [int(round(v)) for v in ticks if round(v) > 0]
            g = math.gcd(*nz) if nz else 1
            eg = " or ".join(f"{v:g} ms" for v in sorted({float(g), 1.0, 0.5}, reverse=True))
            raise ValueError(
                f"physics_dt {physics_dt * 1e3:g} ms cannot represent the delay of {t:g} ticks ({t * TICK_S * 1e3:g} ms = "
                f"{x:.4g} physics steps); delays {[int(round(v)) for v in ticks]} ms need a physics step of {g} ms / k "
                f"(k = 1, 2, ...), e.g. {eg}")
        steps.append(int(round(x)))
    if rng is None:
        return steps[0], steps[0], steps[0]
    return steps[0], steps[1], steps[2]


def actuator_values(record: DrRecord, physics: str = "newton",
                    effort_limit: Sequence[float] | None = None) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Per-joint ``DelayedPDActuatorCfg`` fields (``armature``, ``friction``, ``dynamic_friction``,
    ``viscous_friction``, for a position servo ``stiffness``, ``damping``, and ``actuator_effort_limit``:
    joint -> value, SI units) of the record's fitted values, and warnings.

    ``friction`` is the joint's native Coulomb effort [N m] (``dynamic_friction`` the same level): the fitted
    ``friction`` (Coulomb law); the break-away ``mu_static`` under the Stribeck law, which the actuator overwrites with
    its budget every physics step; 0 under the sigmoid and Dahl laws (the actuator's torque is the whole dry friction).
    A servo fit (groups ``kp``, ``kd``): ``stiffness`` = kp [N m/rad], ``damping`` = kd [N m s/rad] of
    the explicit PD (``DelayedPDActuator`` delays the position target, as the servo's bus does).
    ``actuator_effort_limit`` = ``effort_limit`` [N m] when given: the torque clamp of the fit's replay (a servo's
    torque limit, or the real controller's clamp; an infinite entry is left out: that joint keeps the asset's own limit).

    Raises:
        ValueError: unknown ``physics``, or a law the actuator does not apply (:func:`record_law`).
    """
    if physics not in PHYSICS:
        raise ValueError(f"physics must be one of {PHYSICS}, got {physics!r}")
    joints = list(record.joint_names)
    fitted = record.fitted
    warns: list[str] = []
    per = lambda vals: {j: float(v) for j, v in zip(joints, vals)}  # noqa: E731
    act: dict[str, dict[str, float]] = {}
    if "armature" in fitted:
        act["armature"] = per(fitted["armature"])
    law = record_law(record)
    if law in ("sigmoid", "dahl"):  # the law is the whole dry friction: no native Coulomb friction under it
        act["friction"] = per([0.0] * len(joints))
        act["dynamic_friction"] = dict(act["friction"])
    elif law == "stribeck":  # the actuator writes the budget every step; the joint starts at the break-away level
        act["friction"] = per(fitted["mu_static"])
        act["dynamic_friction"] = dict(act["friction"])
    elif "friction" in fitted:
        act["friction"] = per(fitted["friction"])
        act["dynamic_friction"] = dict(act["friction"])  # one Coulomb level: dynamic = static
    if "viscous" in fitted:
        act["viscous_friction"] = per(fitted["viscous"])
    if "kp" in fitted:
        act["stiffness"] = per(fitted["kp"])
    if "kd" in fitted:
        act["damping"] = per(fitted["kd"])
    if effort_limit is not None:
        lim = [float(v) for v in effort_limit]
        if len(lim) != len(joints) or not all(v > 0 for v in lim):
            raise ValueError(f"effort_limit: expected {len(joints)} positive torques [N m], got {lim}")
        finite = {j: v for j, v in zip(joints, lim) if math.isfinite(v)}  # an unlimited joint keeps Isaac Lab's inf
        if finite:
            act["actuator_effort_limit"] = finite
    if "encoder_offset" in fitted:
        warns.append("encoder_offset: the servo's homing error has no Isaac Lab actuator field; FITTED['encoder_offset'] "
                     "holds it (the real arm's angle = the simulated joint's + offset)")
    return act, warns


def servo_motor_literal(record: DrRecord, families: Sequence) -> dict:
    """``SERVO_MOTOR`` of a servo motor model's fit: per field joint -> value (firmware facts of each joint's family,
    ``robots/servos.py``; the fitted kt [N m/A], R [Ohm]); ``{}`` for any other fit.

    Raises:
        ValueError: a motor fit without one family per joint.
    """
    if "motor_kt" not in record.fitted:
        return {}
    joints = list(record.joint_names)
    if families is None or len(families) != len(joints):
        raise ValueError(f"a servo motor model's export needs the servo family of each of its {len(joints)} joints "
                         "('servo' in the robot config)")
    per = lambda f: {j: f(k, fam) for k, (j, fam) in enumerate(zip(joints, families))}  # noqa: E731
    return {"family": per(lambda k, f: f.name), "error_gain": per(lambda k, f: float(f.error_gain)),
            "max_pwm": per(lambda k, f: float(f.max_pwm)),
            "max_current_a": per(lambda k, f: None if not f.max_current_a else float(f.max_current_a)),
            "vin_nominal_v": per(lambda k, f: float(f.vin_nominal_v)),
            "kt": per(lambda k, f: float(record.fitted["motor_kt"][k])), "r": per(lambda k, f: float(record.fitted["motor_r"][k]))}


def _servo_motor_terms(record: DrRecord) -> tuple[list[Term], Sampled]:
    """A servo motor model's fit: per joint one ``randomize_servo_motor`` term (kt and R each from its range; a number
    without a range stays at its fitted value)."""
    terms: list[Term] = []
    sampled: Sampled = {}
    if "motor_kt" not in record.fitted:
        return terms, sampled
    for jk, j in enumerate(record.joint_names):
        params: dict[str, object] = {"group_name": "sysid_arm", "joint": j}
        for group, key in (("motor_kt", "kt_range"), ("motor_r", "r_range")):
            lab = _label(record, group, jk)
            r = record.range_of(lab)
            v = float(record.fitted[group][jk])
            if r is not None:
                sampled[lab] = r
            params[key] = r if r is not None else (v, v)
        if any(lab in sampled for lab in (_label(record, "motor_kt", jk), _label(record, "motor_r", jk))):
            terms.append((f"servo_motor_{_ident(j)}", {"func": "randomize_servo_motor", "params": params}))
    return terms, sampled


def is_servo(record: DrRecord) -> bool:
    """Whether the record is a position servo's fit (its gains ``kp`` or ``kd`` fitted)."""
    return "kp" in record.fitted or "kd" in record.fitted


def generate_module(record: DrRecord, asset_name: str = "robot", viscous: str = "envelope",
                    physics_dt: float = TICK_S, physics: str = "newton",
                    effort_limit: Sequence[float] | None = None,
                    servo_families: Sequence | None = None,
                    stribeck_velocity: float | None = None,
                    torque_rate_limit: Sequence[float] | None = None) -> tuple[str, list[str]]:
    """The module's source text and warnings.

    Args:
        record: the randomization record (``sysid_dr.json``: joints, fitted values, intervals, ranges,
            masses, delay); not the grasped part of ``payload/``.
        asset_name: the scene entity name of the arm (``SceneEntityCfg(asset_name)``).
        viscous: ``independent``, ``envelope`` or ``coulomb`` (see module docstring).
        physics_dt: the Isaac Lab task's physics step ``sim.dt`` [s]; every delay (1 ms ticks) must be a
            whole number of these steps.
        physics: ``newton`` or ``physx`` (how the friction torque is written; see module docstring).
        effort_limit: (N,) the torque clamp of the fit's replay [N m] (``actuator_effort_limit``), or None (the fit
            did not clamp: the asset's own limits stay).
        torque_rate_limit: (N,) the slew limit of the fit's replay [N m/s] (``TORQUE_RATE_LIMIT``), or None.
        servo_families: (N,) the ``ServoFamily`` of each joint: a servo motor model's fit needs them.
        stribeck_velocity: the fit's ``--stribeck_velocity`` [rad/s]: a Stribeck fit without the group needs it.

    Raises:
        ValueError: bad ``viscous``/``physics``, a ``physics_dt`` that cannot represent the delay, a
            static/dynamic friction fit for Newton, or a load-law fit for PhysX.
    """
    if viscous not in VISCOUS_MODES:
        raise ValueError(f"viscous must be one of {VISCOUS_MODES}, got {viscous!r}")
    if not (physics_dt > 0 and math.isfinite(physics_dt)):
        raise ValueError(f"physics_dt must be > 0 [s], got {physics_dt!r}")
    act, warns = actuator_values(record, physics, effort_limit)
    delay = delay_steps(record.delay, physics_dt)
    if physics_dt != TICK_S:
        warns.append(f"delay converted from 1 ms ticks to physics steps of {physics_dt * 1e3:g} ms")
    law = friction_law_literal(record, stribeck_velocity)
    if law["name"] == "load" and physics != "newton":
        raise ValueError("the load friction law's module is written for Newton only: its budget needs every env's "
                         "Coriolis torque, which it takes from Newton's inverse dynamics (export/build.py: WHY_NOT)")
    joint_record = _without_groups(record, law_groups(law["name"]))  # the law's numbers go to the actuator
    if viscous == "independent":
        terms, sampled = _independent_terms(joint_record, act)
    else:
        terms, sampled = _stock_joint_terms(joint_record, viscous, act, warns)
    law_terms, law_sampled = _friction_law_terms(record, law)
    terms += law_terms
    sampled.update(law_sampled)
    gain_terms, gain_sampled = _gain_terms(record)
    terms += gain_terms
    sampled.update(gain_sampled)
    servo_motor = servo_motor_literal(record, servo_families)
    motor_terms, motor_sampled = _servo_motor_terms(record)
    terms += motor_terms
    sampled.update(motor_sampled)
    mass_terms, mass_sampled = _mass_terms(record)
    terms += mass_terms
    sampled.update(mass_sampled)
    if delay[1] < delay[2]:
        terms.append(("actuator_delay", {"func": "randomize_actuator_delay",
                                         "params": {"group_name": "sysid_arm", "delay_range": (delay[1], delay[2])}}))
        sampled["delay"] = (float(delay[1]), float(delay[2]))
    outside = [lab for lab, (lo, hi) in sampled.items() if lab in record.ranges and lab != "delay"
               and not _inside((lo, hi), record.ranges[lab])]
    if outside:
        warns.append(f"viscous={viscous}: {len(outside)} randomized number(s) are drawn outside their exported range "
                     f"({', '.join(outside[:4])}{', ...' if len(outside) > 4 else ''}); --viscous independent keeps each inside")
    rate = rate_limit_literal(record, torque_rate_limit)
    return _module_source(record, asset_name, physics_dt, physics, act, delay, terms, sampled, viscous, servo_motor,
                          law, rate), warns


def rate_limit_literal(record: DrRecord, torque_rate_limit: Sequence[float] | None) -> dict[str, float]:
    """``TORQUE_RATE_LIMIT``: joint -> the fit's slew limit [N m/s] (inf, written None: that joint unlimited); ``{}``
    without one.

    Raises:
        ValueError: not one positive rate per joint, or a rate on a servo motor model's fit (its replay applies none).
    """
    if torque_rate_limit is None:
        return {}
    joints = list(record.joint_names)
    rate = [float(v) for v in torque_rate_limit]
    if len(rate) != len(joints) or not all(v > 0 for v in rate):
        raise ValueError(f"torque_rate_limit: expected {len(joints)} positive rates [N m/s], got {rate}")
    if "motor_kt" in record.fitted:
        raise ValueError("torque_rate_limit: a servo motor model's replay applies no slew limit")
    if not any(math.isfinite(v) for v in rate):
        return {}
    return dict(zip(joints, rate))  # an unlimited joint's inf is written as None


def _without_groups(record: DrRecord, groups: Sequence[str]) -> DrRecord:
    """``record`` without the fitted ``groups`` (the joint terms then neither see nor randomize them)."""
    if not groups:
        return record
    return dataclasses.replace(record, fitted={k: v for k, v in record.fitted.items() if k not in groups},
                               labels_per_joint={k: v for k, v in record.labels_per_joint.items() if k not in groups})


def _inside(r: tuple[float, float], ref: SpanRow) -> bool:
    tol = 1e-9 * max(1.0, abs(float(ref.upper)))
    return r[0] >= float(ref.lower) - tol and r[1] <= float(ref.upper) + tol


def _label(record: DrRecord, group: str, jk: int) -> str | None:
    """The label of joint ``jk``'s number of ``group`` (None: the group is not fitted)."""
    keys = record.labels_per_joint
    return keys[group][jk] if group in keys else None


def _friction_group(record: DrRecord) -> str:
    return "mu_static" if "mu_static" in record.fitted else "friction"


def _independent_terms(record: DrRecord, act: dict) -> tuple[list[Term], Sampled]:
    """One ``randomize_joint_dynamics`` term per joint with a range, and the sampled ranges (= the exported ones)."""
    fg = _friction_group(record)
    terms: list[Term] = []
    sampled: Sampled = {}
    for jk, j in enumerate(record.joint_names):
        params: dict[str, object] = {}
        for group, key in (("armature", "armature_range"), (fg, "friction_range"), ("viscous", "viscous_range"),
                           ("dynamic_ratio", "dynamic_ratio_range")):
            lab = _label(record, group, jk)
            r = record.range_of(lab)
            if r is not None:
                params[key] = r
                sampled[lab] = r
        if "dynamic_ratio_range" not in params and "dynamic_friction" in act:
            fs = act["friction"][j]
            params["dynamic_ratio"] = float(act["dynamic_friction"][j] / fs if fs > 0 else 1.0)
        if any(k.endswith("_range") for k in params):
            terms.append((f"joint_{_ident(j)}", {"func": "randomize_joint_dynamics", "joint_names": [j], "params": params}))
    return terms, sampled


def _stock_joint_terms(record: DrRecord, viscous: str, act: dict, warns: list[str]) -> tuple[list[Term], Sampled]:
    """One ``randomize_joint_parameters`` term per joint (plus an ``abs`` armature term where scaling cannot work)."""
    fg = _friction_group(record)
    terms: list[Term] = []
    sampled: Sampled = {}
    for jk, j in enumerate(record.joint_names):
        c = float(act.get("friction", {}).get(j, 0.0))
        v = float(act.get("viscous_friction", {}).get(j, 0.0))
        a = float(act.get("armature", {}).get(j, 0.0))
        lab_c, lab_v, lab_a = (_label(record, g, jk) for g in (fg, "viscous", "armature"))
        rc, rv, ar = (record.range_of(lab) for lab in (lab_c, lab_v, lab_a))
        if record.range_of(_label(record, "dynamic_ratio", jk)) is not None:
            warns.append(f"{j}: randomize_joint_parameters scales dynamic friction with static: the dynamic_ratio range is "
                         "not randomized (use --viscous independent)")
        fr = friction_term_params(c, v, rc, rv, viscous)
        p_main: dict[str, object] = {}
        extra_terms: list[Term] = []
        op = None
        if fr is not None:
            op, (lo, hi) = fr
            p_main["friction_distribution_params"] = (float(lo), float(hi))
            if op == "add":
                warns.append(f"{j}: fitted Coulomb friction is 0: friction term uses 'add' (the same offset reaches viscous)")
                for lab, val in ((lab_c, c), (lab_v, v)):
                    if lab is not None:
                        sampled[lab] = (max(val + lo, 0.0), max(val + hi, 0.0))
            else:
                for lab, val in ((lab_c, c), (lab_v, v)):
                    if lab is not None:
                        sampled[lab] = (val * lo, val * hi)
        if ar is not None:
            if a > 0 and op in (None, "scale"):
                op = "scale"
                p_main["armature_distribution_params"] = (float(max(ar[0] / a, 0.0)), float(ar[1] / a))
                sampled[lab_a] = (a * max(ar[0] / a, 0.0), ar[1])
            else:
                extra_terms.append((f"armature_{_ident(j)}", _stock_joint_term(
                    j, {"armature_distribution_params": (float(ar[0]), float(ar[1]))}, "abs")))
                sampled[lab_a] = ar
        if p_main:
            terms.append((f"joint_{_ident(j)}", _stock_joint_term(j, p_main, op or "scale")))
        terms += extra_terms
    return terms, sampled


def _stock_joint_term(joint: str, params: dict, op: str) -> dict:
    """A stock ``mdp.randomize_joint_parameters`` term on one joint."""
    return {"func": "mdp.randomize_joint_parameters", "joint_names": [joint],
            "params": {**params, "operation": op, "distribution": "uniform"}}


def _gain_terms(record: DrRecord) -> tuple[list[Term], Sampled]:
    """A servo fit: per joint with a kp or kd range one stock ``mdp.randomize_actuator_gains`` term
    (``operation="abs"``: stiffness and damping each drawn from its own range; Isaac Lab 3.0 writes Newton's
    native actuator gains too). Isaac Lab refuses a stiffness range starting at 0: its lower end is then 1e-6."""
    terms: list[Term] = []
    sampled: Sampled = {}
    for jk, j in enumerate(record.joint_names):
        params: dict[str, object] = {}
        for group, key, floor in (("kp", "stiffness_distribution_params", 1e-6), ("kd", "damping_distribution_params", 0.0)):
            lab = _label(record, group, jk)
            r = record.range_of(lab)
            if r is not None:
                r = (max(float(r[0]), floor), float(r[1]))
                params[key] = r
                sampled[lab] = r
        if params:
            terms.append((f"gains_{_ident(j)}", {"func": "mdp.randomize_actuator_gains", "joint_names": [j],
                                                 "params": {**params, "operation": "abs", "distribution": "uniform"}}))
    return terms, sampled


def _mass_terms(record: DrRecord) -> tuple[list[Term], Sampled]:
    """One ``randomize_rigid_body_mass`` term per link mass with a range."""
    terms: list[Term] = []
    sampled: Sampled = {}
    for m in record.masses:
        r = record.ranges.get(m.label)
        if r is None:
            continue
        lo, hi = max(r.lower, 1e-6), r.upper
        sampled[m.label] = (float(lo), float(hi))
        terms.append((f"mass_{_ident(m.link)}", {
            "func": "mdp.randomize_rigid_body_mass", "body_names": [m.link],
            "params": {"mass_distribution_params": (float(lo), float(hi)), "operation": "abs", "distribution": "uniform",
                       "recompute_inertia": True}}))
    return terms, sampled


def _module_source(record: DrRecord, asset_name: str, physics_dt: float, physics: str, act: dict,
                   delay: tuple[int, int, int], terms: list[Term], sampled: Sampled, viscous: str,
                   servo_motor: dict | None = None, friction_law: dict | None = None,
                   rate_limit: dict | None = None) -> str:
    """The generated module's text: the template's code with the fit's numbers as its data block."""
    delay_fit, delay_lo, delay_hi = delay
    doc = (f"Source: {record.source}\nCreated: {datetime.now().isoformat(timespec='seconds')}\n"
           f"Interval method: {record.interval_method} (level {record.level}); range policy: "
           f"{record.range_policy}\nrho (held-out / fit loss): {record.rho}\n"
           f"Physics: {physics}; joint terms: {viscous}.\n"
           "Units: armature kg m^2, friction N m (a torque, on Newton and on PhysX 5), viscous N m s/rad, delay physics "
           f"steps of sim.dt = {physics_dt * 1e3:g} ms (not env steps), mass kg.\nSee docs/intervals_and_export.md of isaaclab_sysid.")
    data = [
        Literal("JOINT_NAMES", list(record.joint_names)),
        Literal("ASSET_NAME", asset_name),
        Literal("PHYSICS", physics),
        Literal("PHYSICS_DT", physics_dt),
        Literal("FITTED", {**{k: [float(x) for x in v] for k, v in record.fitted.items()}, "delay_steps": delay_fit},
                "fitted values (per joint, joint order of JOINT_NAMES); delay in physics steps"),
        Literal("INTERVALS", {k: v.ends for k, v in record.intervals.items()},
                "intervals: label -> (lower, upper); None = unbounded (not identifiable)"),
        Literal("RANGES", {k: v.ends for k, v in record.ranges.items()},
                "randomization ranges: label -> (lower, upper) in the label's units"),
        Literal("SAMPLED_RANGES", sampled,
                "what the event terms draw each randomized number from (label -> (lower, upper)); delay in physics steps"),
        Literal("DELAY_RANGE_STEPS", (delay_lo, delay_hi)),
        Literal("ACTUATOR_VALUES", act),
        Literal("SERVO_MOTOR", servo_motor or {},
                "a servo motor model's fit: per field joint -> value (error_gain, max_pwm, max_current_a (None: no limit),\n"
                "vin_nominal_v, kt [N m/A], r [Ohm]); empty for every other fit"),
        Literal("EVENT_TERMS", dict(terms),
                "the event terms of SysidEventsCfg: name -> {\"func\", \"joint_names\" or \"body_names\", \"params\"}"),
        Literal("FRICTION_LAW", friction_law or {"name": "coulomb"},
                "the fitted friction law: {\"name\": law} and, beyond Coulomb, {\"params\": SysidFrictionActuatorCfg field -> joint ->\n"
                "value} (units in SysidFrictionActuatorCfg)"),
        Literal("TORQUE_RATE_LIMIT", rate_limit or {},
                "the fit's torque slew limit [N m/s] per joint (joint -> value, None: none on that joint; the real controller's rate\n"
                "limit, which the fit's replay applied to the commanded torque after its delay and before its clamp); empty when the\n"
                "fit used none"),
    ]
    return module_source("Isaac Lab configs exported by isaaclab_sysid (scripts/export_dr.py).", doc, TEMPLATE, data)


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)
