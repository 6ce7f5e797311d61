"""The fit problem: runs, robot, parameter space, backend and weights, built and checked from a
:class:`~isaaclab_sysid.objective.problem_record.ProblemRecord` (the fit job resolves its flags into one).

Order of work (so failures are cheap): every option is checked first, then every
run file (fit and held-out) is read and validated; a bad file stops everything
with the loader's one-line error before a backend is built. The export stage
rebuilds the same problem from a fit folder's ``config.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from isaaclab_sysid.data import RunFormatError, unstated_robot_note
from isaaclab_sysid.data import read_runs as data_read_runs
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.loss import LossWeights, channel_scales
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.armature_bound import armature_spec, describe_armature
from isaaclab_sysid.objective.param_space import GROUPS, GroupSpec, ParamSpace
from isaaclab_sysid.objective.problem_record import ClusterConfig, ProblemRecord
from isaaclab_sysid.fit.replay_facts import resolve_replay_facts
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import RESULT_FILE, RunFolder
from isaaclab_sysid.fit import torque_replay
from isaaclab_sysid.fit.state_age_source import resolve_state_age
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.robots.config import RobotConfig
from isaaclab_sysid.sim.factory import BackendUnavailableError, RayOptions, make_backend
from isaaclab_sysid.sim.friction import LAWS, law_of_groups
from isaaclab_sysid.sim.interface import ReplayBackend, ReplayOptions
from isaaclab_sysid.sim.state_age import StateAgeBackend, StateAgeModel


@dataclass
class FitProblem:
    """Everything a fit stage needs, built once.

    Attributes:
        runs: the fit runs; heldout: runs scored only after the fit.
        robot: the robot (with ``--nominal`` inertials when given).
        space: the fitted parameter space, labelled with ``robot.joint_names``.
        backend: the replay backend, built for ``robot``.
        weights: the MSE term weights; traj_weights: (R,) per-run loss weights.
    """

    runs: list[Run]
    heldout: list[Run]
    robot: Robot
    space: ParamSpace
    backend: ReplayBackend
    weights: LossWeights
    traj_weights: np.ndarray

    @property
    def all_runs(self) -> list[Run]:
        return self.runs + self.heldout

    def objective(self) -> ReplayObjective:
        """The fit runs' objective (what the search stages score candidates against)."""
        return ReplayObjective(self.space, self.backend, self.runs, self.weights, self.traj_weights)


#: the friction groups ``--fit_groups auto`` chooses among (not to be named beside it): every law's groups
AUTO_CHOSEN_GROUPS = frozenset(g for law in LAWS.values() for g in law.groups + law.fit_groups) | {"dynamic_ratio"}


def check_record(record: ProblemRecord) -> None:
    """Refuse an option of the problem that cannot work, before any file is read (one line naming the flag; the
    search's and the outputs' flags: ``jobs.fit_args.check_job_flags``)."""
    r = record.replay
    if not record.runs.real_csv:
        raise FitError("no runs: give at least one run: --runs FILE [FILE ...]")
    if r.warmup_ticks < 0:
        raise FitError("--warmup_ticks must be >= 0")
    if r.substeps < 1:
        raise FitError("--substeps must be >= 1")
    if r.substeps > 1 and r.backend != "mujoco":
        raise FitError(f"--substeps {r.substeps}: only the mujoco backend sub-steps the 1 ms tick")
    if r.backend == "mujoco" and r.device != "cpu":
        raise FitError(f"--device {r.device}: the mujoco backend runs on the CPU only; use --backend isaaclab for a GPU")
    c = record.cluster
    if (c.ray_workers is not None and c.ray_workers < 1) or c.ray_worker_cpus < 1 or not c.ray_timeout_s > 0:
        raise FitError("--ray_workers and --ray_worker_cpus must be >= 1 and --ray_timeout_s > 0")
    if record.runs.state_age_ms is not None and record.runs.state_age_ms < 0:
        raise FitError("--state_age_ms must be >= 0 (0 = fresh states)")
    if not record.params.stribeck_velocity > 0:
        raise FitError("--stribeck_velocity must be > 0 [rad/s]")
    extras = record.params.auto_extras()
    dry = [g for g in extras if g in AUTO_CHOSEN_GROUPS or g in LAWS]
    if dry:
        raise FitError(f"--fit_groups auto,{','.join(extras)}: {', '.join(dry)} is friction, which auto chooses; give "
                       f"the groups to fit beside its choice (e.g. auto,torque_offset), or the friction groups without "
                       f"auto")
    groups = set(record.params.groups())
    if "friction" in groups and "mu_static" in groups:
        raise FitError("--fit_groups: friction (Coulomb) and mu_static (static-friction group: Coulomb = dynamic_ratio x "
                       "mu_static) describe the same torque; give one of them")
    for g in ("dynamic_ratio", "stribeck_velocity", "stribeck_shape"):
        if g in groups and "mu_static" not in groups:
            raise FitError(f"--fit_groups: {g} needs mu_static (the static-friction group: Coulomb = dynamic_ratio x mu_static)")
    try:
        law = law_of_groups(groups)
    except ValueError as exc:
        raise FitError(f"--fit_groups: {exc}") from None
    need = {"sigmoid": ("sigmoid_amplitude", "sigmoid_slope"), "dahl": ("friction", "presliding_stiffness"),
            "load": ("friction",)}.get(law.name, ())
    missing = [g for g in need if g not in groups]
    if missing:
        raise FitError(f"--fit_groups: the {law.name} friction law needs {', '.join(missing)} (or give the law's name, "
                       f"'{law.name}', for all its groups)")
    torque_replay.check_torque_args(record)


def read_runs(csvs: Sequence[str], sidecars: Sequence[str], what: str = "--runs", admit_abort: bool = False,
              reader: Callable[[str, str | None], Run] | None = None) -> list[Run]:
    """:func:`isaaclab_sysid.data.read_runs` (CSV + sidecar, or HDF5) with its refusal as a :class:`FitError`.
    ``admit_abort``: read aborted Franka-tooling runs truncated at the abort (``--admit_aborted``).
    ``reader``: reads one (CSV, sidecar) instead (``--replay torque``: torque_replay.run_reader)."""
    try:
        return data_read_runs(csvs, sidecars, admit_abort=admit_abort, what=what, reader=reader)
    except RunFormatError as exc:
        raise FitError(str(exc)) from None


def parse_traj_weights(text: str | None, n_runs: int) -> np.ndarray:
    """(n_runs,) per-run loss weights from ``--traj_weights`` (default 1 each)."""
    if text is None or str(text).strip() == "":
        return np.ones(n_runs)
    try:
        w = np.array([float(v) for v in str(text).split(",")], dtype=float)
    except ValueError:
        raise FitError(f"--traj_weights '{text}': expected comma-separated numbers, e.g. 1.0,1.5") from None
    if w.size != n_runs:
        raise FitError(f"--traj_weights has {w.size} values for {n_runs} --runs runs")
    if np.any(~np.isfinite(w)) or np.any(w < 0):
        raise FitError("--traj_weights must be finite and non-negative")
    return w


#: what ``--fit_groups auto`` adds for servo runs (controller ``servo``): the motor model and the homing error
SERVO_AUTO_GROUPS = ("motor_kt", "motor_r", "encoder_offset")
#: servo-scale default boxes for servo runs where the flag is left at the arm-scale default (a small servo's
#: friction is a few hundredths of a N m: in the arm's 0..5 N m box every fitted value reads as "at its bound").
#: Friction: BAM's XL330 box widened (bam/model.py: max_friction_base 0.2); viscous: a tenth of BAM's 1.0 (its fitted
#: XL330 values are 0.004 to 0.006 N m s/rad: at 1.0 they sit within the 1 % "at a bound" margin).
SERVO_BOUNDS = {"friction": (0.0, 0.5), "viscous": (0.0, 0.1), "mu_static": (0.0, 0.5), "sigmoid_amplitude": (0.0, 0.5)}


def servo_scale_bounds(record: ProblemRecord, log: Callable[[str], None] = print) -> None:
    """Servo runs: the bounds flags left at their arm-scale defaults set to :data:`SERVO_BOUNDS` (said in the log;
    ``config.json`` stores the boxes the fit used)."""
    changed = []
    for g, box in SERVO_BOUNDS.items():
        if tuple(record.params.bounds_of(g)) == tuple(GROUPS[g].default_bounds):
            setattr(record.params, f"{g}_bounds", box)
            changed.append(f"{g} {box[0]:g}..{box[1]:g}")
    if changed:
        log(f"servo runs: servo-scale boxes for the flags left at their arm-scale defaults ({', '.join(changed)} N m or "
            "N m s/rad; give --<group>_bounds to choose)")


def build_space(record: ProblemRecord, joint_names: Sequence[str], robot_config: RobotConfig | None = None,
                servo: bool = False, log: Callable[[str], None] = print) -> ParamSpace:
    """The parameter space of ``--fit_groups`` with its bounds flags, labelled with the robot's joint names; the
    armature's default box is the robot config's physical bound per joint (fit/armature_bound.py).

    ``servo``: the runs are servo runs (controller ``servo``): ``auto`` adds :data:`SERVO_AUTO_GROUPS` (said in the
    log); explicit groups without ``motor_kt`` and ``motor_r`` are refused in one line.
    """
    groups = record.params.groups()
    if not groups:
        raise FitError("--fit_groups is empty")
    if servo and record.params.auto:
        added = [g for g in SERVO_AUTO_GROUPS if g not in groups]
        groups = groups + added
        if added:
            log(f"--fit_groups auto: servo runs: the motor model and homing error added ({', '.join(added)}; "
                "docs/servo_arms.md)")
    elif servo and not {"motor_kt", "motor_r"} <= set(groups):
        raise FitError("servo runs (controller servo) replay the servo's motor model: --fit_groups needs motor_kt and "
                       "motor_r (or auto, which adds them)")
    specs = []
    for g in groups:
        bounds = record.params.bounds_of(g)
        if bounds is None and g != "armature":
            raise FitError(f"unknown parameter group '{g}' in --fit_groups ({', '.join(GROUPS)})")
        try:
            if g == "armature":
                specs.append(armature_spec(bounds, robot_config))
                continue
            specs.append(GroupSpec(g, float(bounds[0]), float(bounds[1])))
        except ValueError as exc:
            raise FitError(str(exc)) from None
    try:
        return ParamSpace(specs, len(joint_names), joint_names)
    except ValueError as exc:
        raise FitError(str(exc)) from None


def build_robot(record: ProblemRecord, runs: Sequence[Run]) -> Robot:
    """The robot of ``--robot`` or the runs' sidecars, with ``--nominal`` inertials."""
    names = {r.meta.robot for r in runs}
    if record.replay.robot is None and len(names) > 1 and bench_set(runs) is None:
        raise FitError(f"runs recorded on different robots: {', '.join(sorted(names))}")
    robot = load_robot(record.replay.robot or sorted(names)[0])
    for r in runs:
        if r.n_dof != robot.n_dof:
            raise FitError(f"run {r.name} has {r.n_dof} joints, robot {robot.name} has {robot.n_dof}")
    if record.replay.nominal:
        from isaaclab_sysid.arm_model import with_body_inertials  # Pinocchio: only when asked
        from isaaclab_sysid.robots.identified import NominalFileError, load_nominal
        from isaaclab_sysid.robots.overrides import InertialError

        path = nominal_file(record.replay.nominal)
        try:
            bodies = load_nominal(path, admit_rejected=record.replay.admit_rejected_nominal)
            # the file holds the regressor's moving bodies (fixed children such as the Franka's hand merged in):
            # with_body_inertials gives each body those inertials without counting its merged children twice, and
            # refuses a link the engines would refuse (the link, its moments and the file named: never --backend)
            robot = with_body_inertials(robot, bodies)
        except (NominalFileError, InertialError) as exc:  # the message names the file
            raise FitError(f"--nominal: {exc}") from None
        except Exception as exc:  # OSError, JSON errors, an unknown link: one line naming the flag, no traceback
            raise FitError(f"--nominal {path}: {exc}") from None
    return robot


def bench_set(runs: Sequence[Run]) -> dict[str, Robot] | None:
    """The bench robots of servo runs recorded on several benches (``meta.robot`` differs) that carry the same
    servos: robot reference -> Robot, or None when the runs are not such a set (one robot, or not servo runs).

    Raises:
        FitError: servo runs on several robots whose joints or servo families differ (not one servo).
    """
    names = sorted({r.meta.robot for r in runs})
    if len(names) < 2 or any(r.meta.controller != "servo" for r in runs):
        return None
    robots = {n: load_robot(n) for n in names}
    first = robots[names[0]]
    for n, rb in robots.items():
        if rb.joint_names != first.joint_names or rb.config.servo != first.config.servo:
            raise FitError(f"servo runs on benches that carry different servos: {names[0]} has joints "
                           f"{list(first.joint_names)} and servo {first.config.servo}, {n} has "
                           f"{list(rb.joint_names)} and {rb.config.servo}")
    return robots


def params_file(flag: str, spec: str) -> str:
    """``--eval_params`` / ``--x0``: a params file, or a fit's output folder (its sysid_best_params.json)."""
    p = Path(spec)
    if not p.is_dir():
        return spec
    folder = RunFolder(p)
    if folder.result.is_file():
        return str(folder.result)
    ckpts = folder.checkpoints()
    hint = f" (it has {len(ckpts)} checkpoint_<iter>.json: give one, e.g. {ckpts[-1][1]})" if ckpts else ""
    raise FitError(f"{flag} {spec}: a folder without {RESULT_FILE}{hint}; give a sysid_best_params.json, a "
                   "checkpoint_<iter>.json, or a fit's output folder that holds one")


def nominal_file(spec: str) -> str:
    """``--nominal``: a file, or an identify_rigid_body.py output folder (its nominal_inertials.json)."""
    p = Path(spec)
    if p.is_dir():
        f = p / "nominal_inertials.json"
        if not f.is_file():
            raise FitError(f"--nominal {spec}: a folder without nominal_inertials.json (give the file, or the --out "
                           "folder of scripts/identify_rigid_body.py)")
        return str(f)
    return spec


def ray_options(cluster: ClusterConfig) -> RayOptions | None:
    """``--cluster``/``--ray_*`` as the factory's :class:`~isaaclab_sysid.sim.factory.RayOptions` (None: local).

    Raises:
        FitError: ``--ray_address``/``--ray_workers`` given without ``--cluster ray``.
    """
    if cluster.cluster == "ray":
        return RayOptions(address=cluster.ray_address, workers=cluster.ray_workers, worker_cpus=cluster.ray_worker_cpus,
                          timeout_s=cluster.ray_timeout_s)
    flags = (("--ray_address", cluster.ray_address), ("--ray_workers", cluster.ray_workers))
    given = [f for f, v in flags if v is not None]
    if given:
        raise FitError(f"{', '.join(given)} given but --cluster is {cluster.cluster}; add --cluster ray")
    return None


def build_backend(record: ProblemRecord, robot: Robot, log: Callable[[str], None] = print) -> ReplayBackend:
    """The replay backend of ``--backend`` for ``robot``, in this process or on Ray workers (``--cluster``)."""
    r = record.replay
    options = ReplayOptions(warmup_ticks=r.warmup_ticks, torque_clamp=r.torque_clamp, slew_limit=r.slew_limit,
                            stribeck_velocity=record.params.stribeck_velocity,
                            window_ticks=torque_replay.window_ticks(record))
    # the isaaclab backend sizes its delay buffer to the delay bounds
    kw = {"max_delay": max(4, int(max(record.params.delay_bounds)))} if r.backend == "isaaclab" else {"substeps": r.substeps}
    try:
        age = record.runs.state_age_ms
        wrap = partial(StateAgeBackend, model=StateAgeModel(int(age))) if age else None  # on each Ray worker too
        return make_backend(r.backend, robot, options, ray=ray_options(record.cluster), wrap=wrap, log=log,
                            device=r.device, **kw)
    except BackendUnavailableError as exc:
        raise FitError(str(exc), code=3) from None
    except ValueError as exc:
        raise FitError(f"--backend {r.backend}: {exc}") from None


def build_problem(record: ProblemRecord, log: Callable[[str], None] = print, *, start: str = "low",
                  population: int = 0, eval_params: str | None = None) -> FitProblem:
    """Check the record, read the runs, build robot, space and backend (see module docstring); what is resolved from
    the runs is written into ``record``.

    ``start``: the search's start (``--x0``: an unset torque-replay window is chosen at it); ``population``: the
    search's population (``--num_envs``: a torque replay's memory check, which takes at least the refinement's
    stencil); ``eval_params``: the ``--eval_params`` file (its fit's window, else one chosen at its parameters).
    """
    check_record(record)
    torque = record.replay.replay == "torque"
    ab, reader = record.replay.admit_aborted, torque_replay.run_reader(record) if torque else None
    runs = read_runs(record.runs.real_csv, record.runs.real_sidecar, "--runs", ab, reader)
    heldout = (read_runs(record.runs.heldout_csv, record.runs.heldout_sidecar, "--heldout", ab, reader)
               if record.runs.heldout_csv else [])
    clash = {r.name for r in runs} & {r.name for r in heldout}
    if clash:
        raise FitError(f"run(s) {', '.join(sorted(clash))} given both as fit and held-out runs")
    tw = parse_traj_weights(record.runs.traj_weights, len(runs))
    robot = build_robot(record, runs + heldout)
    benches = None if record.replay.robot or torque else bench_set(runs + heldout)
    if benches is not None and (record.cluster.cluster == "ray" or record.replay.nominal):
        raise FitError("runs on several benches: --cluster ray and --nominal apply to one robot; fit the benches in "
                       "this process with their configs' own models")
    note = None if record.replay.robot else unstated_robot_note(runs + heldout)
    if note:
        log(note)
    log(robot.arm_line())  # what the arm carries, as every stage that builds it says (docs/robots.md)
    if torque:  # the logged torque needs no law, EE point or limits; windows and memory checked before simulating
        space = build_space(record, robot.joint_names, robot.config)
        # --window_s unset: chosen from the fit runs at the start model (the --x0 seed); --eval_params: the
        # evaluated fit's own window, else chosen at the evaluated parameters
        torque_replay.resolve_window(record, runs, robot,
                                     space.to_batch(_window_model(record, space, start, eval_params, log)), log)
        torque_replay.check_batch_memory(record, runs + heldout, robot.n_dof, space.dim, population)
        torque_replay.describe(record, runs + heldout, robot, log)
    else:
        runs, heldout, robot = resolve_replay_facts(record.replay, runs, heldout, robot, log)  # law, EE point, limits
        servo = any(r.meta.controller == "servo" for r in runs + heldout)
        if servo and any(r.meta.controller != "servo" for r in runs + heldout):
            raise FitError("servo runs (controller servo) and runs of other controllers in one fit: fit them apart")
        if servo:
            servo_scale_bounds(record, log)
        space = build_space(record, robot.joint_names, robot.config, servo=servo, log=log)
        # the flag, else the sidecars' state_age, else refused (one line); kept in record for the backend, verdict, config.json
        record.runs.state_age_ms = resolve_state_age(record.runs.state_age_ms, runs + heldout, log)
    if "armature" in space.group_names:
        log(describe_armature(space.group("armature")))
    if benches is not None:
        log(f"{len(benches)} benches, one servo: {', '.join(benches)} (each run replayed on its own bench, with its "
            "config's EE point)")
        benches[sorted(benches)[0]] = robot  # the first bench as the replay facts left it
    backend = _checked_backend(record, robot, space, benches)
    w_x = 0.0 if torque else record.loss.w_x  # a torque replay scores q and qd (the EE position is a function of q)
    weights = LossWeights(record.loss.w_q, record.loss.w_dq, w_x, **channel_scales(runs, record.loss.channel_scale))
    return FitProblem(runs, heldout, robot, space, backend, weights, tw)


def _window_model(record: ProblemRecord, space: ParamSpace, start: str, eval_params: str | None,
                  log: Callable[[str], None]) -> np.ndarray:
    """The model (normalized, (D,)) at which an unset ``--window_s`` is chosen: the start ``start`` for a fit. For
    ``--eval_params FILE`` the window is the evaluated fit's own when its folder's config.json records one (set in
    ``record``, so nothing is chosen), else it is chosen at the evaluated parameters, not at ``--x0``: a window chosen
    at an unrelated start would score the parameters on other windows than their fit's."""
    if eval_params is None or record.replay.window_s is not None:
        return start_point(start, space)
    f = Path(params_file("--eval_params", str(eval_params)))
    folder = RunFolder(f.parent)
    try:
        w = folder.read_problem().replay.window_s if folder.config.is_file() else None
    except (FitError, TypeError, ValueError, KeyError, AttributeError):
        w = None
    if isinstance(w, (int, float)) and w > 0:
        record.replay.window_s = float(w)
        log(f"--window_s unset: {float(w):g} s, the evaluated fit's window ({folder.config})")
    return start_point(str(f), space)


def _checked_backend(record: ProblemRecord, robot: Robot, space: ParamSpace,
                     benches: dict[str, Robot] | None = None) -> ReplayBackend:
    if benches is not None:  # sim/benches.py: one backend per bench, each run on its own
        from isaaclab_sysid.sim.benches import BenchSetBackend

        backend: ReplayBackend = BenchSetBackend({name: build_backend(record, rb) for name, rb in benches.items()})
    else:
        backend = build_backend(record, robot)
    bad = [g for g in space.group_names if g not in backend.supported_groups]
    if bad:
        raise FitError(f"backend '{record.replay.backend}' cannot represent parameter group(s) {', '.join(bad)} "
                       f"(supported: {', '.join(sorted(backend.supported_groups))})")
    return backend


def start_point(spec: str, space: ParamSpace, log: Callable[[str], None] = print) -> np.ndarray:
    """The CMA-ES start in the normalized space: ``low``, ``center`` or a params JSON file.

    ``low`` (default) starts in the sliding regime (:meth:`ParamSpace.low_start`):
    armature at 20 % of its range, friction and viscous at 5 %, the delay in the
    middle. From the centre of the default bounds (2.5 N m of Coulomb friction) most
    joints stick, the loss is flat in every direction that does not unstick them,
    and the search wastes its generations there (docs/fit.md).

    A file (a ``sysid_best_params.json``, a checkpoint, or a ``seed_fit.py`` seed) sets
    the groups it holds (clipped to the bounds); groups it lacks keep the ``low`` start. A servo part file
    (``export_dr.py --servo_model``, robots/servo_model.py) sets the groups it holds on every joint
    (:func:`seed_from_parts`; ``log`` says which).
    """
    if spec == "center":
        return np.full(space.dim, 0.5)
    x = space.low_start()
    if spec == "low":
        return x
    part = _servo_part_file(spec)
    if part is not None:  # a servo part (robots/servo_model.py): its numbers on every joint
        return seed_from_parts(x, space, (part,) * space.n_dof, log)
    try:
        given = FitResult.read(spec, space=space)
    except (OSError, ValueError) as exc:
        raise FitError(f"--x0 {spec}: expected low, center or a sysid_best_params.json/checkpoint ({exc})") from None
    values = {**_law_starts(spec, [g for g in space.group_names if g not in given.values], log), **given.values}
    from_file = space.normalize({g: values.get(g, 0.0) for g in space.group_names})
    for g in space.groups:
        if g.name in values:
            x[space.slice(g.name)] = from_file[space.slice(g.name)]
    dropped = [g for g in given.space.group_names if g not in space.group_names]
    if dropped:
        log(dropped_groups_line(spec, dropped))
    return x


def _law_starts(spec: str, wanted: Sequence[str], log: Callable[[str], None]) -> dict[str, np.ndarray]:
    """The groups of ``wanted`` a seed file's ``law_starts`` holds (seed_fit.py writes another friction law's start
    there, beside the Coulomb model it describes): group -> (N,) values; ``log`` says which were taken."""
    if not wanted:
        return {}
    try:
        starts = json.loads(Path(spec).read_text(encoding="utf-8")).get("law_starts") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    out = {g: np.asarray(v, dtype=float) for law in starts.values() if isinstance(law, dict)
           for g, v in law.items() if g in wanted}
    if out:
        log(f"--x0 {spec}: {', '.join(out)} from the file's law_starts (the rigid-body step's start of that law)")
    return out


def dropped_groups_line(spec: str, dropped: Sequence[str]) -> str:
    """The line that says a start file's groups the fit does not fit are not used (never dropped silently); another
    friction law's groups (a seed holds the sigmoid's start beside Coulomb's) are said to be that law's start."""
    laws = {law.name: [g for g in dropped if g in law.groups] for law in LAWS.values() if law.groups}
    laws = {name: gs for name, gs in laws.items() if gs}
    rest = [g for g in dropped if not any(g in gs for gs in laws.values())]
    parts = []
    if rest:
        parts.append(f"holds {', '.join(rest)}, which --fit_groups does not fit: not used (the fit holds them at "
                     "their nominal values; add them to --fit_groups to start them from this file)")
    for name, gs in laws.items():
        parts.append(f"holds the {name} friction law's start ({', '.join(gs)}), which this fit's law does not use "
                     f"(--fit_groups {name} starts from it)")
    text = f"--x0 {spec}: " + "; ".join(parts)
    if "torque_offset" in dropped:
        text += ("; the rigid-body step's torque offsets belong with its inertials (its gravity is both together): "
                 "a torque replay with --nominal needs torque_offset in --fit_groups (docs/rigid_body.md)")
    return text


def _servo_part_file(spec: str):
    """The servo part in ``spec`` when it is a part file (its ``kind``), else None; a bad part is refused in one line."""
    from isaaclab_sysid.robots.servo_model import SERVO_MODEL_KIND, ServoModel, ServoModelFileError

    p = Path(spec)
    if p.suffix != ".json" or not p.is_file():
        return None
    try:
        body = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("kind") != SERVO_MODEL_KIND:
        return None
    try:
        return ServoModel.from_json(body, str(p))
    except ServoModelFileError as exc:
        raise FitError(f"--x0: {exc}") from None


def seed_from_parts(x: np.ndarray, space: ParamSpace, parts, log: Callable[[str], None] = print) -> np.ndarray:
    """``x`` (D,) with the groups the servo parts hold set to the parts' values (robots/servo_model.part_values), each
    joint from its own part (None: that joint keeps ``x``), clipped to the bounds; ``log`` says which values came from
    which part and which were clipped."""
    from isaaclab_sysid.robots.servo_model import part_values

    vals = part_values(tuple(parts))
    x = np.array(x, dtype=float)
    cur = space.decode(x[None])
    used, clipped = [], []
    for g in space.groups:
        if g.name not in vals:
            continue
        v = np.asarray(vals[g.name], dtype=float)
        if g.per_joint:
            have = np.isfinite(v)
            new = np.where(have, v, np.asarray(cur[g.name][0], dtype=float))
            lo, hi = g.lower, g.uppers(space.n_dof)
            for j in np.flatnonzero(have):
                used.append(f"{g.name}[{space.joint_names[j]}] = {v[j]:.6g}")
                if not lo <= v[j] <= hi[j]:
                    clipped.append(f"{g.name}[{space.joint_names[j]}]")
            x[space.slice(g.name)] = space.normalize({**{k: np.asarray(c[0]) for k, c in cur.items()},
                                                      g.name: new})[space.slice(g.name)]
        else:
            used.append(f"{g.name} = {int(v[0])}")
            if not g.lower <= v[0] <= g.upper:
                clipped.append(g.name)
            x[space.slice(g.name)] = space.normalize({**{k: np.asarray(c[0]) for k, c in cur.items()},
                                                      g.name: v[0]})[space.slice(g.name)]
    sources = sorted({p.source or "(no source)" for p in parts if p is not None})
    if used:
        log(f"start from the servo part ({', '.join(sources)}): {', '.join(used)}"
            + (f"; clipped to the search bounds: {', '.join(clipped)}" if clipped else ""))
    else:
        log("the servo part holds none of the fitted groups: the start is unchanged")
    return x
