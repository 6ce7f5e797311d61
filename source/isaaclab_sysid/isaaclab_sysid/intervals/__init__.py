"""Intervals for every fitted number: curvature (used for export), block bootstrap, per-run spread, CMA-ES covariance.

See docs/intervals_and_export.md.
"""

from isaaclab_sysid.intervals.combine import IntervalReport, compute_all, read_intervals, write_intervals
from isaaclab_sysid.intervals.common import Interval, IntervalSet
from isaaclab_sysid.intervals.curvature import Sensitivity, curvature_intervals, sensitivity

__all__ = [
    "Interval",
    "IntervalReport",
    "IntervalSet",
    "Sensitivity",
    "compute_all",
    "curvature_intervals",
    "read_intervals",
    "sensitivity",
    "write_intervals",
]
