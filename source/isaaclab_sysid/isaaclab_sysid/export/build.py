"""The export job behind ``scripts/export_dr.py`` and ``scripts/compute_intervals.py``.

fit folder (``sysid_best_params.json`` + ``config.json``) -> ``intervals.json``
(computed once, one batched rollout) -> ranges (policy) -> ``sysid_dr.json``,
``sysid_dr.yaml`` and ``sysid_dr_isaaclab.py``, all written atomically.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.export.isaaclab_module import generate_module
from isaaclab_sysid.export.masses import mass_intervals
from isaaclab_sysid.export.mjcf import MjcfCheck
from isaaclab_sysid.export.neutral import write_neutral
from isaaclab_sysid.export.record import DelayRow, DrRecord, MassRow, SpanRow
from isaaclab_sysid.export.ranges import RangePolicy, make_ranges
from isaaclab_sysid.intervals.combine import IntervalReport, compute_all, read_intervals, write_intervals
from isaaclab_sysid.intervals.omitted import OMITTED_GROUPS
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.param_space import GROUPS, ParamSpace
from isaaclab_sysid.objective.problem_record import ProblemRecord
from isaaclab_sysid.fit.problem import FitProblem, build_problem
from isaaclab_sysid.fit.replay_facts import limits_read
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import INTERVALS_FILE, RESULT_FILE, RunFolder
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.sim.friction import law_of_groups
from isaaclab_sysid.sim.servo import MOTOR_GROUPS
from isaaclab_sysid.timebase import TICK_S
from isaaclab_sysid.utils.atomic import atomic_write_text
from isaaclab_sysid.utils.errors import UserError
from isaaclab_sysid.utils.json_io import read_json


class ExportError(UserError):
    """A user-facing failure (printed as one line; exit 2)."""


@dataclass
class FitContext:
    """A fit folder: its :class:`FitResult`, its problem (:class:`ProblemRecord`, ``config.json``; None without one)
    and (built lazily) its :class:`FitProblem`."""

    fit_dir: Path
    result: FitResult
    record: ProblemRecord | None
    _problem: FitProblem | None = field(default=None, repr=False)

    @classmethod
    def load(cls, fit_dir: str | Path) -> "FitContext":
        """Read ``sysid_best_params.json`` and ``config.json``; errors name the file."""
        d = Path(fit_dir)
        rp = d / RESULT_FILE
        if not rp.is_file():
            raise ExportError(f"{d}: no {RESULT_FILE} (give the folder a fit wrote, e.g. logs/sysid/<time>)")
        folder = RunFolder(d)
        config = folder.read_config() if folder.config.is_file() else None
        record = folder.read_problem() if config else None
        body = read_json(rp, "parameters")
        if not isinstance(body, dict):
            raise ExportError(f"{rp}: not a JSON object")
        try:
            result = FitResult.from_json(body, joint_names=_recorded_joint_names(d, body, config, record))
        except (KeyError, TypeError, ValueError) as exc:
            raise ExportError(f"{rp}: {exc}") from None
        return cls(d, result, record)

    @property
    def space(self) -> ParamSpace:
        return self.result.space

    def problem(self) -> FitProblem:
        """The fit's runs, robot and backend, rebuilt from ``config.json`` (once)."""
        if self._problem is None:
            if self.record is None:
                raise ExportError(f"{self.fit_dir}: no config.json: cannot rebuild the runs to compute intervals")
            try:
                self._problem = build_problem(self.record, log=lambda _s: None)
            except FitError as exc:
                raise ExportError(str(exc)) from None
        return self._problem


def _recorded_joint_names(fit_dir: Path, result: dict, config: dict | None,
                          record: ProblemRecord | None) -> list[str] | None:
    """The robot config's joint names for a result file (``result``, its JSON) that records none (older fits);
    None if the file has them."""
    if (result.get("param_space") or {}).get("joint_names"):
        return None
    name = (record.replay.robot if record else None) or (config or {}).get("robot")
    if name is None and record is not None and record.runs.real_csv:
        runs = record.runs
        try:
            name = read_run(runs.real_csv[0], runs.real_sidecar[0] if runs.real_sidecar else None).meta.robot
        except RunFormatError as exc:
            raise ExportError(f"{fit_dir / RESULT_FILE} records no joint names and its first run cannot be read: {exc}") from None
    if name is None:
        raise ExportError(f"{fit_dir / RESULT_FILE} records no joint names and {fit_dir / 'config.json'} names no robot "
                          "config: rerun the fit with this version, or add \"robot\" to config.json")
    try:
        return list(load_robot(name).joint_names)
    except Exception as exc:  # RobotConfigError, OSError: one line naming the robot config
        raise ExportError(f"robot config '{name}' (for the joint names of {fit_dir / RESULT_FILE}): {exc}") from None


def other_starts(ctx: FitContext) -> list[FitResult]:
    """The law step's refits of the fit's law from the starts it did not keep (the load law's
    ``law_load/other_start.json``, fit/law_starts.py), for the interval stage's lines (intervals/basins.py)."""
    if "load_friction_motor" not in ctx.space.group_names:
        return []
    folder = RunFolder(ctx.fit_dir)
    try:
        other = folder.read_other_start("load", joint_names=list(ctx.space.joint_names))
    except (KeyError, TypeError, ValueError) as exc:
        raise ExportError(f"{folder.other_start('load')}: {exc}") from None
    return [other] if other is not None else []


def intervals_for(ctx: FitContext, recompute: bool = False, level: float = 0.95, method: str = "curvature",
                  fd_step: float = 1e-3, n_boot: int = 1000, log: Callable[[str], None] = print,
                  omitted: bool = True, basins: bool = True) -> IntervalReport:
    """Read ``<fit_dir>/intervals.json`` or compute and write it (``omitted=False``: intervals conditional on the
    groups the fit left out, intervals/omitted.py; ``basins=False``: without the friction law's other basin,
    intervals/basins.py, nor the load law's other start, ``law_load/other_start.json``)."""
    path = ctx.fit_dir / INTERVALS_FILE
    if path.is_file() and not recompute:
        rep = read_intervals(path)
        labels = [iv.label for iv in rep.sets["curvature"].intervals] if "curvature" in rep.sets else []
        if abs(rep.level - level) > 1e-12 or rep.selected != method:
            log(f"{path}: level/method differ from the request; recomputing")
        elif labels != ctx.space.labels():
            log(f"{path}: its labels do not match the fit's parameters (an older file?); recomputing")
        else:
            log(f"using {path}")
            return rep
    problem = ctx.problem()
    log(f"computing intervals: one batched rollout of the optimum, {2 * ctx.space.dim + 5} finite-difference/delay "
        f"candidates on {len(problem.runs)} run(s), held-out on {len(problem.heldout)}")
    rep = compute_all(problem.backend, ctx.result, problem.runs, problem.heldout, level, method, fd_step, n_boot,
                      source=str(ctx.fit_dir / RESULT_FILE), omitted_groups=OMITTED_GROUPS if omitted else (),
                      basins=basins, other_starts=other_starts(ctx))
    write_intervals(path, rep)
    log(f"wrote {path}")
    return rep


def _interval_row(iv) -> SpanRow:
    return SpanRow(iv.value, iv.lower, iv.upper, {"std": iv.std, "identifiable": iv.identifiable, "note": iv.note})


def _range_row(r) -> SpanRow:
    return SpanRow(r.value, r.lower, r.upper, {"source": r.source})


def build_dr_record(result: FitResult, rep: IntervalReport, policy: RangePolicy, rb_params: str | None = None,
                    source: str | None = None) -> tuple[DrRecord, list[str]]:
    """The randomization record and warnings; joint names are the fit's (the robot config's)."""
    space = result.space
    chosen = rep.chosen()
    warns = list(rep.warnings)
    bounds = {g.name: (g.lower, g.upper) for g in space.groups}
    rho = rep.structure.get("rho") if rep.structure else None
    ranges, rho_used, w = make_ranges(chosen.intervals, policy, rho, bounds)
    warns += w
    jn = list(space.joint_names)
    entries = {e.label: e for e in space.entries()}
    fitted = {g.name: [float(v) for v in result.values[g.name]] for g in space.groups if g.per_joint}
    labels_per_joint = {g: [e.label for e in entries.values() if e.group == g] for g in fitted}
    intervals = {iv.label: _interval_row(iv) for iv in chosen.intervals}
    rmap = {r.label: _range_row(r) for r in ranges}
    masses = []
    if rb_params:
        mivs, mrho, mw = mass_intervals(rb_params, rep.level)
        warns += mw
        mranges, mrho_used, mw2 = make_ranges(mivs, policy, mrho, None)
        warns += mw2
        for iv in mivs:
            intervals[iv.label] = _interval_row(iv)
            masses.append(MassRow(iv.label, iv.joint, iv.value))
        for r in mranges:
            rmap[r.label] = _range_row(r)
    delay = None
    if "delay" in space.group_names:
        div = next(iv for iv in chosen.intervals if iv.group == "delay")
        dr = rmap.get("delay")
        delay = DelayRow(result.delay, [div.lower, div.upper], None if dr is None else [dr.lower, dr.upper], TICK_S)
    all_methods = {m: {iv.label: [iv.lower, iv.upper] for iv in s.intervals} for m, s in rep.sets.items()}
    record = DrRecord(
        joint_names=jn, fitted=fitted, labels_per_joint=labels_per_joint, intervals=intervals, ranges=rmap, delay=delay,
        masses=masses, source=source, level=rep.level, interval_method=rep.selected, range_policy=policy.to_dict(),
        rho=rho, rho_used=rho_used,
        meta={
            "units": {**{g: GROUPS[g].unit for g in ("armature", "friction", "viscous")}, "delay": "ticks of 1 ms",
                      "mass": "kg"},
            "intervals_all_methods": all_methods,
            "structure": rep.structure,
            "unreliable": result.unreliable,
            "adequacy": None if result.adequacy is None else {"verdict": result.adequacy.verdict,
                                                              "messages": result.adequacy.messages},
            "warnings": warns,
        })
    return record, warns


#: the friction laws each export carries exactly as fitted (sim/friction.py); any other is refused, never reduced.
#: Isaac Lab: Coulomb as the joint's friction, the others by the generated module's SysidFrictionActuator (Stribeck's
#: and the load law's budget written as the joint friction every physics step, the load budget from Newton's inverse
#: dynamics of every env; the sigmoid's and Dahl's torque added to the effort); the USD variant holds joint
#: properties only: Coulomb, and Stribeck with its Gaussian shape as PhysX's two levels
EXPORTED_LAWS = {"isaaclab": ("coulomb", "stribeck", "sigmoid", "load", "dahl"), "usd": ("coulomb", "stribeck"),
                 "mjcf": ("coulomb", "stribeck", "sigmoid", "load", "dahl")}
#: the laws the Isaac Lab module applies on each physics backend (the load budget needs Newton's inverse dynamics)
EXPORTED_PHYSICS_LAWS = {"newton": EXPORTED_LAWS["isaaclab"], "physx": ("coulomb", "stribeck", "sigmoid", "dahl")}
#: the friction laws each export writes exactly beside the servo motor model (motor_kt, motor_r): Isaac Lab's DC motor
#: (export/servo_part.py) with the joint's constant friction or the module's SysidServoMotorWithLaw, MJCF's driver with
#: every law
EXPORTED_MOTOR_LAWS = {"isaaclab": ("coulomb", "stribeck", "sigmoid", "dahl"), "usd": ("coulomb",),
                       "mjcf": ("coulomb", "stribeck", "sigmoid", "load", "dahl")}
#: why an export cannot carry a law (target, law) -> the reason, said in the refusal's one line
WHY_NOT = {
    ("isaaclab", "load"): "the load budget's motor torque would be the DC motor model's, which no Isaac Lab parity "
                          "replay covers (Isaac Lab replays no servo run)",
    ("physx", "load"): "its budget needs every env's Coriolis torque each physics step, which the module takes from "
                       "Newton's inverse dynamics (ArticulationView.eval_inverse_dynamics_passive; Isaac Lab's "
                       "articulation data gives the gravity torque only) and no PhysX replay here checks",
    ("usd", "sigmoid"): "a USD joint holds friction levels, not a torque law: the Isaac Lab module's actuator applies it",
    ("usd", "dahl"): "a USD joint holds friction levels, not a bristle state: the Isaac Lab module's actuator applies it",
    ("usd", "load"): "a USD joint holds friction levels, not a load-dependent budget",
}


def check_exported_law(space: ParamSpace, target: str, physics: str | None = None) -> None:
    """Refuse a fit whose friction law the ``target`` export ("isaaclab", "usd" or "mjcf") would not run as fitted.

    Args:
        physics: the Isaac Lab module's physics backend (``newton`` or ``physx``; None: not checked).

    Raises:
        ExportError: one line naming the law, why the export cannot carry it and what to do.
    """
    motor = [g for g in MOTOR_GROUPS if g in space.group_names]
    law = law_of_groups(space.group_names)
    if motor and len(motor) < len(MOTOR_GROUPS):
        raise ExportError(f"the fit holds {motor[0]} without {', '.join(set(MOTOR_GROUPS) - set(motor))}: not a servo motor "
                          "model any export writes")
    if motor and law.name not in EXPORTED_MOTOR_LAWS[target]:
        why = WHY_NOT.get((target, law.name), "it has no term for it")
        raise ExportError(f"the fit's servo motor model carries the {law.name} friction law, which the {target} export "
                          f"does not apply with it ({target}: {', '.join(EXPORTED_MOTOR_LAWS[target])}): {why}; the "
                          "exported model would be a reduced one; refit with the Coulomb law, or export it with --mjcf "
                          "(docs/servo_arms.md)")
    if law.name not in EXPORTED_LAWS[target]:
        why = WHY_NOT.get((target, law.name), "it has no term for it")
        raise ExportError(f"the fit used the {law.name} friction law, which the {target} export cannot apply as fitted: "
                          f"{why}; export it with --mjcf, or refit with another law (docs/friction.md)")
    if target == "isaaclab" and physics is not None and law.name not in EXPORTED_PHYSICS_LAWS.get(physics, ()):
        why = WHY_NOT.get((physics, law.name), "it has no term for it")
        raise ExportError(f"the fit used the {law.name} friction law, which the Isaac Lab module applies on Newton only, "
                          f"not on {physics}: {why}; export it with --physics newton or --mjcf (docs/friction.md)")
    if "stribeck_shape" in space.group_names and target == "usd":
        raise ExportError("the fit's Stribeck shape exponent (stribeck_shape) is not held by the USD variant, whose "
                          "joints keep two friction levels: the Isaac Lab module's actuator applies it (docs/friction.md)")


def export(ctx: FitContext, out_dir: str | Path, rep: IntervalReport, policy: RangePolicy, rb_params: str | None = None,
           asset_name: str = "robot", viscous: str = "independent", physics_dt: float = TICK_S,
           stem: str = "sysid_dr", physics: str = "newton",
           log: Callable[[str], None] | None = None) -> tuple[dict[str, Path], list[str]]:
    """Write the neutral JSON/YAML and the Isaac Lab module; returns paths and warnings. The record says what the
    arm carries (``meta.robot``; ``log`` prints it), as every stage that builds the arm does.

    Raises:
        ValueError: the fit cannot be written for ``physics`` (e.g. static friction on Newton).
    """
    check_exported_law(ctx.space, "isaaclab", physics)
    families = None
    if "motor_kt" in ctx.space.group_names:  # the servo motor model: Isaac Lab's DC motor needs each joint's family
        from isaaclab_sysid.robots.servos import servo_family

        robot = ctx._problem.robot if ctx._problem is not None else fit_robot(ctx)
        if robot.config.servo is None:
            raise ExportError(f"{ctx.fit_dir}: robot '{robot.name}' states no servo family: the DC-motor actuator "
                              "cannot be written")
        families = [servo_family(f) for f in robot.config.servo]
    record, warns = build_dr_record(ctx.result, rep, policy, rb_params, str(ctx.fit_dir / RESULT_FILE))
    try:
        robot = fit_robot(ctx)
        record.meta["robot"] = {"name": robot.name, "carries": robot.carries, "line": robot.arm_line()}
        if log is not None:
            log(robot.arm_line())
    except ExportError as exc:
        warns.append(f"the record does not say what the arm carries ({exc})")
    try:
        effort, rate = fit_torque_limits(ctx)
    except ExportError as exc:  # no config.json: the module keeps the asset's own effort limits, and says so
        effort = rate = None
        warns.append(f"the fit's torque clamp and slew limit are not written: the asset's effort limits stay ({exc})")
    src, w2 = generate_module(record, asset_name, viscous, physics_dt, physics, effort, families,
                              stribeck_velocity=None if ctx.record is None else ctx.record.params.stribeck_velocity,
                              torque_rate_limit=rate)
    warns += w2
    record.meta["warnings"] = warns
    record.meta["isaaclab"] = {"asset_name": asset_name, "viscous": viscous, "physics_dt": physics_dt, "physics": physics}
    pj, py = write_neutral(out_dir, record.to_json(), stem)
    pm = Path(out_dir) / f"{stem}_isaaclab.py"
    atomic_write_text(pm, src)
    return {"json": pj, "yaml": py, "module": pm}, warns


def fit_robot(ctx: FitContext) -> Robot:
    """The arm a fit folder was fitted on (``config.json``'s robot or its first run's, with ``--nominal`` inertials),
    without reading every run.

    Raises:
        ExportError: no config.json, or the robot cannot be rebuilt (one line).
    """
    from isaaclab_sysid.fit.problem import build_robot

    if ctx.record is None:
        raise ExportError(f"{ctx.fit_dir}: no config.json: give --robot")
    runs = ctx.record.runs
    try:
        first = read_run(runs.real_csv[0], runs.real_sidecar[0] if runs.real_sidecar else None)
        return build_robot(ctx.record, [first])
    except (RunFormatError, FitError, IndexError) as exc:
        raise ExportError(f"{ctx.fit_dir}/config.json: cannot rebuild the fit's robot: {exc}") from None


def fit_torque_limits(ctx: FitContext) -> tuple[list[float] | None, list[float] | None]:
    """(N,) the torque clamp [N m] and (N,) the slew limit [N m/s] the fit's replay applied, each None where it applied
    none: as its ``--torque_clamp``/``--torque_limit`` and ``--slew_limit``/``--torque_rate_limit`` said (the arm's
    config, or those flags' values; inf: that joint unlimited); a servo motor model's fit has its own windows
    (neither).

    Raises:
        ExportError: no config.json says what the fit's replay applied (one line).
    """
    if "motor_kt" in set(ctx.space.group_names):
        return None, None
    if ctx.record is None:
        raise ExportError(f"{ctx.fit_dir}: no config.json says whether the fit clamped or slew-limited the torque")
    rep = ctx.record.replay
    clamp, slew = bool(rep.torque_clamp), bool(rep.slew_limit)
    if not (clamp or slew):
        return None, None
    if ctx._problem is not None:
        robot = ctx._problem.robot
    else:
        robot = fit_robot(ctx)
        if rep.torque_limit or rep.torque_rate_limit:
            robot = robot.with_real_controller(torque_limit=limits_read(rep.torque_limit),
                                               torque_rate_limit=limits_read(rep.torque_rate_limit))
    rate = robot.config.torque_rate_limit if slew else None
    return ([float(v) for v in robot.tau_max] if clamp else None,
            None if rate is None else [float(v) for v in np.broadcast_to(np.asarray(rate, dtype=float), (robot.n_dof,))])


def export_servo_part(ctx: FitContext, rep: IntervalReport | None, path: str | Path, joint: str | None = None):
    """Write the servo part file (robots/servo_model.py) of joint ``joint`` of a servo fit; returns (path, part).

    The family is the fit's robot config's ``servo`` of that joint.

    Raises:
        ExportError: not a servo fit, the robot states no servo family, an unknown joint (one line).
    """
    from isaaclab_sysid.export.servo_part import ServoPartError, servo_model_of
    from isaaclab_sysid.robots.servo_model import write_servo_model

    robot = ctx._problem.robot if ctx._problem is not None else fit_robot(ctx)
    fams = robot.config.servo
    if fams is None:
        raise ExportError(f"{ctx.fit_dir}: robot '{robot.name}' states no servo family ('servo' in its config): no servo "
                          "part can be written")
    names = list(ctx.space.joint_names)
    j = names.index(joint) if joint in names else 0
    try:
        part = servo_model_of(ctx.result, rep, fams[j], joint, source=str(ctx.fit_dir / RESULT_FILE))
    except ServoPartError as exc:
        raise ExportError(f"{ctx.fit_dir}: {exc}") from None
    return write_servo_model(path, part), part


def _mujoco_backend_of(backend):
    """The fit's own MuJoCo backend under its wrappers (state age), or None (Isaac Lab, Ray)."""
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    be = backend
    while be is not None:
        if isinstance(be, MujocoBackend):
            return be
        be = getattr(be, "inner", None)
    return None


def export_mjcf(ctx: FitContext, out_dir: str | Path, tol: float | None = None,
                log: Callable[[str], None] = print) -> tuple[Path, MjcfCheck]:
    """Write ``<robot>_sysid.xml`` (export/mjcf.py) only once it replays the fit's held-out runs as the fit does.

    The file is written beside its final name, loaded with plain MuJoCo, every held-out run (the fit runs
    when the fit has none, and the log says so) is replayed on it and compared with the fit's own MuJoCo
    replay of the fitted values; it is renamed into place when the largest |q difference| is <= ``tol``
    (default 1e-6 rad), else removed.

    Raises:
        ExportError: the check fails (the figure and the run named), or the fit cannot be written as MJCF.
    """
    import numpy as np

    from isaaclab_sysid.export.mjcf import MJCF_TOL_RAD, MjcfError, check_mjcf, fit_rollouts, fitted_joints, write_mjcf

    check_exported_law(ctx.space, "mjcf")
    tol = MJCF_TOL_RAD if tol is None else float(tol)
    problem = ctx.problem()
    robot = problem.robot
    options = problem.backend.options
    runs = list(problem.heldout)
    if not runs:
        log("the fit has no held-out runs: the MJCF check replays its fit runs")
        runs = list(problem.runs)
    stated = next(((np.asarray(r.meta.kp, float), np.asarray(r.meta.kd, float)) for r in problem.all_runs
                   if r.meta.controller == "joint_pd" and np.all(np.isfinite(r.meta.kp))
                   and np.all(np.isfinite(r.meta.kd))), None)
    out = Path(out_dir)
    final = out / f"{robot.name}_sysid.xml"
    tmp = out / f".{robot.name}_sysid.checking.xml"
    try:
        fit = fitted_joints(ctx.result, robot.n_dof, options.stribeck_velocity)
        inner = _mujoco_backend_of(problem.backend)
        substeps = inner.substeps if inner is not None else int(ctx.record.replay.substeps)
        write_mjcf(tmp, robot, fit, options, stated, substeps)
        states = fit_rollouts(robot, ctx.result, runs, options, inner, substeps)
        check = check_mjcf(tmp, robot, ctx.result, runs, options, tol, states)
    except MjcfError as exc:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"{ctx.fit_dir}: MJCF export: {exc}") from None
    if not check.passed:
        tmp.unlink(missing_ok=True)
        worst = int(np.argmax(check.max_dq))
        raise ExportError(f"{ctx.fit_dir}: the MJCF replays run '{check.runs[worst]}' {check.worst:.3e} rad away from the "
                          f"fit's replay (required <= {tol:g} rad): not written")
    tmp.replace(final)
    check.path = final
    return final, check
