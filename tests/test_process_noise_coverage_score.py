"""benchmarks/process_noise_coverage.py's scoring (its figures are in docs/benchmarks.md, issue 46, eighth pass): the
count inside, z's spread and the misses, flagged or not, on rows whose answer is known."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import process_noise_coverage as pnc  # noqa: E402


def _row(label, truth, value, half, flagged=False):
    lo, hi = (None, None) if half is None else (value - half, value + half)
    return {"label": label, "truth": truth, "value": value, "lower": lo, "upper": hi, "flagged": flagged}


def test_score_counts_inside_misses_and_the_spread_of_z():
    rows = [_row("a", 1.0, 1.0, 0.196), _row("b", 1.098, 1.0, 0.196), _row("c", 1.3, 1.0, 0.196),
            _row("d", 0.5, 1.0, 0.196, flagged=True), _row("e", 2.0, 1.0, None, flagged=True)]
    s = pnc.score(rows)
    assert (s["compared"], s["inside"]) == (5, 2)
    assert (s["unflagged_misses"], s["flagged_misses"]) == (1, 2)
    assert s["missed"] == ["c"]
    # z of the four bounded rows: 0, 0.98, 3, -5 (a half-width of 0.196 is 1.96 sigma of 0.1)
    z = np.array([0.0, 0.98, 3.0, -5.0])
    assert s["std_z"] == pytest.approx(float(np.std(z)), rel=1e-9)
    assert s["mean_z"] == pytest.approx(float(np.mean(z)), rel=1e-9)
    assert s["rms_z"] == pytest.approx(float(np.sqrt(np.mean(z**2))), rel=1e-9)  # a bias shows here, not in std_z


def test_no_bounded_interval_gives_no_spread():
    s = pnc.score([_row("e", 2.0, 1.0, None, flagged=True)])
    assert s["std_z"] is None and s["rms_z"] is None and (s["inside"], s["flagged_misses"]) == (0, 1)


def test_an_unbounded_interval_must_be_flagged():
    with pytest.raises(AssertionError, match="not flagged"):
        pnc.score([_row("e", 2.0, 1.0, None, flagged=False)])


def test_seeds_read_as_a_range_or_a_list():
    assert pnc.seeds_of("1-4") == [1, 2, 3, 4]
    assert pnc.seeds_of("3,5") == [3, 5]
