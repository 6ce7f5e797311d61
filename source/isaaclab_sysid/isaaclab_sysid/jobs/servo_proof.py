"""The servo twin's proof (issue 27): LeRobot dataset -> importer -> fit -> intervals, judged against the truth.

:func:`make_servo_dataset` records the SO-101 twin (:data:`~isaaclab_sysid.twin.servo.SO101_TRUTH`) on
multisine designs (two fit episodes, one held-out episode with other frequencies), writes them as a LeRobot
dataset with its calibration file and mapping, and imports it into runs (CSV + sidecar).
:func:`judge` reads a fit folder (``sysid_best_params.json``, ``intervals.json``, ``eval_result.json``) and
says, per fitted number, whether the truth lies in its 95 % interval, or why the number is unidentified.

Viscous friction is not fitted: below the torque limit ``kd dq`` and ``viscous dq`` are one torque, so the
fitted ``kd`` is compared with the truth's ``kd + viscous`` (docs/servo_arms.md); in saturation the two part, and
the intervals hold the refit with viscous free (intervals/omitted.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.importers.run_import import import_runs
from isaaclab_sysid.intervals.combine import read_intervals
from isaaclab_sysid.excitation.servo_design import ServoDesignSpec, servo_multisine
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.servo import SO101_CAL_MIDS, SO101_TRUTH, ServoTruth, record_servo_twin, write_twin_dataset


@dataclass(frozen=True)
class ServoDataset:
    """The imported twin runs: fit CSVs, held-out CSVs, and where the LeRobot dataset is."""

    fit_csv: list[str]
    heldout_csv: list[str]
    dataset: Path
    mapping: Path


def make_servo_dataset(out: str | Path, duration_s: float = 20.0, truth: ServoTruth = SO101_TRUTH, seed: int = 0,
                       n_fit: int = 2, stated_gains: tuple | None = None, step_hold_s: float = 0.8,
                       step_rad: float = 0.3) -> ServoDataset:
    """Record ``n_fit`` + 1 twin episodes (multisine + saturating steps, 30 fps), write the LeRobot dataset under
    ``out/lerobot/so101_twin`` and import it into ``out/runs`` (the last episode is the held-out run).
    ``stated_gains``: (kp, kd) the import mapping states (default: unknown)."""
    out = Path(out)
    robot = load_robot("so101")
    runs = []
    for e in range(n_fit + 1):
        spec = ServoDesignSpec(duration_s=duration_s, seed=seed + e, f_min_hz=0.1 + 0.03 * e,
                               n_sines=int(np.clip((5.0 - 0.03 * e) * duration_s // 7, 1, 6)), step_hold_s=step_hold_s, step_rad=step_rad,
                               f_max_hz=6.0 - 0.5 * e, speed_max_rad_s=1.2 + 0.15 * e)
        design = servo_multisine(robot, spec, name=f"design_{e}")
        runs.append(record_servo_twin(robot, design, truth, seed=1000 + seed + e, name=f"ep{e}", mids=SO101_CAL_MIDS))
    root = out / "lerobot" / "so101_twin"
    mapping = write_twin_dataset(root, runs, robot.joint_names, state_age_ms=truth.state_age_max_ms,
                                 stated_gains=stated_gains)
    imported, _ = import_runs(root, "lerobot", mapping, out / "runs", log=lambda s: None)
    csvs = [str(out / "runs" / f"{r.name}.csv") for r in imported]
    return ServoDataset(csvs[:n_fit], csvs[n_fit:], root, mapping)


FULL_GROUPS = "kp,kd,armature,mu_static,dynamic_ratio,stribeck_velocity,delay,encoder_offset"
#: the CI-size proofs' groups (the frictionless twin: tests/test_servo_proof.py)
CI_GROUPS = "kp,kd,armature,delay,encoder_offset"


def fit_flags(data: ServoDataset, log_dir: str | Path, groups: str = FULL_GROUPS,
              extra: tuple[str, ...] = ()) -> list[str]:
    """The flags of ``scripts/sysid_franka_osc.py`` for the servo twin (docs/servo_arms.md)."""
    flags = []
    for c in data.fit_csv:
        flags += ["--runs", c]
    for c in data.heldout_csv:
        flags += ["--heldout", c]
    return flags + ["--robot", "so101", "--fit_groups", groups, "--torque_clamp", "--w_dq", "0", "--w_x", "0",
                    "--delay_bounds", "0", "12", "--kp_bounds", "1", "60", "--kd_bounds", "0", "2",
                    "--mu_static_bounds", "0", "0.3", "--encoder_offset_bounds", "-0.08", "0.08",
                    "--out", str(log_dir), "--no_plots", *extra]


@dataclass
class Judged:
    """One fitted number against the truth."""

    label: str
    value: float
    truth: float
    lo: float | None
    hi: float | None
    covered: bool
    unidentified: str | None = None


@dataclass
class ServoVerdict:
    """The proof's figures: per number covered / unidentified (with the reason), the delay, held-out vs floor."""

    rows: list[Judged]
    delay_fit: int
    delay_true: int
    heldout_rmse_rad: float | None
    noise_floor_rad: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def missed(self) -> list[Judged]:
        """Identified numbers whose interval misses the truth (the failures: a confident wrong interval)."""
        return [r for r in self.rows if not r.covered and r.unidentified is None]

    def format(self) -> str:
        lines = [f"delay: fitted {self.delay_fit} ticks, true {self.delay_true}"]
        if self.heldout_rmse_rad is not None and self.noise_floor_rad:
            lines.append(f"held-out q RMSE {self.heldout_rmse_rad * 1e3:.3f} mrad = "
                         f"{self.heldout_rmse_rad / self.noise_floor_rad:.2f} x the noise floor {self.noise_floor_rad * 1e3:.3f} mrad")
        for r in self.rows:
            iv = "-" if r.lo is None else f"[{r.lo:.4g}, {r.hi:.4g}]"
            tag = "ok" if r.covered else ("UNIDENTIFIED: " + r.unidentified if r.unidentified else "MISSED")
            lines.append(f"  {r.label:<32} {r.value:10.4g}  true {r.truth:10.4g}  95% {iv:<26} {tag}")
        return "\n".join(lines + self.notes)


def truth_of(truth: ServoTruth, group: str, j: int, viscous_fitted: bool = False) -> float:
    """The truth a fitted group's entry j is compared with (kd holds the viscous friction unless the fit has a
    viscous group; mu_static is the breakaway)."""
    if group == "kd" and not viscous_fitted:
        return float(truth.kd[j] + truth.viscous[j])
    if group == "mu_static":
        return float(truth.static_friction[j])
    if group == "dynamic_ratio":
        return float(truth.friction[j] / truth.static_friction[j])
    return float(np.asarray(getattr(truth, group))[j])


def judge(fit_dir: str | Path, truth: ServoTruth = SO101_TRUTH) -> ServoVerdict:
    """Read a fit folder and judge every fitted number against ``truth`` (see module doc).

    A number is covered when the truth lies in its selected 95 % interval; a number whose interval the
    intervals stage marks not identifiable or not reliable is flagged with that stage's reason instead.
    """
    folder = RunFolder(Path(fit_dir))
    adequacy = folder.read_result().adequacy
    return judge_intervals(read_intervals(folder.intervals).to_dict(), truth,
                           adequacy.to_json() if adequacy is not None else {})


def judge_intervals(ivs: dict, truth: ServoTruth = SO101_TRUTH, adequacy: dict | None = None) -> ServoVerdict:
    """:func:`judge` on an intervals report as a dict (``IntervalReport.to_dict()``, ``intervals.json``) and the
    fit's adequacy record (``sysid_best_params.json``'s ``adequacy``; empty: no held-out figures)."""
    by_label = {e["label"]: e for e in ivs["methods"][ivs["selected"]]["intervals"]}
    rows = []
    delay, delay_iv = None, None
    viscous = any(e["group"] == "viscous" for e in by_label.values())
    joints = load_robot("so101").joint_names
    for label, e in by_label.items():
        if e["group"] == "delay":
            delay = int(round(e["value"]))
            delay_iv = (e.get("lower"), e.get("upper"))
            continue
        t = truth_of(truth, e["group"], joints.index(e["joint"]), viscous)
        lo, hi = e.get("lower"), e.get("upper")
        flagged = None
        if not e.get("identifiable", True):
            flagged = f"not identifiable: {e.get('note') or 'interval unbounded'}"
        elif not e.get("reliable", True):
            flagged = f"unreliable: {e.get('note') or e.get('at_bound') or 'flagged by the intervals stage'}"
        covered = lo is not None and hi is not None and lo <= t <= hi
        rows.append(Judged(label, float(e["value"]), t, lo, hi, covered, None if covered else flagged))
    adequacy = adequacy or {}
    held = [r for r in adequacy.get("runs", []) if r.get("heldout")]
    rmse = float(np.sqrt(np.mean([r["q_rms_all_mrad"] ** 2 for r in held]))) * 1e-3 if held else None
    floor = adequacy.get("floor_mrad")
    notes = [f"adequacy: {adequacy.get('verdict')}: " + "; ".join(adequacy.get("messages", []))] if adequacy else []
    notes += [f"delay interval: {list(delay_iv)}"] if delay_iv is not None else []
    notes += [w for w in ivs.get("warnings", []) if "delay" in w]
    return ServoVerdict(rows, -1 if delay is None else delay, int(truth.delay), rmse,
                        None if floor is None else float(floor) * 1e-3, notes)


def with_truth(truth: ServoTruth, settings: Sequence[str]) -> ServoTruth:
    """``truth`` with ``FIELD=VALUE`` settings applied (a per-joint field takes one value for every joint), e.g.
    ``actuator_tau_std=0`` or ``viscous=0``."""
    out = truth
    for item in settings:
        name, sep, text = item.partition("=")
        if not sep or name not in ServoTruth.__dataclass_fields__:
            raise ValueError(f"'{item}': expected FIELD=VALUE with FIELD one of {', '.join(ServoTruth.__dataclass_fields__)}")
        cur = getattr(out, name)
        val = np.full_like(cur, float(text)) if isinstance(cur, np.ndarray) else type(cur)(float(text))
        out = dataclasses.replace(out, **{name: val})
    return out


def frictionless(truth: ServoTruth = SO101_TRUTH) -> ServoTruth:
    """The twin without Coulomb or static friction (the CI-size proofs' truth)."""
    return dataclasses.replace(truth, friction=np.zeros(len(truth.kp)), static_friction=np.zeros(len(truth.kp)))


@dataclass
class DelayCase:
    """The short-episode delay case judged twice: ``conditional``, the intervals at the fitted delay alone
    (``compute_all(..., delay_max=0, omitted_groups=())``, what the intervals were before intervals/delay_union.py
    and intervals/omitted.py), and ``union``,
    the default (the delay's uncertainty carried into them); ``delay`` is the union's record."""

    conditional: ServoVerdict
    union: ServoVerdict
    delay: dict
    seconds: dict


def delay_case(out: str | Path, duration_s: float = 4.0, fit_delay: int | None = 5, groups: str = CI_GROUPS,
               refine_iter: int = 4, truth: ServoTruth | None = None, n_boot: int = 200) -> DelayCase:
    """The short-episode case of docs/servo_arms.md section 6: on a ``duration_s`` episode of the frictionless twin,
    the continuous numbers fitted at a wrong delay ``fit_delay`` (the true one is 7) absorb the difference.

    With ``fit_delay`` set, the fitted point is the truth moved to that delay and refined there by at most
    2 x ``refine_iter`` Levenberg-Marquardt iterations (the conditional optimum a fit that settles on that delay
    returns; seconds instead of the fit's minutes). With ``fit_delay=None`` the fit runs as a user runs it
    (``jobs.fit_job.run_fit``, as ``scripts/sysid_franka_osc.py`` runs it, ``--refine_iter refine_iter``). Both
    interval reports are computed in process.
    """
    import time

    import tyro

    from isaaclab_sysid.export.build import FitContext
    from isaaclab_sysid.fit.refine import refine_point
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.intervals.combine import compute_all
    from isaaclab_sysid.jobs.fit_args import FitArgs, resolve_problem
    from isaaclab_sysid.jobs.fit_job import run_fit

    truth = frictionless() if truth is None else truth
    out = Path(out)
    sec = {}
    t0 = time.perf_counter()
    data = make_servo_dataset(out, duration_s=duration_s, n_fit=1, step_hold_s=0.5, truth=truth)
    flags = fit_flags(data, out / "fit", groups, ("--refine_iter", str(refine_iter)))
    adequacy: dict = {}
    if fit_delay is None:
        ctx = FitContext.load(run_fit(tyro.cli(FitArgs, args=flags, use_underscores=True), lambda s: None))
        result, problem = ctx.result, ctx.problem()
        adequacy = result.adequacy.to_json() if result.adequacy is not None else {}
    else:
        problem = resolve_problem(tyro.cli(FitArgs, args=flags, use_underscores=True), log=lambda s: None)
        space, obj = problem.space, problem.objective()
        viscous = "viscous" in space.group_names
        true_vals = {g: (truth.delay if g == "delay" else
                         np.array([truth_of(truth, g, j, viscous) for j in range(len(truth.kp))]))
                     for g in space.group_names}
        x = refine_point(obj, space.with_delay(space.normalize(true_vals), fit_delay), refine_iter, 0)
        lb = obj.loss(x[None])
        result = FitResult.from_search(space, x, float(lb.total[0]), run_names=obj.run_names,
                                       weighted_loss=lb.per_run[:, 0] * obj.traj_weights, traj_weights=obj.traj_weights,
                                       loss_weights=problem.weights)
    sec["fit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cond = compute_all(problem.backend, result, problem.runs, problem.heldout, n_boot=n_boot, delay_max=0,
                       omitted_groups=(), basins=False)
    sec["intervals_conditional"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    union = compute_all(problem.backend, result, problem.runs, problem.heldout, n_boot=n_boot)
    sec["intervals_union"] = time.perf_counter() - t0
    return DelayCase(judge_intervals(cond.to_dict(), truth, adequacy), judge_intervals(union.to_dict(), truth, adequacy),
                     union.structure.get("delay", {}), sec)


def run_proof(out: str | Path, duration_s: float = 20.0, groups: str = FULL_GROUPS, refine_iter: int = 30,
              extra: tuple[str, ...] = (), log=print, seed: int = 0, truth: ServoTruth = SO101_TRUTH) -> ServoVerdict:
    """The whole proof: dataset, the fit, its intervals, :func:`judge`. ``seed``: the twin's designs and noise
    (:func:`make_servo_dataset`); ``truth``: the hidden truth.

    In process: the jobs ``scripts/sysid_franka_osc.py`` and ``scripts/compute_intervals.py`` call, with the flags a
    user gives the fit (logged as the command line they stand for).
    """
    import tyro

    from isaaclab_sysid.export.build import FitContext, intervals_for
    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_job import run_fit

    out = Path(out)
    data = make_servo_dataset(out, duration_s=duration_s, seed=seed, truth=truth)
    log_dir = out / "fit"
    flags = fit_flags(data, log_dir, groups, ("--refine_iter", str(refine_iter), *extra))
    log("$ scripts/sysid_franka_osc.py " + " ".join(flags))
    fit_dir = run_fit(tyro.cli(FitArgs, args=list(flags), use_underscores=True), log)
    log(f"$ scripts/compute_intervals.py --fit_dir {fit_dir}")
    intervals_for(FitContext.load(fit_dir), True)
    return judge(fit_dir, truth)
