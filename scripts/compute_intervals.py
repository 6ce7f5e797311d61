#!/usr/bin/env python
"""Compute every interval method for a fit and write <fit_dir>/intervals.json (scripts/export_dr.py reuses it).

    python scripts/compute_intervals.py --fit_dir logs/sysid/<time>

Methods: curvature (Gauss-Newton from one batched finite-difference rollout, HAC
sandwich for autocorrelated residuals; used for export), bootstrap (moving-block,
no extra rollouts), per_run (spread of one-step per-run optima), cma (CMA-ES
final covariance, diagnostic). Curvature and bootstrap carry the delay's
uncertainty: the union over the delays the re-optimized delay profile accepts
(intervals/delay_union.py) and, where the fit left viscous friction out, the refit with it free
(intervals/omitted.py). See docs/intervals_and_export.md.
"""

from __future__ import annotations

from isaaclab_sysid.jobs.pipeline import IntervalOptions, intervals_main
from isaaclab_sysid.utils.cli import parse, run_cli

if __name__ == "__main__":
    run_cli(lambda: intervals_main(parse(IntervalOptions)))
