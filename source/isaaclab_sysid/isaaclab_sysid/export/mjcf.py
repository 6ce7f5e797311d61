"""The fitted model as an MJCF file that plain MuJoCo loads, and the proof that it replays like the fit.

``write_mjcf`` writes the arm the fit replayed (the robot's MuJoCo model: same bodies,
inertials, joint limits, 1 ms step) with the fitted joint physics and the actuator:

* per joint ``armature`` [kg m^2], ``frictionloss`` [N m] (the Coulomb level; with the
  static-friction groups the sliding level ``dynamic_ratio x mu_static``) and
  ``damping`` [N m s/rad] (the fitted ``viscous``);
* **a position servo** (a fit with ``kp``, ``kd`` or ``encoder_offset``): one ``general``
  actuator per joint, ``force = kp ctrl - kp encoder_offset - kp q - kd dq``
  (``gainprm = kp``, ``biasprm = [-kp offset, -kp, -kd]``), i.e. the servo's
  ``kp (q* - (q + offset)) - kd dq`` with ``ctrl`` the servo's setpoint q* [rad] in its
  encoder's frame, and ``forcerange`` = the torque limit [N m], ``forcelimited`` when the
  fit clamped (``--torque_clamp``). The option ``integrator="Euler"``: MuJoCo's Euler
  integrates the joint damping implicitly, as the fit's ``implicitfast`` does, but applies
  an actuator's velocity term ``-kd dq`` explicitly, as the fit's replay does (under
  ``implicitfast`` MuJoCo would integrate ``kd`` implicitly: another discrete-time model);
* **every other fit** (torque-controlled arms: the Franka's task impedance, a joint PD
  whose gains the runs state): one ``motor`` actuator per joint (``ctrl`` = joint torque
  [N m], gear 1), ``forcerange`` = the torque limit, limited when the fit clamped; the
  controller stays outside the model (it is the run's, not the arm's), integrator
  ``implicitfast`` as in the fit;
* gravity -9.81 m/s^2 along -z (the physical arm); a run of an arm that compensated its
  gravity is replayed with gravity off, as the fit replays it;
* the timestep: the 1 ms tick over the fit's ``substeps`` (the motor's torque held over a tick's
  steps, as in the fit; a servo with substeps is refused: MuJoCo would apply its PD every step).

What MJCF cannot hold is written as ``<custom>`` elements of the same file (``numeric``
``sysid_*``, read back by :func:`read_facts`) and said in its ``text`` element
``sysid_note``: the **delay** (ticks of 1 ms: the servo's setpoint, or the motor's torque,
acts that many ticks late; the first setpoint is held before the run starts), the
**Stribeck static friction** (``sysid_mu_static``, ``sysid_stribeck_velocity``: the
frictionloss is ``Fc + (Fs - Fc) exp(-(v / vs)^2)``, set from the joint velocity before
every step), the **encoder offset** (``sysid_encoder_offset``: in the actuator's bias,
and the logged angle is ``q + offset``), the **zero-order hold** of a 30 fps servo log
(each frame's setpoint held until the next: that is the run's schedule, not the arm), and
the torque **slew limit** (``sysid_slew_per_tick`` when the fit used it). A driver that
loads the file (:func:`replay_mjcf`) applies them exactly as the fit's replay does.

Numbers are written with 17 significant digits (MuJoCo's own writer keeps 6, which moves
a 10 s replay by more than 1e-6 rad): :func:`_precise_xml`.

:func:`check_mjcf` loads the written file with ``mujoco.MjModel.from_xml_path`` and nothing
else of this package's model code, replays runs tick by tick in Python
(``mj_step1``, the setpoint or controller, ``mj_step2``) and compares with the fit's own
MuJoCo replay (``sim/mujoco_backend.py``, the native loop) of the fitted parameters: the
largest |q difference| [rad] over every sample of every run, which must be <= 1e-6.
Torque runs (``--replay torque``, the UR10e's) are replayed window by window as the fit cuts them: each
shooting window from its first sample's measured state, the motors applying the logged torque of ``delay``
ticks ago less the file's ``sysid_torque_offset``, unclamped (the measured torque is what acted).
"""

from __future__ import annotations

import copy
import math
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.robots.robot import EE_NAME, Robot
from isaaclab_sysid.sim.friction import LAW_COLUMNS, LAW_IDS, LAWS, LOAD_BUDGET_FLOOR, FrictionLaw, applied_force, \
    batch_law, budget, dahl_step, law_of_id
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, candidate_arrays, replay_gravity
from isaaclab_sysid.sim.mujoco_backend import GRAVITY, MujocoBackend
from isaaclab_sysid.sim.reference import orientation_error
from isaaclab_sysid.sim.schedule import RunSchedule, schedule_of
from isaaclab_sysid.sim.servo import MOTOR_GROUPS, SERVO_COLUMNS, SERVO_GROUPS, families_of, servo_arrays, \
    servo_table, servo_torque
from isaaclab_sysid.sim.shooting import run_windows
from isaaclab_sysid.sim.torque_input import torque_offset_arrays, window_input
from isaaclab_sysid.timebase import TICK_S
from isaaclab_sysid.utils.atomic import atomic_write_text
from isaaclab_sysid.utils.errors import UserError

#: required agreement of the MJCF replay with the fit's own replay [rad]
MJCF_TOL_RAD = 1e-6
#: prefix of the custom numeric/text elements this module writes
PREFIX = "sysid_"
#: actuator name of joint j: ``<PREFIX>act_<joint>``
ACT_PREFIX = PREFIX + "act_"


class MjcfError(UserError, ValueError):
    """A fit or run the MJCF export cannot represent, or a file that is not this module's (one line)."""


@dataclass(frozen=True)
class FittedJoints:
    """The fitted candidate as the fit's replay takes it (groups not fitted at the backend's nominal 0).

    Attributes:
        armature, friction, viscous: (N,) kg m^2, N m (the sliding Coulomb level), N m s/rad.
        delay: ticks of 1 ms.
        mu_static, stribeck_velocity: (N,) N m, rad/s, or None (one Coulomb level).
        kp, kd, encoder_offset: (N,) N m/rad, N m s/rad, rad, or None (not fitted).
        torque_offset: (N,) N m: a torque replay's logged-torque bias (the torque that acted is logged - offset), or None.
        law: the friction law (sim/friction.py); law_p: its (N, 4) packed parameters (None for Coulomb).
    """

    armature: np.ndarray
    friction: np.ndarray
    viscous: np.ndarray
    delay: int
    mu_static: np.ndarray | None = None
    stribeck_velocity: np.ndarray | None = None
    kp: np.ndarray | None = None
    kd: np.ndarray | None = None
    encoder_offset: np.ndarray | None = None
    torque_offset: np.ndarray | None = None
    law: str = "coulomb"
    law_p: np.ndarray | None = None
    motor_kt: np.ndarray | None = None
    motor_r: np.ndarray | None = None

    @property
    def motor(self) -> bool:
        """Whether the fit is of the servo motor model (``motor_kt``, ``motor_r``: controller ``servo``)."""
        return self.motor_kt is not None

    @property
    def servo(self) -> bool:
        """Whether the fit is of a PD position servo (its gains or encoder offset fitted, no motor model)."""
        return not self.motor and any(getattr(self, g) is not None for g in SERVO_GROUPS)


def fitted_batch(result: FitResult) -> CandidateBatch:
    """The one-candidate batch of the fitted values (what the fit's replay rolls out)."""
    dec = {k: np.asarray(v)[None] if np.ndim(v) else np.asarray([v]) for k, v in result.values.items()}
    return result.space.batch_from_decoded(dec, 1)


def fitted_joints(result: FitResult, n_dof: int, stribeck_velocity: float) -> FittedJoints:
    """The fitted values as the fit's replay applies them (``sim.interface.candidate_arrays``).

    Args:
        stribeck_velocity: the fit's ``--stribeck_velocity`` [rad/s], used when the Stribeck velocity
            is not a fitted group but ``mu_static`` is.
    """
    batch = fitted_batch(result)
    zeros = np.zeros(n_dof)
    arr = candidate_arrays(batch, {"armature": zeros, "friction": zeros, "viscous": zeros}, n_dof)
    srv = servo_arrays(batch, n_dof)
    fs = arr["mu_static"][0] if "mu_static" in arr else None
    vs = None
    if fs is not None:
        vs = arr["stribeck_velocity"][0] if "stribeck_velocity" in arr else np.full(n_dof, float(stribeck_velocity))
    off = torque_offset_arrays(batch, n_dof)
    law, table = batch_law(batch, n_dof, vs if vs is not None else float(stribeck_velocity))
    return FittedJoints(armature=arr["armature"][0], friction=arr["friction"][0], viscous=arr["viscous"][0],
                        delay=int(arr["delay"][0]), mu_static=fs, stribeck_velocity=vs, law=law.name,
                        law_p=None if law.name == "coulomb" else table[0],
                        torque_offset=off["torque_offset"][0] if off else None,
                        **{g: (srv[g][0] if g in srv else None) for g in SERVO_GROUPS + MOTOR_GROUPS})


# ------------------------------------------------------------------------------------------- the file
def fitted_spec(robot: Robot, fit: FittedJoints, options: ReplayOptions,
                servo_gains: tuple[np.ndarray, np.ndarray] | None = None, substeps: int = 1) -> mujoco.MjSpec:
    """The MjSpec of the fitted model (module docstring).

    Args:
        robot: the fit's arm (its link inertials, torque limits).
        fit: the fitted joints (:func:`fitted_joints`).
        options: the fit's replay options (torque clamp, slew limit, warm-up).
        servo_gains: (kp, kd) (N,) for a servo whose gains are not (all) fitted: the runs' stated gains.
        substeps: physics steps per 1 ms tick of the fit's replay (the timestep is ``TICK_S / substeps``; the
            torque is held over a tick's steps).

    Raises:
        MjcfError: a servo with neither fitted nor stated gains, or a servo fit replayed with substeps (its PD would
            act on every physics step in MuJoCo, once per tick in the fit).
    """
    n = robot.n_dof
    # a force law (sigmoid, Dahl) replaces the frictionloss constraint: its Coulomb level is sysid_law_fc
    floss = np.zeros(n) if LAWS[fit.law].acts_as == "force" else fit.friction
    spec = robot.build_mjspec(JointOverrides(armature=fit.armature, friction=floss, damping=fit.viscous),
                              gravity=True)
    spec.modelname = f"{robot.name}_sysid"
    substeps = int(substeps)
    if substeps < 1:
        raise MjcfError(f"substeps must be >= 1, got {substeps}")
    if fit.servo and substeps != 1:
        raise MjcfError(f"the fit's replay takes {substeps} physics steps per tick and holds the servo's torque over them; "
                        "an MJCF servo actuator acts on every physics step: not written")
    spec.option.timestep = TICK_S / substeps
    tau_max = np.asarray(robot.tau_max, dtype=float)
    clamp = bool(options.torque_clamp) and not fit.motor  # the servo motor model has its own windows (replay.c)
    for name in robot.joint_names:  # the fit's torque is not limited by the URDF's effort limit
        spec.joint(name).actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE
    if fit.servo:
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
        kp, kd = _servo_gains(fit, servo_gains, n)
        off = fit.encoder_offset if fit.encoder_offset is not None else np.zeros(n)
    for i, name in enumerate(robot.joint_names):
        a = spec.add_actuator()
        a.name = ACT_PREFIX + name
        a.target = name
        a.trntype = mujoco.mjtTrn.mjTRN_JOINT
        a.gear = [1.0, 0, 0, 0, 0, 0]
        a.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE if clamp else mujoco.mjtLimited.mjLIMITED_FALSE
        a.forcerange = [-float(tau_max[i]), float(tau_max[i])]
        a.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        a.dyntype = mujoco.mjtDyn.mjDYN_NONE
        gain = np.zeros(10)
        bias = np.zeros(10)
        if fit.servo:
            gain[0] = kp[i]
            bias[:3] = (-kp[i] * off[i], -kp[i], -kd[i])
            a.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        else:
            gain[0] = 1.0
            a.biastype = mujoco.mjtBias.mjBIAS_NONE
        a.gainprm = gain
        a.biasprm = bias
    _custom(spec, fit, robot, options, substeps)
    return spec


def _servo_gains(fit: FittedJoints, stated: tuple[np.ndarray, np.ndarray] | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    out = []
    for k, g in enumerate(("kp", "kd")):
        v = getattr(fit, g)
        if v is None:
            if stated is None or not np.all(np.isfinite(stated[k])):
                raise MjcfError(f"the servo's {g} is neither fitted nor stated by the runs: the MJCF actuator needs it")
            v = np.asarray(stated[k], dtype=float)
        out.append(np.asarray(v, dtype=float).reshape(n))
    return out[0], out[1]


def _custom(spec: mujoco.MjSpec, fit: FittedJoints, robot: Robot, options: ReplayOptions, substeps: int) -> None:
    """The numbers MJCF has no element for, as ``<custom>`` numerics, and the note that says so."""
    n = robot.n_dof
    nums: dict[str, Sequence[float]] = {
        "delay_ticks": [float(fit.delay)],
        "tick_s": [TICK_S],
        "substeps": [float(substeps)],
        "servo": [1.0 if fit.servo else 0.0],
        "encoder_offset": list(fit.encoder_offset) if fit.encoder_offset is not None else [0.0] * n,
    }
    if fit.motor:  # the servo motor model the driver applies (sim/servo.py: servo_table's N x 6 rows)
        fams = families_of(robot.config.servo, n, robot.name)
        nums["servo_motor"] = [float(v) for v in servo_table(fams, fit.motor_kt, fit.motor_r).ravel()]
    if fit.torque_offset is not None:
        nums["torque_offset"] = list(fit.torque_offset)
    if fit.mu_static is not None:
        nums["mu_static"] = list(fit.mu_static)
        nums["stribeck_velocity"] = list(fit.stribeck_velocity)
    if fit.law != "coulomb":  # the friction law the driver applies (docs/friction.md)
        nums["friction_law"] = [float(LAW_IDS[fit.law])]
        nums["law_p"] = [float(v) for v in np.asarray(fit.law_p, dtype=float).ravel()]
        nums["law_fc"] = list(fit.friction)
    if options.slew_limit:
        rate = robot.config.torque_rate_limit
        if rate is None:
            raise MjcfError(f"the fit used a slew limit but robot '{robot.name}' has no torque_rate_limit")
        nums["slew_per_tick"] = [float(r) * TICK_S for r in rate]
    for k, v in nums.items():
        el = spec.add_numeric()
        el.name = PREFIX + k
        el.data = [float(x) for x in v]
    t = spec.add_text()
    t.name = PREFIX + "note"
    t.data = ("isaaclab_sysid fitted model. Actuators: " + ("position servo kp(ctrl - offset - q) - kd dq, ctrl = setpoint [rad]"
              if fit.servo else "motor, ctrl = joint torque [N m]")
              + ("; the servo motor model (sysid_servo_motor: N x 6 rows error gain [1/rad], largest duty, current "
                 "limit [A] (0 none), nominal supply [V], kt [N m/A], R [Ohm]): ctrl = kt (duty V - kt dq) / R from the "
                 "run's delayed goal, torque enable and supply, isaaclab_sysid.sim.servo.servo_torque" if fit.motor else "")
              + ". Not in MJCF elements: the delay (sysid_delay_ticks ticks of sysid_tick_s: ctrl acts that late, the first "
              "ctrl held before the start; sysid_substeps physics steps per tick, ctrl held over them), the static Stribeck friction (sysid_mu_static, sysid_stribeck_velocity: "
              "frictionloss = Fc + (Fs - Fc) exp(-(v/vs)^2) before every step), the friction law (sysid_friction_law: "
              "0 Coulomb, 1 Stribeck, 2 sigmoid, 3 load-dependent, 4 Dahl; sysid_law_p: its N x 4 parameters; "
              "sysid_law_fc: the Coulomb level it reads; docs/friction.md), the encoder offset (sysid_encoder_offset: "
              "logged angle = q + offset), a torque log's bias (sysid_torque_offset: the torque that acted = logged - offset), "
              "the log's zero-order hold, the slew limit (sysid_slew_per_tick). Gravity: off "
              "for runs of an arm that compensated it. See docs/intervals_and_export.md of isaaclab_sysid.")


def _fmt(v) -> str:
    """Numbers as the shortest text that reads back as the same double."""
    a = np.atleast_1d(np.asarray(v, dtype=float)).ravel()
    return " ".join(repr(float(x)) if math.isfinite(x) else ("inf" if x > 0 else "-inf") for x in a)


def _precise_xml(spec: mujoco.MjSpec) -> str:
    """``spec.to_xml()`` with every number this export depends on rewritten at full precision.

    MuJoCo's writer rounds to 6 significant digits. Bodies (pos, quat), inertials (pos, quat, mass,
    diaginertia), joints (pos, axis, range, armature, damping, frictionloss), sites, actuators and
    numerics are rewritten from the spec's doubles.
    """
    root = ET.fromstring(spec.to_xml())
    opt = root.find("option")
    if opt is not None:  # the integrator written even where it is MuJoCo's default (Euler): it matters here
        opt.set("integrator", "Euler" if spec.option.integrator == mujoco.mjtIntegrator.mjINT_EULER else "implicitfast")
        opt.set("timestep", _fmt(spec.option.timestep))
        opt.set("gravity", _fmt(spec.option.gravity))
    for el in root.iter("body"):
        b = spec.body(el.get("name"))
        if b is None:
            continue
        el.set("pos", _fmt(b.pos))
        el.set("quat", _fmt(b.quat))
        for attr in ("euler", "axisangle", "xyaxes", "zaxis"):
            el.attrib.pop(attr, None)
        inert = el.find("inertial")
        if inert is not None:
            inert.set("pos", _fmt(b.ipos))
            inert.set("quat", _fmt(b.iquat))
            inert.set("mass", _fmt(b.mass))
            inert.set("diaginertia", _fmt(b.inertia))
            inert.attrib.pop("fullinertia", None)
    for el in root.iter("joint"):
        j = spec.joint(el.get("name"))
        if j is None:
            continue
        el.set("pos", _fmt(j.pos))
        el.set("axis", _fmt(j.axis))
        if el.get("range") is not None:
            el.set("range", _fmt(j.range))
        el.set("armature", _fmt(j.armature))
        el.set("frictionloss", _fmt(j.frictionloss))
        el.set("damping", _fmt(j.damping[0]))
    for el in root.iter("site"):
        s = spec.site(el.get("name"))
        if s is not None:
            el.set("pos", _fmt(s.pos))
            el.set("quat", _fmt(s.quat))
    act = root.find("actuator")
    if act is not None:
        for el in act:
            a = spec.actuator(el.get("name"))
            if a is None:
                continue
            el.set("gainprm", _fmt(a.gainprm))
            el.set("biasprm", _fmt(a.biasprm))
            el.set("forcerange", _fmt(a.forcerange))
    for el in root.iter("numeric"):
        nm = spec.numeric(el.get("name"))
        if nm is not None:
            el.set("data", _fmt(nm.data))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def mjcf_text(robot: Robot, fit: FittedJoints, options: ReplayOptions,
              servo_gains: tuple[np.ndarray, np.ndarray] | None = None, substeps: int = 1) -> str:
    """The MJCF text of the fitted model (:func:`fitted_spec`, full precision)."""
    spec = fitted_spec(robot, fit, options, servo_gains, substeps)
    spec.compile()  # refuses a spec MuJoCo cannot build before anything is written
    return _precise_xml(spec)


def write_mjcf(path: str | Path, robot: Robot, fit: FittedJoints, options: ReplayOptions,
               servo_gains: tuple[np.ndarray, np.ndarray] | None = None, substeps: int = 1) -> Path:
    """Write the fitted model as MJCF (atomically); returns the path."""
    p = Path(path)
    atomic_write_text(p, mjcf_text(robot, fit, options, servo_gains, substeps))
    return p


# ------------------------------------------------------------------------------------- reading back
@dataclass(frozen=True)
class MjcfFacts:
    """What a written file holds beside MuJoCo's own elements (its ``sysid_*`` numerics).

    Attributes:
        delay: ticks; tick_s: [s]; servo: position-servo actuators (else motors); substeps: physics steps per tick;
        encoder_offset: (N,) rad; mu_static, stribeck_velocity: (N,) or None; slew_per_tick: (N,) N m or None.
    """

    delay: int
    tick_s: float
    servo: bool
    substeps: int
    encoder_offset: np.ndarray
    mu_static: np.ndarray | None = None
    stribeck_velocity: np.ndarray | None = None
    slew_per_tick: np.ndarray | None = None
    torque_offset: np.ndarray | None = None
    law: str = "coulomb"
    law_p: np.ndarray | None = None
    law_fc: np.ndarray | None = None
    servo_motor: np.ndarray | None = None


def read_facts(model: mujoco.MjModel) -> MjcfFacts:
    """The ``sysid_*`` numerics of a loaded model.

    Raises:
        MjcfError: the model has none (not written by :func:`write_mjcf`).
    """
    def num(key: str) -> np.ndarray | None:
        try:
            return np.array(model.numeric(PREFIX + key).data, dtype=float)
        except KeyError:
            return None

    delay = num("delay_ticks")
    if delay is None:
        raise MjcfError(f"the model has no <numeric name=\"{PREFIX}delay_ticks\">: not written by isaaclab_sysid's "
                        "MJCF export (export_dr.py --mjcf)")
    sub = num("substeps")
    law, law_p, law_fc = "coulomb", None, None
    lid = num("friction_law")
    if lid is not None:
        try:
            law = law_of_id(int(round(float(lid[0])))).name
        except ValueError:
            raise MjcfError(f"<numeric name=\"{PREFIX}friction_law\"> {lid[0]:g} is no friction law this version knows") from None
        law_p = num("law_p").reshape(model.nv, LAW_COLUMNS)
        law_fc = num("law_fc")
    elif num("mu_static") is not None:  # a file of the Stribeck model written before the law family
        law, law_fc = "stribeck", np.array(model.dof_frictionloss)
        law_p = np.zeros((model.nv, LAW_COLUMNS))
        law_p[:, 0], law_p[:, 1], law_p[:, 2] = num("mu_static"), num("stribeck_velocity"), 2.0
    return MjcfFacts(delay=int(round(float(delay[0]))), tick_s=float(num("tick_s")[0]), servo=bool(num("servo")[0]),
                     substeps=1 if sub is None else int(round(float(sub[0]))),
                     encoder_offset=num("encoder_offset"), mu_static=num("mu_static"),
                     stribeck_velocity=num("stribeck_velocity"), slew_per_tick=num("slew_per_tick"),
                     torque_offset=num("torque_offset"), law=law, law_p=law_p, law_fc=law_fc,
                     servo_motor=None if num("servo_motor") is None else num("servo_motor").reshape(model.nv, SERVO_COLUMNS))


# ---------------------------------------------------------------------------------------- the driver
def _gravity_force(m: mujoco.MjModel, d: mujoco.MjData, gravity: np.ndarray | None = None) -> np.ndarray:
    """(N,) generalized gravity force of a hinge chain under ``gravity`` (default the model's; replay.c's
    gravity_force_of)."""
    g = m.opt.gravity if gravity is None else gravity
    out = np.empty(m.nv)
    for j in range(m.nv):
        b, jnt = m.dof_bodyid[j], m.dof_jntid[j]
        r = d.subtree_com[b] - d.xanchor[jnt]
        f = m.body_subtreemass[b] * g
        out[j] = float(d.xaxis[jnt] @ np.cross(r, f))
    return out


class _LawDriver:
    """The file's friction law applied tick by tick, as the native loop applies it (replay.c, docs/friction.md):
    the Stribeck budget before each physics step, the load budget from the tick's motor and external torques
    written into the friction rows after ``mj_step1``, the force laws' torque in ``qfrc_applied`` (held over the
    tick's substeps), the Dahl state advanced over each tick."""

    def __init__(self, m: mujoco.MjModel, facts: MjcfFacts, gravity_on: bool) -> None:
        self.law: FrictionLaw = LAWS[facts.law]
        self.p = facts.law_p
        self.fc = np.array(m.dof_frictionloss) if facts.law_fc is None else np.asarray(facts.law_fc, dtype=float)
        self.tick_s = facts.tick_s
        self.load_gravity = None if gravity_on else np.array([0.0, 0.0, -GRAVITY])
        self.reset(m.nv)

    def reset(self, n: int) -> None:
        self.state = np.zeros(n)

    def before_step1(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        if self.law.name == "stribeck":
            m.dof_frictionloss[:] = budget(self.law, self.fc, self.p, d.qvel)
        elif self.law.name == "load":
            m.dof_frictionloss[:] = np.maximum(self.fc, LOAD_BUDGET_FLOOR)

    def after_control(self, m: mujoco.MjModel, d: mujoco.MjData, motor: np.ndarray) -> None:
        """``motor``: (N,) the actuator's torque this tick [N m] (after its clamp)."""
        name = self.law.name
        if name == "sigmoid":
            d.qfrc_applied[:] = applied_force(self.law, self.p, d.qvel, self.state)
        elif name == "dahl":
            d.qfrc_applied[:] = applied_force(self.law, self.p, d.qvel, self.state)
            self.state = dahl_step(self.fc, self.p, d.qvel.copy(), self.state, self.tick_s)
        elif name == "load":
            g = np.zeros(m.nv) if self.load_gravity is None else _gravity_force(m, d, self.load_gravity)
            b = budget(self.law, self.fc, self.p, d.qvel, tau_motor=motor - g, tau_ext=-d.qfrc_bias + g)
            m.dof_frictionloss[:] = b
            fr = int(mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF)
            rows = np.flatnonzero(d.efc_type == fr)
            d.efc_frictionloss[rows] = b[d.efc_id[rows]]
            if d.nisland > 0:
                rows = np.flatnonzero(d.iefc_type == fr)
                d.iefc_frictionloss[rows] = b[d.iefc_id[rows]]

    def substep(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        if self.law.name == "stribeck":
            m.dof_frictionloss[:] = budget(self.law, self.fc, self.p, d.qvel)


def _task_torque(m, d, s: RunSchedule, sp: np.ndarray, site: int, gravity_on: bool) -> np.ndarray:
    """The task-impedance torque of the native loop (replay.c task_impedance) at the current state."""
    law = s.law
    nv = m.nv
    jacp, jacr = np.zeros((3, nv)), np.zeros((3, nv))
    mujoco.mj_jacSite(m, d, jacp, jacr, site)
    jac = np.vstack([jacp, jacr])
    e = np.empty(6)
    e[:3] = sp[:3] - d.site_xpos[site]
    conv = "rotvec" if law.orientation_error == "rotvec" else "quat_2vec"
    e[3:] = orientation_error(sp[3:7], d.site_xmat[site].reshape(3, 3), conv)
    for sl, lim in ((slice(0, 3), law.max_position_error), (slice(3, 6), law.max_orientation_error)):
        if lim and lim > 0:
            nrm = math.sqrt(float(e[sl] @ e[sl]))
            if nrm > lim:
                e[sl] *= lim / nrm
    f = s.kp * e - s.kd * (jac @ d.qvel)
    tau = jac.T @ f
    if law.coriolis_compensation:
        tau = tau + d.qfrc_bias + (_gravity_force(m, d) if gravity_on else 0.0)
    k = float(law.nullspace_stiffness or 0.0)
    if k > 0:
        y = k * (s.q_rest - d.qpos) - 2.0 * math.sqrt(k) * d.qvel
        w = np.linalg.solve(jac @ jac.T, jac @ y)
        tau = tau + (y - jac.T @ w)
    return tau


def _setpoint(s: RunSchedule, k: int) -> int:
    """Index of the setpoint active at tick k (k < 0: the first)."""
    if k < 0:
        return 0
    return int(np.searchsorted(s.sp_ticks, k, side="right")) - 1


@dataclass
class MjcfReplay:
    """One run replayed on a loaded MJCF: states at the run's sample instants, in the log's frame.

    Attributes:
        q, dq: (T, N) [rad], [rad/s]; diverged: the replay left the velocity bound (rest NaN).
    """

    q: np.ndarray
    dq: np.ndarray
    diverged: bool = False


def replay_mjcf(model: mujoco.MjModel, run: Run, options: ReplayOptions) -> MjcfReplay:
    """Replay ``run`` on a model loaded from a :func:`write_mjcf` file, as the fit's replay does.

    Per 1 ms tick, from ``-warmup``: the Stribeck frictionloss from the velocity, ``mj_step1``, the
    actuator's ``ctrl`` (servo: the setpoint active ``delay`` ticks ago; motor: the run's controller
    torque, delayed, slew-limited), the sample (state before the step), ``mj_step2``. The joint
    physics, gains, torque limit and offset come from the file; a run that states servo gains
    replays with them (as the fit's replay does).

    Raises:
        MjcfError: a run the file's actuators cannot drive (a servo file and a task-space or torque run).
    """
    m = copy_model(model)
    facts = read_facts(m)
    n = m.nv
    if n != run.n_dof or m.nu != n:
        raise MjcfError(f"run '{run.name}' has {run.n_dof} joints; the model {m.nv} joints and {m.nu} actuators")
    if abs(m.opt.timestep * facts.substeps - facts.tick_s) > 1e-15:
        raise MjcfError(f"the model's timestep {m.opt.timestep} x {facts.substeps} substeps is not its tick {facts.tick_s}")
    s = schedule_of(run, n)
    gravity_on = replay_gravity(options, s.gravity_compensated)
    if not gravity_on:
        m.opt.gravity[:] = 0.0
    else:
        m.opt.gravity[:] = (0.0, 0.0, -GRAVITY)
    if s.controller == "torque":
        if facts.servo:
            raise MjcfError(f"run '{run.name}' is a torque run but the model's actuators are position servos")
        return _replay_torque(m, facts, s, run, options)
    if (facts.servo_motor is not None) != (s.controller == "servo"):
        raise MjcfError(f"run '{run.name}' is a {s.controller} run but the model's actuators are "
                        + ("the servo motor model (servo runs only)" if facts.servo_motor is not None else
                           "not the servo motor model (a servo run needs a fit with motor_kt, motor_r)"))
    if facts.servo_motor is not None:
        return _replay_servo_motor(m, facts, s, options)
    servo = facts.servo
    if servo and s.controller != "joint_pd":
        raise MjcfError(f"run '{run.name}' is a {s.controller} run but the model's actuators are position servos")
    off = facts.encoder_offset
    if servo:  # stated gains replace the file's (sim/servo.effective_gains); NaN = unstated
        kp = np.where(np.isfinite(s.kp), s.kp, m.actuator_gainprm[:, 0])
        kd = np.where(np.isfinite(s.kd), s.kd, -m.actuator_biasprm[:, 2])
        changed = np.isfinite(s.kp) | np.isfinite(s.kd)
        m.actuator_gainprm[changed, 0] = kp[changed]
        m.actuator_biasprm[changed, 0] = -kp[changed] * off[changed]
        m.actuator_biasprm[changed, 1] = -kp[changed]
        m.actuator_biasprm[changed, 2] = -kd[changed]
        if facts.slew_per_tick is not None:
            raise MjcfError("a servo fit with a slew limit: the MJCF servo actuator has none (not exported)")
    d = mujoco.MjData(m)
    d.qpos[:] = s.q_init - off if servo else s.q_init
    d.qvel[:] = 0.0
    site = m.site(EE_NAME).id
    law = _LawDriver(m, facts, gravity_on)
    k0 = -int(options.warmup_ticks)
    k_last = s.last_tick
    delay = facts.delay
    lim = np.asarray(m.actuator_forcerange[:, 1]) if np.all(m.actuator_forcelimited) else None
    hist: deque[np.ndarray] = deque()
    prev = np.zeros(n)
    T = s.n_samples
    q_out, dq_out = np.full((T, n), np.nan), np.full((T, n), np.nan)
    samples = {int(k): i for i, k in enumerate(s.sample_ticks)}
    vmax = float(options.max_joint_velocity)
    for k in range(k0, k_last + 1):
        law.before_step1(m, d)
        mujoco.mj_step1(m, d)
        if servo:
            d.ctrl[:] = s.sp_values[_setpoint(s, max(k - delay, k0))]
            motor = m.actuator_gainprm[:, 0] * d.ctrl + m.actuator_biasprm[:, 0] + m.actuator_biasprm[:, 1] * d.qpos \
                + m.actuator_biasprm[:, 2] * d.qvel
            if lim is not None:
                motor = np.clip(motor, -lim, lim)
        else:
            if s.controller == "joint_pd":
                sp = s.sp_values[_setpoint(s, max(k - delay, k0))]
                applied = s.kp * (sp - d.qpos) - s.kd * d.qvel
            else:
                tau = _task_torque(m, d, s, s.sp_values[_setpoint(s, k)], site, gravity_on)
                if not hist:  # before the start the first command is held (replay.c)
                    hist.extend([tau] * delay)
                hist.append(tau)
                applied = hist.popleft()  # the command of delay ticks ago
            if facts.slew_per_tick is not None:  # written only when the fit used the slew limit
                applied = prev + np.clip(applied - prev, -facts.slew_per_tick, facts.slew_per_tick)
            d.ctrl[:] = applied
            prev = np.clip(applied, -lim, lim) if lim is not None else applied
            motor = prev
        i = samples.get(k)
        if i is not None:
            q_out[i] = d.qpos + off if servo else d.qpos
            dq_out[i] = d.qvel
        if k == k_last:
            break
        law.after_control(m, d, motor)
        mujoco.mj_step2(m, d)
        _substeps(m, d, facts, law)
        if not (np.all(np.abs(d.qvel) <= vmax) and np.all(np.isfinite(d.qpos))):
            return MjcfReplay(q_out, dq_out, True)
    return MjcfReplay(q_out, dq_out, False)


def _replay_servo_motor(m: mujoco.MjModel, facts: MjcfFacts, s: RunSchedule, options: ReplayOptions) -> MjcfReplay:
    """A servo run (controller ``servo``) on a servo-motor file: per tick the goal row of ``delay`` ticks ago (goal,
    torque enable, supply voltage; the first held before the start), the encoder offset taken off the goal and the
    start, the motor torque of :func:`~isaaclab_sysid.sim.servo.servo_torque` as the motors' ctrl, unclamped (the
    model's own windows limit it), the friction law's driver as for every file (replay.c ``CTRL_SERVO``)."""
    n = m.nv
    m.actuator_forcelimited[:] = 0
    off = facts.encoder_offset
    table = facts.servo_motor
    d = mujoco.MjData(m)
    d.qpos[:] = s.q_init - off
    d.qvel[:] = 0.0
    law = _LawDriver(m, facts, bool(np.any(m.opt.gravity != 0)))
    k0 = -int(options.warmup_ticks)
    T = s.n_samples
    q_out, dq_out = np.full((T, n), np.nan), np.full((T, n), np.nan)
    samples = {int(k): i for i, k in enumerate(s.sample_ticks)}
    vmax = float(options.max_joint_velocity)
    kp = np.asarray(s.kp, dtype=float)
    for k in range(k0, s.last_tick + 1):
        law.before_step1(m, d)
        mujoco.mj_step1(m, d)
        row = s.sp_values[_setpoint(s, max(k - facts.delay, k0))]
        d.ctrl[:] = servo_torque(table, kp, row[:n] - off, row[n:2 * n], row[2 * n:3 * n], d.qpos, d.qvel)
        i = samples.get(k)
        if i is not None:
            q_out[i], dq_out[i] = d.qpos + off, d.qvel
        if k == s.last_tick:
            break
        law.after_control(m, d, np.array(d.ctrl))
        mujoco.mj_step2(m, d)
        _substeps(m, d, facts, law)
        if not (np.all(np.abs(d.qvel) <= vmax) and np.all(np.isfinite(d.qpos))):
            return MjcfReplay(q_out, dq_out, True)
    return MjcfReplay(q_out, dq_out, False)


def _substeps(m: mujoco.MjModel, d: mujoco.MjData, facts: MjcfFacts, law: _LawDriver) -> None:
    """The tick's remaining physics steps (the fit's ``substeps``): the same ctrl and friction torque, the Stribeck
    frictionloss updated before each (replay.c)."""
    for _ in range(facts.substeps - 1):
        law.substep(m, d)
        mujoco.mj_step(m, d)


def _replay_torque(m: mujoco.MjModel, facts: MjcfFacts, s: RunSchedule, run: Run,
                   options: ReplayOptions) -> MjcfReplay:
    """A torque run (``--replay torque``): each shooting window starts at its first sample's measured state and
    the motors apply the logged torque of ``delay`` ticks ago, less the file's torque offset (held at the window's
    first/last tick outside the log), without clamp or slew: the measured torque is what acted (the fit's replay)."""
    n = m.nv
    m.actuator_forcelimited[:] = 0
    law = _LawDriver(m, facts, bool(np.any(m.opt.gravity != 0)))
    T = s.n_samples
    q_out, dq_out = np.full((T, n), np.nan), np.full((T, n), np.nan)
    d = mujoco.MjData(m)
    vmax = float(options.max_joint_velocity)
    diverged = False
    for a, b in run_windows([run], options.window_ticks)[0]:
        a, b = int(a), int(b)
        tau, ticks = window_input(s.torque, s.sample_ticks[a:b], facts.delay, facts.torque_offset)
        mujoco.mj_resetData(m, d)
        law.reset(n)
        d.qpos[:], d.qvel[:] = s.q_meas[a], s.dq_meas[a]
        samples = {int(k): a + i for i, k in enumerate(ticks)}
        k_last, L = int(ticks[-1]), tau.shape[0]
        for k in range(int(ticks[0]), k_last + 1):
            law.before_step1(m, d)
            mujoco.mj_step1(m, d)
            d.ctrl[:] = tau[min(max(k - facts.delay, 0), L - 1)]
            i = samples.get(k)
            if i is not None:
                q_out[i], dq_out[i] = d.qpos, d.qvel
            if k == k_last:
                break
            law.after_control(m, d, np.array(d.ctrl))
            mujoco.mj_step2(m, d)
            _substeps(m, d, facts, law)
            if not (np.all(np.abs(d.qvel) <= vmax) and np.all(np.isfinite(d.qpos))):
                diverged = True
                break
    return MjcfReplay(q_out, dq_out, diverged)


def copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """A private copy of a model (the driver changes gravity, gains and frictionloss in it)."""
    return copy.copy(model)


# ------------------------------------------------------------------------------------------ the check
@dataclass
class MjcfCheck:
    """The MJCF replay against the fit's own replay of the fitted parameters.

    Attributes:
        path: the file checked.
        runs: run names; max_dq: per run the largest |q_mjcf - q_fit| over samples and joints [rad];
        max_ddq: the same for the velocities [rad/s]; tol: the required bound [rad].
    """

    path: Path
    runs: list[str]
    max_dq: list[float]
    max_ddq: list[float]
    tol: float = MJCF_TOL_RAD
    samples: list[int] = field(default_factory=list)

    @property
    def worst(self) -> float:
        """The largest |q difference| over every run [rad] (inf when a run is missing or not finite)."""
        return max(self.max_dq) if self.max_dq else math.inf

    @property
    def passed(self) -> bool:
        return bool(self.max_dq) and all(math.isfinite(v) and v <= self.tol for v in self.max_dq)

    def lines(self) -> list[str]:
        """One line per run and a verdict."""
        out = [f"  {r}: max |q_mjcf - q_fit| = {a:.3e} rad, max |dq diff| = {b:.3e} rad/s over {n} samples"
               for r, a, b, n in zip(self.runs, self.max_dq, self.max_ddq, self.samples)]
        out.append(f"MJCF replay {'PASS' if self.passed else 'FAIL'}: worst {self.worst:.3e} rad "
                   f"({'<=' if self.passed else 'not <='} {self.tol:g} rad)")
        return out


def fit_rollouts(robot: Robot, result: FitResult, runs: Sequence[Run], options: ReplayOptions,
                 backend: MujocoBackend | None = None, substeps: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    """(T, N) q [rad] and dq [rad/s] of each run replayed by the fit's MuJoCo backend (the native loop) at the
    fitted values (q in the log's frame: with the encoder offset).

    Args:
        backend: the fit's own MuJoCo backend (default: one built for ``robot``, ``options`` and ``substeps``, as the
            fit builds it).
    """
    be = backend if backend is not None else MujocoBackend(robot, options, n_threads=1, substeps=substeps)
    try:
        return [(ro.q[0], ro.dq[0]) for ro in be.rollout(fitted_batch(result), list(runs))]
    finally:
        if backend is None:
            be.close()


def check_mjcf(path: str | Path, robot: Robot, result: FitResult, runs: Sequence[Run], options: ReplayOptions,
               tol: float = MJCF_TOL_RAD, fit_states: Sequence[tuple[np.ndarray, np.ndarray]] | None = None) -> MjcfCheck:
    """Load ``path`` with plain MuJoCo, replay ``runs`` with :func:`replay_mjcf` and compare with the fit's replay.

    Args:
        fit_states: the fit's replayed (q, dq) per run (default: :func:`fit_rollouts`).
    """
    p = Path(path)
    model = mujoco.MjModel.from_xml_path(str(p))
    ref = list(fit_states) if fit_states is not None else fit_rollouts(robot, result, runs, options)
    names, dq, ddq, ns = [], [], [], []
    for run, (q_fit, dq_fit) in zip(runs, ref):
        rep = replay_mjcf(model, run, options)
        dq.append(_max_abs(rep.q - q_fit))
        ddq.append(_max_abs(rep.dq - dq_fit))
        names.append(run.name)
        ns.append(int(q_fit.shape[0]))
    return MjcfCheck(p, names, dq, ddq, tol, ns)


def _max_abs(diff: np.ndarray) -> float:
    """max |diff|; inf when any entry is not finite (a diverged replay never passes)."""
    return float(np.max(np.abs(diff))) if np.all(np.isfinite(diff)) else math.inf
