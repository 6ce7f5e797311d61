"""The problem a fit solves, as one typed record: :class:`ProblemRecord`, what ``config.json`` stores under
``problem`` and :meth:`~isaaclab_sysid.fit.run_folder.RunFolder.read_problem` reads back.

The record holds the resolved facts a :class:`~isaaclab_sysid.fit.problem.FitProblem` is built from, in five
sections: the runs (:class:`RunsConfig`), the fitted groups with their bounds (:class:`ParamsConfig`), the loss
weights (:class:`LossConfig`), the replay: robot, backend, the real controller's facts, the torque replay
(:class:`ReplayConfig`), and where the population is evaluated (:class:`ClusterConfig`). Each field has its docstring
and unit; the same sections are the fit's flags (``jobs/fit_args.py``: ``FitArgs`` adds the search and the outputs,
which are not the problem), so what a user sets is what is stored. The fit writes into the record what it resolved
from the runs (the EE point, the limits, the state age, the torque replay's window, a servo's boxes), so a rebuild from
``config.json`` (the export, ``--resume``) builds the same problem.

:meth:`ProblemRecord.from_dict` also reads what older fit folders stored: every flag under ``args``, nested by
section or flat.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Literal

import tyro

from isaaclab_sysid.objective.param_space import GROUPS
from isaaclab_sysid.sim.friction import expand_law_aliases

#: repeatable list flags (--runs a.csv --runs b.csv)
Repeat = tyro.conf.UseAppendAction
#: the Coulomb groups ``--fit_groups auto`` (the default) starts from
FIT_GROUPS_DEFAULT = "armature,friction,viscous,delay"


def _tokens(spec: str) -> list[str]:
    """The comma-separated names of a ``--fit_groups`` value, stripped, empty ones dropped."""
    return [g.strip() for g in spec.split(",") if g.strip()]


def _bounds(group: str) -> tuple[float, float]:
    return GROUPS[group].default_bounds


@dataclass
class RunsConfig:
    """The recorded runs."""

    real_csv: Annotated[list[str], Repeat, tyro.conf.arg(aliases=("--runs",))] = field(default_factory=list)
    """Recorded run CSV to fit on (--runs, the shared vocabulary; --real_csv its older spelling): --runs a.csv b.csv,
    or repeat the flag (--runs a.csv --runs b.csv)."""
    real_sidecar: Annotated[list[str], Repeat] = field(default_factory=list)
    """Sidecar JSON of each --runs, paired in order; omitted ones default to the CSV path with .json."""
    heldout_csv: Annotated[list[str], Repeat, tyro.conf.arg(aliases=("--heldout",))] = field(default_factory=list)
    """Held-out run CSV (never seen by the optimizer), scored after the fit (--heldout; --heldout_csv its older
    spelling); several values or repeats, as --runs."""
    heldout_sidecar: Annotated[list[str], Repeat] = field(default_factory=list)
    """Sidecar JSON of each --heldout, paired in order (default: CSV path with .json)."""
    log_format: Literal["run", "ur10e"] = "run"
    """Format of --runs/--heldout: run (the project's run format or the Franka tooling's, with sidecars) or
    ur10e (the raw 31-column UR10e CSV of shared/data/ur10e: --replay torque only)."""
    traj_weights: str | None = None
    """Comma-separated weight per --runs run in the loss, e.g. 1.0,1.5 (dimensionless; default 1 each)."""
    state_age_ms: int | None = None
    """Age of the state in rows logged below 1 kHz [ms]: 0..N, uniform (the newest frame of a state stream; 10 for
    the Franka tooling's 100 Hz stream, 0 for fresh states). Required when a run is logged below 1 kHz and its sidecar
    does not state it ("state_age": {"model": "uniform", "max_ms": N}); overrides the sidecars' when given (docs/fit.md)."""


@dataclass
class ParamsConfig:
    """The fitted parameter groups and their search bounds."""

    fit_groups: str = "auto"
    """Comma-separated parameter groups to fit: armature, friction, viscous, delay; for joints that stick, replace
    friction by the static-friction group mu_static,dynamic_ratio (static friction Fs, Coulomb = ratio x Fs; mujoco),
    optionally with stribeck_velocity (else --stribeck_velocity) and stribeck_shape (else 2). Other friction laws
    (mujoco; docs/friction.md), by name or by their groups: stribeck (mu_static,dynamic_ratio,stribeck_velocity,
    stribeck_shape), sigmoid (Gaz: sigmoid_amplitude,sigmoid_slope,sigmoid_offset; instead of friction), load (BAM's
    load-dependent law: friction,load_friction_motor,load_friction_external), dahl (pre-sliding:
    friction,presliding_stiffness). Servos: kp, kd, encoder_offset; a servo run's motor model (controller servo,
    docs/servo_arms.md): motor_kt,motor_r with the load law for the gearbox; torque runs: torque_offset. auto (the default): fit armature,friction,viscous,
    delay, then refit with the static-friction group from that optimum where the score test asks for static friction
    or a Gauss-Newton step forecasts half of --auto_static_margin, and keep the static fit if the test fired or the
    refit lowered the loss by the margin (the log says what it chose, the loss ratio, the forecast and each joint's z;
    fit_groups_auto.json). auto,GROUP,...: the same choice with GROUPs fitted beside it (e.g. auto,torque_offset on torque
    runs; not a friction group: auto chooses those)."""
    auto_laws: str = "stribeck,sigmoid,load,dahl"
    """--fit_groups auto, second step: the friction laws weighed against the Coulomb / static answer (comma-separated:
    stribeck (the Stribeck law with its velocity and shape exponent fitted per joint, started at the static answer),
    sigmoid, load, dahl; none to skip). Each is refitted from the Coulomb optimum only where a Gauss-Newton forecast
    says it could lower the BIC on the fit runs' residual, and the lowest BIC is the answer (docs/friction.md;
    friction_law_auto.json)."""
    auto_static_margin: float = 0.1
    """--fit_groups auto: the share by which the static-friction refit must lower the fit loss to be chosen when the
    score test does not fire (0.1 = 10 %)."""
    armature_bounds: tuple[float, float] | None = None
    """Bounds of the per-joint armature (reflected rotor inertia) [kg m^2]; default: [0, the robot config's physical
    bound per joint] (armature_max: rotor inertia x gear ratio^2, or its stated rule), else [0, 0.5]."""
    friction_bounds: tuple[float, float] = _bounds("friction")
    """Bounds of the per-joint Coulomb friction torque [N m]."""
    viscous_bounds: tuple[float, float] = _bounds("viscous")
    """Bounds of the per-joint viscous friction [N m s/rad]."""
    delay_bounds: tuple[int, int] = tuple(int(v) for v in _bounds("delay"))  # type: ignore[assignment]
    """Bounds of the actuator delay [ticks of 1 ms], integers."""
    mu_static_bounds: tuple[float, float] = _bounds("mu_static")
    """Bounds of the per-joint static friction (PhysX-style) [N m]."""
    dynamic_ratio_bounds: tuple[float, float] = _bounds("dynamic_ratio")
    """Bounds of the per-joint dynamic/static friction ratio [-]."""
    stribeck_velocity_bounds: tuple[float, float] = _bounds("stribeck_velocity")
    """Bounds of the per-joint Stribeck velocity [rad/s] (when the stribeck_velocity group is fitted)."""
    torque_offset_bounds: tuple[float, float] = _bounds("torque_offset")
    """Bounds of the per-joint torque offset [N m] (--replay torque: the torque that acted is logged - offset)."""
    kp_bounds: tuple[float, float] = _bounds("kp")
    """Bounds of the per-joint PD stiffness [N m/rad] of a servo whose runs leave their gains unstated (LeRobot)."""
    kd_bounds: tuple[float, float] = _bounds("kd")
    """Bounds of the per-joint PD damping [N m s/rad] (it also holds the joint's viscous friction: same torque)."""
    encoder_offset_bounds: tuple[float, float] = _bounds("encoder_offset")
    """Bounds of the per-joint encoder offset [rad] (joint_pd runs: the logged position is true + offset)."""
    stribeck_shape_bounds: tuple[float, float] = _bounds("stribeck_shape")
    """Bounds of the per-joint Stribeck shape exponent delta [-] (the stribeck law: exp(-|v/vs|^delta); 2 when not
    fitted)."""
    sigmoid_amplitude_bounds: tuple[float, float] = _bounds("sigmoid_amplitude")
    """Bounds of the sigmoid (Gaz) law's amplitude phi1 [N m]."""
    sigmoid_slope_bounds: tuple[float, float] = _bounds("sigmoid_slope")
    """Bounds of the sigmoid (Gaz) law's slope phi2 [s/rad]."""
    sigmoid_offset_bounds: tuple[float, float] = _bounds("sigmoid_offset")
    """Bounds of the sigmoid (Gaz) law's velocity offset phi3 [rad/s]."""
    load_friction_motor_bounds: tuple[float, float] = _bounds("load_friction_motor")
    """Bounds of the load-dependent law's friction per N m of motor torque [-] (BAM's directional law)."""
    load_friction_external_bounds: tuple[float, float] = _bounds("load_friction_external")
    """Bounds of the load-dependent law's friction per N m of external (gravity + Coriolis) torque [-]."""
    presliding_stiffness_bounds: tuple[float, float] = _bounds("presliding_stiffness")
    """Bounds of the Dahl law's bristle stiffness sigma0 [N m/rad] (pre-sliding creep before break-away)."""
    motor_kt_bounds: tuple[float, float] = _bounds("motor_kt")
    """Bounds of a servo motor's torque constant at the output shaft [N m/A] (servo runs; kt and R trade off where
    neither the back-EMF nor the current limit is reached: the intervals say so)."""
    motor_r_bounds: tuple[float, float] = _bounds("motor_r")
    """Bounds of a servo motor's winding resistance [Ohm] (servo runs)."""
    stribeck_velocity: float = 0.05
    """Stribeck velocity of the static-friction group [rad/s] when not fitted: friction Fc + (Fs - Fc) exp(-(v/vs)^2)."""

    @property
    def auto(self) -> bool:
        """``--fit_groups auto`` (or ``auto,GROUP,...``): the friction model chosen on evidence
        (jobs/model_choice.py, jobs/law_choice.py)."""
        tokens = _tokens(self.fit_groups)
        return bool(tokens) and tokens[0] == "auto"

    def auto_extras(self) -> list[str]:
        """The groups ``--fit_groups auto,GROUP,...`` fits beside auto's choice (e.g. ``torque_offset`` on torque
        runs, ``kp`` where the gains are unknown), in the order given; [] for plain ``auto`` or explicit groups."""
        return _tokens(self.fit_groups)[1:] if self.auto else []

    def groups(self) -> list[str]:
        """The group names of ``fit_groups``, in the order given (``auto``: the Coulomb set it starts from, then
        the extra groups of ``auto,GROUP,...``), a friction law's name (stribeck, sigmoid, load, dahl) expanded to
        its groups (sim/friction.py)."""
        tokens = _tokens(self.fit_groups)
        if tokens[:1] == ["auto"]:
            base = FIT_GROUPS_DEFAULT.split(",")
            return base + [g for g in dict.fromkeys(tokens[1:]) if g not in base]
        return expand_law_aliases(tokens)

    def bounds_of(self, group: str) -> tuple[float, float] | None:
        """The bounds flag of ``group`` (None for an unknown group)."""
        return getattr(self, f"{group}_bounds", None)


@dataclass
class LossConfig:
    """The loss: weights of the three MSE terms."""

    w_q: float = 1.0
    """Loss weight of the joint position MSE [1/rad^2]."""
    w_dq: float = 0.1
    """Loss weight of the joint velocity MSE [1/(rad/s)^2]."""
    w_x: float = 0.01
    """Loss weight of the end-effector position MSE [1/m^2]."""
    channel_scale: Literal["none", "rms"] = "none"
    """Per-joint scaling of the q and qd channels: none, or rms (each joint's error divided by its measured RMS motion
    over the fit runs, as mujoco.sysid does, capped at 10x between joints; under task impedance the joints that
    barely move then count as much as the big ones). Stored in sysid_best_params.json's loss_weights."""


@dataclass
class ReplayConfig:
    """The simulated replay: robot, backend and the real arm's limits."""

    backend: Literal["mujoco", "isaaclab"] = "mujoco"
    """Physics backend: mujoco (CPU, default) or isaaclab (needs the [isaaclab] extra)."""
    device: str = "cpu"
    """Device of the isaaclab backend: cpu or cuda:0 (the mujoco backend runs on the CPU only and refuses any other device)."""
    robot: str | None = None
    """Robot config name or path (default: the runs' sidecar 'robot', e.g. franka_panda)."""
    nominal: str | None = None
    """Rigid-body identification output whose link masses/inertias replace the URDF's (nominal_inertials.json or
    rb_params.json of identify_rigid_body.py, or its output folder)."""
    admit_rejected_nominal: bool = False
    """Use a --nominal file that its identification marked not to be used (its consistency test rejected the estimate)."""
    warmup_ticks: int = 50
    """Ticks [1 ms] the first setpoint is held before the logged time base starts."""
    torque_clamp: bool = False
    """Clamp the simulated commanded torque to the robot's torque limits [N m]."""
    slew_limit: bool = False
    """Limit the simulated torque rate to the robot's torque_rate_limit [N m/s]."""
    substeps: int = 1
    """Physics steps per 1 ms tick (mujoco: a finer integrator, the torque held over the tick; costs that many times
    the time). A real arm is continuous: 2 halves the integration error of a fast or stiff run (docs/fit.md)."""
    headless: bool = True
    """Accepted for Isaac Lab habit (its scripts take --headless); no backend here opens a window, so it changes nothing."""
    orientation_error: Literal["rotvec", "quat_vec", "quat_2vec"] | None = None
    """The real controller's orientation error: rotvec (rotation vector of R_des R^T), quat_vec (vec(q_des q^-1):
    libfranka's and franka_ros's cartesian_impedance_example) or quat_2vec (2 vec(q_des q^-1)). Required for runs that
    do not record it (the Franka tooling's schema 2); overrides a schema-1 sidecar's when given (docs/data_format.md)."""
    coriolis_compensation: tyro.conf.DisallowNone[bool | None] = None
    """Whether the real controller adds C(q, qd) qd (--coriolis_compensation / --no_coriolis_compensation). Required
    for runs that do not record it (schema 2); overrides a schema-1 sidecar's when given."""
    ee_offset: tuple[float, float, float] | None = None
    """The real controller's EE point [m] in the robot config's ee_link frame (the Franka's Desk EE: 0 0 0.1034 for the
    hand TCP); replaces the robot config's ee_offset. Required for runs that do not record it (schema 2)."""
    torque_limit: tuple[float, ...] | None = None
    """The real controller's torque clamp [N m], one value per joint (or one for all; inf = none); replaces the robot
    config's and turns --torque_clamp on. Required for runs that do not record it (schema 2; the tooling: 87 x4, 12 x3)."""
    torque_rate_limit: tuple[float, ...] | None = None
    """The real controller's torque slew limit [N m/s], per joint or one for all (inf = none); replaces the robot
    config's and turns --slew_limit on. Required for runs that do not record it (schema 2; the tooling ramps at 800)."""
    replay: Literal["controller", "torque"] = "controller"
    """What drives the replay: controller (the real closed loop: its law, gains and setpoints; default) or torque
    (the logged torque, --torque_signal, applied open loop in shooting windows of --window_s, each started from the
    measured state; for logs without a replayable controller, e.g. the UR10e's; mujoco backend; docs/replay.md)."""
    torque_signal: Literal["tau_J", "tau", "current"] | None = None
    """--replay torque: the logged torque that acted: tau_J (measured joint torque), tau (commanded torque; the UR10e
    log's desired torque) or current (motor current x --drive_gains; UR10e logs). Required with --replay torque."""
    torque_includes_gravity: tyro.conf.DisallowNone[bool | None] = None
    """--replay torque: whether --torque_signal contains the gravity torque (--torque_includes_gravity: libfranka's
    tau_J, UR motor current; the replay then simulates gravity) or not (--no_torque_includes_gravity). Required."""
    drive_gains: tuple[float, ...] | None = None
    """--torque_signal current: current-to-torque gain of each joint [N m/A] (the UR10e authors': 10.0 10.6956
    8.4566 9.0029 9.48 10.1232, UR10E_parameters.txt drvGains; or scripts/identify_rigid_body.py's)."""
    window_s: float | None = None
    """--replay torque: length of each shooting window [s] (each restarts from the measured q, qd; 0.1-1 s). Unset:
    chosen from the data, the longest of 0.05-1 s at which the start model's residual is within 2x the drift floor
    (objective/shooting_floor.py: choose_window; the log says what it chose and why, config.json keeps it)."""
    max_batch_mb: float = 4096.0
    """Memory limit of one batched rollout [MB]: population x samples x states (plus per-window buffers); a
    configuration above it is refused before any simulation, naming what to lower."""
    admit_aborted: bool = False
    """Read runs the Franka tooling recorded as aborted (sidecar abort.code != 0), truncated at the abort time
    (refused by default, naming the abort)."""


@dataclass
class ClusterConfig:
    """Where the population is evaluated: this process, or Ray workers on one or many machines (docs/cluster.md)."""

    cluster: Literal["local", "ray"] = "local"
    """local (this process, the default) or ray: split every batch of candidates over Ray workers (needs the [ray] extra); the result is the same bit for bit."""
    ray_address: str | None = None
    """Ray cluster to join: host:port of `ray start --head`, or auto; default: start a private Ray instance on this machine (loopback only)."""
    ray_workers: int | None = None
    """Number of Ray workers, each holding one backend built once; default: the cluster's CPUs / --ray_worker_cpus."""
    ray_worker_cpus: int = 1
    """CPU cores each Ray worker takes (the MuJoCo backend's threads in that worker)."""
    ray_timeout_s: float = 600.0
    """Limit [s] for a worker to start or to answer one slice of a batch; past it the worker is killed and its slice re-run on another."""


#: the record's sections, as ``config.json`` nests them
SECTIONS = {"runs": RunsConfig, "params": ParamsConfig, "loss": LossConfig, "replay": ReplayConfig,
            "cluster": ClusterConfig}


#: every section name a stored layout may nest (the record's and the fit job's: search, output)
ALL_SECTIONS = ("runs", "search", "params", "loss", "replay", "output", "cluster")


def section_values(d: dict) -> dict:
    """The flat name -> value of a stored layout: sections nested (``{"replay": {...}}``) or flat (older folders)."""
    flat: dict = {}
    for k, v in d.items():
        if k in ALL_SECTIONS and isinstance(v, dict):
            flat.update(v)
        else:
            flat[k] = v
    return flat


def sections_from(flat: dict, sections: dict) -> tuple[dict, set]:
    """Each section of ``sections`` (name -> class) built from the flat values it names (bounds as tuples), and the
    names used."""
    out, used = {}, set()
    for name, typ in sections.items():
        names = {f.name for f in fields(typ)}
        kw = {k: v for k, v in flat.items() if k in names}
        used |= set(kw)
        for k, v in kw.items():
            if k.endswith("_bounds") and v is not None:
                kw[k] = tuple(v)
        out[name] = typ(**kw)
    return out, used


@dataclass
class ProblemRecord:
    """The problem a fit solves: its runs, fitted groups and bounds, loss weights, replay and backend (see the module
    docstring); ``config.json``'s ``problem``."""

    runs: RunsConfig = field(default_factory=RunsConfig)
    params: ParamsConfig = field(default_factory=ParamsConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    @classmethod
    def from_dict(cls, d: dict) -> "ProblemRecord":
        """Read :meth:`to_dict`'s layout, or an older folder's flags (nested by section or flat; the search's and the
        outputs' flags among them are not the problem and are skipped)."""
        return cls(**sections_from(section_values(d), SECTIONS)[0])

    def to_dict(self) -> dict:
        """Nested by section, JSON-able (tuples as lists)."""
        return {name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(getattr(self, name)).items()}
                for name in SECTIONS}
