"""A servo test bench fitted and scored as BAM scores it (issue 42; ``benchmarks/vs_bam.py``, docs/servo_arms.md).

BAM's logs (``importers/bam.py``: resampled at 5 ms exactly as ``bam.process`` does) are split by firmware gain:
the fit gains are fitted with the product's default fit (``--fit_groups auto``: for servo runs the motor model,
the homing offset and a friction law chosen on evidence), the held-out gains are replayed free-running from their
first state with the fitted model, and each held-out log's position MAE [rad] is computed on the same 5 ms rows
BAM's ``bam.mae`` scores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.fit.problem import build_problem
from isaaclab_sysid.objective.problem_record import ProblemRecord
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.importers.run_import import import_runs
from isaaclab_sysid.jobs.fit_job import run_fit

#: ``quick``: the fit's groups fixed to the motor model with the load-dependent law (no auto law search) and one
#: refinement budget short of the default; the CI-sized figure, not the benchmark's
QUICK_GROUPS = "armature,friction,load_friction_motor,load_friction_external,viscous,delay,motor_kt,motor_r,encoder_offset"


@dataclass(frozen=True)
class BenchScore:
    """What :func:`fit_and_score` measured.

    Attributes:
        fit_dir: the fit's output folder.
        mae: held-out log stem (the raw JSON file's stem) -> position MAE [rad] of the free-running replay.
        fit_mae: the same on the fit logs.
        values: the fitted values (the result's decoded values, by group).
        runs: held-out log stem -> (trajectory kind, kp).
    """

    fit_dir: Path
    mae: dict[str, float]
    fit_mae: dict[str, float]
    values: dict[str, object]
    runs: dict[str, tuple[str, float]]


def split_by_gain(runs: Sequence[Run], fit_kp: Sequence[float], heldout_kp: Sequence[float]) -> tuple[list[Run], list[Run]]:
    """The runs whose (first) register gain is in ``fit_kp`` and those in ``heldout_kp``.

    Raises:
        FitError: a split is empty, or a gain is in both.
    """
    both = set(map(float, fit_kp)) & set(map(float, heldout_kp))
    if both:
        raise FitError(f"gain(s) {sorted(both)} both fitted and held out")
    fit = [r for r in runs if float(r.meta.kp[0]) in set(map(float, fit_kp))]
    held = [r for r in runs if float(r.meta.kp[0]) in set(map(float, heldout_kp))]
    if not fit or not held:
        have = sorted({float(r.meta.kp[0]) for r in runs})
        raise FitError(f"no logs at kp {list(fit_kp) if not fit else list(heldout_kp)} (the logs have kp {have})")
    return fit, held


def position_mae(result: FitResult, record: ProblemRecord, log: Callable[[str], None] = lambda s: None) -> dict[str, float]:
    """Fit and held-out runs' position MAE [rad] by run name: each replayed free-running with the fitted values
    (``record``: the fit's problem with ``fit_groups`` the result's groups)."""
    problem = build_problem(record, log)
    try:
        dec = {k: np.asarray(v)[None] if np.ndim(v) else np.asarray([v]) for k, v in result.values.items()}
        batch = result.space.batch_from_decoded(dec, 1)
        runs = problem.all_runs
        outs = problem.backend.rollout(batch, runs)
        maes = {}
        for r, ro in zip(runs, outs):
            maes[r.name] = float("inf") if ro.diverged[0] else float(np.mean(np.abs(ro.q[0] - r.q)))
        return maes
    finally:
        problem.backend.close()


def fit_and_score(raw_dir: str | Path, fit_kp: Sequence[float], heldout_kp: Sequence[float], out_dir: str | Path,
                  quick: bool = False, log: Callable[[str], None] = print) -> BenchScore:
    """Import BAM's logs in ``raw_dir``, fit on ``fit_kp``, score on ``heldout_kp`` (module docstring)."""
    out = Path(out_dir)
    runs, _ = import_runs(raw_dir, "bam", None, out / "runs", log=lambda s: None)
    fit, held = split_by_gain(runs, fit_kp, heldout_kp)
    csv = lambda rs: [str(out / "runs" / f"{r.name}.csv") for r in rs]  # noqa: E731
    flags = dict(real_csv=csv(fit), heldout_csv=csv(held), log_dir=str(out / "fit"), plots=False)
    if quick:
        flags.update(fit_groups=QUICK_GROUPS, refine_iter=15)
    args = FitArgs.build(**flags)
    run_dir = run_fit(args, log)
    result = RunFolder(Path(run_dir)).read_result()
    eval_args = FitArgs.build(**{**flags, "fit_groups": ",".join(result.space.group_names)})
    maes = position_mae(result, eval_args.problem)
    held_names = {r.name for r in held}
    return BenchScore(
        fit_dir=Path(run_dir),
        mae={k: v for k, v in maes.items() if k in held_names},
        fit_mae={k: v for k, v in maes.items() if k not in held_names},
        values=dict(result.values),
        runs={r.name: (str(r.meta.excitation.get("kind", "")), float(r.meta.kp[0])) for r in held},
    )


def fit_bench(raw_dir: str | Path, fit_kp: Sequence[int], heldout_kp: Sequence[int], out_dir: str | Path,
              quick: bool) -> dict[str, float]:
    """``benchmarks/vs_bam.py``'s column: held-out log stem -> position MAE [rad] (:func:`fit_and_score`)."""
    return fit_and_score(raw_dir, fit_kp, heldout_kp, out_dir, quick).mae
