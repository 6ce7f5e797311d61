"""Apply an exported Isaac Lab module in a real Isaac Lab environment and read the numbers back.

The job behind ``scripts/check_export.py``: a kit-less manager-based environment on
Newton (CPU or GPU) with E clones of the fit's arm (the project's own USD,
``sim/isaaclab_backend/asset.py``), the exported actuator (``apply_to``), a joint
effort action and the exported event terms switched to ``reset`` mode, so every
reset redraws them. Then:

1. **nominal**: right after construction (no event has run) each env's armature,
   friction and viscous damping, read from the simulation (Newton's model and the
   MJWarp solver's arrays, ``sim/isaaclab_backend/readback.py``), must equal the
   fitted values (float32);
2. **randomized**: over ``resets`` resets, every randomized number of every env
   must lie inside the exported range (``RANGES``) and inside what the terms draw
   from (``SAMPLED_RANGES``), and the draws must spread over that range (each end
   within the distance a uniform sample of that size misses with probability
   1e-6); numbers without a term must stay at their fitted value;
3. **delay**: every env's actuator delay (read from Newton's native actuator) lies
   in the exported range, and the latency measured in the running env, the
   physics steps from commanding an effort to the actuator applying it, equals
   it; in seconds it is the fit's delay in 1 ms ticks at the env's ``sim.dt``,
   whatever the decimation.

A position servo's export (``ACTUATOR_VALUES["stiffness"]``: kp, kd fitted) adds the actuator's
gains, read from Newton's native actuator (``controller`` ``kp``, ``kd``): right after construction
they must be the fitted ones, after the resets inside their ranges and spread over them (the
``randomize_actuator_gains`` terms); its effort limit (``clamping`` ``max_effort``) must stay the
exported one. The latency probe then stays below the effort limit (half of the smallest).

An export with a friction law beyond Coulomb (``FRICTION_LAW``) runs its ``SysidFrictionActuator`` on
Isaac Lab's actuator path (``use_newton_actuators=False``): each law number is read from the
actuator's per-env values (right after construction the fitted one, after the resets inside its
exported range cut to the number's domain and spread over it: the ``friction_law`` term), the
delay from its delay buffer, and under the sigmoid and Dahl laws the joint's native friction must
read 0 (the law is the whole dry friction); the Stribeck law's joint friction is its budget of the
last step, so it has no friction row. That the law then moves the arm as the fit's replay does is
``export/parity.py``'s proof (tests/test_isaaclab_law_parity.py).

Isaac Lab allows one simulation per process: the job builds one environment and
closes it.

An export written before one of the fields the check reads existed (:data:`CURRENT_FIELDS`:
``PHYSICS_DT``, ``SAMPLED_RANGES`` ...) is refused in one line naming the file, the missing fields
and the command that regenerates it (:func:`require_current_export`); nothing is assumed for a
missing field.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from isaaclab_sysid.export.build import ExportError
from isaaclab_sysid.robots.robot import Robot
from isaaclab_sysid.timebase import TICK_S

#: probability that a uniform sample of this size misses a range end by more than the spread tolerance
MISS_PROBABILITY = 1e-6
#: relative float32 tolerance of a value written and read back
F32_RTOL = 2e-6
#: effort used to measure the actuator latency [N m] (below every Panda joint's effort limit)
PROBE_EFFORT = 5.0
GROUPS = ("armature", "friction", "viscous")
#: what makes a module an isaaclab_sysid export at all
EXPORT_FIELDS = ("JOINT_NAMES", "ASSET_NAME", "FITTED", "RANGES", "apply_to", "SysidEventsCfg")
#: the fields of a current export the check reads; an export written before one existed is refused, not guessed at
#: (a 1 ms PHYSICS_DT, Newton, the exported ranges as what the terms draw, no delay, no servo gains)
CURRENT_FIELDS = ("PHYSICS", "PHYSICS_DT", "check_physics_dt", "SAMPLED_RANGES", "DELAY_RANGE_STEPS", "ACTUATOR_VALUES",
                  "make_events_cfg")


class CheckError(ExportError):
    """A user-facing failure (printed as one line)."""


def load_export_module(path: str | Path) -> ModuleType:
    """Import a generated ``sysid_dr_isaaclab.py`` by path (needs Isaac Lab)."""
    p = Path(path)
    if not p.is_file():
        raise CheckError(f"{p}: no exported module (run scripts/export_dr.py first)")
    name = f"_sysid_export_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # configclass resolves annotations through sys.modules
    spec.loader.exec_module(mod)
    for attr in EXPORT_FIELDS:
        if not hasattr(mod, attr):
            raise CheckError(f"{p}: not an isaaclab_sysid export (no {attr})")
    require_current_export(mod, p)
    return mod


def require_current_export(mod: ModuleType, path: str | Path | None = None) -> None:
    """Refuse an export written before a field the check reads existed (:data:`CURRENT_FIELDS`).

    Args:
        mod: the exported module; path: its file (default ``mod.__file__``), named in the message together with
            the command that regenerates it (the fit folder is the file's grandparent when it sits in
            ``<fit_dir>/export/``).

    Raises:
        CheckError: one line: the file, the missing fields and ``python scripts/export_dr.py --fit_dir ...``.
    """
    missing = [f for f in CURRENT_FIELDS if not hasattr(mod, f)]
    if not missing:
        return
    p = Path(path if path is not None else getattr(mod, "__file__", None) or "<the exported module>")
    fit_dir = str(p.parent.parent) if p.parent.name == "export" else "<the fit folder>"
    raise CheckError(f"{p}: an older export without {', '.join(missing)} (written before "
                     f"{'these fields' if len(missing) > 1 else 'that field'} existed); the check assumes nothing for "
                     f"{'them' if len(missing) > 1 else 'it'}: regenerate it with python scripts/export_dr.py --fit_dir "
                     f"{fit_dir}")


@dataclass
class CheckRow:
    """One number of the export: fitted value, ranges, and what the simulation held.

    Attributes:
        label: ``armature[<joint>]``, ``friction[<joint>]``, ``viscous[<joint>]`` or ``delay``.
        fitted: the fitted value (delay: physics steps).
        exported: the exported randomization range (``RANGES``; delay: in steps), or None (not randomized).
        sampled: what the terms draw from (``SAMPLED_RANGES``), or None.
        nominal: (min, max) over envs right after construction.
        read: (min, max) over envs and resets after randomization.
        n: number of values read after randomization.
        failures: what failed for this number (empty = passed).
    """

    label: str
    fitted: float
    exported: tuple[float, float] | None
    sampled: tuple[float, float] | None
    nominal: tuple[float, float]
    read: tuple[float, float]
    n: int
    failures: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    """The outcome of :func:`check_module`."""

    rows: list[CheckRow]
    num_envs: int
    resets: int
    sim_dt: float
    decimation: int
    physics: str
    delay_ticks: tuple[float, float] | None  # the exported delay range in 1 ms ticks
    latency_ok: bool
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures and all(not r.failures for r in self.rows)

    def table(self) -> str:
        """The read-back table (markdown)."""
        def f(v: float) -> str:
            return f"{v:.6g}"

        def rng(r):
            return "-" if r is None else f"[{f(r[0])}, {f(r[1])}]"

        lines = [f"{self.num_envs} envs x {self.resets} resets, sim.dt {self.sim_dt * 1e3:g} ms, decimation "
                 f"{self.decimation}, {self.physics}; values read from the MJWarp solver (= Newton's model)", "",
                 "| number | fitted | exported range | drawn from | nominal read back | min / max read back | spread | ok |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            w = None if r.exported is None else r.exported[1] - r.exported[0]
            spread = "-" if not w else f"{(r.read[1] - r.read[0]) / w:.2f}"
            nom = "-" if math.isnan(r.nominal[0]) else f(r.nominal[0]) if r.nominal[0] == r.nominal[1] else rng(r.nominal)
            lines.append(f"| {r.label} | {f(r.fitted)} | {rng(r.exported)} | {rng(r.sampled)} | {nom} | "
                         f"{f(r.read[0])} / {f(r.read[1])} | {spread} | {'yes' if not r.failures else '; '.join(r.failures)} |")
        return "\n".join(lines)


def robot_of_fit(fit_dir: str | Path) -> Robot:
    """The arm a fit folder was fitted on (``config.json``'s robot or its first run's, with ``--nominal`` inertials)."""
    from isaaclab_sysid.export.build import FitContext, fit_robot

    try:
        return fit_robot(FitContext.load(fit_dir))
    except CheckError:
        raise
    except ExportError as exc:
        raise CheckError(str(exc)) from None


def spread_tolerance(n: int) -> float:
    """Fraction of a range's width by which the min (or max) of n uniform draws misses its end
    with probability :data:`MISS_PROBABILITY`: ``1 - p^(1/n)``."""
    return 1.0 - MISS_PROBABILITY ** (1.0 / max(n, 1))


def arm_articulation_cfg(mod: ModuleType, robot: Robot):
    """The exported module's arm as an Isaac Lab ``ArticulationCfg``: the project's USD of ``robot``, every joint at
    the middle of its range and at rest, no actuators (the module's ``apply_to`` adds its own)."""
    import isaaclab.sim as sim_utils
    from isaaclab.assets import ArticulationCfg

    from isaaclab_sysid.sim.isaaclab_backend.asset import robot_usd

    names = list(mod.JOINT_NAMES)
    q0 = 0.5 * (robot.q_lower + robot.q_upper)
    return ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(usd_path=str(robot_usd(robot))),
        init_state=ArticulationCfg.InitialStateCfg(joint_pos={n: float(v) for n, v in zip(names, q0)},
                                                   joint_vel={".*": 0.0}),
        actuators={},
    )


def _env_cfg(mod: ModuleType, robot: Robot, num_envs: int, decimation: int, sim_dt: float, seed: int,
             device: str, events_mode: str):
    from isaaclab.envs import ManagerBasedEnvCfg
    from isaaclab.envs.mdp import JointEffortActionCfg, joint_pos
    from isaaclab.managers import ObservationGroupCfg, ObservationTermCfg
    from isaaclab.scene import InteractiveSceneCfg
    from isaaclab.sim import SimulationCfg
    from isaaclab.utils import configclass

    from isaaclab_sysid.sim.isaaclab_backend.scene import physics_cfg

    names = list(mod.JOINT_NAMES)
    base = arm_articulation_cfg(mod, robot)

    @configclass
    class ActionsCfg:
        effort = JointEffortActionCfg(asset_name=mod.ASSET_NAME, joint_names=names, preserve_order=True)

    scene = InteractiveSceneCfg(num_envs=num_envs, env_spacing=2.0)
    setattr(scene, mod.ASSET_NAME, mod.apply_to(base))
    obs = ObservationGroupCfg()
    obs.q = ObservationTermCfg(func=joint_pos)
    events = mod.make_events_cfg(mode=events_mode)
    if is_servo_module(mod):
        # a servo's PD acts on the arm's state: every reset puts the arm back at rest at its position target, so the
        # latency probe sees the probe alone (the Frankas' effort path needs no state and keeps no such term)
        from isaaclab.managers import EventTermCfg, SceneEntityCfg

        events.sysid_check_rest = EventTermCfg(func=_rest_at_target, mode="reset",
                                               params={"asset_cfg": SceneEntityCfg(mod.ASSET_NAME)})
    return ManagerBasedEnvCfg(
        sim=SimulationCfg(dt=sim_dt, device=device, gravity=(0.0, 0.0, 0.0), physics=physics_cfg("newton"),
                          use_newton_actuators=not module_needs_lab_actuators(mod)),
        scene=scene, decimation=decimation, observations={"policy": obs}, actions=ActionsCfg(), events=events, seed=seed,
    )


def module_law(mod: ModuleType) -> str:
    """The friction law an exported module applies (``FRICTION_LAW``; an export from before it existed: Coulomb)."""
    return str(getattr(mod, "FRICTION_LAW", {"name": "coulomb"})["name"])


def module_needs_lab_actuators(mod: ModuleType) -> bool:
    """Whether an exported module's actuator runs on Isaac Lab's actuator path, not Newton's native actuators (a law
    beyond Coulomb or a slew limit: the module's ``needs_lab_actuators``; an export from before it: its law)."""
    f = getattr(mod, "needs_lab_actuators", None)
    return bool(f()) if f is not None else module_law(mod) != "coulomb"


def _rest_at_target(env, env_ids, asset_cfg) -> None:
    """Event term of the servo check: the arm at rest at its default posture, which is also its position target."""
    import torch

    asset = env.scene[asset_cfg.name]
    ids = torch.arange(env.scene.num_envs, device=asset.device) if env_ids is None or isinstance(env_ids, slice) \
        else torch.as_tensor(env_ids, device=asset.device)
    pos = asset.data.default_joint_pos.torch[ids].clone()
    asset.write_joint_position_to_sim_index(position=pos, env_ids=ids)
    asset.write_joint_velocity_to_sim_index(velocity=torch.zeros_like(pos), env_ids=ids)
    asset.set_joint_position_target_index(target=pos, env_ids=ids)


class _EffortLog:
    """The effort the arm's actuator applies, recorded after every physics step's actuator update
    (inside Newton's decimation loop), as (E, N) float64 arrays."""

    def __init__(self, articulation) -> None:
        self.art = articulation
        self.rows: list[np.ndarray] = []

    def __call__(self) -> None:
        self.rows.append(self.art.actuators.applied_effort.torch.detach().cpu().numpy().astype(np.float64).copy())


def _measure_latency(env, art, n_joints: int, hi: int, log: _EffortLog, probe: float = PROBE_EFFORT) -> np.ndarray:
    """(E,) physics steps between commanding ``probe`` [N m] and the actuator applying it.

    The env steps with zero effort for ``hi + 1`` physics steps (so the delay buffer holds zeros),
    then with the probe; the first physics step whose applied effort is the probe, counted from the
    first step of the probe's env step, is the latency.
    """
    import torch

    E, D = env.num_envs, env.cfg.decimation
    zero = torch.zeros(E, n_joints, device=env.device)
    n_zero = math.ceil((hi + 1) / D)
    log.rows.clear()
    for _ in range(n_zero):
        env.step(zero)
    start = len(log.rows)
    if start != n_zero * D:
        raise CheckError(f"expected {n_zero * D} physics steps from {n_zero} env steps of decimation {D}, recorded {start}")
    for _ in range(math.ceil((hi + 2) / D)):
        env.step(torch.full((E, n_joints), probe, device=env.device))
    eff = np.stack(log.rows[start:])  # (steps, E, N)
    on = np.all(np.abs(eff - probe) < 1e-4, axis=2)  # (steps, E)
    lat = np.where(on.any(0), on.argmax(0), -1)
    return lat


def check_module(mod: ModuleType, robot: Robot, num_envs: int = 16, resets: int = 4, decimation: int = 2,
                 sim_dt: float | None = None, seed: int = 0, device: str = "cpu",
                 log: Callable[[str], None] = print) -> CheckReport:
    """Build the check environment for an exported module, randomize ``resets`` times and compare.

    Args:
        mod: the exported module (:func:`load_export_module`).
        robot: the fit's arm (its joints must be ``mod.JOINT_NAMES``).
        num_envs: E (16 or more for a meaningful spread).
        resets: resets (redraws) read back.
        decimation: the env's decimation (the delay must not depend on it).
        sim_dt: the task's physics step [s]; default ``mod.PHYSICS_DT``. Another step is refused
            (``mod.check_physics_dt``) when the module has the check.
        seed: the env's seed (draws are deterministic for a seed).

    Raises:
        CheckError: a task dt the export cannot serve, or joints that do not match.
    """
    if list(mod.JOINT_NAMES) != list(robot.joint_names):
        raise CheckError(f"the export's joints {list(mod.JOINT_NAMES)} are not robot '{robot.name}''s {list(robot.joint_names)}")
    require_current_export(mod)
    if getattr(mod, "SERVO_MOTOR", None):
        raise CheckError("the export is of a servo motor model (SERVO_MOTOR: make_servo_motor_cfg(kp_register, supply_v)): "
                         "this check does not read its DC-motor actuator back yet (tests/test_servo_part.py builds it "
                         "through Isaac Lab and holds it to the servo model; docs/servo_arms.md section 9)")
    dt = float(mod.PHYSICS_DT if sim_dt is None else sim_dt)
    try:
        mod.check_physics_dt(dt)
    except ValueError as exc:
        raise CheckError(str(exc)) from None
    physics = mod.PHYSICS
    if physics != "newton":
        raise CheckError(f"the export was written for {physics}; this check runs on Newton (re-export with --physics newton)")

    from isaaclab.envs import ManagerBasedEnv
    from isaaclab.sim import SimulationContext
    from isaaclab_newton.physics import NewtonManager

    from isaaclab_sysid.sim.isaaclab_backend.readback import actuator_delay_steps

    if SimulationContext.instance() is not None:
        SimulationContext.clear_instance()
    env = ManagerBasedEnv(_env_cfg(mod, robot, num_envs, decimation, dt, seed, device, "reset"))
    try:
        art = env.scene[mod.ASSET_NAME]
        names = list(mod.JOINT_NAMES)
        ids, found = art.find_joints(names, preserve_order=True)
        if list(found) != names:
            raise CheckError(f"the scene's arm has joints {art.joint_names}, the export names {names}")
        failures: list[str] = []
        elog = _EffortLog(art)
        NewtonManager.register_post_actuator_callback(elog)
        env.step(_zeros(env, len(names)))  # one physics step: the solver's arrays are refreshed from Newton's model
        nominal = _read(names, num_envs, failures, "after construction")
        servo = is_servo_module(mod)
        gain_nominal = _read_gains(art, ids) if servo else None
        gain_draws = {g: [] for g in SERVO_GAINS}
        probe = PROBE_EFFORT
        if "actuator_effort_limit" in mod.ACTUATOR_VALUES:  # the probe passes the clamp
            limits = [float(v) for v in mod.ACTUATOR_VALUES["actuator_effort_limit"].values() if v is not None]
            probe = min([probe] + [0.5 * v for v in limits])
        rates = [float(v) for v in getattr(mod, "TORQUE_RATE_LIMIT", {}).values() if v is not None]
        if rates:  # and reaches its level in one physics step from zero under the slew limit
            probe = min(probe, 0.5 * min(rates) * dt)
        lo_d, hi_d = tuple(int(v) for v in mod.DELAY_RANGE_STEPS)
        law = module_law(mod)
        act = art.actuators["sysid_arm"] if module_needs_lab_actuators(mod) else None
        law_nominal = {f: v.cpu().numpy().copy() for f, v in act.law_params.items()} if act is not None else {}
        law_draws = {f: [] for f in law_nominal}
        draws = {g: [] for g in GROUPS}
        delays, latency_ok = [], True
        for r in range(resets):
            env.reset()
            lat = None
            if hi_d > 0:
                lat = _measure_latency(env, art, len(names), hi_d, elog, probe)
            else:
                env.step(_zeros(env, len(names)))  # one step so the solver's arrays are refreshed
            vals = _read(names, num_envs, failures, f"reset {r}")
            for g in GROUPS:
                draws[g].append(vals[g])
            if servo:
                got = _read_gains(art, ids)
                for g in SERVO_GAINS:
                    gain_draws[g].append(got[g])
            for f in law_draws:
                law_draws[f].append(act.law_params[f].cpu().numpy().copy())
            if law in ("sigmoid", "dahl") and np.any(vals["friction"] != 0):
                failures.append(f"reset {r}: the joint's native friction is not 0 under the {law} law (the law is the "
                                "whole dry friction)")
            try:
                if act is not None:  # Isaac Lab's actuator path: the delay buffer's per-env lag
                    d = act.positions_delay_buffer.time_lags.cpu().numpy().astype(np.int64)
                else:
                    d = actuator_delay_steps(art, "sysid_arm") if hi_d > 0 else np.zeros(num_envs, dtype=np.int64)
            except ValueError as exc:
                raise CheckError(f"cannot read the actuator delay: {exc}") from None
            delays.append(d)
            if lat is not None and not np.array_equal(lat, d):
                latency_ok = False
                bad = int(np.flatnonzero(lat != d)[0])
                failures.append(f"reset {r}: env {bad} applies the effort {lat[bad]} physics steps late, its actuator "
                                f"delay is {d[bad]}")
        rows = _rows(mod, names, nominal, draws, np.concatenate(delays), num_envs * resets)
        rows += _law_rows(mod, names, law_nominal, law_draws)
        if servo:
            rows += _gain_rows(mod, names, gain_nominal, gain_draws)
        ticks = (lo_d * dt / TICK_S, hi_d * dt / TICK_S)
        log(f"checked {len(rows)} numbers over {num_envs} envs x {resets} resets")
        return CheckReport(rows, num_envs, resets, dt, decimation, physics, ticks, latency_ok, failures)
    finally:
        env.close()
        if SimulationContext.instance() is not None:
            SimulationContext.clear_instance()


#: a servo export's gains: the fitted group -> the attribute of Newton's native PD controller
SERVO_GAINS = {"kp": "kp", "kd": "kd"}


def is_servo_module(mod: ModuleType) -> bool:
    """Whether an exported module is a position servo's (its actuator carries fitted gains)."""
    return "stiffness" in mod.ACTUATOR_VALUES


def _read_gains(art, ids) -> dict[str, np.ndarray]:
    """(E, N) kp, kd and the effort limit (``effort``) of the arm's Newton actuator group, columns in the export's
    joint order (``ids``: the articulation's index of each exported joint)."""
    from isaaclab.actuators.newton import read_group_parameter

    order = np.argsort(np.argsort(np.asarray(ids)))  # the group's columns follow the articulation's joint order
    out = {}
    for g, attr in (*SERVO_GAINS.items(), ("effort", "max_effort")):
        comp = "clamping" if g == "effort" else "controller"
        try:
            v = read_group_parameter(art.actuators, "sysid_arm", comp, attr).cpu().numpy().astype(np.float64)
        except ValueError as exc:
            raise CheckError(f"cannot read the actuator's {attr}: {exc}") from None
        out[g] = v[:, order]
    return out


def _gain_rows(mod: ModuleType, names: list[str], nominal: dict, draws: dict) -> list[CheckRow]:
    """Rows of a servo export's gains (randomized) and effort limits (fixed)."""
    sampled_all = mod.SAMPLED_RANGES
    rows = []
    for g in SERVO_GAINS:
        if g not in mod.FITTED:
            continue
        got = np.concatenate(draws[g])
        for jk, j in enumerate(names):
            label = f"{g}[{j}]"
            exported = mod.RANGES.get(label)
            exported = None if exported is None or exported[0] is None else (float(exported[0]), float(exported[1]))
            sampled = sampled_all.get(label)
            col, nom = got[:, jk], nominal[g][:, jk]
            row = CheckRow(label, float(mod.FITTED[g][jk]), exported,
                           None if sampled is None else (float(sampled[0]), float(sampled[1])),
                           (float(nom.min()), float(nom.max())), (float(col.min()), float(col.max())), int(col.size))
            _judge(row, nom, col, sampled is not None)
            rows.append(row)
    limits = mod.ACTUATOR_VALUES.get("actuator_effort_limit")
    if limits:
        for jk, j in enumerate(names):
            nom = nominal["effort"][:, jk]
            row = CheckRow(f"effort_limit[{j}]", float(limits[j]), None, None, (float(nom.min()), float(nom.max())),
                           (float(nom.min()), float(nom.max())), int(nom.size))
            _judge(row, nom, nom, False)
            rows.append(row)
    return rows


def _zeros(env, n: int):
    import torch

    return torch.zeros(env.num_envs, n, device=env.device)


def _read(names: list[str], num_envs: int, failures: list[str], when: str) -> dict[str, np.ndarray]:
    """The solver's values (E, N) per group; a mismatch with Newton's model is a failure."""
    from isaaclab_sysid.sim.isaaclab_backend.readback import joint_physics

    newton = joint_physics(names, num_envs, "newton").as_dict()
    try:
        solver = joint_physics(names, num_envs, "mjwarp").as_dict()
    except RuntimeError as exc:
        failures.append(f"{when}: {exc}")
        return newton
    for g in GROUPS:
        if not np.allclose(solver[g], newton[g], rtol=F32_RTOL, atol=1e-7):
            failures.append(f"{when}: the MJWarp solver's {g} differs from Newton's model (max |diff| "
                            f"{np.max(np.abs(solver[g] - newton[g])):.3g})")
    return solver


def _rows(mod: ModuleType, names: list[str], nominal: dict, draws: dict, delays: np.ndarray, n: int) -> list[CheckRow]:
    fitted_key = {"armature": "armature", "friction": "mu_static" if "mu_static" in mod.FITTED else "friction",
                  "viscous": "viscous"}
    sampled_all = mod.SAMPLED_RANGES
    rows = []
    for g in GROUPS:
        key = fitted_key[g]
        if key not in mod.FITTED or (g == "friction" and module_law(mod) != "coulomb"):  # a law's: _law_rows
            continue
        got = np.concatenate(draws[g])  # (resets*E, N)
        for jk, j in enumerate(names):
            label = f"{key}[{j}]"
            fit = float(mod.FITTED[key][jk])
            exported = mod.RANGES.get(label)
            exported = None if exported is None or exported[0] is None else (float(exported[0]), float(exported[1]))
            sampled = sampled_all.get(label)
            col, nom = got[:, jk], nominal[g][:, jk]
            row = CheckRow(label, fit, exported, None if sampled is None else (float(sampled[0]), float(sampled[1])),
                           (float(nom.min()), float(nom.max())), (float(col.min()), float(col.max())), int(col.size))
            _judge(row, nom, col, sampled is not None)
            rows.append(row)
    if "delay_steps" in mod.FITTED:
        lo, hi = (int(v) for v in mod.DELAY_RANGE_STEPS)
        row = CheckRow("delay", float(mod.FITTED["delay_steps"]), (float(lo), float(hi)),
                       None if "delay" not in sampled_all else tuple(float(v) for v in sampled_all["delay"]),
                       (float("nan"), float("nan")), (float(delays.min()), float(delays.max())), int(delays.size))
        if delays.min() < lo or delays.max() > hi:
            row.failures.append(f"delay read back outside [{lo}, {hi}] steps")
        missing = sorted(set(range(lo, hi + 1)) - set(int(v) for v in delays))
        if missing:
            row.failures.append(f"delays {missing} never drawn in {delays.size} draws")
        rows.append(row)
    return rows


#: the fit's group of each SysidFrictionActuatorCfg field (export/isaaclab_module.py: LAW_FIELDS)
def _law_group() -> dict[str, str]:
    from isaaclab_sysid.export.isaaclab_module import LAW_FIELDS

    return {fld: group for fields in LAW_FIELDS.values() for fld, (group, _) in fields.items()}


LAW_GROUP = _law_group()


def _law_rows(mod: ModuleType, names: list[str], nominal: dict, draws: dict) -> list[CheckRow]:
    """One row per friction-law number, read from the ``SysidFrictionActuator``'s per-env values (float64). The exported
    range is cut to the number's domain (a Stribeck dynamic ratio above 1 is no law), as the term draws it."""
    from isaaclab_sysid.export.isaaclab_module import LAW_DOMAINS

    rows = []
    for f, nom_all in nominal.items():
        got = np.concatenate(draws[f])
        for jk, j in enumerate(names):
            label = f"{LAW_GROUP[f]}[{j}]"
            exported = mod.RANGES.get(label)
            if exported is not None and exported[0] is not None:
                lo_d, hi_d = LAW_DOMAINS[f]
                exported = (max(float(exported[0]), lo_d), min(float(exported[1]), hi_d))
            else:
                exported = None
            sampled = mod.SAMPLED_RANGES.get(label)
            col, nom = got[:, jk], nom_all[:, jk]
            row = CheckRow(label, float(mod.FRICTION_LAW["params"][f][j]), exported,
                           None if sampled is None else (float(sampled[0]), float(sampled[1])),
                           (float(nom.min()), float(nom.max())), (float(col.min()), float(col.max())), int(col.size))
            _judge(row, nom, col, sampled is not None)
            rows.append(row)
    return rows


def _judge(row: CheckRow, nominal: np.ndarray, col: np.ndarray, randomized: bool) -> None:
    """Record the failures of one number (nominal = fit; draws inside the ranges and spread over them)."""
    tol = lambda v: F32_RTOL * max(abs(v), 1.0) + 1e-7  # noqa: E731
    if np.max(np.abs(nominal - row.fitted)) > tol(row.fitted):
        row.failures.append(f"nominal {row.nominal} != fitted {row.fitted:.6g}")
    if not randomized:
        if row.exported is not None:
            row.failures.append("has an exported range but no event term draws it")
        elif np.max(np.abs(col - row.fitted)) > tol(row.fitted):
            row.failures.append("not randomized but changed after reset")
        return
    for name, rng in (("exported range", row.exported), ("drawn-from range", row.sampled)):
        if rng is None:
            continue
        if col.min() < rng[0] - tol(rng[0]) or col.max() > rng[1] + tol(rng[1]):
            row.failures.append(f"read back [{col.min():.6g}, {col.max():.6g}] outside the {name} [{rng[0]:.6g}, {rng[1]:.6g}]")
    ex, rng = row.exported, row.sampled
    if ex is not None and (rng[0] > ex[0] + tol(ex[0]) or rng[1] < ex[1] - tol(ex[1])):
        row.failures.append(f"drawn from [{rng[0]:.6g}, {rng[1]:.6g}], which does not cover the exported range "
                            f"[{ex[0]:.6g}, {ex[1]:.6g}]")
    w = rng[1] - rng[0]
    if w > 0:
        q = spread_tolerance(col.size)
        if col.min() > rng[0] + q * w or col.max() < rng[1] - q * w:
            row.failures.append(f"draws [{col.min():.6g}, {col.max():.6g}] do not spread over [{rng[0]:.6g}, {rng[1]:.6g}] "
                                f"({col.size} uniform draws reach within {q:.0%} of each end)")
