"""The delay's uncertainty in the continuous intervals (intervals/delay_union.py), on a linear stand-in.

The stand-in (tests/test_intervals_curvature.py's ``LinearBackend``) is linear in the continuous numbers; here
a change of delay also moves the output along ``armature[j1]``'s own signal by ``couple`` per tick, so that
number can absorb a wrong delay exactly, and a weak signal only the delay produces (``sharp`` x (d - 2)^2)
decides how well the runs pin it. The three cases: a sharp delay (nothing may change, bit for bit), an
ambiguous one (several delays accepted: the union must cover armature[j1]'s truth where the interval at the
fitted delay alone misses it, and the warnings must name the delays and the number), and a fit stuck at a
wrong delay the data reject (flagged, and the union reaches the right one).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_intervals_curvature import TRUE, LinearBackend, _runs, _space

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.fit.refine import refine_point
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.intervals.combine import compute_all
from isaaclab_sysid.intervals.curvature import curvature_intervals, sensitivity
from isaaclab_sysid.intervals.delay_union import delay_scale

T, R = 200, 2
LAB = "armature[j1]"


class CoupledBackend(LinearBackend):
    """LinearBackend whose delay also shifts the output along armature[j1]'s basis (``couple`` per tick)."""

    def __init__(self, couple: float, sharp: float, **kw) -> None:
        super().__init__(T, R, **kw)
        self.couple = couple
        self.delay_sig = self.delay_sig * sharp

    def clean(self, r, base, P, batch):
        q = super().clean(r, base, P, batch)
        d = np.asarray(batch.delay, float) - TRUE["delay"]
        return q + self.couple * d[:, None, None] * self.basis[(r, "armature")][None, :, :, 0]


def _case(couple: float, sharp: float, fit_delay: int, seed: int = 0, phi: float = 0.5):
    be = CoupledBackend(couple, sharp)
    runs = _runs(be, T, R, seed=seed, phi=phi)
    for r in runs:  # what compute_all's process-noise check reads (it then finds the stand-in cannot be pushed)
        r.t = np.arange(T) * 0.02
        r.sample_ticks = lambda: np.arange(T) * 20
    space = _space()
    obj = ReplayObjective(space, be, runs)
    x = refine_point(obj, space.with_delay(space.normalize(TRUE), fit_delay), max_iter=3)
    lb = obj.loss(x[None])
    res = FitResult.from_search(space, x, float(lb.total[0]), run_names=obj.run_names,
                                weighted_loss=lb.per_run[:, 0], traj_weights=obj.traj_weights)
    return be, runs, res


def _ivs(rep, method="curvature"):
    return rep.sets[method].by_label()


def test_sharp_delay_leaves_every_interval_bit_identical():
    be, runs, res = _case(couple=0.02, sharp=1.0, fit_delay=2)
    off = compute_all(be, res, runs, n_boot=200, delay_max=0)
    on = compute_all(be, res, runs, n_boot=200)
    d = on.structure["delay"]
    assert d["accepted"] == [2] and d["union_delays"] == [2]
    assert d["cost"]["lm_iterations"] == 0  # every other delay screened out: the walk cost no rollout
    assert on.to_dict()["methods"] == off.to_dict()["methods"]  # every method, every field, bit for bit
    assert not any("delay" in w and "pinned" in w for w in on.warnings)


def test_ambiguous_delay_gives_the_union_and_names_the_delays_and_the_number_that_moves():
    be, runs, res = _case(couple=0.02, sharp=0.002, fit_delay=3)
    truth = TRUE["armature"][0]
    off = compute_all(be, res, runs, n_boot=200, delay_max=0)
    on = compute_all(be, res, runs, n_boot=200)
    cond, uni = _ivs(off)[LAB], _ivs(on)[LAB]
    assert not cond.contains(truth)  # conditional on the wrong delay 3: a confident wrong interval
    d = on.structure["delay"]
    assert 2 in d["accepted"] and 3 in d["accepted"] and len(d["accepted"]) >= 2
    assert uni.contains(truth) and uni.upper - uni.lower > 3 * (cond.upper - cond.lower)
    assert "depends on the delay" in uni.note
    assert LAB in d["depends_on_delay"]
    # the optimum at every accepted delay is recorded, and armature[j1] moves by the coupling per tick there
    vals = {int(k): v["values"][LAB] for k, v in d["profile"].items() if k in map(str, d["accepted"])}
    assert vals[2] - vals[3] == pytest.approx(0.02, rel=0.05)
    w = [x for x in on.warnings if "not pinned" in x]
    assert len(w) == 1 and LAB in w[0] and str(d["accepted"]) in w[0]
    deli = _ivs(on)["delay"]
    assert deli.lower <= 2 <= deli.upper
    # numbers the delay does not move keep their interval (the union of nearly equal intervals)
    for lab in ("friction[j3]", "viscous[j2]"):
        a, b = _ivs(off)[lab], _ivs(on)[lab]
        assert b.upper - b.lower <= 1.2 * (a.upper - a.lower)
    # the bootstrap (selectable for export) gets the union too
    assert _ivs(on, "bootstrap")[LAB].contains(truth) and not _ivs(off, "bootstrap")[LAB].contains(truth)


def test_fit_at_a_delay_the_data_reject_is_flagged_and_the_union_reaches_the_right_one():
    be, runs, res = _case(couple=0.02, sharp=1.0, fit_delay=3)
    on = compute_all(be, res, runs, n_boot=200)
    d = on.structure["delay"]
    assert d["accepted"] == [2] and d["union_delays"] == [2, 3]
    assert d["profile"]["3"]["statistic"] > d["threshold_chi2_1"]
    assert any("fitted delay 3 is rejected" in w and "--delay_bounds 2 2" in w for w in on.warnings)
    ivs = _ivs(on)
    assert ivs[LAB].contains(TRUE["armature"][0])
    assert all(not iv.reliable for iv in ivs.values())


def _kappa_and_ratio(phi: float) -> tuple[float, float]:
    """kappa at the fitted optimum of a stand-in with AR(1) ``phi`` residuals, and the median HAC / white-noise
    variance ratio of its identifiable continuous numbers."""
    be = CoupledBackend(0.0, 1.0)
    runs = _runs(be, T, R, seed=5, phi=phi)
    space = _space()
    obj = ReplayObjective(space, be, runs)
    sens = sensitivity(obj, refine_point(obj, space.normalize(TRUE), max_iter=2))
    s2, kappa, note = delay_scale(sens)
    assert "V_hac" in note and s2 == pytest.approx(sens.ssr / (sens.n_obs - len(sens.cont)))
    d = curvature_intervals(sens).diagnostics
    ok = [k for k, lab in enumerate(sens.labels) if lab != "viscous[j7]"]  # the dead one
    ratio = np.median((np.asarray(d["std_hac"])[ok] / np.asarray(d["std_naive"])[ok]) ** 2)
    return kappa, float(ratio)


def test_delay_scale_is_the_sandwich_ratio_the_continuous_numbers_get():
    """kappa (the delay's HAC / white-noise variance ratio) is what the sandwich says of the continuous numbers,
    within 2x, on white and on AR(1) 0.9 residuals, and grows with the autocorrelation. (The white-noise s^2 counts
    the stand-in's zero dq / EE channels, so even white residuals give a ratio above 1.)"""
    (k0, r0), (k9, r9) = _kappa_and_ratio(0.0), _kappa_and_ratio(0.9)
    assert 0.5 * r0 < k0 < 2.0 * r0 and 0.5 * r9 < k9 < 2.0 * r9, (k0, r0, k9, r9)
    assert k9 > 3 * k0
