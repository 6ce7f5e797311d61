"""One pipeline: the fit's stages as typed functions on one run folder, sequenced once.

    fit (jobs.fit_job.run_fit) -> RunFolder -> intervals_stage -> IntervalReport -> export_stage -> what was written

``scripts/sysid_franka_osc.py`` (``scripts/fit.py``) runs the fit and, with ``--export``, the intervals and the
export on the folder it wrote; ``scripts/compute_intervals.py`` and ``scripts/export_dr.py`` call the same stage
functions on a folder a fit wrote earlier. Every stage reads and writes the folder through
:class:`~isaaclab_sysid.fit.run_folder.RunFolder`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from isaaclab_sysid.intervals.combine import IntervalReport


@dataclass
class IntervalOptions:
    """Intervals for every fitted number of one fit."""

    fit_dir: str
    """Fit output folder holding sysid_best_params.json and config.json."""
    level: float = 0.95
    """Two-sided confidence level (0.95 -> +-1.96 standard errors)."""
    interval_method: Literal["curvature", "bootstrap", "widest"] = "curvature"
    """The method recorded as selected for export."""
    fd_step: float = 1e-3
    """Finite-difference step in the normalized parameter space (fraction of each bound width)."""
    n_boot: int = 1000
    """Block-bootstrap resamples."""
    omitted: bool = True
    """Hold the refit with each group the fit left out (viscous friction, held at 0 by the servo fits) in every
    interval; --no_omitted keeps them conditional on the nominal value (docs/intervals_and_export.md)."""
    basins: bool = True
    """Restart the refinement on the other side of the friction law's shape (Stribeck velocity and exponent, sigmoid
    slope and offset, Dahl stiffness) and hold a basin within the noise in every interval; --no_basins keeps the
    intervals local (docs/intervals_and_export.md)."""


def intervals_stage(options: IntervalOptions, recompute: bool = True,
                    log: Callable[[str], None] = print) -> IntervalReport:
    """Every interval method for the fit in ``options.fit_dir``, written to its ``intervals.json`` (``recompute``
    False: an existing file of the same level and method is reused)."""
    from isaaclab_sysid.export.build import FitContext, intervals_for

    ctx = FitContext.load(options.fit_dir)
    return intervals_for(ctx, recompute, options.level, options.interval_method, options.fd_step, options.n_boot,
                         log=log, omitted=options.omitted, basins=options.basins)


def interval_table(rep: IntervalReport) -> list[str]:
    """The report as text lines: one row per number with every method's interval, the delay and rho."""
    lines = [f"{'number':18s}" + "".join(f"{m:>26s}" for m in rep.sets)]
    for lab in [iv.label for iv in rep.sets["curvature"].intervals]:
        row = f"{lab:18s}"
        for s in rep.sets.values():
            iv = s.by_label().get(lab)
            txt = "-" if iv is None else ("unbounded" if not iv.bounded else f"[{iv.lower:.4g}, {iv.upper:.4g}]")
            row += f"{txt:>26s}"
        lines.append(row)
    d = rep.structure.get("delay")
    if d:
        lines.append(f"delay: fitted {d['fitted']}, accepted by the re-optimized profile {d['accepted']}, interval "
                     f"{d['interval']}; depends on the delay: {', '.join(d.get('depends_on_delay', [])) or 'nothing'}")
    lines.append(f"rho (held-out / fit loss) = {rep.structure.get('rho')}; timing {rep.timing_s}")
    return lines


def intervals_main(options: IntervalOptions) -> int:
    """``scripts/compute_intervals.py``: the intervals stage, its warnings on stderr and its table on stdout."""
    from isaaclab_sysid.export.build import ExportError

    try:
        rep = intervals_stage(options)
    except ValueError as exc:  # a fit folder's file that does not read (named in the message)
        raise ExportError(str(exc)) from None
    for w in rep.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print("\n".join(interval_table(rep)))
    return 0


#: the fit's older spellings of the shared vocabulary (utils/cli.VOCABULARY), still accepted with a note
FIT_RENAMES = {"--real_csv": "--runs", "--heldout_csv": "--heldout", "--log_dir": "--out"}


def run_pipeline(args, log: Callable[[str], None] = print) -> int:
    """The fit (``jobs.fit_job.run_fit``) and, with ``--export``, the intervals and the export on the folder it wrote,
    in that order; returns the exit status of the last stage that ran (0: every stage ran)."""
    from isaaclab_sysid.export.export_cli import ExportOptions, export_main
    from isaaclab_sysid.jobs.fit_job import run_fit

    folder = run_fit(args, log)
    if not args.output.export or args.output.eval_params:
        return 0
    log(f"--export: intervals of {folder} (scripts/compute_intervals.py)")
    intervals_main(IntervalOptions(fit_dir=str(folder)))
    log(f"--export: the exports of {folder} (scripts/export_dr.py)")
    return export_main(ExportOptions(fit_dir=str(folder)))


def fit_cli(argv: Sequence[str] | None = None) -> int:
    """The fit's command line (``scripts/fit.py`` and its documented alias ``scripts/sysid_franka_osc.py``): the
    fit's options in the shared vocabulary (default ``sys.argv[1:]``), the fit, and with ``--export`` the intervals
    and the export on the folder it wrote; returns the exit status."""
    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_job import main_from_args
    from isaaclab_sysid.utils.cli import parse

    return main_from_args(parse(FitArgs, argv, renames=FIT_RENAMES, repeated=("--runs", "--heldout")), run_pipeline)


__all__ = ["FIT_RENAMES", "IntervalOptions", "fit_cli", "interval_table", "intervals_main", "intervals_stage",
           "run_pipeline"]
