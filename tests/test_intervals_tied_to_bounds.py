"""Numbers correlated with a number at its search bound are marked unreliable (intervals/combine.py, issue 27)."""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.intervals.combine import BOUND_CORRELATION, tied_to_bounds
from isaaclab_sysid.intervals.common import Interval, IntervalSet


def _set(corr: np.ndarray, labels: list[str], unidentified: tuple[str, ...] = ()) -> IntervalSet:
    std = np.array([0.1, 0.2, 0.3, 0.4])[: len(labels)]
    ivs = [Interval(lab, lab.split("[")[0], "j", 1.0, None if lab in unidentified else 0.5,
                    None if lab in unidentified else 1.5, float(s), lab not in unidentified)
           for lab, s in zip(labels, std)]
    return IntervalSet("curvature", 0.95, ivs, cov=corr * np.outer(std, std), cov_labels=labels)


def test_numbers_tied_to_a_bounded_one_are_named_with_their_correlation():
    labels = ["mu_static[j]", "dynamic_ratio[j]", "kp[j]", "stribeck_velocity[j]"]
    corr = np.eye(4)
    corr[0, 3] = corr[3, 0] = -0.64
    corr[1, 3] = corr[3, 1] = 0.68
    corr[2, 3] = corr[3, 2] = 0.3  # below the threshold
    tied = tied_to_bounds(_set(corr, labels), ["stribeck_velocity[j]"])
    assert set(tied) == {"mu_static[j]", "dynamic_ratio[j]"}
    assert tied["mu_static[j]"][0] == "stribeck_velocity[j]"
    np.testing.assert_allclose(tied["mu_static[j]"][1], -0.64)
    assert BOUND_CORRELATION == 0.5
    # nothing at a bound: nothing tied
    assert tied_to_bounds(_set(corr, labels), []) == {}


def test_a_bounded_number_in_the_null_space_ties_nothing():
    labels = ["kp[j]", "encoder_offset[j]"]
    corr = np.array([[1.0, 0.9], [0.9, 1.0]])
    assert tied_to_bounds(_set(corr, labels, unidentified=("encoder_offset[j]",)), ["encoder_offset[j]"]) == {}
    assert set(tied_to_bounds(_set(corr, labels), ["encoder_offset[j]"])) == {"kp[j]"}
