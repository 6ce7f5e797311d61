"""Issue 45: benchmarks/scaling.py at CI size. Correctness only (the delay, the numbers against the twin's truth, the
held-out error), never speed: a longer run and the same total as two shorter runs are at least as right."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import scaling  # noqa: E402


def test_scaling_ci_longer_data_is_at_least_as_right(tmp_path):
    out = scaling.run(scaling.CI, scaling.CI_GROUPS, work=tmp_path, verbose=False)
    print(scaling.report(out))
    rows = {r["case"]: r for r in out["rows"]}
    assert set(rows) == {"2s", "4s", "2x2s"}
    for r in rows.values():
        assert r["delay"] == r["delay_true"], r["case"]
        assert r["iterations"] > 0 and r["jacobians"] > 0 and r["peak_rss_gb"] > 0
    # 2 s of multiband leaves the static group poorly determined; 4 s pins it
    assert rows["4s"]["median_rel"] < 0.10, rows["4s"]["median_rel"]
    assert rows["4s"]["heldout_over_floor"] < 3.0, rows["4s"]["heldout_over_floor"]
    # twice the data, as one run or as the same run recorded twice: at least as right as the reference length
    # (the same 2 s motion twice averages the noise but adds no motion: its numbers stay as poorly determined as at
    # 2 s, 53 % against 56 % median error when measured, so only its held-out error is held to it)
    assert rows["4s"]["median_rel"] <= rows["2s"]["median_rel"] + 0.005
    for case in ("4s", "2x2s"):
        assert rows[case]["heldout_over_floor"] <= rows["2s"]["heldout_over_floor"] * 1.05, case


def test_per_sample_blocks_and_effective_samples():
    import numpy as np

    from isaaclab_sysid.objective.residuals import autocorr_time, effective_samples, per_sample_blocks

    rng = np.random.default_rng(0)
    shapes = [(400, 7), (300, 7)]
    blocks = [rng.normal(size=(T, 2 * N + 3)) for T, N in shapes]
    flat = np.concatenate([np.concatenate([b[:, :7].ravel(), b[:, 7:14].ravel(), b[:, 14:].ravel()]) for b in blocks])
    back = per_sample_blocks(flat, shapes)
    for a, b in zip(back, blocks):
        np.testing.assert_array_equal(a, b)
    assert autocorr_time(blocks) == pytest.approx(1.0, abs=0.3)  # white: every sample counts
    smooth = [np.cumsum(b, axis=0) for b in blocks]  # a random walk: few independent samples
    assert autocorr_time(smooth) > 20
    assert effective_samples(flat, shapes) > 10 * effective_samples(
        np.concatenate([np.concatenate([b[:, :7].ravel(), b[:, 7:14].ravel(), b[:, 14:].ravel()]) for b in smooth]),
        shapes)
