"""Issue 26, item 4: per-joint scaling of the q and qd channels (``--channel_scale rms``), one definition for the loss,
the residuals (LM, intervals) and the result file."""

from __future__ import annotations

import json
from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import pytest

from isaaclab_sysid.objective.loss import MAX_SCALE_RATIO, LossWeights, channel_scales, total_loss
from isaaclab_sysid.objective.residuals import stacked_residuals, weighted_residuals
from isaaclab_sysid.sim.interface import RunRollout


def _run(rng, T=2000, amp=(1.0, 0.3, 0.01, 0.0001)) -> SimpleNamespace:
    """What the loss reads of a run (q, dq, ee_pos): joint j moves amp[j] rad at (1 + j) Hz (whole periods in 2 s)
    about an offset of 0.5 j rad."""
    t = np.arange(T) / 1000.0
    q = np.stack([a * np.sin(2 * np.pi * (1 + j) * t) + 0.5 * j for j, a in enumerate(amp)], axis=1)
    dq = np.gradient(q, t, axis=0)
    return SimpleNamespace(q=q, dq=dq, ee_pos=rng.normal(size=(T, 3)))


def test_rms_scales_weigh_small_motion_up_capped_and_normalized():
    rng = np.random.default_rng(0)
    sc = channel_scales([_run(rng)], "rms")
    for name in ("q_scale", "dq_scale"):
        s = np.asarray(sc[name])
        assert np.isclose(np.mean(s**2), 1.0)
        assert np.all(np.diff(s) >= -1e-12)  # smaller motion, larger weight
        assert s.max() / s.min() == pytest.approx(MAX_SCALE_RATIO)  # the joint that barely moves is capped
    # the offset (0.5 j rad) does not count as motion: q is taken about its mean
    s = np.asarray(sc["q_scale"])
    assert s[1] / s[0] == pytest.approx(1.0 / 0.3, rel=0.05)
    assert channel_scales([_run(rng)], "none") == {"q_scale": None, "dq_scale": None}
    with pytest.raises(ValueError, match="unknown channel scaling"):
        channel_scales([_run(rng)], "max")


def test_loss_equals_the_squared_residuals_with_scales():
    rng = np.random.default_rng(1)
    runs = [_run(rng), _run(rng)]
    P, (T, N) = 3, runs[0].q.shape
    ros = [RunRollout(q=r.q[None] + 1e-3 * rng.normal(size=(P, T, N)), dq=r.dq[None] + 1e-2 * rng.normal(size=(P, T, N)),
                      ee_pos=r.ee_pos[None] + 1e-3 * rng.normal(size=(P, T, 3)), ee_quat=np.zeros((P, T, 4)),
                      tau=np.zeros((P, T, N)), diverged=np.zeros(P, bool)) for r in runs]
    plain = LossWeights()
    scaled = LossWeights(**channel_scales(runs, "rms"))
    for w in (plain, scaled):
        R, _ = stacked_residuals(weighted_residuals(ros, runs, w, [1.0, 2.0]))
        np.testing.assert_allclose(np.sum(R**2, axis=1), total_loss(ros, runs, w, [1.0, 2.0]).total, rtol=1e-12)
    assert not np.allclose(total_loss(ros, runs, plain).total, total_loss(ros, runs, scaled).total)


def test_scales_survive_the_result_file_and_refuse_nonsense():
    w = LossWeights(q_scale=[1.0, 2.0], dq_scale=(0.5, 1.5))
    back = LossWeights(**json.loads(json.dumps(asdict(w))))
    assert back == w and back.q_scale == (1.0, 2.0)
    with pytest.raises(ValueError, match="q_scale"):
        LossWeights(q_scale=(1.0, 0.0))


def test_the_flag_reaches_the_problem_and_the_result_file(tmp_path):
    from pathlib import Path

    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_args import resolve_problem
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.fit.run_folder import RESULT_FILE
    from isaaclab_sysid.jobs.fit_job import run_fit

    csv = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "data" / "real_runs").glob("*.csv"))[:1]
    flags = dict(real_csv=csv, log_dir=str(tmp_path), num_envs=4, max_iter=1, refine_iter=1, plots=False, quiet=True,
                 strategy="cmaes")
    plain = resolve_problem(FitArgs.build(**flags), log=lambda _s: None)
    assert plain.weights.q_scale is None
    out = run_fit(FitArgs.build(channel_scale="rms", **flags), log=lambda _s: None)
    res = FitResult.read(out / RESULT_FILE)
    assert res.loss_weights.q_scale is not None and len(res.loss_weights.q_scale) == plain.robot.n_dof
    assert res.loss_weights == LossWeights(**channel_scales(plain.runs, "rms"))
