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
from isaaclab_sysid.jobs.twin_study import CI, TRUTH, Cell, matrix, run_cell, table

CELLS = matrix()
#: the cell that fooled the residual-based verdicts (docs/fit.md): at 50 Hz with the state-age model, a joint-PD
#: run's missing static friction hides in the rows' random age (the held-out run replays at the noise floor); the
#: score test of the omitted static group (evaluate/friction_score.py) is what calls it out
HIDDEN_STATIC = Cell(50.0, "stribeck", "coulomb", "joint_pd")


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
    wrong = [s for s in scores if not s.cell.model_is_right]
    assert len(wrong) == 6
    for s in wrong:
        assert s.verdict == "misfit", (s.cell.name, s.messages)
        assert s.honest, s.cell.name  # every interval missing the truth is marked unreliable


def test_hidden_static_friction_is_found_by_the_score_test(scores):
    s = next(s for s in scores if s.cell == HIDDEN_STATIC)
    assert s.verdict == "misfit" and s.honest
    assert "static friction the model lacks" in s.messages[0], s.messages
