"""Does the UR10e's joint friction drift between recording sessions? (issue 28: wrist_1 at 0.5 s windows)

    python benchmarks/ur10e_friction_drift.py [--joint wrist_1_joint]

The rigid-body least squares (``scripts/identify_rigid_body.py`` defaults: the ten unloaded Fourier runs, all
recorded 2020-02-05..19) gives one standard parameter set (its SDP reconstruction: link inertials and joint terms).
Holding every link inertial of that set, this refits **one joint's four joint terms** (armature [kg m^2], viscous
[N m s/rad], Coulomb [N m], offset [N m]) on each log alone, by ordinary least squares on that joint's torque
residual (motor current x the authors' drive gains less the rigid-body prediction), same preprocessing as the LS
(resampled at 0.02 s, 4 Hz zero-phase low-pass, Coulomb column zero below 1e-3 rad/s). Logs: the ten Fourier runs
(February), the eleven validation files (2020-01-17), the jointwise runs (2020-01-22, one joint moving at a time) and
the free-motion / unload runs (2019-12-23, 2020-01-31). Prints, per log: its date, the per-log Coulomb and viscous
with their OLS standard errors (white-noise ones: the residuals are correlated, so they are too small), and that
joint's torque RMSE with the common LS terms and with the per-log ones; a log where the joint moves in under
``MIN_MOVING`` of its samples (the validation files that hold the arm still, the other joints' jointwise runs) says so
instead of terms.

The per-log terms are a diagnostic (each absorbs the inertial error of its own trajectory), not a model: a shift
shared by every log of one day and absent from the others is what a session-to-session drift would look like.
Needs ../shared/data/ur10e.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.formats.ur10e import list_runs, ur10e_dir
from isaaclab_sysid.rigid_body.cli import IdentifyArgs, pipeline_options, prepare_ur10e
from isaaclab_sysid.rigid_body.pipeline import identify, load_ur10e_processed
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions

#: the four joint terms of the LS regressor, in its column order
TERMS = ("armature", "viscous", "coulomb", "offset")
#: the share of a log's samples in which the joint must move (|qd| > 1e-3 rad/s) for its terms to be refitted there
MIN_MOVING = 0.2


def log_date(name: str) -> str:
    """'20-02-05' style date of a UR10e log name ('ur-20_02_05-20sec_12harm.csv' -> '2020-02-05')."""
    m = re.match(r"ur-(\d\d)_(\d\d)_(\d\d)", name)
    return f"20{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else "?"


def per_log_terms(reg, pi: np.ndarray, gains: np.ndarray, p, j: int) -> dict[str, float]:
    """Joint ``j``'s four joint terms refitted on one preprocessed log ``p`` with every other entry of the standard
    set ``pi`` (P,) held; returns the terms [N m units], their OLS standard errors, the current RMSE [A] of joint j
    with ``pi``'s terms and with the refitted ones, and the samples used."""
    n = reg.n_dof
    Y = reg.matrix(p.q, p.qd, p.qdd, gains).reshape(-1, n, reg.n_params)[:, j, :]  # (T, P) joint j's rows [A]
    y = p.signals["current"][:, j]
    cols = [reg.term_slice(t).start + j for t in TERMS]
    A = Y[:, cols]
    rest = y - Y @ pi + A @ pi[cols]  # the current the joint terms must explain
    theta, *_ = np.linalg.lstsq(A, rest, rcond=None)
    r = rest - A @ theta
    dof = max(len(y) - len(cols), 1)
    cov = np.linalg.pinv(A.T @ A) * float(r @ r) / dof
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    out = {t: float(v) for t, v in zip(TERMS, theta)}
    out.update({f"{t}_se": float(s) for t, s in zip(TERMS, se)})
    out["rmse_ls_A"] = float(np.sqrt(np.mean((rest - A @ pi[cols]) ** 2)))
    out["rmse_own_A"] = float(np.sqrt(np.mean(r**2)))
    out["samples"] = len(y)
    out["moving_share"] = float(np.mean(np.abs(p.qd[:, j]) > 1e-3))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--joint", default="wrist_1_joint", help="the joint whose terms are refitted per log")
    a = ap.parse_args()
    folder = ur10e_dir()
    if not (folder / "validation_data").is_dir():
        print(f"skipped: no UR10e data at {folder} (set ISAACLAB_SYSID_SHARED)")
        return 0
    args = IdentifyArgs(audit_uniform=300, audit_dense=200, seeds=(0,), no_plots=True)
    prepared = prepare_ur10e(args)
    data = prepared.data
    res = identify(data, pipeline_options(args))
    reg, gains = data.regressor, np.asarray(data.gains, dtype=float)
    pi = np.asarray(res.reconstruction.pi, dtype=float)
    j = reg.robot.joint_names.index(a.joint)
    # the regressor's rows are torque / gain (current [A]) and its parameters stay in torque units [N m ...]
    g = float(gains[j])
    print(f"LS (SDP) terms of {a.joint}: " + ", ".join(f"{t} {pi[reg.term_slice(t).start + j]:.3f}" for t in TERMS)
          + " [kg m^2, N m s/rad, N m, N m]")
    pre = PreprocessOptions(dt=args.dt, cutoff_hz=args.cutoff_hz)
    groups: list[tuple[str, list]] = [
        ("LS identification (Fourier)", [(Path(pp.record["source"]).name, pp) for pp in data.ident]),
        ("validation", list(data.valid.items())),
        ("jointwise", [(f.name, load_ur10e_processed(f, pre)) for f in list_runs(folder / "jointwise_motion")]),
        ("free / unload", [(n, load_ur10e_processed(folder / "identification_data" / n, pre))
                           for n in ("ur-19_12_23_free.csv", "ur-20_01_31-unload.csv")
                           if (folder / "identification_data" / n).is_file()]),
    ]
    print(f"\nper-log refit of {a.joint}'s joint terms (link inertials held at the LS set); current x gain {g:g} N m/A")
    print("| logs | file | date | moving | Coulomb [N m] | viscous [N m s/rad] | armature [kg m^2] | offset [N m] | "
          "RMSE LS terms / own [N m] |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, logs in groups:
        for name, p in logs:
            t = per_log_terms(reg, pi, gains, p, j)
            if t["moving_share"] < MIN_MOVING:
                print(f"| {label} | {name} | {log_date(name)} | {100 * t['moving_share']:.0f} % | joint nearly at rest: "
                      f"not refitted | | | | {g * t['rmse_ls_A']:.3f} / - |")
                continue
            print(f"| {label} | {name} | {log_date(name)} | {100 * t['moving_share']:.0f} % | "
                  f"{t['coulomb']:.2f} +- {t['coulomb_se']:.2f} | {t['viscous']:.2f} +- {t['viscous_se']:.2f} | "
                  f"{t['armature']:.3f} | {t['offset']:.2f} | {g * t['rmse_ls_A']:.3f} / {g * t['rmse_own_A']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
