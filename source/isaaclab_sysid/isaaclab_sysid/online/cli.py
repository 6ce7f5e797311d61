"""The commands behind ``scripts/track_friction.py`` and ``scripts/record_friction_twin.py``.

A bad flag or file stops with one line ``error: ...`` and exit status 2. ``track_friction``
exits 1 when a change larger than the band was flagged (so a script can react), else 0.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from typing import Annotated

import tyro

from isaaclab_sysid.arm_model import with_body_inertials
from isaaclab_sysid.data import RunFormatError, read_runs, write_runs_hdf5
from isaaclab_sysid.online.rls import FRICTION_TERMS, RLSOptions, TrackerError
from isaaclab_sysid.online.signal import FrictionSignal, SignalOptions
from isaaclab_sysid.online.track import TrackOptions, TrackResult, track
from isaaclab_sysid.online.twin import DriftTwin, franka_drift, record_session
from isaaclab_sysid.robots.identified import NominalFileError, load_nominal
from isaaclab_sysid.rigid_body.runs_input import robot_of
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.config import RobotConfigError
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.json_io import read_json

ERRORS = (OSError, ValueError, KeyError, RunFormatError, RobotConfigError, NominalFileError, TrackerError)


@dataclass
class TrackArgs:
    """Track each joint's friction (Coulomb, viscous, offset) over a session of runs with RLS and forgetting."""

    runs: tyro.conf.Positional[tuple[Path, ...]]
    """the session's runs in time order (CSV with sidecar, or HDF5 with many runs; or after --runs, the shared spelling)"""
    robot: str | None = None
    """robot config (default: the runs' robot)"""
    nominal: Path | None = None
    """the arm's link inertials (nominal_inertials.json or rb_params.json; default: the URDF's)"""
    armature: tuple[float, ...] | None = None
    """rotor inertia per joint [kg m^2] subtracted with qdd (default: the --fit_params armature, else 0)"""
    fit_params: Path | None = None
    """a replay fit's sysid_best_params.json: armature, and the tracker's start (friction, viscous)"""
    source: str = "model"
    """friction signal: model (torque minus the rigid-body model) or sensor_difference (tau + g - tau_J)"""
    torque: Annotated[str, tyro.conf.arg(name="torque_signal")] = "tau_J"
    """torque of the model source: tau_J (measured) or tau (commanded) (--torque_signal; --torque, its older
    spelling, still works)"""
    forgetting: tuple[float, ...] = (0.98,)
    """forgetting factor(s) per update; several compare lag against noise (e.g. 1.0 0.98 0.9)"""
    guard: str = "bound"
    """covariance windup guard: bound (P <= p_max), directional (forget only along excited directions) or none"""
    p0: float = 100.0
    """initial covariance P = p0 I"""
    p_max: float | None = None
    """bound on P's eigenvalues (default p0)"""
    chunk_s: float = 2.0
    """log seconds per update"""
    readings: int | None = None
    """readings per update, evenly spaced in the chunk (default: all; 1 = one reading per update)"""
    deadband: float = 0.05
    """|qd| [rad/s] below which a sample does not update (stiction zone)"""
    level: float = 0.95
    """two-sided level of the band"""
    start_s: tuple[float, ...] | None = None
    """session start of each run [s] (default: the sidecars' summary.session_start_s, else back to back)"""
    reference_s: float | None = None
    """session time of the reference estimate for change flags [s] (default: the end of the first run)"""
    truth: Path | None = None
    """a twin's friction_truth.json: overlay the truth and report lag, noise and coverage"""
    out: Path = Path("logs/friction_track")
    """output folder: friction_track.json, friction_track.png"""


@dataclass
class TwinArgs:
    """Write a warm-up session twin: runs whose joint friction falls over the session (hidden truth)."""

    out: Path = Path("logs/friction_twin")
    """output folder: session.h5 (all runs) and friction_truth.json"""
    session_s: float = 1200.0
    """session length [s] (20 minutes: a warm-up)"""
    runs: Annotated[int, tyro.conf.arg(name="n_runs")] = 40
    """how many runs the session has, back to back (--n_runs; --runs, its older spelling, still works)"""
    fall: float = 0.35
    """relative fall of Coulomb and viscous friction from cold to warm"""
    seed: int = 0
    """noise and motion seed"""


def _starts(runs, given: tuple[float, ...] | None) -> tuple[list[float] | None, str]:
    if given is not None:
        return list(given), "--start-s"
    st = [r.meta.summary.get("session_start_s") if isinstance(r.meta.summary, dict) else None for r in runs]
    if all(isinstance(s, (int, float)) for s in st):
        return [float(s) for s in st], "the sidecars' summary.session_start_s"
    return None, "back to back (no start times recorded; pass --start-s to place runs on the session clock)"


def load_truth(path: Path) -> tuple[DriftTwin, int]:
    """A twin's truth file (as :func:`run_twin` writes it) and its run count."""
    d = read_json(path, "friction truth")
    try:
        twin = DriftTwin(**{k: np.asarray(d[k], dtype=float) for k in ("cold_friction", "warm_friction", "cold_viscous",
                                                                         "warm_viscous", "armature")},
                         session_s=float(d["session_s"]))
        return twin, int(d["runs"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a friction_truth.json ({exc})") from None


def plot(results: list[TrackResult], path: Path, truth: np.ndarray | None = None) -> Path:
    """Coulomb and viscous friction of every joint against time, with bands and flags."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = results[0]
    n = len(first.joint_names)
    fig, axes = plt.subplots(n, 2, figsize=(12, 1.9 * n), sharex=True, squeeze=False)
    colors = ["tab:red", "tab:orange", "tab:blue", "tab:green", "tab:purple"]
    for r, c in zip(results, colors):
        tm = r.t / 60.0
        for j in range(n):
            for i in range(2):
                ax = axes[j, i]
                ax.plot(tm, r.theta[:, j, i], color=c, lw=1.0, label=f"lambda {r.options.forgetting:g}" if j == 0 else None)
                ax.fill_between(tm, r.theta[:, j, i] - r.half_width[:, j, i], r.theta[:, j, i] + r.half_width[:, j, i],
                                color=c, alpha=0.15, lw=0)
                for f in r.flags:
                    if f.joint == r.joint_names[j] and f.term == FRICTION_TERMS[i]:
                        ax.plot(f.t / 60.0, f.value, "x", color=c)
    for j in range(n):
        for i, unit in enumerate(("Coulomb [N m]", "viscous [N m s/rad]")):
            ax = axes[j, i]
            if truth is not None:
                ax.plot(first.t / 60.0, truth[:, j, i], "k--", lw=1.0, label="truth" if j == 0 else None)
            for s in first.starts[1:]:
                ax.axvline(s / 60.0, color="0.85", lw=0.5)
            ax.set_ylabel(f"{first.joint_names[j]}\n{unit}", fontsize=7)
            lo = np.nanpercentile(np.concatenate([r.theta[r.t.size // 20:, j, i] for r in results]), [1, 99])
            pad = 0.3 * (lo[1] - lo[0]) + 1e-3
            ax.set_ylim(lo[0] - pad, lo[1] + pad)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("session time [min]")
    fig.suptitle("friction tracked by recursive least squares (x: change larger than the band)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_track(args: TrackArgs) -> int:
    try:
        opts = [RLSOptions(forgetting=lam, guard=args.guard, p0=args.p0, p_max=args.p_max, deadband=args.deadband,
                           level=args.level) for lam in args.forgetting]
        for o in opts:
            o.validate()
        topts = TrackOptions(args.chunk_s, args.readings, args.reference_s)
        topts.validate()
        runs = read_runs(list(args.runs))
        robot = load_robot(robot_of(runs, args.robot))
        if args.nominal is not None:
            robot = with_body_inertials(robot, load_nominal(args.nominal))
        theta0, armature = None, None
        if args.fit_params is not None:
            from isaaclab_sysid.objective.result import FitResult

            fit = FitResult.read(args.fit_params, joint_names=robot.joint_names)
            armature = np.asarray(fit.values["armature"], dtype=float) if "armature" in fit.values else None
            c = np.asarray(fit.values.get("friction", np.zeros(robot.n_dof)), dtype=float)
            v = np.asarray(fit.values.get("viscous", np.zeros(robot.n_dof)), dtype=float)
            theta0 = np.stack([c, v, np.zeros(robot.n_dof)], axis=1)
        if args.armature is not None:
            armature = np.asarray(args.armature, dtype=float)
        signal = FrictionSignal(robot, armature, SignalOptions(args.source, args.torque))
        samples = [signal.of_run(r) for r in runs]
        starts, how = _starts(runs, args.start_s)
        results = [track(samples, robot.joint_names, o, topts, starts, theta0) for o in opts]
        truth_model = load_truth(args.truth) if args.truth is not None else None
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    truth = truth_model[0].run_truth(results[0].t, truth_model[1]) if truth_model else None
    print(f"friction of {robot.name} over {len(runs)} runs ({results[0].t.size} updates of {args.chunk_s:g} s"
          f"{'' if args.readings is None else f', {args.readings} reading(s) each'}); session clock: {how}")
    print(f"signal: {args.source} ({args.torque if args.source == 'model' else 'tau + g - tau_J'}), armature "
          f"{'zero (not given)' if armature is None else np.round(armature, 4).tolist()}, guard {args.guard}")
    summaries = []
    for r in results:
        s = r.summary(truth)
        summaries.append(s)
        print(f"lambda {r.options.forgetting:g} (remembers ~{r.options.memory:.0f} updates):")
        for term in ("coulomb", "viscous"):
            d = s[term]
            line = f"  {term:>8}: final " + " ".join(f"{v:.3f}" for v in r.theta[-1, :, FRICTION_TERMS.index(term)])
            line += " | band +-" + " ".join(f"{v:.3f}" for v in d["half_width"])
            if truth is not None:
                line += (f" | lag {np.mean(np.abs(d['lag'])):.4f}, noise {np.mean(d['shake']):.4f}, "
                         f"coverage {np.mean(d['coverage']):.2f}")
            print(line)
        for w in r.warnings:
            print(f"  warning: {w}")
        for f in r.flags:
            if f.term != "offset":
                print(f"  change: {f.joint} {f.term} left its band at {f.t / 60:.1f} min ({f.reference:.3f} -> "
                      f"{f.value:.3f}, band +-{f.band:.3f}; largest change {f.max_change:.3f})")
    out = Path(args.out)
    body = {"schema": "isaaclab_sysid.friction_session/1", "robot": robot.name, "session_clock": how,
            "signal": asdict(SignalOptions(args.source, args.torque)),
            "settings": [r.to_json() for r in results], "summary": summaries}
    atomic_write_json(out / "friction_track.json", body)
    png = plot(results, out / "friction_track.png", truth)
    print(f"wrote {out / 'friction_track.json'} and {png}")
    return 1 if any(f.term != "offset" for r in results for f in r.flags) else 0


def run_twin(args: TwinArgs) -> int:
    try:
        if not (args.session_s > 0 and args.runs >= 2 and 0 <= args.fall < 1):
            raise TrackerError("--session-s must be > 0, --runs >= 2 and --fall in [0, 1)")
        robot = load_robot("franka_panda")
        twin = franka_drift(args.session_s, args.fall)
        runs, starts = record_session(robot, twin, args.runs, args.seed, log_rate_hz=1000.0)
        path = write_runs_hdf5(runs, Path(args.out) / "session.h5")
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    truth = {k: np.asarray(getattr(twin, k)).tolist() for k in ("cold_friction", "warm_friction", "cold_viscous",
                                                                  "warm_viscous", "armature")}
    truth.update(session_s=twin.session_s, runs=args.runs, noise=asdict(twin.noise),
                 profile="cold for the first quarter, linear fall to warm by the third quarter; each run holds the "
                         "value at its middle")
    atomic_write_json(Path(args.out) / "friction_truth.json", truth)
    print(f"wrote {len(runs)} runs ({args.session_s / args.runs:g} s each, 1 kHz) to {path}; hidden truth in "
          f"{Path(args.out) / 'friction_truth.json'}")
    return 0


