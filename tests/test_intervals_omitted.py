"""A group the fit leaves out (intervals/omitted.py): the servo's kd stands for kd + viscous below the torque limit
and the two part in saturation, where the PD torque (with its damping) is clamped and the friction is not.

The fake backend is linear in the parameters, so the linearized refit with viscous free is the refit itself: the
test checks the shift against an actual refit in the augmented space, and that the widened interval holds the
truth the conditional one misses.
"""

from __future__ import annotations

import numpy as np

from conftest import make_run
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.objective.param_space import ParamSpace
from isaaclab_sysid.fit.refine import refine_point
from isaaclab_sysid.intervals.curvature import curvature_intervals, sensitivity
from isaaclab_sysid.intervals.omitted import applies, augmented_with, omitted_shift, widen_for_omitted
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, ReplayOptions, RunRollout, check_supported

N = 7
KD = np.array([0.40, 0.30, 0.35, 0.20, 0.10, 0.15, 0.12])
ARM = np.array([0.010, 0.012, 0.008, 0.006, 0.004, 0.005, 0.003])
DELAY = 2


class _SaturatingServo(ReplayBackend):
    """rollout = recorded states + a linear error in (kd, viscous, armature); kd's and viscous's signals are one
    except on the last ``sat`` share of each run, where kd's halves (the PD torque clamped: kd moves only when the
    joint enters and leaves saturation) and viscous's stays.
    A fixed noise (the sensor's) rides on every candidate alike."""

    name = "fake_servo"
    supported_groups = frozenset({"kd", "armature", "viscous", "delay"})
    options = ReplayOptions()

    def __init__(self, viscous: np.ndarray, sat: float = 0.3, noise: float = 1e-4) -> None:
        self.viscous, self.sat, self.noise = viscous, sat, noise

    def rollout(self, batch: CandidateBatch, runs):
        check_supported(batch, self.supported_groups, self.name)
        out = []
        for r, run in enumerate(runs):
            T, _ = run.q.shape
            t = np.arange(T) / T
            damp = np.sin(2 * np.pi * (2 + r) * t[:, None] + np.arange(N)[None, :])
            saturated = t >= 1.0 - self.sat
            sat_sig = np.cos(2 * np.pi * 7 * t[:, None] + np.arange(N)[None, :])
            b_kd = np.where(saturated[:, None], 0.5 * sat_sig, damp)  # in saturation only the entry / exit times
            b_v = np.where(saturated[:, None], sat_sig, damp)
            b_a = np.sin(2 * np.pi * (5 + r) * t[:, None] + 2 * np.arange(N)[None, :])
            v = np.zeros((batch.size, N)) if batch.viscous is None else batch.viscous
            err = 0.05 * ((batch.kd - KD)[:, None, :] * b_kd + (v - self.viscous)[:, None, :] * b_v
                          + 10 * (batch.armature - ARM)[:, None, :] * b_a)
            err += (batch.delay - DELAY)[:, None, None] * 0.01 * np.cos(3 * np.pi * t)[None, :, None]
            err += self.noise * np.random.default_rng(r).standard_normal((T, N))[None]
            out.append(RunRollout(q=run.q[None] + err, dq=run.dq[None] + 2 * err,
                                  ee_pos=np.broadcast_to(run.ee_pos[None], (batch.size, T, 3)) + err[:, :, :3],
                                  ee_quat=np.broadcast_to(run.ee_quat[None], (batch.size, T, 4)),
                                  tau=np.zeros((batch.size, T, N)), diverged=np.zeros(batch.size, dtype=bool)))
        return out


def _fit(viscous_true: np.ndarray):
    runs = [make_run("joint_pd", 50.0, n=200, seed=1), make_run("joint_pd", 50.0, n=160, seed=2)]
    be = _SaturatingServo(viscous_true)
    space = ParamSpace.from_bounds({"kd": (0.0, 2.0), "armature": (0.0, 0.05), "delay": (0, 5)}, N)
    x0 = space.normalize({"kd": np.full(N, 0.5), "armature": np.full(N, 0.02), "delay": DELAY})
    obj = ReplayObjective(space, be, runs, LossWeights())
    x = refine_point(obj, x0, 20, 0)
    return be, runs, space, x, sensitivity(obj, x)


def test_the_refit_with_viscous_free_is_what_the_shift_says_and_the_widened_interval_holds_it():
    visc = np.array([0.08, 0.0, 0.05, 0.0, 0.03, 0.0, 0.02])
    be, runs, space, x, sens = _fit(visc)
    kd_fit = space.decode(x)["kd"]
    # the conditional fit: kd takes kd + viscous where unsaturated, and is biased by the saturated share
    om = omitted_shift(be, sens, runs, LossWeights(), None, "viscous")
    assert om is not None and om.gain > 0.1
    # the refit in the augmented space (linear model: the linearized refit is the refit)
    aug = augmented_with(space, "viscous")
    xa = aug.normalize({**space.decode(x), "viscous": np.zeros(N)})
    ref = space.decode(x)
    refit = aug.decode(refine_point(ReplayObjective(aug, be, runs, LossWeights()), xa, 20, 0))
    np.testing.assert_allclose(om.step, refit["viscous"], atol=2e-3)
    for j, name in enumerate(space.joint_names):
        np.testing.assert_allclose(kd_fit[j] + om.shift[f"kd[{name}]"], refit["kd"][j] + refit["viscous"][j], atol=2e-3)
        np.testing.assert_allclose(ref["armature"][j] + om.shift[f"armature[{name}]"], refit["armature"][j], atol=1e-4)
    # the free model's own curvature: its standard errors over the held model's are the widening ratios
    sa = sensitivity(ReplayObjective(aug, be, runs, LossWeights()), xa)
    Ha, Hc = sa.gauss_newton_inverse(), sens.gauss_newton_inverse()
    for j, name in enumerate(space.joint_names):
        i, ia, iv = (sens.labels.index(f"armature[{name}]"), sa.labels.index(f"armature[{name}]"),
                     sa.labels.index(f"viscous[{name}]"))
        np.testing.assert_allclose(om.widen[f"armature[{name}]"], max(1.0, np.sqrt(Ha[ia, ia] / Hc[i, i])), rtol=0.02)
        i, ia = sens.labels.index(f"kd[{name}]"), sa.labels.index(f"kd[{name}]")
        var_sum = Ha[ia, ia] + Ha[iv, iv] + 2 * Ha[ia, iv]  # kd stands for kd + viscous
        np.testing.assert_allclose(om.widen[f"kd[{name}]"], max(1.0, np.sqrt(var_sum / Hc[i, i])), rtol=0.02)
    assert min(om.widen.values()) >= 1.0 and max(om.widen.values()) > 1.01  # viscous takes information kd had
    # the truth kd stands for is kd + viscous; the conditional interval misses it where viscous is large
    sets = {"curvature": curvature_intervals(sens, 0.95), "bootstrap": curvature_intervals(sens, 0.95)}
    target = KD + visc
    by = sets["curvature"].by_label()
    missed_before = [j for j, n in enumerate(space.joint_names) if not by[f"kd[{n}]"].contains(target[j])]
    assert 0 in missed_before  # the largest viscous term biases its kd beyond the interval
    warns = widen_for_omitted(sets, om, space)
    by = sets["curvature"].by_label()
    assert all(by[f"kd[{n}]"].contains(target[j]) for j, n in enumerate(space.joint_names))
    assert warns and "viscous is not fitted" in warns[0] and f"kd[{space.joint_names[0]}]" in warns[0]


def test_no_viscous_in_the_data_leaves_the_intervals_almost_as_they_are():
    be, runs, space, x, sens = _fit(np.zeros(N))
    om = omitted_shift(be, sens, runs, LossWeights(), None, "viscous")
    assert om is not None and om.gain < 0.01
    sets = {"curvature": curvature_intervals(sens, 0.95), "bootstrap": curvature_intervals(sens, 0.95)}
    before = {iv.label: iv.upper - iv.lower for iv in sets["curvature"].intervals if iv.bounded and iv.group != "delay"}
    widen_for_omitted(sets, om, space)
    after = {iv.label: iv.upper - iv.lower for iv in sets["curvature"].intervals if iv.bounded and iv.group != "delay"}
    assert max(after[k] / before[k] for k in before) < 1.5


def test_a_backend_that_cannot_represent_viscous_or_a_fit_with_it_is_left_alone():
    be, runs, space, x, sens = _fit(np.zeros(N))
    assert applies(space, be, runs, "viscous")
    assert not applies(augmented_with(space, "viscous"), be, runs, "viscous")
    be.supported_groups = frozenset({"kd", "armature", "delay"})
    assert not applies(space, be, runs, "viscous")


def test_a_rollout_that_diverges_cannot_tell_and_says_nothing_of_a_shift():
    be, runs, space, x, sens = _fit(np.zeros(N))
    rollout = be.rollout

    def diverging(batch, rs):
        out = rollout(batch, rs)
        for ro in out:
            ro.diverged[:] = batch.viscous is not None and np.any(batch.viscous > 0, axis=1)
        return out

    be.rollout = diverging
    assert omitted_shift(be, sens, runs, LossWeights(), None, "viscous") is None
