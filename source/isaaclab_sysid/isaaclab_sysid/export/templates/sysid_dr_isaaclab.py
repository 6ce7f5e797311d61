"""Template of ``sysid_dr_isaaclab.py``: the fit's actuator and domain-randomization event terms for Isaac Lab.

``export/isaaclab_module.py`` copies this file below its own docstring, the data block
replaced by the fit's numbers; everything else is the generated module's code as it is
here. As shipped the data block is an empty export (no joints, no terms).
"""

from __future__ import annotations

import math

import torch
from isaaclab.actuators import DCMotorCfg, DelayedPDActuatorCfg
from isaaclab.actuators.actuator_pd import DCMotor, DelayedPDActuator
from isaaclab.managers import EventTermCfg, ManagerTermBase, SceneEntityCfg
from isaaclab.utils import configclass
from isaaclab.utils import string as string_utils

# --- data: the export replaces this block with its numbers ---
JOINT_NAMES: list[str] = []
ASSET_NAME = "robot"
PHYSICS = "newton"
PHYSICS_DT = 0.001
#: fitted values (per joint, joint order of JOINT_NAMES); delay in physics steps
FITTED: dict = {"delay_steps": 0}
#: intervals: label -> (lower, upper); None = unbounded (not identifiable)
INTERVALS: dict = {}
#: randomization ranges: label -> (lower, upper) in the label's units
RANGES: dict = {}
#: what the event terms draw each randomized number from (label -> (lower, upper)); delay in physics steps
SAMPLED_RANGES: dict = {}
DELAY_RANGE_STEPS = (0, 0)
ACTUATOR_VALUES: dict = {}
#: a servo motor model's fit: per field joint -> value (error_gain, max_pwm, max_current_a (None: no limit),
#: vin_nominal_v, kt [N m/A], r [Ohm]); empty for every other fit
SERVO_MOTOR: dict = {}
#: the event terms of SysidEventsCfg: name -> {"func", "joint_names" or "body_names", "params"}
EVENT_TERMS: dict = {}
#: the fitted friction law: {"name": law} and, beyond Coulomb, {"params": SysidFrictionActuatorCfg field -> joint ->
#: value} (units in SysidFrictionActuatorCfg)
FRICTION_LAW: dict = {"name": "coulomb"}
#: the fit's torque slew limit [N m/s] per joint (joint -> value, None: none on that joint; the real controller's rate
#: limit, which the fit's replay applied to the commanded torque after its delay and before its clamp); empty when the
#: fit used none
TORQUE_RATE_LIMIT: dict = {}
# --- end of data ---


def check_physics_dt(sim_dt: float) -> None:
    """Refuse a task whose physics step is not the one the delay was exported for.

    Raises:
        ValueError: ``sim_dt`` [s] differs from ``PHYSICS_DT`` (the delay in steps would be wrong).
    """
    if abs(float(sim_dt) - PHYSICS_DT) > 1e-12:
        raise ValueError(
            f"this export's delays are in physics steps of {PHYSICS_DT * 1e3:g} ms but the task's sim.dt is "
            f"{float(sim_dt) * 1e3:g} ms: re-export with scripts/export_dr.py --physics_dt {float(sim_dt)!r} "
            "(refused there if that step cannot represent the delay)"
        )


def _check_friction_units() -> None:
    """PhysX before Isaac Sim 5 takes a unitless friction coefficient, not the fitted torque: refuse."""
    if PHYSICS != "physx":
        return
    from isaaclab.utils.version import get_isaac_sim_version, has_kit

    if has_kit() and get_isaac_sim_version().major < 5:
        raise RuntimeError(
            "PhysX joint friction before Isaac Sim 5 is a unitless coefficient of the spatial force through the joint; "
            "this export's friction is a torque [N m] (PhysX 5 friction efforts): use Isaac Sim >= 5"
        )


def needs_lab_actuators() -> bool:
    """Whether the actuator runs on Isaac Lab's actuator path (``sim.use_newton_actuators = False`` on Newton): a
    friction law beyond Coulomb or a torque slew limit, which Newton's native actuators cannot apply."""
    return FRICTION_LAW["name"] != "coulomb" or bool(TORQUE_RATE_LIMIT)


def make_actuator_cfg(stiffness: float | dict | None = None, damping: float | dict | None = None,
                      randomize_delay: bool = True, carried_gravity: float = 0.0) -> DelayedPDActuatorCfg:
    """The arm's actuator with the fitted joint properties.

    Args:
        stiffness, damping: joint PD gains of the explicit actuator [N m/rad, N m s/rad]. None: a
            position servo's fitted gains (``ACTUATOR_VALUES["stiffness"]``/``["damping"]``: the
            servo's kp, kd; the actuator delays the position target, as the servo's bus does), else 0
            (the environment sends efforts, e.g. a task-space impedance controller, delayed as on the
            real arm).
        randomize_delay: min/max delay = the delay's randomization range (drawn per env; on
            Newton's native actuators by the ``actuator_delay`` event term); False: both = the
            fitted delay (then use ``make_events_cfg(randomize_delay=False)``).
        carried_gravity: the load law only: the gravity [m/s^2, along -z] the gearbox carries that the task does not
            simulate (a gravity-compensated arm simulated without gravity: 9.81; the fit replayed such runs so);
            0: the task's own gravity is all the gearbox carries.

    Returns:
        ``DelayedPDActuatorCfg`` for a Coulomb fit without a slew limit (Newton's native actuators run it); for any
        other friction law (``FRICTION_LAW``) or a fit with a torque slew limit (``TORQUE_RATE_LIMIT``)
        :class:`SysidFrictionActuatorCfg`, the same PD, delay and effort limit, the slew limit and the law applied
        every physics step (Isaac Lab's actuator path, :func:`needs_lab_actuators`: set
        ``sim.use_newton_actuators = False``; the Stribeck and load laws need the articulation, bound by
        :func:`make_events_cfg`'s ``friction_law`` term or :func:`bind_friction_law`).
    """
    _check_friction_units()
    if SERVO_MOTOR:
        raise ValueError("this export is of a servo motor model: make_servo_motor_cfg(kp_register, supply_v) builds its "
                         "actuator (a PD actuator would be a reduced model)")
    lo, hi = DELAY_RANGE_STEPS if randomize_delay else (FITTED["delay_steps"], FITTED["delay_steps"])
    values = {k: dict(v) for k, v in ACTUATOR_VALUES.items()}
    if PHYSICS == "newton":
        values.pop("dynamic_friction", None)  # Newton has one Coulomb level (and warns on a dynamic one)
    fitted_kp, fitted_kd = values.pop("stiffness", 0.0), values.pop("damping", 0.0)
    kwargs = dict(joint_names_expr=list(JOINT_NAMES), stiffness=fitted_kp if stiffness is None else stiffness,
                  damping=fitted_kd if damping is None else damping, min_delay=lo, max_delay=hi, **values)
    if not needs_lab_actuators():
        return DelayedPDActuatorCfg(**kwargs)
    if carried_gravity and FRICTION_LAW["name"] != "load":
        raise ValueError(f"carried_gravity is the load law's; this export's law is {FRICTION_LAW['name']}")
    return SysidFrictionActuatorCfg(friction_law=FRICTION_LAW["name"], physics_dt=PHYSICS_DT,
                                    carried_gravity=float(carried_gravity),
                                    torque_rate_limit=dict(TORQUE_RATE_LIMIT) or None,
                                    **{k: dict(v) for k, v in FRICTION_LAW.get("params", {}).items()}, **kwargs)


def servo_motor_values(kp_register: float | dict, supply_v: float | dict | None = None, kt: dict | None = None,
                       r: dict | None = None) -> dict[str, dict[str, float]]:
    """The servo motor model as Isaac Lab's ``DCMotor`` numbers, per joint (``SERVO_MOTOR``; exact where
    ``|dq| <= corner velocity``, see the module docstring).

    Args:
        kp_register: the servo's position gain register (one for every joint, or joint -> value).
        supply_v: the supply [V] (None: each family's nominal).
        kt, r: joint -> torque constant [N m/A] / resistance [Ohm] (None: the fitted ones).

    Returns:
        ``stiffness`` kt V eg kp / R [N m/rad], ``damping`` kt^2 / R [N m s/rad], ``saturation_effort``
        kt V max_pwm / R [N m], ``actuator_velocity_limit`` V max_pwm / kt [rad/s], ``actuator_effort_limit``
        kt I_max [N m] (inf without a current limit): each joint -> value.
    """
    if not SERVO_MOTOR:
        raise ValueError("this export is not of a servo motor model (no SERVO_MOTOR): use make_actuator_cfg's gains")
    out: dict[str, dict[str, float]] = {k: {} for k in ("stiffness", "damping", "saturation_effort",
                                                          "actuator_velocity_limit", "actuator_effort_limit")}
    for j in JOINT_NAMES:
        kp = float(kp_register[j] if isinstance(kp_register, dict) else kp_register)
        v = supply_v[j] if isinstance(supply_v, dict) else supply_v
        v = float(SERVO_MOTOR["vin_nominal_v"][j] if v is None else v)
        k_t = float((kt or SERVO_MOTOR["kt"])[j])
        res = float((r or SERVO_MOTOR["r"])[j])
        if not (kp >= 0 and v > 0 and k_t > 0 and res > 0):
            raise ValueError(f"{j}: kp_register >= 0, supply_v > 0, kt > 0 and r > 0 needed, got {kp}, {v}, {k_t}, {res}")
        pwm, imax = float(SERVO_MOTOR["max_pwm"][j]), SERVO_MOTOR["max_current_a"][j]
        out["stiffness"][j] = k_t * v * float(SERVO_MOTOR["error_gain"][j]) * kp / res
        out["damping"][j] = k_t * k_t / res
        out["saturation_effort"][j] = k_t * v * pwm / res
        out["actuator_velocity_limit"][j] = v * pwm / k_t
        out["actuator_effort_limit"][j] = math.inf if not imax else k_t * float(imax)
    return out


class SysidServoMotor(DelayedPDActuator, DCMotor):
    """Isaac Lab's ``DCMotor`` torque-speed envelope behind ``DelayedPDActuator``'s delay of the position target (the
    servo's bus delay): ``compute`` delays the targets, ``IdealPDActuator`` forms ``stiffness (q* - q) - damping dq``
    and ``DCMotor._clip_effort`` clips it. A torque-off phase is no configuration: write stiffness and damping 0."""


def _configclass_here(cls):
    """``configclass(cls)``, also when this file was loaded from a path with no ``sys.modules`` entry (dataclasses
    looks the class's module up to read its string annotations, which ``from __future__ import annotations`` and the
    Isaac Lab base configs make)."""
    import sys
    import types

    if sys.modules.get(__name__) is not None:
        return configclass(cls)
    stand_in = types.ModuleType(__name__)
    stand_in.__dict__.update(globals())
    sys.modules[__name__] = stand_in
    try:
        return configclass(cls)
    finally:
        del sys.modules[__name__]


#: the SysidFrictionActuatorCfg fields of each friction law (the fit's group in docs/friction.md of isaaclab_sysid)
LAW_FIELDS = {
    "coulomb": (),
    "stribeck": ("static_friction", "dynamic_ratio", "stribeck_velocity", "stribeck_shape"),
    "sigmoid": ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset"),
    "dahl": ("coulomb_friction", "presliding_stiffness"),
    "load": ("coulomb_friction", "load_friction_motor", "load_friction_external"),
}
#: each field's domain (lower, upper): a value outside is refused, a randomization range is cut to it
LAW_DOMAINS = {"static_friction": (0.0, math.inf), "dynamic_ratio": (0.0, 1.0), "stribeck_velocity": (1e-6, math.inf),
               "stribeck_shape": (1e-6, math.inf), "sigmoid_amplitude": (0.0, math.inf),
               "sigmoid_slope": (1e-6, math.inf), "sigmoid_offset": (-math.inf, math.inf),
               "coulomb_friction": (0.0, math.inf), "presliding_stiffness": (0.0, math.inf),
               "load_friction_motor": (0.0, math.inf), "load_friction_external": (0.0, math.inf)}
#: the load law's budget never drops below this [N m] (isaaclab_sysid's LOAD_BUDGET_FLOOR: the friction row stays)
LOAD_BUDGET_FLOOR = 1e-9


class _DofBuffer:
    """A flat model-wide DoF buffer as the ``joint_f`` a Newton ``ArticulationView`` reads through its layout."""

    def __init__(self, joint_f) -> None:
        self.joint_f = joint_f


class _BiasTorques:
    """g(q) and C(q, qd) qd [N m] of every env of one Isaac Lab articulation on Newton, (num_envs, num_joints) float64
    in its joint order: Newton's inverse dynamics of the simulated model (``ArticulationView.
    eval_inverse_dynamics_passive``, a Newton-Euler pass at the state's q, qd; Isaac Lab's articulation data gives
    the gravity term only). g(q) = dU/dq is the torque that holds the arm still under the simulation's gravity, and
    g_c(q) the same under ``carried_gravity`` [m/s^2, along -z] (the model's gravity set to it for the call,
    restored after). isaaclab_sysid's replay backend runs the same code (sim/isaaclab_backend/bias.py)."""

    def __init__(self, articulation, carried_gravity: float = 0.0) -> None:
        import warp as wp

        view = getattr(articulation, "root_view", None)
        if view is None or not hasattr(view, "eval_inverse_dynamics_passive"):
            raise RuntimeError("the load law's budget needs Newton's ArticulationView.eval_inverse_dynamics_passive "
                               f"(Isaac Lab on Newton); got {type(view).__name__}")
        self.view, self.model = view, view.model
        self.device = torch.device(articulation.device)
        n, dev = self.model.joint_dof_count, self.model.device
        self._g, self._c = wp.zeros(n, dtype=wp.float32, device=dev), wp.zeros(n, dtype=wp.float32, device=dev)
        self._gc = wp.zeros(n, dtype=wp.float32, device=dev) if carried_gravity else None
        if self._gc is not None:
            grav = self.model.gravity
            self._saved = wp.clone(grav)
            self._carried = wp.array([(0.0, 0.0, -float(carried_gravity))] * grav.shape[0], dtype=grav.dtype, device=dev)
        backend, user = list(articulation.backend_joint_names), list(articulation.joint_names)
        self._cols = None if backend == user else torch.tensor([backend.index(j) for j in user], device=self.device)

    def _rows(self, flat) -> torch.Tensor:
        import warp as wp

        v = wp.to_torch(self.view.get_dof_forces(_DofBuffer(flat))).to(self.device, torch.float64)
        v = v.reshape(v.shape[0] * v.shape[1], -1)
        return v if self._cols is None else v[:, self._cols]

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(g(q), C(q, qd) qd, g_c(q)) at Newton's current state (the one the next physics step starts from); g_c is
        zeros without ``carried_gravity``."""
        from isaaclab_newton.physics import NewtonManager

        state = NewtonManager.get_state_0()
        self.view.eval_fk(state)
        self.view.eval_inverse_dynamics_passive(state, gravity_force=self._g, coriolis_force=self._c)
        g, cqd = self._rows(self._g), self._rows(self._c)
        if self._gc is None:
            return g, cqd, torch.zeros_like(g)
        grav = self.model.gravity
        self._saved.assign(grav)
        grav.assign(self._carried)
        try:
            self.view.eval_inverse_dynamics_passive(state, gravity_force=self._gc)
        finally:
            grav.assign(self._saved)
        return g, cqd, self._rows(self._gc)


class _FrictionLaw:
    """The fitted friction law applied every physics step, per env, on top of an Isaac Lab actuator (a mixin before it
    in the bases: :class:`SysidFrictionActuator`, :class:`SysidServoMotorWithLaw`).

    From the joint velocity at the start of the step (float64, the law of isaaclab_sysid's replay):

    * ``stribeck``: the budget ``Fc + (Fs - Fc) exp(-|v / vs|^delta)``, ``Fc = dynamic_ratio Fs``, written as the joint's
      Coulomb friction (Newton's joint friction is MuJoCo's ``frictionloss``: the joint sticks below the budget; on
      PhysX 5 static = dynamic friction effort = the budget). Needs the articulation (:meth:`bind`).
    * ``sigmoid``: the torque ``-[phi1 / (1 + exp(-phi2 (v + phi3))) - phi1 / (1 + exp(-phi2 phi3))]`` added to the
      effort (after the effort limit's clip: it is the joint's friction, not the motor's torque).
    * ``dahl``: the torque ``-F`` added likewise, then the bristle force advanced over the step exactly at that
      velocity, ``F <- Fc sign(v) + (F - Fc sign(v)) exp(-sigma0 |v| dt / Fc)`` (0 where Fc is 0); ``reset`` zeroes F
      (Isaac Lab computes the actuators once more at an env's reset, from the reset state: at rest, F stays 0).
    * ``load`` (BAM's load-dependent law, Duclusaud et al. ICRA 2025): the budget
      ``max(Fc + |k_ext tau_ext - k_motor tau_motor|, LOAD_BUDGET_FLOOR)`` written as the joint's Coulomb friction,
      like Stribeck's, from the state at the start of the step and the step's actuator torque: ``tau_motor`` = the
      actuator's effort after its clip + g_c(q), ``tau_ext`` = -(C(q, qd) qd + g(q)), g(q) the torque gravity
      exerts on the joint held still (``dU/dq``: the simulation's gravity and, with ``carried_gravity``, the one the
      gearbox carries that the task leaves out, g_c, which the motor holds) and C(q, qd) qd the Coriolis/centrifugal
      torque, both Newton's inverse dynamics of every env (:class:`_BiasTorques`; Newton only). Needs the
      articulation (:meth:`bind`).

    Attributes:
        law_params: field -> (num_envs, num_joints) float64 per-env values (the ``randomize_friction_law`` term
            writes them).
        bristle: (num_envs, num_joints) the Dahl bristle force [N m].
        friction_effort: (num_envs, num_joints) the law's torque added in the last step [N m] (0 for ``stribeck``,
            whose friction the solver applies).
        friction_budget: (num_envs, num_joints) the Stribeck or load budget written in the last step [N m] (None
            otherwise).
    """

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        if cfg.friction_law not in LAW_FIELDS:
            raise ValueError(f"SysidFrictionActuatorCfg.friction_law must be one of {list(LAW_FIELDS)}, got "
                             f"{cfg.friction_law!r}")
        if not cfg.physics_dt > 0:
            raise ValueError(f"SysidFrictionActuatorCfg.physics_dt must be > 0 [s], got {cfg.physics_dt!r}")
        self.law = cfg.friction_law
        self.law_params = {f: self._per_joint(f, getattr(cfg, f)) for f in LAW_FIELDS[self.law]}
        self.bristle = torch.zeros(self._num_envs, self.num_joints, dtype=torch.float64, device=self._device)
        self.friction_effort = torch.zeros(self._num_envs, self.num_joints, device=self._device)
        self.friction_budget = None
        self._asset = None
        self._bias = None
        if self.law == "load" and PHYSICS != "newton":
            raise ValueError("the load law's budget needs every env's Coriolis torque from Newton's inverse dynamics: "
                             f"this export is for {PHYSICS}")

    def _per_joint(self, name: str, value) -> torch.Tensor:
        """(num_envs, num_joints) float64 of a field given for every joint (a number, or joint-name regex -> value)."""
        if value is None:
            raise ValueError(f"SysidFrictionActuatorCfg.{name} is needed by the {self.cfg.friction_law} law")
        if isinstance(value, (int, float)):
            vals = [float(value)] * self.num_joints
        else:
            _, names, v = string_utils.resolve_matching_names_values(dict(value), self.joint_names)
            by_name = dict(zip(names, v))
            missing = [j for j in self.joint_names if j not in by_name]
            if missing:
                raise ValueError(f"SysidFrictionActuatorCfg.{name} gives no value for joint(s) {missing}")
            vals = [float(by_name[j]) for j in self.joint_names]
        lo, hi = LAW_DOMAINS.get(name, (-math.inf, math.inf))
        if not all(lo <= x <= hi for x in vals):
            raise ValueError(f"SysidFrictionActuatorCfg.{name} must lie in [{lo}, {hi}], got {vals}")
        return torch.tensor(vals, dtype=torch.float64, device=self._device).repeat(self._num_envs, 1)

    def bind(self, articulation) -> None:
        """The articulation whose joint friction the Stribeck law writes every step (the group's joints)."""
        self._asset = articulation
        ids = self.joint_indices
        self._joint_ids = None if isinstance(ids, slice) else torch.as_tensor(ids, device=self._device).to(torch.int32)
        self._cols = ids if isinstance(ids, slice) else torch.as_tensor(ids, device=self._device).long()

    def reset(self, env_ids):
        super().reset(env_ids)
        self.bristle[slice(None) if env_ids is None else env_ids] = 0.0

    def compute(self, control_action, joint_pos: torch.Tensor, joint_vel: torch.Tensor):
        """The actuator's effort (delayed, clipped to its limits) plus the friction law's torque of this step (the
        load law: its budget, from that effort, written to the joint friction instead)."""
        if self.law == "load":
            out = super().compute(control_action, joint_pos, joint_vel)
            self._write_load_budget(out.joint_efforts.to(torch.float64))
            self.friction_effort = torch.zeros_like(out.joint_efforts)
            return out
        tau = self._law_torque(joint_vel.to(torch.float64))
        out = super().compute(control_action, joint_pos, joint_vel)
        self.friction_effort = tau.to(out.joint_efforts.dtype)
        out.joint_efforts = out.joint_efforts + self.friction_effort
        return out

    def _write_load_budget(self, tau_motor: torch.Tensor) -> None:
        """The load budget of this step [N m] from the actuator's effort ``tau_motor`` (num_envs, num_joints), written
        as the joint friction."""
        if self._asset is None:
            raise RuntimeError("SysidFrictionActuator: the load law writes the joint friction every step and is not "
                               "bound to its articulation: add make_events_cfg()'s friction_law term or call "
                               "bind_friction_law(env.scene[ASSET_NAME])")
        if self._bias is None:
            self._bias = _BiasTorques(self._asset, float(self.cfg.carried_gravity))
        g, cqd, g_carried = (x[:, self._cols] for x in self._bias())
        p = self.law_params
        b = p["coulomb_friction"] + (p["load_friction_external"] * -(cqd + g + g_carried)
                                     - p["load_friction_motor"] * (tau_motor + g_carried)).abs()
        self.friction_budget = torch.clamp(b, min=LOAD_BUDGET_FLOOR)
        self._asset.write_joint_friction_coefficient_to_sim_index(
            joint_friction_coeff=self.friction_budget.to(torch.float32), joint_ids=self._joint_ids)

    def _law_torque(self, qd: torch.Tensor) -> torch.Tensor:
        """(num_envs, num_joints) the torque the law adds this step [N m]; the Stribeck budget is written instead;
        Coulomb: none (the joint's native friction is the law)."""
        p = self.law_params
        if self.law == "coulomb":
            return torch.zeros_like(qd)
        if self.law == "stribeck":
            if self._asset is None:
                raise RuntimeError("SysidFrictionActuator: the Stribeck law writes the joint friction every step and is "
                                   "not bound to its articulation: add make_events_cfg()'s friction_law term or call "
                                   "bind_friction_law(env.scene[ASSET_NAME])")
            fs, vs, shape = p["static_friction"], p["stribeck_velocity"], p["stribeck_shape"]
            fc = p["dynamic_ratio"] * fs
            x = (qd / vs).abs()
            budget = fc + (fs - fc) * torch.exp(-torch.where(shape == 2.0, x * x, x ** shape))
            self.friction_budget = budget
            b32 = budget.to(torch.float32)
            kw = {"joint_dynamic_friction_coeff": b32} if PHYSICS == "physx" else {}
            self._asset.write_joint_friction_coefficient_to_sim_index(joint_friction_coeff=b32, joint_ids=self._joint_ids,
                                                                      **kw)
            return torch.zeros_like(qd)
        if self.law == "sigmoid":
            a, s, o = p["sigmoid_amplitude"], p["sigmoid_slope"], p["sigmoid_offset"]
            return -(a / (1.0 + torch.exp(-s * (qd + o))) - a / (1.0 + torch.exp(-s * o)))
        fc, sigma0 = p["coulomb_friction"], p["presliding_stiffness"]
        tau = -self.bristle
        target = fc * torch.sign(qd)
        decay = torch.exp(-sigma0 * qd.abs() * float(self.cfg.physics_dt) / torch.where(fc > 0, fc, 1.0))
        self.bristle = torch.where(fc > 0, target + (self.bristle - target) * decay, 0.0)
        return tau


class _SlewLimit:
    """The real controller's torque slew limit, as the fit's replay applies it: each physics step the actuator's effort
    (after the delay, the PD and any effort target) moves at most ``torque_rate_limit`` x ``physics_dt`` [N m] from the
    last step's applied effort, then the effort limit clips it. ``reset`` zeroes the last effort, as the replay starts
    from 0; Isaac Lab's env reset then computes the actuators once from the reset state (as it does for the delay
    buffers), which is that env's first step. A mixin before the actuator in the bases (:class:`SysidFrictionActuator`);
    with no ``torque_rate_limit`` it changes nothing.

    Attributes:
        slew_per_step: (num_envs, num_joints) float64 the largest change per physics step [N m], or None.
    """

    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.slew_per_step = None
        if cfg.torque_rate_limit is not None:
            value = cfg.torque_rate_limit  # a joint without a limit is None (inf)
            if isinstance(value, dict):
                value = {k: math.inf if v is None else v for k, v in value.items()}
            rate = self._per_joint("torque_rate_limit", value)
            if not bool((rate > 0).all()):
                raise ValueError(f"SysidFrictionActuatorCfg.torque_rate_limit must be > 0 [N m/s], got {rate[0].tolist()}")
            self.slew_per_step = rate * float(cfg.physics_dt)
        self._last_effort = torch.zeros(self._num_envs, self.num_joints, dtype=torch.float64, device=self._device)

    def reset(self, env_ids):
        super().reset(env_ids)
        self._last_effort[slice(None) if env_ids is None else env_ids] = 0.0

    def _clip_effort(self, effort: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if self.slew_per_step is None:
            return super()._clip_effort(effort, *args, **kwargs)
        limit = self.actuator_effort_limit.to(torch.float64)
        last = self._last_effort
        self._last_effort = torch.clamp(last + torch.clamp(effort.to(torch.float64) - last, -self.slew_per_step,
                                                           self.slew_per_step), -limit, limit)
        return super()._clip_effort(self._last_effort.to(effort.dtype), *args, **kwargs)


class SysidFrictionActuator(_FrictionLaw, _SlewLimit, DelayedPDActuator):
    """``DelayedPDActuator`` that also applies the fitted friction law every physics step, per env (:class:`_FrictionLaw`),
    and the fit's torque slew limit (:class:`_SlewLimit`)."""


@_configclass_here
class SysidFrictionActuatorCfg(DelayedPDActuatorCfg):
    """The fit's actuator with its friction law (:class:`SysidFrictionActuator`): ``DelayedPDActuatorCfg``'s PD, delay
    and limits, the fit's torque slew limit, and the law's numbers per joint (a number for every joint, or joint-name
    regex -> value). The joint's native Coulomb ``friction`` stays 0 under the sigmoid and Dahl laws (the law is the
    whole dry friction)."""

    class_type: type = SysidFrictionActuator
    friction_law: str = "stribeck"
    """The law: ``coulomb`` (the joint's native friction; this actuator then carries a slew limit), ``stribeck``,
    ``sigmoid``, ``dahl`` or ``load`` (docs/friction.md of isaaclab_sysid)."""
    torque_rate_limit: dict[str, float] | float | None = None
    """The torque slew limit [N m/s] (the real controller's rate limit; a joint's None: none on it); None: no slew
    limit."""
    physics_dt: float = 0.001
    """The physics step [s] over which the Dahl bristle state advances each compute (the task's ``sim.dt``)."""
    static_friction: dict[str, float] | float | None = None
    """Stribeck: the break-away friction Fs [N m] (the fit's ``mu_static``)."""
    dynamic_ratio: dict[str, float] | float | None = None
    """Stribeck: the sliding level as a fraction of Fs, Fc = dynamic_ratio Fs [-], in [0, 1]."""
    stribeck_velocity: dict[str, float] | float | None = None
    """Stribeck: the velocity vs [rad/s] over which the budget falls from Fs to Fc."""
    stribeck_shape: dict[str, float] | float | None = None
    """Stribeck: the shape exponent delta [-] of exp(-|v / vs|^delta) (2: Gaussian)."""
    sigmoid_amplitude: dict[str, float] | float | None = None
    """Sigmoid (Gaz et al. 2019): the amplitude phi1 [N m]."""
    sigmoid_slope: dict[str, float] | float | None = None
    """Sigmoid: the slope phi2 [s/rad]."""
    sigmoid_offset: dict[str, float] | float | None = None
    """Sigmoid: the velocity offset phi3 [rad/s]."""
    coulomb_friction: dict[str, float] | float | None = None
    """Dahl: the sliding friction Fc [N m] the bristle force saturates at; load: the budget's constant part Fc [N m]
    (the fit's ``friction`` for both)."""
    presliding_stiffness: dict[str, float] | float | None = None
    """Dahl: the bristle stiffness sigma0 [N m/rad] (dF/dx at F = 0)."""
    load_friction_motor: dict[str, float] | float | None = None
    """Load: k_motor [-], the budget's growth per N m of the motor's torque tau_motor (motor-driven gearbox)."""
    load_friction_external: dict[str, float] | float | None = None
    """Load: k_ext [-], the budget's growth per N m of the gravity and Coriolis torque tau_ext (back-driven gearbox)."""
    carried_gravity: float = 0.0
    """Load: the gravity [m/s^2, along -z] the gearbox carries that the task does not simulate (a gravity-compensated
    arm simulated without gravity: 9.81); 0: the task's own gravity is all it carries."""


def bind_friction_law(articulation, group_name: str = "sysid_arm") -> None:
    """Bind ``articulation``'s friction-law actuator group ``group_name`` to it (the Stribeck law writes the
    joint friction through it); what :func:`make_events_cfg`'s ``friction_law`` term does at startup."""
    act = articulation.actuators[group_name]
    if not isinstance(act, _FrictionLaw):
        raise ValueError(f"actuator group {group_name!r} applies no friction law (a SysidFrictionActuator or "
                         f"SysidServoMotorWithLaw; got {type(act).__name__}; on Newton set sim.use_newton_actuators = False)")
    act.bind(articulation)


@_configclass_here
class SysidServoMotorCfg(DelayedPDActuatorCfg, DCMotorCfg):
    """The servo motor model's actuator: ``DCMotorCfg`` with ``min_delay``/``max_delay`` (physics steps)."""

    class_type: type = SysidServoMotor
    kp_register: float | dict = 0.0
    """The position gain register the stiffness was computed for (the randomization recomputes it from kt, R)."""
    supply_v: float | dict | None = None
    """The supply [V] the numbers were computed for (None: the family's nominal)."""


class SysidServoMotorWithLaw(_FrictionLaw, SysidServoMotor):
    """:class:`SysidServoMotor` that also applies the fitted friction law every physics step (:class:`_FrictionLaw`;
    the law's torque added after the DC motor's clip: it is the joint's friction, not the motor's). No slew limit:
    the motor model's replay applies none."""

    def __init__(self, cfg, *args, **kwargs):
        if getattr(cfg, "torque_rate_limit", None) is not None:
            raise ValueError("SysidServoMotorWithLawCfg.torque_rate_limit must be None: a servo motor model has no "
                             "slew limit (its DC motor saturates itself)")
        super().__init__(cfg, *args, **kwargs)


@_configclass_here
class SysidServoMotorWithLawCfg(SysidServoMotorCfg, SysidFrictionActuatorCfg):
    """The servo motor model's actuator with its friction law: :class:`SysidServoMotorCfg`'s fields and
    :class:`SysidFrictionActuatorCfg`'s law fields."""

    class_type: type = SysidServoMotorWithLaw


def make_servo_motor_cfg(kp_register: float | dict, supply_v: float | dict | None = None,
                         randomize_delay: bool = True) -> SysidServoMotorCfg:
    """The servo motor model's actuator over ``JOINT_NAMES`` at register gain ``kp_register`` and supply ``supply_v``
    (:func:`servo_motor_values`), with the fitted armature, friction and viscous friction and the delay's range (or the
    fitted delay twice); with a friction law beyond Coulomb (``FRICTION_LAW``) :class:`SysidServoMotorWithLawCfg`.
    Explicit: on Newton set ``use_newton_actuators=False`` (Newton's native actuators refuse it)."""
    _check_friction_units()
    lo, hi = DELAY_RANGE_STEPS if randomize_delay else (FITTED["delay_steps"], FITTED["delay_steps"])
    values = {k: dict(v) for k, v in ACTUATOR_VALUES.items()}
    if PHYSICS == "newton":
        values.pop("dynamic_friction", None)
    motor = servo_motor_values(kp_register, supply_v)
    limit = motor.pop("actuator_effort_limit")
    finite = {j: v for j, v in limit.items() if math.isfinite(v)}
    kwargs = dict(joint_names_expr=list(JOINT_NAMES), min_delay=lo, max_delay=hi, kp_register=kp_register,
                  supply_v=supply_v, actuator_effort_limit=finite or None, **motor, **values)
    if FRICTION_LAW["name"] == "coulomb":
        return SysidServoMotorCfg(**kwargs)
    return SysidServoMotorWithLawCfg(friction_law=FRICTION_LAW["name"], physics_dt=PHYSICS_DT,
                                     **{k: dict(v) for k, v in FRICTION_LAW["params"].items()}, **kwargs)


def apply_to(articulation_cfg, group_name: str = "sysid_arm", **kwargs):
    """``articulation_cfg`` with its actuators replaced by :func:`make_actuator_cfg` (kwargs go to it; a servo motor
    model's export: :func:`make_servo_motor_cfg`)."""
    make = make_servo_motor_cfg if SERVO_MOTOR else make_actuator_cfg
    return articulation_cfg.replace(actuators={group_name: make(**kwargs)})


def _env_ids(env, env_ids, device):
    if env_ids is None or isinstance(env_ids, slice):
        every = torch.arange(env.scene.num_envs, dtype=torch.int32, device=device)
        return every[env_ids if isinstance(env_ids, slice) else slice(None)]
    return torch.as_tensor(env_ids, device=device).to(torch.int32)


def _uniform(r, n, m, device):
    return torch.rand(n, m, device=device) * (float(r[1]) - float(r[0])) + float(r[0])


class randomize_joint_dynamics(ManagerTermBase):
    """Per env: the selected joints' armature [kg m^2], Coulomb friction [N m] and viscous friction [N m s/rad],
    each drawn uniformly from its own range (absolute values; a range left None keeps the current value).

    The dynamic friction (PhysX) is ``dynamic_ratio x`` the drawn static friction (the ratio drawn from
    ``dynamic_ratio_range`` when given); Newton has no dynamic friction.
    """

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.asset = env.scene[cfg.params["asset_cfg"].name]

    def __call__(self, env, env_ids, asset_cfg, armature_range=None, friction_range=None, viscous_range=None,
                 dynamic_ratio_range=None, dynamic_ratio=1.0):
        asset = self.asset
        dev = asset.device
        ids = _env_ids(env, env_ids, dev)
        jids = asset_cfg.joint_ids
        if isinstance(jids, slice):
            jids = torch.arange(asset.num_joints, dtype=torch.int32, device=dev)
        else:
            jids = torch.as_tensor(jids, dtype=torch.int32, device=dev)
        n, m = len(ids), len(jids)
        if armature_range is not None:
            asset.write_joint_armature_to_sim_index(armature=_uniform(armature_range, n, m, dev), joint_ids=jids, env_ids=ids)
        if friction_range is None and viscous_range is None and dynamic_ratio_range is None:
            return
        rows, cols = ids.long()[:, None], jids.long()[None, :]
        static = (_uniform(friction_range, n, m, dev) if friction_range is not None
                  else asset.data.joint_friction_coeff.torch[rows, cols].clone())
        visc = None if viscous_range is None else _uniform(viscous_range, n, m, dev)
        dyn = None
        if PHYSICS == "physx":
            ratio = _uniform(dynamic_ratio_range, n, m, dev) if dynamic_ratio_range is not None else float(dynamic_ratio)
            dyn = static * ratio
        asset.write_joint_friction_coefficient_to_sim_index(
            joint_friction_coeff=static, joint_dynamic_friction_coeff=dyn, joint_viscous_friction_coeff=visc,
            joint_ids=jids, env_ids=ids)


class randomize_servo_motor(ManagerTermBase):
    """Per env: the joint's torque constant kt [N m/A] and resistance R [Ohm], each drawn uniformly from its range, and
    the ``SysidServoMotor`` numbers recomputed from them at the actuator's ``kp_register`` and ``supply_v``
    (stiffness, damping, saturation effort, velocity limit, effort limit and DCMotor's corner velocity)."""

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.asset = env.scene[cfg.params["asset_cfg"].name]
        self.actuator = self.asset.actuators[cfg.params["group_name"]]
        if not isinstance(self.actuator, SysidServoMotor):
            raise ValueError(f"actuator group {cfg.params['group_name']!r} is not make_servo_motor_cfg's SysidServoMotor")

    def __call__(self, env, env_ids, asset_cfg, group_name, joint, kt_range, r_range):
        act = self.actuator
        dev = act.stiffness.device
        ids = _env_ids(env, env_ids, dev).long()
        col = list(act.joint_names).index(joint)
        kt = _uniform(kt_range, len(ids), 1, dev)[:, 0]
        r = _uniform(r_range, len(ids), 1, dev)[:, 0]
        kp = act.cfg.kp_register[joint] if isinstance(act.cfg.kp_register, dict) else act.cfg.kp_register
        sv = act.cfg.supply_v[joint] if isinstance(act.cfg.supply_v, dict) else act.cfg.supply_v
        v = float(SERVO_MOTOR["vin_nominal_v"][joint] if sv is None else sv)
        pwm, imax = float(SERVO_MOTOR["max_pwm"][joint]), SERVO_MOTOR["max_current_a"][joint]
        sat = kt * v * pwm / r
        vlim = v * pwm / kt
        eff = torch.full_like(kt, math.inf) if not imax else kt * float(imax)
        act.stiffness[ids, col] = kt * v * float(SERVO_MOTOR["error_gain"][joint]) * float(kp) / r
        act.damping[ids, col] = kt * kt / r
        act._saturation_effort[ids, col] = sat
        act.actuator_velocity_limit[ids, col] = vlim
        act.actuator_effort_limit[ids, col] = eff
        act._vel_at_effort_lim[ids, col] = vlim * (1.0 + eff / sat)


class randomize_friction_law(ManagerTermBase):
    """Binds the arm's :class:`SysidFrictionActuator` to its articulation (at construction) and, per env, draws each
    friction-law number of ``ranges`` (field -> joint -> (lower, upper), the field's unit) uniformly into the
    actuator's ``law_params``; a number without a range keeps its fitted value."""

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.asset = env.scene[cfg.params["asset_cfg"].name]
        bind_friction_law(self.asset, cfg.params["group_name"])
        self.actuator = self.asset.actuators[cfg.params["group_name"]]

    def __call__(self, env, env_ids, asset_cfg, group_name, ranges):
        act = self.actuator
        ids = _env_ids(env, env_ids, act._device).long()
        names = list(act.joint_names)
        for field, per_joint in ranges.items():
            col = act.law_params[field]
            for joint, r in per_joint.items():
                draw = torch.rand(len(ids), device=act._device, dtype=torch.float64) * (float(r[1]) - float(r[0]))
                col[ids, names.index(joint)] = draw + float(r[0])

class randomize_actuator_delay(ManagerTermBase):
    """Per env, the actuator delay [physics steps] drawn uniformly from the integers of ``delay_range``.

    Newton's native actuators keep one authored delay (``max_delay``) for every env: this term writes
    the drawn one. On the Lab actuator path ``DelayedPDActuator`` draws it itself at every reset and
    the term does nothing.
    """

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.asset = env.scene[cfg.params["asset_cfg"].name]
        group = cfg.params["group_name"]
        act = self.asset.cfg.actuators.get(group)
        lo, hi = cfg.params["delay_range"]
        if act is None or getattr(act, "max_delay", 0) < hi:
            raise ValueError(f"actuator group {group!r} must be make_actuator_cfg(randomize_delay=True) (max_delay >= {hi}) "
                             "for the actuator_delay term; with a fixed delay use make_events_cfg(randomize_delay=False)")
        self.native = None  # known once the articulation's actuators exist (after the simulation starts)

    def _is_native(self, group_name):
        from isaaclab.actuators.newton import read_group_parameter

        try:
            read_group_parameter(self.asset.actuators, group_name, "delay", "delay_steps")
        except ValueError:  # Isaac Lab: "not executed by Newton actuators" (the Lab path draws the delay itself)
            return False
        return True

    def __call__(self, env, env_ids, asset_cfg, group_name, delay_range):
        from isaaclab.actuators.newton import write_group_parameter

        if self.native is None:
            self.native = self._is_native(group_name)
        if not self.native:
            return
        asset = self.asset
        ids = _env_ids(env, env_ids, asset.device)
        lo, hi = int(delay_range[0]), int(delay_range[1])
        d = torch.randint(lo, hi + 1, (len(ids), 1), device=asset.device, dtype=torch.int32)
        write_group_parameter(asset.actuators, group_name, "delay", "delay_steps", d.expand(-1, len(JOINT_NAMES)),
                              env_ids=ids.long())


def _term_func(name: str):
    """The event function ``name`` of ``EVENT_TERMS``: ``mdp.<f>`` (Isaac Lab's stock terms) or one of this module's."""
    if name.startswith("mdp."):
        import isaaclab.envs.mdp as mdp

        return getattr(mdp, name[len("mdp."):])
    return {"randomize_joint_dynamics": randomize_joint_dynamics, "randomize_actuator_delay": randomize_actuator_delay,
            "randomize_servo_motor": randomize_servo_motor, "randomize_friction_law": randomize_friction_law}[name]


def _event_term(spec: dict) -> EventTermCfg:
    """One ``EVENT_TERMS`` entry as an ``EventTermCfg`` (mode ``startup``) on ``ASSET_NAME``."""
    selector = {key: list(spec[key]) for key in ("joint_names", "body_names") if key in spec}
    return EventTermCfg(func=_term_func(spec["func"]), mode="startup",
                        params={"asset_cfg": SceneEntityCfg(ASSET_NAME, **selector), **spec["params"]})


#: Domain-randomization event terms from the identification (mode "startup"): one field per ``EVENT_TERMS`` entry.
SysidEventsCfg = configclass(type("SysidEventsCfg", (), {
    "__doc__": 'Domain-randomization event terms from the identification (mode "startup").',
    "__module__": __name__,
    **{name: _event_term(spec) for name, spec in EVENT_TERMS.items()},
}))


def make_events_cfg(mode: str = "startup", randomize_delay: bool = True,
                    randomize_friction_law: bool = True) -> SysidEventsCfg:
    """:class:`SysidEventsCfg` with every term in ``mode`` (``startup``: drawn once per env; ``reset``:
    redrawn at every reset); ``randomize_delay=False`` drops the delay term (for a fixed-delay actuator);
    ``randomize_friction_law=False`` keeps the ``friction_law`` term's binding of the actuator to the
    articulation but draws nothing (every env at the fitted law)."""
    ev = SysidEventsCfg()
    for name, term in list(vars(ev).items()):
        if not isinstance(term, EventTermCfg):
            continue
        if name == "actuator_delay" and not randomize_delay:
            setattr(ev, name, None)
            continue
        if name == "friction_law" and not randomize_friction_law:
            term.params["ranges"] = {}
        term.mode = mode
    return ev
