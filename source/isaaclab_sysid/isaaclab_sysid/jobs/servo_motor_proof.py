"""The servo motor model's proof (issue 42): BAM logs of a twin with hidden truth -> importer -> fit -> intervals.

:func:`make_motor_dataset` records the XL330 bench twin (:data:`~isaaclab_sysid.twin.servo_motor.XL330_TRUTH`:
voltage, back-EMF, the current window, load-dependent friction, torque-off phases, the recorder's irregular loop and
the sensors' quantization) on BAM's trajectories at several register gains, writes each as a BAM JSON log and imports
the folder with the importer of ``scripts/import_runs.py --format bam`` (the whole chain a user's logs take).
:func:`run_proof` fits the fit gains' runs with the fit job of ``scripts/sysid_franka_osc.py`` (``--fit_groups auto``,
the default), holds out the other gain's, computes the intervals as ``scripts/compute_intervals.py`` does (all in
process: the jobs the scripts call) and :func:`judge` says, per fitted number, whether the truth lies in
its 95 % interval or why the intervals flag it; a number that is neither is a failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.importers.run_import import import_runs
from isaaclab_sysid.intervals.combine import read_intervals
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.servo_motor import TRAJECTORIES, XL330_TRUTH, MotorTruth, record_bench_log
from isaaclab_sysid.utils.atomic import atomic_write_json

ROBOT = "bam_pendulum_xl330"


@dataclass(frozen=True)
class MotorDataset:
    """The imported twin runs: fit CSVs, held-out CSVs, the raw logs' folder, realism figures of the logs."""

    fit_csv: list[str]
    heldout_csv: list[str]
    raw: Path
    realism: dict


def log_name(kp: float, trajectory: str) -> str:
    return f"kp{int(kp)}_{trajectory}"


def make_motor_dataset(out: str | Path, fit_logs: Sequence[tuple[float, str]], heldout_logs: Sequence[tuple[float, str]],
                       truth: MotorTruth = XL330_TRUTH, seed: int = 0) -> MotorDataset:
    """Record one log per (register gain, trajectory) of ``fit_logs`` and ``heldout_logs`` into ``out/raw`` (BAM's
    JSON) and import them into ``out/runs`` with ``scripts/import_runs.py --format bam``. Each log has its own noise
    and loop timing (``seed`` x 1000 + its index)."""
    out = Path(out)
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    robot = load_robot(ROBOT)
    plan = [(kp, tr, False) for kp, tr in fit_logs] + [(kp, tr, True) for kp, tr in heldout_logs]
    counts = {"entries": 0, "torque_off_entries": 0, "repeated_positions": 0, "position_steps": [], "speed_steps": [],
              "volts": [], "gaps_ms": []}
    for i, (kp, tr, _) in enumerate(plan):
        log, _, _ = record_bench_log(robot, tr, kp, truth, seed=seed * 1000 + i)
        atomic_write_json(raw / f"{log_name(kp, tr)}.json", log)
        e = log["entries"]
        p = np.array([x["position"] for x in e])
        s = np.array([x["speed"] for x in e])
        counts["entries"] += len(e)
        counts["torque_off_entries"] += sum(not x["torque_enable"] for x in e)
        counts["repeated_positions"] += int(np.sum(np.diff(p) == 0))
        counts["position_steps"].append(float(np.min(np.diff(np.unique(p)))))
        counts["speed_steps"].append(float(np.min(np.diff(np.unique(s)))))
        counts["volts"] += [float(min(x["input_volts"] for x in e)), float(max(x["input_volts"] for x in e))]
        counts["gaps_ms"].append(float(np.max(np.diff([x["timestamp"] for x in e])) * 1e3))
    realism = {"entries": counts["entries"], "torque_off_entries": counts["torque_off_entries"],
               "repeated_position_fraction": counts["repeated_positions"] / counts["entries"],
               "smallest_position_step_rad": min(counts["position_steps"]),
               "smallest_speed_step_rad_s": min(counts["speed_steps"]),
               "volts_range": [min(counts["volts"]), max(counts["volts"])], "largest_gap_ms": max(counts["gaps_ms"])}
    import_runs(raw, "bam", None, out / "runs", log=lambda s: None)  # what import_runs.py --format bam runs
    csv = lambda kp, tr: str(out / "runs" / f"{log_name(kp, tr)}.csv")  # noqa: E731
    return MotorDataset([csv(kp, tr) for kp, tr, h in plan if not h], [csv(kp, tr) for kp, tr, h in plan if h], raw,
                        realism)


@dataclass
class Judged:
    """One fitted number against the truth: ``verdict`` is ``inside``, ``flagged: <reason>`` or ``FAIL: <why>``."""

    label: str
    group: str
    value: float
    truth: float | None
    lower: float | None
    upper: float | None
    verdict: str

    @property
    def failed(self) -> bool:
        return self.verdict.startswith("FAIL")


@dataclass
class MotorVerdict:
    """The proof's figures: every fitted number judged, the law auto chose, the held-out position MAE."""

    rows: list[Judged]
    law: str | None
    heldout_mae_mrad: dict[str, float]
    fit_dir: str
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Judged]:
        return [r for r in self.rows if r.failed]

    @property
    def misfit_only(self) -> list[Judged]:
        """Numbers whose interval misses the truth, flagged only by the blanket misfit (no reason of their own)."""
        return [r for r in self.rows if r.verdict.startswith("flagged (misfit only)")]

    def format(self) -> str:
        lines = [f"friction law auto chose: {self.law}"]
        if self.heldout_mae_mrad:
            mean = float(np.mean(list(self.heldout_mae_mrad.values())))
            lines.append(f"held-out position MAE: mean {mean:.2f} mrad; " + ", ".join(
                f"{k} {v:.2f}" for k, v in self.heldout_mae_mrad.items()))
        for r in self.rows:
            iv = "-" if r.lower is None or r.upper is None else f"[{r.lower:.5g}, {r.upper:.5g}]"
            tr = "-" if r.truth is None else f"{r.truth:.5g}"
            lines.append(f"  {r.label:<34} fitted {r.value:<10.5g} true {tr:<10} 95% {iv:<26} {r.verdict}")
        lines.append(f"failures: {[r.label for r in self.failures] or 'none'}; missed but flagged only by the misfit: "
                     f"{[r.label for r in self.misfit_only] or 'none'}")
        if self.seconds:
            lines.append("wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items()))
        return "\n".join(lines + self.notes)

    def to_dict(self) -> dict:
        return {"rows": [asdict(r) for r in self.rows], "law": self.law, "heldout_mae_mrad": self.heldout_mae_mrad,
                "fit_dir": self.fit_dir, "seconds": self.seconds, "notes": self.notes,
                "failures": [r.label for r in self.failures],
                "misfit_only": [r.label for r in self.misfit_only]}


#: the intervals' blanket reason when the fit misfits (every interval then assumes a model the data reject)
MISFIT_NOTE = "fitted under a misfit"
#: the truth's friction law (the load law); a fitted friction group of another law has no true value
TRUTH_LAW_GROUPS = ("friction", "load_friction_motor", "load_friction_external")


def judge_intervals(ivs: dict, truth: MotorTruth = XL330_TRUTH, law: str | None = None) -> list[Judged]:
    """Every entry of the selected interval method judged against ``truth`` (``intervals.json`` as a dict).

    Inside: the truth lies in [lower, upper]. Flagged: the intervals stage marks the number not identifiable, not
    reliable, or at a bound, with its reason. Otherwise FAIL (a confident interval that misses, or a number of a
    friction law the truth does not have, unflagged)."""
    truths = truth.values()
    rows = []
    for e in ivs["methods"][ivs["selected"]]["intervals"]:
        g = e["group"]
        lo, hi = e.get("lower"), e.get("upper")
        t = truths.get(g)
        if g in TRUTH_LAW_GROUPS and g != "friction" and law not in (None, "load"):
            t = None
        if g == "friction" and law not in (None, "load"):
            t = None  # another law's level is not the load law's base
        parts = [p for p in (e.get("note") or "").split("; ") if p]
        own = [p for p in parts if not p.startswith("widened") and p != MISFIT_NOTE]
        reasons = []
        if not e.get("identifiable", True):
            reasons.append("not identifiable")
        if e.get("at_bound"):
            reasons.append(f"at its {e.get('at_bound')} bound")
        if not e.get("reliable", True) and own:
            reasons.append("unreliable: " + "; ".join(own))
        inside = t is not None and lo is not None and hi is not None and lo <= t <= hi
        if inside:
            verdict = "inside"
        elif reasons:
            verdict = "flagged: " + "; ".join(reasons)
        elif not e.get("reliable", True) and MISFIT_NOTE in parts:
            verdict = "flagged (misfit only): " + MISFIT_NOTE
        elif t is None:
            verdict = f"FAIL: no true value ({g} belongs to the {law} law; the truth's law is load)"
        else:
            verdict = "FAIL: the interval misses the truth"
        rows.append(Judged(e["label"], g, float(e["value"]), t, lo, hi, verdict))
    return rows


def heldout_mae(fit_dir: Path, heldout_csv: Sequence[str]) -> dict[str, float]:
    """Per held-out run, the mean |q_replayed - q_logged| [mrad] over its rows: the fit folder's fitted values replayed
    free-running on its runs (:func:`~isaaclab_sysid.jobs.servo_bench.position_mae`, as the bench benchmark scores)."""
    from isaaclab_sysid.export.build import FitContext
    from isaaclab_sysid.jobs.servo_bench import position_mae

    ctx = FitContext.load(fit_dir)
    names = {Path(c).stem for c in heldout_csv}
    return {k: 1e3 * v for k, v in position_mae(ctx.result, ctx.record).items() if k in names}


def judge(fit_dir: str | Path, heldout_csv: Sequence[str], truth: MotorTruth = XL330_TRUTH) -> MotorVerdict:
    """Read a fit folder (``intervals.json``, ``friction_law_auto.json``, ``eval_result.json``) and judge it."""
    folder = RunFolder(Path(fit_dir))
    ivs = read_intervals(folder.intervals).to_dict()
    law = json.loads(folder.law_choice.read_text()).get("chosen") if folder.law_choice.is_file() else None
    notes = [w for w in ivs.get("warnings", [])]
    return MotorVerdict(judge_intervals(ivs, truth, law), law, heldout_mae(fit_dir, heldout_csv), str(fit_dir), notes=notes)


def grid(kps: Sequence[float], trajectories: Sequence[str]) -> list[tuple[float, str]]:
    """Every (gain, trajectory) pair, gains first."""
    return [(kp, tr) for kp in kps for tr in trajectories]


#: the full proof's split: BAM's four trajectories at kp 100 and 200 fitted, at kp 400 held out (vs_bam's split)
FULL_FIT = grid((100, 200), tuple(TRAJECTORIES))
FULL_HELDOUT = grid((400,), tuple(TRAJECTORIES))
#: the CI size: the fastest trajectory at kp 100 and the torque-off one at kp 200 fitted, sin_sin at kp 400 held out
CI_FIT = [(100, "sin_time_square"), (200, "lift_and_drop")]
CI_HELDOUT = [(400, "sin_sin")]


def run_proof(out: str | Path, fit_logs: Sequence[tuple[float, str]] = FULL_FIT,
              heldout_logs: Sequence[tuple[float, str]] = FULL_HELDOUT, truth: MotorTruth = XL330_TRUTH, seed: int = 0,
              log: Callable[[str], None] = print) -> MotorVerdict:
    """The whole proof (module doc), in process: the jobs the scripts call (``import_runs.py --format bam``,
    ``sysid_franka_osc.py`` with its defaults, ``compute_intervals.py``)."""
    from isaaclab_sysid.export.build import FitContext, intervals_for
    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_job import run_fit

    out = Path(out)
    sec = {}
    t0 = time.perf_counter()
    data = make_motor_dataset(out, fit_logs, heldout_logs, truth, seed)
    sec["record_and_import"] = time.perf_counter() - t0
    log(f"twin logs: {data.realism}")
    t0 = time.perf_counter()
    fit_dir = run_fit(FitArgs.build(real_csv=list(data.fit_csv), heldout_csv=list(data.heldout_csv),
                                    log_dir=str(out / "fit"), plots=False), lambda s: None)
    sec["fit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = intervals_for(FitContext.load(fit_dir), True)  # writes intervals.json, as compute_intervals.py does
    for w in rep.warnings:
        log(f"intervals: {w}")
    sec["intervals"] = time.perf_counter() - t0
    v = judge(fit_dir, data.heldout_csv, truth)
    v.seconds = sec
    v.notes.insert(0, f"twin logs: {data.realism}")
    atomic_write_json(out / "servo_motor_verdict.json", v.to_dict() | {"truth": truth.as_dict()})
    return v
