"""The fit on twins it must work for, CI-sized (benchmarks/fit_matrix.py prints the full table, docs/fit.md).

Every cell of {1 kHz, 50 Hz with the state-age model} x {Coulomb truth, Stribeck truth fitted with the static
group, Stribeck truth fitted Coulomb-only} x {joint PD, task impedance}, plus stale 50 Hz logs fitted without the
state-age model. Where the model can represent the truth, the fit must find the exact delay, its 95 % intervals must
cover the truth (pooled over cells) and the verdict must not cry wolf; where it cannot, the adequacy verdict must
say so and every interval that misses the truth must be marked unreliable: never a confident wrong interval.
"""

from __future__ import annotations

import pytest

from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.study import CI, TRUTH, Cell, matrix, run_cell, table

CELLS = matrix()
#: the one cell where the fit fails today, documented in docs/fit.md: at 50 Hz with the state-age model, a
#: joint-PD run's missing static friction is hidden by the rows' random age (the held-out run is replayed at the
#: noise floor), so the verdict says adequate and a few intervals of the effective Coulomb model miss the truth
KNOWN_MISS = Cell(50.0, "stribeck", "coulomb", "joint_pd")


@pytest.fixture(scope="module")
def scores():
    robot = load_robot("franka_panda")
    out = [run_cell(c, 0, CI, robot) for c in CELLS]
    print("\n" + table(out))
    return out


def test_right_models_find_the_delay_cover_the_truth_and_do_not_cry_wolf(scores):
    right = [s for s in scores if s.cell.model_is_right]
    assert len(right) == 8
    for s in right:
        assert s.delay == TRUTH["delay"], s.cell.name
        assert s.verdict == "adequate", (s.cell.name, s.messages)
        assert s.checked >= 15, s.cell.name  # most numbers identifiable (task impedance leaves joint 1 unbounded)
    coverage = sum(s.covered for s in right) / sum(s.checked for s in right)
    assert coverage >= 0.9, coverage


def test_wrong_models_are_called_out_and_never_confidently_wrong(scores):
    wrong = [s for s in scores if not s.cell.model_is_right and s.cell != KNOWN_MISS]
    assert len(wrong) == 5
    for s in wrong:
        assert s.verdict == "misfit", (s.cell.name, s.messages)
        assert s.honest, s.cell.name  # every interval missing the truth is marked unreliable


@pytest.mark.xfail(strict=True, reason="known limit (docs/fit.md): 50 Hz rows' random age hides a joint-PD run's "
                                       "missing static friction from the verdict")
def test_known_miss_50hz_static_friction_under_state_age(scores):
    s = next(s for s in scores if s.cell == KNOWN_MISS)
    assert s.verdict == "misfit" and s.honest
