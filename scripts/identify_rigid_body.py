"""Identify rigid-body parameters by least squares and seed the simulator's nominal inertials.

Reads real logs (today: the UR10e CSV format of shared/data/ur10e), preprocesses
them (time-axis correction, zero-phase Butterworth, resampling, central
differences), builds the Pinocchio joint-torque regressor with armature,
viscous, Coulomb and offset columns, reduces it to base parameters (pivoted QR),
solves least squares by QR with covariance and condition number, audits M(q)
over all poses, reconstructs physically consistent link parameters by SDP, and
predicts every held-out run.

Writes into --out: rb_params.json, nominal_inertials.json (for
Robot.with_inertials and the fit's --nominal FILE), report.md and plots/*.png.

Example:
    python scripts/identify_rigid_body.py --out logs/rigid_body/ur10e
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from isaaclab_sysid.rigid_body.pipeline import (
    PipelineOptions,
    load_ur10e_processed,
    published_standard_vector,
    run_pipeline,
)
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.rigid_body.regressor import Regressor, RegressorOptions
from isaaclab_sysid.rigid_body.ur10e_data import (
    is_fourier_unloaded,
    list_runs,
    load_published_parameters,
    ur10e_dir,
)
from isaaclab_sysid.robots import load_robot


@dataclass
class Args:
    """Rigid-body least squares on real logs (UR10e CSV format)."""

    out: Path = Path("logs/rigid_body/ur10e")
    """Output folder (created)."""
    data: Path | None = None
    """UR10e data folder with identification_data/ and validation_data/ (default: the shared data)."""
    robot: str = "ur10e"
    """Robot config name or path."""
    ident: tuple[str, ...] = ()
    """Identification CSV names (default: the Fourier runs without payload, '*harm*' and not '*Load*')."""
    method: str = "ols"
    """Estimator: ols, wls (per-joint noise weights) or tls."""
    dt: float = 0.02
    """Resampling interval [s]."""
    cutoff_hz: float = 4.0
    """Zero-phase Butterworth corner [Hz] (order 4)."""
    coulomb_deadband: float = 1e-3
    """|qd| [rad/s] below which the Coulomb column is zero."""
    drive_gains: tuple[float, ...] | None = None
    """Current-to-torque gains [N m/A] (default: the authors' published gains)."""
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
    sdp_mode: str = "auto"
    """SDP: exact (reproduce the base parameters), penalized, or auto."""
    mass_upper_factor: float | None = None
    """Optional SDP bound on link masses, factor x URDF mass."""
    no_plots: bool = False
    """Skip the PNG per held-out run."""


def main(args: Args) -> int:
    data = args.data or ur10e_dir()
    if not (data / "identification_data").is_dir() or not (data / "validation_data").is_dir():
        print(f"error: {data}: needs identification_data/ and validation_data/ (set --data or ISAACLAB_SYSID_SHARED)")
        return 2
    files = list_runs(data / "identification_data")
    ident = [f for f in files if (f.name in args.ident if args.ident else is_fourier_unloaded(f))]
    missing = set(args.ident) - {f.name for f in files}
    if missing:
        print(f"error: {data / 'identification_data'}: no such run(s): {sorted(missing)}")
        return 2
    published = None
    pub_path = args.published or data / "UR10E_parameters.txt"
    if str(pub_path) != "none" and Path(pub_path).is_file():
        published = load_published_parameters(pub_path)
    if args.drive_gains is not None:
        gains = np.array(args.drive_gains, dtype=float)
    elif published is not None:
        gains = published.drive_gains
    else:
        print("error: --drive-gains needed (no published parameter file found)")
        return 2
    robot = load_robot(args.robot)
    reg = Regressor(robot, RegressorOptions(coulomb_deadband=args.coulomb_deadband))
    pre = PreprocessOptions(dt=args.dt, cutoff_hz=args.cutoff_hz)
    t0 = time.perf_counter()
    runs = [load_ur10e_processed(f, pre) for f in ident]
    valid = {f.name: load_ur10e_processed(f, pre) for f in list_runs(data / "validation_data")}
    t_load = time.perf_counter() - t0
    ref = {"published (authors)": published_standard_vector(reg, published)} if published is not None else None
    opt = PipelineOptions(
        method=args.method,
        audit_grid=args.audit_grid,
        audit_uniform=args.audit_uniform,
        audit_dense=args.audit_dense,
        audit_seeds=args.seeds,
        sdp_mode=args.sdp_mode,
        mass_upper_factor=args.mass_upper_factor,
        plots=not args.no_plots,
    )
    res = run_pipeline(reg, runs, valid, args.out, "current", gains, "A", opt, ref)
    print(f"identification runs: {len(runs)}; held-out runs: {len(valid)}; load+preprocess {t_load:.1f} s")
    print(f"base parameters {res.base.rank}/{len(res.base.param_names)}; cond {res.fit.cond:.1f}")
    print(f"audit LS: {'PASS' if res.audit_ls.passed else 'FAIL'} min eig {res.audit_ls.min_eig:.4g} "
          f"over {res.audit_ls.n_poses} poses; SDP mode {res.reconstruction.mode}; "
          f"audit SDP: {'PASS' if res.audit_reconstructed.passed else 'FAIL'}")
    for m, r in res.pooled_rmse.items():
        print(f"held-out RMSE [A] {m:>22}: " + " ".join(f"{v:.3f}" for v in r))
    print("timing [s]: " + ", ".join(f"{k} {v:.2f}" for k, v in res.timing_s.items()))
    for k, v in res.files.items():
        print(f"wrote {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
