"""The command behind ``scripts/identify_rigid_body.py``: flags -> checked inputs -> identify -> files.

Two inputs: the UR10e CSV logs of the shared data (output: motor current [A], with
published, given or identified drive gains) or, with ``--runs``, runs in the
project's run format (output: measured joint torque [N m]). Every flag is checked
before a file is read; a bad flag or file stops with one line ``error: ...`` and
exit status 2 (:func:`main_from_args`).
"""

from __future__ import annotations

import sys

import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from typing import Annotated

import tyro

from isaaclab_sysid.data import RunFormatError, read_runs
from isaaclab_sysid.rigid_body.base_params import compute_base_parameters
from isaaclab_sysid.rigid_body.drive_gains import DriveGainResult, Payload, identify_drive_gains
from isaaclab_sysid.rigid_body.feasibility import mass_sentence
from isaaclab_sysid.rigid_body.options import PipelineOptions, RigidBodyError, require, require_choice, require_number
from isaaclab_sysid.rigid_body.pipeline import (
    IdentificationData,
    ReferenceModel,
    RigidBodyIdentification,
    identify,
    load_ur10e_processed,
    published_standard_vector,
)
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, Processed
from isaaclab_sysid.robots.regressor import Regressor, RegressorOptions
from isaaclab_sysid.rigid_body.report import verdict
from isaaclab_sysid.rigid_body.runs_input import commanded_trajectory, gravity_record, process_run, robot_of
from isaaclab_sysid.data.formats.ur10e import (
    PublishedParameters,
    UR10eDataError,
    is_fourier_unloaded,
    list_runs,
    load_published_parameters,
    ur10e_dir,
)
from isaaclab_sysid.rigid_body.writers import OutputFiles, nominal_verdict, verdict_lines, write_identification
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.robots.config import RobotConfigError, load_robot_config

#: Output signals of --runs.
RUN_SIGNALS = ("tau_J", "tau")
GAIN_METHODS = ("output_error", "equation_error")


@dataclass
class IdentifyArgs:
    """Rigid-body least squares on real logs (UR10e CSV format, or --runs in the run format)."""

    out: Path | None = None
    """Output folder (created; default logs/rigid_body/<robot>)."""
    runs: tuple[Path, ...] = ()
    """Identification runs in the project's run format (CSV + sidecar, or HDF5); when given,
    the UR10e data is not used and the output is the measured joint torque (--torque_signal)."""
    heldout: tuple[Path, ...] = ()
    """Held-out runs (run format) whose torque is predicted and reported."""
    signal: Annotated[str, tyro.conf.arg(name="torque_signal")] = "tau_J"
    """--runs output signal: tau_J (measured joint torque, libfranka: includes gravity) or tau (commanded)
    (--torque_signal, the shared spelling; --signal still works)."""
    tau_includes_gravity: tyro.conf.DisallowNone[bool | None] = None
    """--runs: the signal contains gravity (real Panda tau_J: yes; the gravity-free twin's tau_J: no). Default: what
    the runs' sidecars record (gravity_compensated, the recorder, schema 2); required where they do not say, refused
    where it contradicts them."""
    logged_velocity: bool = True
    """--runs: use the logged dq (filtered) instead of differentiating q."""
    data: Path | None = None
    """UR10e data folder with identification_data/ and validation_data/ (default: the shared data)."""
    robot: str | None = None
    """Robot config name or path (default: ur10e, or the runs' sidecar robot with --runs); it states what the arm
    carries: franka_panda (the Franka Hand), franka_panda_nohand (nothing), or a config with a [tool]
    (docs/rigid_body.md). Any config of the sidecar's arm is accepted."""
    ident: tuple[str, ...] = ()
    """Identification CSV names (default: the Fourier runs without payload, '*harm*' and not '*Load*')."""
    method: str = "ols"
    """Estimator: ols, wls (per-joint noise weights), tls, or iv (instrumental variables for closed-loop
    data: the instrument is the regressor of the commanded trajectory q_des; --runs with joint_pd runs only)."""
    dt: float = 0.02
    """Resampling interval [s]."""
    cutoff_hz: float = 4.0
    """Zero-phase Butterworth corner [Hz] (order 4)."""
    coulomb_deadband: float = 1e-3
    """|qd| [rad/s] below which the Coulomb column is zero."""
    drive_gains: tuple[float, ...] | None = None
    """Current-to-torque gains [N m/A] (default: the authors' published gains, or --identify_gains)."""
    identify_gains: bool = False
    """Identify the drive gains from runs carrying a payload of known mass (--payload_runs,
    --payload_mass) together with the unloaded identification runs, then identify with them."""
    payload_runs: tuple[str, ...] = ("ur-20_02_19_14harm50secLoad.csv",)
    """identification_data runs carrying the payload (each run may mount it differently)."""
    payload_mass: float = 2.805
    """Payload mass [kg]; 2.805 kg is the payload of the UR10e *Load runs (the authors' estimate_drive_gains.m)."""
    payload_heldout: tuple[str, ...] = ()
    """identification_data runs with the same payload, predicted as held-out (its placement fitted per run)."""
    gain_method: str = "output_error"
    """output_error (LM on the measured current; default) or equation_error (the authors' linear OLS)."""
    fixed_gains: tuple[float, ...] = ()
    """With --identify_gains: one value per joint [N m/A] to hold, nan where identified (e.g. nan 10.7 nan nan nan nan)."""
    max_corrupt_head_rows: int = 0
    """Drop a corrupt block of at most this many rows at the start of a UR10e log (two real logs begin
    with garbage packets; 25 covers them); 0 refuses any bad row. Dropped rows are recorded."""
    published: Path | None = None
    """UR10E_parameters.txt to compare against (default: the one in --data; 'none' to skip)."""
    audit_uniform: int = 20000
    """Uniform poses per seed in the all-pose audit."""
    audit_dense: int = 10000
    """Dense-region poses per seed in the audit."""
    audit_grid: int = 5
    """Grid points per joint (joint 1 held)."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Audit seeds."""
    sdp_mode: str = "map"
    """SDP: map (Mahalanobis to the base parameters + URDF prior), exact (reproduce them), or auto."""
    prior_rel_std: float = 0.3
    """Prior std of the URDF link parameters: this fraction of the link mass (x radius of gyration for
    first moments, its square for inertias)."""
    prior_weight: float = 1.0
    """Weight of the prior term (0: nearest to the data only: unphysical splits)."""
    sdp_covariance: str = "hac_conditioned"
    """Base-parameter covariance in the SDP: hac_conditioned (Newey-West with its near-zero directions
    floored at its mean long-run variance ratio), hac (Newey-West as it is) or ols."""
    hac_lag_s: float = 0.5
    """HAC window [s]."""
    mass_upper_factor: float | None = None
    """Optional SDP bound on link masses, factor x URDF mass (UR10e authors: 1.1)."""
    mass_lower_factor: float | None = None
    """Optional SDP lower bound on link masses, factor x URDF mass."""
    no_plots: tyro.conf.FlagCreatePairsOff[bool] = False
    """Skip the PNG per held-out run."""


@dataclass
class Prepared:
    """Checked, preprocessed inputs of one identification and the load + preprocess time [s];
    ``facts``: what the signal was taken to contain and where that came from (recorded in the outputs)."""

    data: IdentificationData
    t_load: float
    facts: dict[str, str] | None = None


def main_from_args(args: IdentifyArgs) -> int:
    """Run; a :class:`RigidBodyError` becomes one line ``error: ...`` on stderr and exit status 2."""
    try:
        run(args)
    except RigidBodyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def run(args: IdentifyArgs) -> tuple[RigidBodyIdentification, OutputFiles]:
    """Check every flag, load and preprocess, identify, write the files, print the summary."""
    options = pipeline_options(args)
    check_flags(args)
    prepared = prepare_runs(args) if args.runs else prepare_ur10e(args)
    out = args.out if args.out is not None else Path("logs/rigid_body") / prepared.data.regressor.robot.name
    res = identify(prepared.data, options)
    verdict = nominal_verdict(res, prepared.facts)
    files = write_identification(res, out, verdict)
    print_summary(res, files, prepared.t_load)
    print_verdict(verdict, files)
    return res, files


def pipeline_options(args: IdentifyArgs) -> PipelineOptions:
    """The checked pipeline options the flags set: same-named fields, plus --seeds and --no-plots."""
    same = {f.name: getattr(args, f.name) for f in fields(PipelineOptions) if hasattr(args, f.name)}
    return PipelineOptions(**same, audit_seeds=args.seeds, plots=not args.no_plots).validate()


def check_flags(args: IdentifyArgs) -> None:
    """The flags :class:`PipelineOptions` does not hold, and the combinations each input allows.

    Raises:
        RigidBodyError: naming the flag.
    """
    require_number("--dt", args.dt)
    require_number("--cutoff-hz", args.cutoff_hz)
    require_number("--coulomb-deadband", args.coulomb_deadband, strict=False)
    if args.runs:
        require(not args.identify_gains,
                "--identify-gains needs current logs with a payload (UR10e format); --runs logs torque")
        require_choice("--torque_signal", args.signal, RUN_SIGNALS)
        for name in ("ident", "data", "drive_gains", "published", "payload_heldout", "fixed_gains"):
            value = getattr(args, name)
            require(value is None or value == (), f"--{name.replace('_', '-')} is for the UR10e logs, not --runs")
        require(args.max_corrupt_head_rows == 0, "--max-corrupt-head-rows is for the UR10e logs, not --runs")
        return
    require(args.tau_includes_gravity is None, "--tau-includes-gravity is for --runs (the UR10e current model always "
            "includes gravity)")
    require(args.method != "iv", "--method iv needs the commanded joint trajectory (q_des): runs in the run format "
            "(--runs) from the joint_pd controller; the UR10e logs hold no desired positions")
    require(not args.heldout, "--heldout needs --runs (the UR10e held-out runs are validation_data/)")
    require(not (args.identify_gains and args.drive_gains is not None),
            "give --drive-gains or --identify-gains, not both")
    require(args.max_corrupt_head_rows >= 0, f"--max-corrupt-head-rows must be >= 0; got {args.max_corrupt_head_rows}")
    if args.identify_gains:
        require_number("--payload-mass", args.payload_mass)
        require_choice("--gain-method", args.gain_method, GAIN_METHODS)
        require(len(args.payload_runs) > 0, "--identify-gains needs at least one --payload-runs run")
    else:
        require(not args.payload_heldout, "--payload-heldout needs --identify-gains")
        require(not args.fixed_gains, "--fixed-gains needs --identify-gains")


def prepare_runs(args: IdentifyArgs) -> Prepared:
    """--runs: read the runs (run format), pick the robot, preprocess; output = measured joint torque [N m]."""
    t0 = time.perf_counter()
    try:
        ident_runs = read_runs(list(args.runs))
        held_runs = read_runs(list(args.heldout))
        robot = load_robot(robot_of(ident_runs + held_runs, args.robot))
    except (RunFormatError, RobotConfigError, ValueError, OSError) as exc:
        raise RigidBodyError(str(exc)) from None
    for r in ident_runs + held_runs:
        require(r.n_dof == robot.n_dof, f"run {r.name} has {r.n_dof} joints, robot {robot.name} has {robot.n_dof}")
        require(same_arm(r.meta.robot, robot), f"--robot {args.robot} (config {robot.name}, arm {robot.config.arm}) "
                f"contradicts {_file(r)}: sidecar robot {r.meta.robot}; drop --robot (the sidecar's is used) or fix "
                "the sidecar")
        period = 1.0 / r.meta.log_rate_hz
        require(args.dt >= period * (1 - 1e-9), f"--dt {args.dt:g} s is finer than {_file(r)}: sidecar log_rate_hz "
                f"{r.meta.log_rate_hz:g} ({period:g} s rows); give --dt {period:g} or coarser")
    gravity, why = resolve_gravity(args, ident_runs + held_runs)
    print(robot.arm_line() + carried_source(args.robot, ident_runs + held_runs, robot))
    print(f"{args.signal} {'includes' if gravity else 'excludes'} gravity: {why}")
    reg = Regressor(robot, RegressorOptions(coulomb_deadband=args.coulomb_deadband, gravity=gravity))
    pre = PreprocessOptions(dt=args.dt, cutoff_hz=args.cutoff_hz)
    try:
        ident = [process_run(r, pre, args.signal, args.logged_velocity) for r in ident_runs]
        valid = {r.name: process_run(r, pre, args.signal, args.logged_velocity) for r in held_runs}
        instruments = [commanded_trajectory(r, pre) for r in ident_runs] if args.method == "iv" else None
    except ValueError as exc:
        raise RigidBodyError(str(exc)) from None
    data = IdentificationData(reg, ident, valid, signal=args.signal, unit="N m", instruments=instruments)
    return Prepared(data, time.perf_counter() - t0, {"gravity_in_signal": why})


def same_arm(sidecar_robot: str, robot: Robot) -> bool:
    """Whether a run's sidecar ``robot`` names a config of ``robot``'s arm (whatever each says it carries)."""
    if sidecar_robot == robot.name:
        return True
    try:
        return load_robot_config(sidecar_robot).arm == robot.config.arm
    except RobotConfigError:
        return False


def carried_source(flag: str | None, runs: list, robot: Robot) -> str:
    """Where the end effector comes from, appended to :meth:`Robot.arm_line`."""
    names = sorted({r.meta.robot for r in runs})
    if flag:
        return f" (--robot {flag}; the runs' sidecars name {', '.join(names)})" if names != [robot.name] else \
            f" (--robot {flag})"
    return " (the runs' sidecars; --robot <config> states another end effector)"


def _file(run) -> str:
    return str(run.source or run.name)


def resolve_gravity(args: IdentifyArgs, runs: list) -> tuple[bool, str]:
    """Whether the runs' ``--torque_signal`` holds gravity: what their files record (:func:`gravity_record`), the flag
    where they are silent. Returns (value, where it comes from).

    Raises:
        RigidBodyError: the flag contradicts a file (both values and the file named), two files disagree,
            or a file is silent and the flag is missing.
    """
    flag = args.tau_includes_gravity
    words = {True: "--tau-includes-gravity", False: "--no-tau-includes-gravity"}
    recorded = [(r, *gravity_record(r, args.signal)) for r in runs]
    known = [(r, v, why) for r, v, why in recorded if v is not None]
    for r, v, why in known:
        if flag is not None and flag != v:
            raise RigidBodyError(f"{words[flag]} contradicts {_file(r)}: its {args.signal} "
                f"{'includes' if v else 'excludes'} gravity ({why}); drop the flag (the file's is used)")
    values = {v for _, v, _ in known}
    if len(values) > 1:
        a = next((r, why) for r, v, why in known if v)
        b = next((r, why) for r, v, why in known if not v)
        raise RigidBodyError(f"{_file(a[0])} records {args.signal} with gravity ({a[1]}) but {_file(b[0])} without "
                             f"({b[1]}); identify them separately")
    silent = [(r, why) for r, v, why in recorded if v is None]
    if silent and flag is None:
        r, why = silent[0]
        raise RigidBodyError(f"{_file(r)}: does its {args.signal} include gravity? The file does not say ({why}); "
                             f"pass --tau-includes-gravity (a real arm's torque sensor, libfranka's tau_J) or "
                             f"--no-tau-includes-gravity (a gravity-free simulation)")
    if flag is not None:
        return flag, f"{words[flag]} (the files do not say)" if not known else f"{words[flag]}, as the files record"
    r, v, why = known[0]
    more = f" (and {len(known) - 1} more run(s) alike)" if len(known) > 1 else ""
    return v, f"{_file(r)}: {why}{more}"


@dataclass
class UR10eLogs:
    """The preprocessed UR10e logs: identification, validation, payload and held-out payload runs."""

    ident: list[Processed]
    valid: dict[str, Processed]
    loaded: list[Processed]
    loaded_valid: dict[str, Processed]


def prepare_ur10e(args: IdentifyArgs) -> Prepared:
    """UR10e logs: check the folder, names, gains and robot, then load; output = motor current [A]."""
    folder = args.data or ur10e_dir()
    require((folder / "identification_data").is_dir() and (folder / "validation_data").is_dir(),
            f"{folder}: needs identification_data/ and validation_data/ (set --data or ISAACLAB_SYSID_SHARED)")
    ident_files = _ur10e_ident_files(args, folder / "identification_data")
    published = _published(args, folder)
    require(args.identify_gains or args.drive_gains is not None or published is not None,
            "--drive-gains or --identify-gains needed (no published parameter file found)")
    robot = load_robot(args.robot or "ur10e")
    _check_gain_flags(args, robot)
    print(robot.arm_line())
    reg = Regressor(robot, RegressorOptions(coulomb_deadband=args.coulomb_deadband))
    t0 = time.perf_counter()
    logs = _load_ur10e(args, folder, ident_files)
    t_load = time.perf_counter() - t0
    dg = _identify_gains(args, reg, logs) if args.identify_gains else None
    if dg is not None:
        gains = dg.gains
    elif args.drive_gains is not None:
        gains = np.array(args.drive_gains, dtype=float)
    else:
        gains = published.drive_gains
    ref = {}
    if published is not None:
        ref["published (authors)"] = ReferenceModel(published_standard_vector(reg, published), published.drive_gains)
    data = IdentificationData(reg, logs.ident, logs.valid, "current", "A", gains, ref, dg, logs.loaded_valid)
    return Prepared(data, t_load, {"gravity_in_signal": "the UR10e motor current: the arm holds its weight"})


def _ur10e_ident_files(args: IdentifyArgs, folder: Path) -> list[Path]:
    """The identification files (--ident, default the unloaded Fourier runs); every named run must exist."""
    files = list_runs(folder)
    wanted = set(args.ident) | (set(args.payload_runs) | set(args.payload_heldout) if args.identify_gains else set())
    missing = wanted - {f.name for f in files}
    require(not missing, f"{folder}: no such run(s): {sorted(missing)}")
    return [f for f in files if (f.name in args.ident if args.ident else is_fourier_unloaded(f))]


def _published(args: IdentifyArgs, folder: Path) -> PublishedParameters | None:
    """The published parameters: --published FILE, 'none', or the data folder's file when there."""
    if args.published is not None and str(args.published) != "none":
        require(args.published.is_file(), f"--published {args.published}: no such file")
    path = args.published or folder / "UR10E_parameters.txt"
    if str(path) == "none" or not Path(path).is_file():
        return None
    try:
        return load_published_parameters(path)
    except ValueError as exc:
        raise RigidBodyError(str(exc)) from None


def _check_gain_flags(args: IdentifyArgs, robot: Robot) -> None:
    """--drive-gains and --fixed-gains: one value per joint of ``robot``."""
    n = robot.n_dof
    if args.drive_gains is not None:
        g = np.array(args.drive_gains, dtype=float)
        require(g.shape == (n,) and bool(np.all(np.isfinite(g) & (g > 0))),
                f"--drive-gains needs {n} positive values [N m/A]; got {len(g)}")
    if args.fixed_gains:
        require(len(args.fixed_gains) == n, f"--fixed-gains needs {n} values (nan where identified)")
        k = np.array(args.fixed_gains, dtype=float)
        require(bool(np.all(np.isnan(k) | (k > 0))), "--fixed-gains must be positive or nan")


def _load_ur10e(args: IdentifyArgs, folder: Path, ident_files: list[Path]) -> UR10eLogs:
    """Load and preprocess every UR10e log the flags name (a bad file: one line with the way out)."""
    pre = PreprocessOptions(dt=args.dt, cutoff_hz=args.cutoff_hz)
    ident_dir = folder / "identification_data"

    def load(path: Path) -> Processed:
        return load_ur10e_processed(path, pre, args.max_corrupt_head_rows)

    try:
        logs = UR10eLogs(
            ident=[load(f) for f in ident_files],
            valid={f.name: load(f) for f in list_runs(folder / "validation_data")},
            loaded=[load(ident_dir / n) for n in args.payload_runs] if args.identify_gains else [],
            loaded_valid={n: load(ident_dir / n) for n in args.payload_heldout} if args.identify_gains else {},
        )
    except UR10eDataError as exc:
        hint = " (a corrupt block at the start of a file: --max-corrupt-head-rows N drops it)" \
            if args.max_corrupt_head_rows == 0 else ""
        raise RigidBodyError(f"{exc}{hint}") from None
    except ValueError as exc:
        raise RigidBodyError(str(exc)) from None
    for p in [*logs.ident, *logs.valid.values(), *logs.loaded, *logs.loaded_valid.values()]:
        if p.record.get("dropped_corrupt_head_rows"):
            print(f"note: {p.record['source']}: dropped {p.record['dropped_corrupt_head_rows']} corrupt leading rows")
    return logs


def _identify_gains(args: IdentifyArgs, reg: Regressor, logs: UR10eLogs) -> DriveGainResult:
    """--identify-gains: drive gains from the unloaded and payload runs; printed; all must be positive."""
    fixed = np.array(args.fixed_gains, dtype=float) if args.fixed_gains else None
    base = compute_base_parameters(reg)
    try:
        dg = identify_drive_gains(reg, base, logs.ident, logs.loaded, Payload(args.payload_mass), fixed_gains=fixed,
                                  method=args.gain_method, hac_lags=max(1, int(round(args.hac_lag_s / args.dt))))
    except ValueError as exc:
        raise RigidBodyError(str(exc)) from None
    print_drive_gains(dg, reg.robot.joint_names)
    require(not np.any(dg.gains <= 0), "a drive gain came out non-positive (see above); hold it with --fixed-gains")
    return dg


def print_drive_gains(dg: DriveGainResult, joint_names: tuple[str, ...]) -> None:
    """The identified gains [N m/A] with their HAC error bars, payload placements and warnings."""
    print(f"drive gains identified ({dg.method}, {dg.payload_mass:g} kg payload on {dg.payload_link}, "
          f"{dg.n_obs} rows, {dg.iterations} evaluations):")
    for n, k, s, r, fx, ke in zip(joint_names, dg.gains, dg.std_hac, dg.rel_std_hac, dg.fixed,
                                  dg.equation_error_gains):
        err = "given" if fx else f"+- {s:.3f} ({r:.1f} %)"
        print(f"  {n:>20}: {k:.3f} N m/A {err}   [equation-error {ke:.3f}]")
    for i, com in enumerate(dg.payload_com):
        print(f"  payload placement {i}: centre of mass " + " ".join(f"{c:.3f}" for c in com) + " m (link frame)")
    if not dg.converged:
        print(f"  warning: the gain estimate did not converge ({dg.message})")
    if dg.weak:
        print("  warning: weakly identified gains (relative std above 5 %): " + ", ".join(dg.weak))


def print_verdict(verdict: dict, files: OutputFiles) -> None:
    """The engine adjustments of the written inertials, then the verdict on them (with likely causes)."""
    for note in files.engine_notes:
        print(f"note: {files.nominal}: {note}")
    for line in verdict_lines(verdict, files):
        print(line)


def print_summary(res: RigidBodyIdentification, files: OutputFiles, t_load: float) -> None:
    """The run's summary: sizes, audits, SDP consistency, link masses, held-out RMSE, timing, files."""
    unit, rec, c = res.data.unit, res.reconstruction, res.consistency
    print(f"identification runs: {len(res.data.ident)}; held-out runs: {len(res.data.valid)}; "
          f"load+preprocess {t_load:.1f} s")
    print(f"base parameters {res.base.rank}/{len(res.base.param_names)}; cond {res.fit.cond:.1f}")
    print(f"audit LS: {verdict(res.audit_ls.passed)} min eig {res.audit_ls.min_eig:.4g} "
          f"over {res.audit_ls.n_poses} poses; SDP mode {rec.mode}; "
          f"audit SDP: {verdict(res.audit_reconstructed.passed)}")
    print(f"SDP consistency (b = {c.base_dof}): Mahalanobis {c.mahalanobis_conditioned_cov:.1f} conditioned HAC cov "
          f"(p {c.p_value_conditioned_cov:.3g}), {c.mahalanobis_hac_cov:.1f} HAC cov (p {c.p_value_hac_cov:.3g}), "
          f"{c.mahalanobis_ols_cov:.1f} OLS cov (p {c.p_value_ols_cov:.3g})")
    print("link masses [kg] (URDF -> SDP): " + ", ".join(
        f"{n.rsplit('.', 1)[0]} {m0:.3f}->{m:.3f}"
        for n, m0, m in zip(res.base.param_names[0 : 10 * len(rec.masses) : 10], rec.prior_masses, rec.masses)))
    if res.mass_ranges:
        print(mass_sentence(res.mass_ranges))
    for m, r in res.heldout.pooled.items():
        print(f"held-out RMSE [{unit}] {m:>22}: " + " ".join(f"{v:.3f}" for v in r))
    print("timing [s]: " + ", ".join(f"{k} {v:.2f}" for k, v in res.timing_s.items()))
    for k, v in files.named().items():
        print(f"wrote {k}: {v}")
    for run_name, row in res.heldout.loaded.items():
        for m, r in row.items():
            print(f"held-out with payload {run_name} RMSE [{unit}] {m:>22}: " + " ".join(f"{v:.3f}" for v in r))
