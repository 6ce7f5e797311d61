"""Issue 45: phase 2's delay profile closes a tie instead of refining it, and does not widen past a tie.

At 24 s the Coulomb stage's phase 2 refined delays 1 and 2 for 14 iterations that the data could not tell apart
(delay 1 ended LR 0.9 below delay 2) and widened the profile to delay 0. ``RefineSettings.tie_level`` closes a delay
track that could at most beat the best by less than chi^2_1(level) on the likelihood-ratio scale, and widens past an
edge only when the best beat its inner neighbour by more than that. A fake whose true delay sits between two ticks
makes the tie; one whose true delay is nearer one tick makes a real separation."""

from __future__ import annotations

import numpy as np
from conftest import make_run
from test_fit_fakes import TRUE, FakeBackend

from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings, chi2_1
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.objective.replay_objective import ReplayObjective

GROUPS = ("armature", "friction", "viscous", "delay")


class FractionalDelayFake(FakeBackend):
    """The fake with its delay error ``(d - delay_true) amp cos(3 pi t)`` (a true delay between ticks) and a fixed
    white measurement noise, so that the loss has a floor and the likelihood-ratio scale means something."""

    def __init__(self, delay_true: float, amp: float = 1e-3, noise: float = 1e-3) -> None:
        super().__init__()
        self.delay_true, self.amp, self.noise = delay_true, amp, noise

    def rollout(self, batch, runs):
        out = super().rollout(batch, runs)
        for k, (ro, run) in enumerate(zip(out, runs)):
            T = run.q.shape[0]
            c = np.cos(3 * np.pi * np.arange(T) / T)[None, :, None]
            d = batch.delay[:, None, None]
            corr = (d - self.delay_true) * self.amp * c - (d - TRUE["delay"]) * 0.01 * c  # replaces the base term
            rng = np.random.default_rng(100 + k)
            ro.q = ro.q + corr + self.noise * rng.normal(size=run.q.shape)[None]
            ro.dq = ro.dq + 2.0 * corr + self.noise * rng.normal(size=run.dq.shape)[None]
            ro.ee_pos = ro.ee_pos + corr[:, :, :3]
        return out


def _refine(delay_true: float, tie_level: float | None):
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in GROUPS}, 7)
    runs = [make_run("task_impedance", 50.0, n=80, seed=1), make_run("task_impedance", 50.0, n=61, seed=2)]
    ref = LMRefiner(ReplayObjective(space, FractionalDelayFake(delay_true), runs),
                    RefineSettings(max_iter=10, tie_level=tie_level))
    x0 = space.normalize({"armature": TRUE["armature"] * 1.3, "friction": TRUE["friction"] * 0.7,
                          "viscous": TRUE["viscous"] + 0.2, "delay": 2})  # phase 1 at delay 2
    st = ref.run(ref.start(x0))
    b = st.best()
    gaps = {t.delay: (t.loss - b.loss) / (b.loss / b.n_eff) for t in st.tracks}  # LR gap of each delay's track
    return st, sum(r["evaluations"] for r in st.history), gaps


def test_a_tie_closes_early_keeps_the_better_delay_and_does_not_widen():
    # true delay 1.5: delays 1 and 2 fit alike (within the noise), 0 and 3 are far worse
    off, n_off, g_off = _refine(1.5, None)
    on, n_on, g_on = _refine(1.5, 0.95)
    assert off.best().delay == on.best().delay == 2  # the better one is kept
    assert 0.0 < g_off[1] < chi2_1(0.95)  # refined to the end, delay 1 ends within the tie margin of 2
    tied = [t for t in on.tracks if t.delay == 1]
    assert [t.stop for t in tied] == ["tied"]
    # closed only within chi2_1(0.999) of the best: the interval stage's delay union (which screens a delay out above
    # 4 chi2_1(0.95) on the fit's track loss) re-optimizes it, so the early close never drops it from the interval
    assert g_on[1] <= chi2_1(0.999)
    assert on.iteration < off.iteration and n_on < n_off, (on.iteration, off.iteration, n_on, n_off)
    assert {t.delay for t in on.tracks} == {1, 2, 3}
    np.testing.assert_array_equal(on.best().x, off.best().x)  # the winner's own refinement is not cut


def test_a_tie_the_challenger_wins_does_not_widen_the_profile():
    # true delay 1.497: delay 1 ends just below 2 (an LR gap under the margin), as the 24 s chirp's Coulomb stage did;
    # without the tie rule the profile widened to 0, which the data then rejected
    off, _, g_off = _refine(1.497, None)
    on, _, g_on = _refine(1.497, 0.95)
    assert off.best().delay == on.best().delay == 1
    assert 0.0 < g_on[2] < chi2_1(0.95)
    assert 0 in {t.delay for t in off.tracks}
    assert {t.delay for t in on.tracks} == {1, 2, 3}


def test_a_real_separation_still_refines_widens_and_chooses_the_better_delay():
    # true delay 1.45: delay 1 beats 2 by far more than the margin; the profile widens to 0 and still picks 1
    off, n_off, _ = _refine(1.45, None)
    on, n_on, g_on = _refine(1.45, 0.95)
    assert off.best().delay == on.best().delay == 1
    assert g_on[2] > 10 * chi2_1(0.95)
    assert {t.delay for t in on.tracks} == {t.delay for t in off.tracks} == {0, 1, 2, 3}
    assert not any(t.stop == "tied" for t in on.tracks)
    assert n_on == n_off
    np.testing.assert_array_equal(on.best().x, off.best().x)
