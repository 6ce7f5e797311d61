"""Identify rigid-body parameters by least squares and seed the simulator's nominal inertials.

Reads real logs (the UR10e CSV format of shared/data/ur10e, or runs in the project's
run format with --runs, e.g. Franka logs: output signal tau_J), preprocesses
them (time-axis correction, zero-phase Butterworth, resampling, central
differences), builds the Pinocchio joint-torque regressor with armature,
viscous, Coulomb and offset columns, reduces it to base parameters (pivoted QR),
solves least squares by QR with covariance and condition number, audits M(q)
over all poses, reconstructs physically consistent link parameters by SDP, and
predicts every held-out run.

Writes into --out: rb_params.json, nominal_inertials.json (for
Robot.with_inertials and the fit's --nominal FILE), report.md and plots/*.png.

Examples:
    python scripts/identify_rigid_body.py --out logs/rigid_body/ur10e
    python scripts/identify_rigid_body.py --identify-gains --max-corrupt-head-rows 25 \
        --payload-heldout ur-20_02_19_15harm50secLoad.csv --out logs/rigid_body/ur10e_gains
    python scripts/identify_rigid_body.py --runs a.csv b.csv --heldout c.csv --out logs/rigid_body/franka
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import tyro
from isaaclab_sysid.rigid_body.base_params import compute_base_parameters
from isaaclab_sysid.rigid_body.drive_gains import Payload, identify_drive_gains
from isaaclab_sysid.rigid_body.pipeline import (
    PipelineOptions,
    load_ur10e_processed,
    published_standard_vector,
    run_pipeline,
)
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.rigid_body.regressor import Regressor, RegressorOptions
from isaaclab_sysid.rigid_body.runs_input import commanded_trajectory, process_run, read_runs, robot_of
from isaaclab_sysid.rigid_body.ur10e_data import (
    UR10eDataError,
    is_fourier_unloaded,
    list_runs,
    load_published_parameters,
    ur10e_dir,
)
from isaaclab_sysid.robots import load_robot


@dataclass
class Args:
    """Rigid-body least squares on real logs (UR10e CSV format, or --runs in the run format)."""

    out: Path = Path("logs/rigid_body/ur10e")
    """Output folder (created)."""
    runs: tuple[Path, ...] = ()
    """Identification runs in the project's run format (CSV + sidecar, or HDF5); when given,
    the UR10e data is not used and the output is the measured joint torque (--signal)."""
    heldout: tuple[Path, ...] = ()
    """Held-out runs (run format) whose torque is predicted and reported."""
    signal: str = "tau_J"
    """--runs output signal: tau_J (measured joint torque, libfranka: includes gravity) or tau (commanded)."""
    tau_includes_gravity: bool = True
    """--runs: the signal contains gravity (real Panda tau_J: yes; the gravity-free twin's tau_J: no)."""
    logged_velocity: bool = True
    """--runs: use the logged dq (filtered) instead of differentiating q."""
    data: Path | None = None
    """UR10e data folder with identification_data/ and validation_data/ (default: the shared data)."""
    robot: str | None = None
    """Robot config name or path (default: ur10e, or the runs' sidecar robot with --runs)."""
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
    """Current-to-torque gains [N m/A] (default: the authors' published gains, or --identify-gains)."""
    identify_gains: bool = False
    """Identify the drive gains from runs carrying a payload of known mass (--payload-runs,
    --payload-mass) together with the unloaded identification runs, then identify with them."""
    payload_runs: tuple[str, ...] = ("ur-20_02_19_14harm50secLoad.csv",)
    """identification_data runs carrying the payload (each run may mount it differently)."""
    payload_mass: float = 2.805
    """Payload mass [kg]; 2.805 kg is the payload of the UR10e *Load runs (the authors' estimate_drive_gains.m)."""
    payload_heldout: tuple[str, ...] = ()
    """identification_data runs with the same payload, predicted as held-out (its placement fitted per run)."""
    gain_method: str = "output_error"
    """output_error (LM on the measured current; default) or equation_error (the authors' linear OLS)."""
    fixed_gains: tuple[float, ...] = ()
    """With --identify-gains: one value per joint [N m/A] to hold, nan where identified (e.g. nan 10.7 nan nan nan nan)."""
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
    sdp_covariance: str = "hac"
    """Base-parameter covariance in the SDP: hac (Newey-West, autocorrelated residuals) or ols."""
    hac_lag_s: float = 0.5
    """HAC window [s]."""
    mass_upper_factor: float | None = None
    """Optional SDP bound on link masses, factor x URDF mass (UR10e authors: 1.1)."""
    mass_lower_factor: float | None = None
    """Optional SDP lower bound on link masses, factor x URDF mass."""
    no_plots: bool = False
    """Skip the PNG per held-out run."""


def _options(args: Args) -> PipelineOptions:
    """The pipeline options the flags set: same-named fields, plus --seeds and --no-plots."""
    same = {f.name: getattr(args, f.name) for f in fields(PipelineOptions) if hasattr(args, f.name)}
    return PipelineOptions(**same, audit_seeds=args.seeds, plots=not args.no_plots)


def _print(res, unit: str, n_ident: int, n_valid: int, t_load: float) -> None:
    print(f"identification runs: {n_ident}; held-out runs: {n_valid}; load+preprocess {t_load:.1f} s")
    print(f"base parameters {res.base.rank}/{len(res.base.param_names)}; cond {res.fit.cond:.1f}")
    rec, c = res.reconstruction, res.consistency
    print(f"audit LS: {'PASS' if res.audit_ls.passed else 'FAIL'} min eig {res.audit_ls.min_eig:.4g} "
          f"over {res.audit_ls.n_poses} poses; SDP mode {rec.mode}; "
          f"audit SDP: {'PASS' if res.audit_reconstructed.passed else 'FAIL'}")
    print(f"SDP consistency (b = {c['base_dof']}): Mahalanobis {c['mahalanobis_hac_cov']:.1f} HAC cov "
          f"(p {c['p_value_hac_cov']:.3g}), {c['mahalanobis_ols_cov']:.1f} OLS cov (p {c['p_value_ols_cov']:.3g})")
    print("link masses [kg] (URDF -> SDP): " + ", ".join(
        f"{n.rsplit('.', 1)[0]} {m0:.3f}->{m:.3f}"
        for n, m0, m in zip(res.base.param_names[0 : 10 * len(rec.masses) : 10], rec.prior_masses, rec.masses)))
    for m, r in res.pooled_rmse.items():
        print(f"held-out RMSE [{unit}] {m:>22}: " + " ".join(f"{v:.3f}" for v in r))
    print("timing [s]: " + ", ".join(f"{k} {v:.2f}" for k, v in res.timing_s.items()))
    for k, v in res.files.items():
        print(f"wrote {k}: {v}")


def main_runs(args: Args) -> int:
    """--runs mode: runs in the project's run format, output = measured joint torque."""
    from isaaclab_sysid.data import RunFormatError
    from isaaclab_sysid.robots.config import RobotConfigError

    t0 = time.perf_counter()
    try:
        ident_runs = read_runs(list(args.runs))
        held_runs = read_runs(list(args.heldout))
        robot = load_robot(robot_of(ident_runs + held_runs, args.robot))
    except (RunFormatError, RobotConfigError, ValueError, OSError) as exc:
        print(f"error: {exc}")
        return 2
    for r in ident_runs + held_runs:
        if r.n_dof != robot.n_dof:
            print(f"error: run {r.name} has {r.n_dof} joints, robot {robot.name} has {robot.n_dof}")
            return 2
    reg = Regressor(robot, RegressorOptions(coulomb_deadband=args.coulomb_deadband, gravity=args.tau_includes_gravity))
    pre = PreprocessOptions(dt=args.dt, cutoff_hz=args.cutoff_hz)
    try:
        ident = [process_run(r, pre, args.signal, args.logged_velocity) for r in ident_runs]
        valid = {r.name: process_run(r, pre, args.signal, args.logged_velocity) for r in held_runs}
        instruments = [commanded_trajectory(r, pre) for r in ident_runs] if args.method == "iv" else None
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    t_load = time.perf_counter() - t0
    res = run_pipeline(reg, ident, valid, args.out, args.signal, None, "N m", _options(args),
                       instruments=instruments)
    _print(res, "N m", len(ident), len(valid), t_load)
    return 0


def _print_gains(dg, names) -> None:
    print(f"drive gains identified ({dg.method}, {dg.payload_mass:g} kg payload on {dg.payload_link}, "
          f"{dg.n_obs} rows, {dg.iterations} evaluations):")
    for n, k, s, r, fx, ke in zip(names, dg.gains, dg.std_hac, dg.rel_std_hac, dg.fixed, dg.equation_error_gains):
        err = "given" if fx else f"+- {s:.3f} ({r:.1f} %)"
        print(f"  {n:>20}: {k:.3f} N m/A {err}   [equation-error {ke:.3f}]")
    for i, com in enumerate(dg.payload_com):
        print(f"  payload placement {i}: centre of mass " + " ".join(f"{c:.3f}" for c in com) + " m (link frame)")
    if not dg.converged:
        print(f"  warning: the gain estimate did not converge ({dg.message})")
    if dg.weak:
        print("  warning: weakly identified gains (relative std above 5 %): " + ", ".join(dg.weak))


def main(args: Args) -> int:
    if args.runs:
        if args.identify_gains:
            print("error: --identify-gains needs current logs with a payload (UR10e format); --runs logs torque")
            return 2
        return main_runs(args)
    if args.method == "iv":
        print("error: --method iv needs the commanded joint trajectory (q_des): runs in the run format "
              "(--runs) from the joint_pd controller; the UR10e logs hold no desired positions")
        return 2
    data = args.data or ur10e_dir()
    if not (data / "identification_data").is_dir() or not (data / "validation_data").is_dir():
        print(f"error: {data}: needs identification_data/ and validation_data/ (set --data or ISAACLAB_SYSID_SHARED)")
        return 2
    files = list_runs(data / "identification_data")
    ident = [f for f in files if (f.name in args.ident if args.ident else is_fourier_unloaded(f))]
    wanted = set(args.ident) | (set(args.payload_runs) | set(args.payload_heldout) if args.identify_gains else set())
    missing = wanted - {f.name for f in files}
    if missing:
        print(f"error: {data / 'identification_data'}: no such run(s): {sorted(missing)}")
        return 2
    published = None
    pub_path = args.published or data / "UR10E_parameters.txt"
    if str(pub_path) != "none" and Path(pub_path).is_file():
        published = load_published_parameters(pub_path)
    if args.identify_gains and args.drive_gains is not None:
        print("error: give --drive-gains or --identify-gains, not both")
        return 2
    robot = load_robot(args.robot or "ur10e")
    reg = Regressor(robot, RegressorOptions(coulomb_deadband=args.coulomb_deadband))
    pre = PreprocessOptions(dt=args.dt, cutoff_hz=args.cutoff_hz)
    t0 = time.perf_counter()
    folder = data / "identification_data"
    try:
        runs = [load_ur10e_processed(f, pre, args.max_corrupt_head_rows) for f in ident]
        valid = {f.name: load_ur10e_processed(f, pre, args.max_corrupt_head_rows)
                 for f in list_runs(data / "validation_data")}
        loaded = [load_ur10e_processed(folder / n, pre, args.max_corrupt_head_rows) for n in args.payload_runs] \
            if args.identify_gains else []
        loaded_valid = {n: load_ur10e_processed(folder / n, pre, args.max_corrupt_head_rows)
                        for n in args.payload_heldout} if args.identify_gains else {}
    except UR10eDataError as exc:
        hint = " (a corrupt block at the start of a file: --max-corrupt-head-rows N drops it)" \
            if args.max_corrupt_head_rows == 0 else ""
        print(f"error: {exc}{hint}")
        return 2
    for p in [*runs, *valid.values(), *loaded, *loaded_valid.values()]:
        if p.record.get("dropped_corrupt_head_rows"):
            print(f"note: {p.record['source']}: dropped {p.record['dropped_corrupt_head_rows']} corrupt leading rows")
    t_load = time.perf_counter() - t0
    dg = None
    if args.identify_gains:
        fixed = None
        if args.fixed_gains:
            if len(args.fixed_gains) != robot.n_dof:
                print(f"error: --fixed-gains needs {robot.n_dof} values (nan where identified)")
                return 2
            fixed = np.array(args.fixed_gains, dtype=float)
        base = compute_base_parameters(reg)
        try:
            dg = identify_drive_gains(reg, base, runs, loaded, Payload(args.payload_mass), fixed_gains=fixed,
                                      method=args.gain_method, hac_lags=max(1, int(round(args.hac_lag_s / args.dt))))
        except ValueError as exc:
            print(f"error: {exc}")
            return 2
        _print_gains(dg, robot.joint_names)
        if np.any(dg.gains <= 0):
            print("error: a drive gain came out non-positive (see above); hold it with --fixed-gains")
            return 2
        gains = dg.gains
    elif args.drive_gains is not None:
        gains = np.array(args.drive_gains, dtype=float)
    elif published is not None:
        gains = published.drive_gains
    else:
        print("error: --drive-gains or --identify-gains needed (no published parameter file found)")
        return 2
    ref = {"published (authors)": (published_standard_vector(reg, published), published.drive_gains)} \
        if published is not None else None
    res = run_pipeline(reg, runs, valid, args.out, "current", gains, "A", _options(args), ref, dg, loaded_valid)
    _print(res, "A", len(runs), len(valid), t_load)
    for run_name, row in res.loaded_rmse.items():
        for m, r in row.items():
            print(f"held-out with payload {run_name} RMSE [A] {m:>22}: " + " ".join(f"{v:.3f}" for v in r))
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
