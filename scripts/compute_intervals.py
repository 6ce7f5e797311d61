#!/usr/bin/env python
"""Compute every interval method for a fit and write <fit_dir>/intervals.json (scripts/export_dr.py reuses it).

    python scripts/compute_intervals.py --fit_dir logs/sysid_franka/<time>

Methods: curvature (Gauss-Newton from one batched finite-difference rollout, HAC
sandwich for autocorrelated residuals; used for export), bootstrap (moving-block,
no extra rollouts), per_run (spread of one-step per-run optima), cma (CMA-ES
final covariance, diagnostic). Curvature and bootstrap carry the delay's
uncertainty: the union over the delays the re-optimized delay profile accepts
(intervals/delay_union.py) and, where the fit left viscous friction out, the refit with it free
(intervals/omitted.py). See docs/intervals_and_export.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from isaaclab_sysid.utils.cli import parse, run_cli


@dataclass
class Args:
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


def main(args: Args) -> int:
    from isaaclab_sysid.export.build import ExportError, FitContext, intervals_for

    try:
        ctx = FitContext.load(args.fit_dir)
        rep = intervals_for(ctx, True, args.level, args.interval_method, args.fd_step, args.n_boot,
                            omitted=args.omitted, basins=args.basins)
    except (ExportError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for w in rep.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"{'number':18s}" + "".join(f"{m:>26s}" for m in rep.sets))
    labels = [iv.label for iv in rep.sets["curvature"].intervals]
    for lab in labels:
        row = f"{lab:18s}"
        for s in rep.sets.values():
            iv = s.by_label().get(lab)
            txt = "-" if iv is None else ("unbounded" if not iv.bounded else f"[{iv.lower:.4g}, {iv.upper:.4g}]")
            row += f"{txt:>26s}"
        print(row)
    d = rep.structure.get("delay")
    if d:
        print(f"delay: fitted {d['fitted']}, accepted by the re-optimized profile {d['accepted']}, interval "
              f"{d['interval']}; depends on the delay: {', '.join(d.get('depends_on_delay', [])) or 'nothing'}")
    print(f"rho (held-out / fit loss) = {rep.structure.get('rho')}; timing {rep.timing_s}")
    return 0


if __name__ == "__main__":
    run_cli(lambda: main(parse(Args)))
