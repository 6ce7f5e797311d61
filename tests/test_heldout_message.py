"""The held-out line of the verdict names the suspect the evidence points at: for torque replays, the fixed inertials."""

from __future__ import annotations

import dataclasses

import numpy as np
from conftest import make_run

from isaaclab_sysid.evaluate.adequacy import assess
from isaaclab_sysid.sim.interface import RunRollout


def _rollout(q: np.ndarray) -> RunRollout:
    qq = np.stack([q, q])  # candidate 0 (nominal) and 1 (fitted)
    T = q.shape[0]
    return RunRollout(q=qq, dq=np.zeros_like(qq), ee_pos=np.zeros((2, T, 3)), ee_quat=np.tile([0, 0, 0, 1.0], (2, T, 1)),
                      tau=np.zeros_like(qq), diverged=np.zeros(2, dtype=bool))


def _pair(controller: str):
    """A fit run with a 0.3 mrad white residual and a held-out run with 3 mrad on joint 7 (10x)."""
    rng = np.random.default_rng(3)
    fit, held = make_run("joint_pd", 1000.0, n=3000, seed=1), make_run("joint_pd", 1000.0, n=3000, seed=2)
    if controller != "joint_pd":
        fit, held = (dataclasses.replace(r, meta=dataclasses.replace(r.meta, controller=controller)) for r in (fit, held))
    sim_fit = fit.q - 3e-4 * rng.standard_normal(fit.q.shape)
    err = 3e-4 * rng.standard_normal(held.q.shape)
    err[:, 6] = 3e-3 * rng.standard_normal(held.q.shape[0])
    return [fit, held], [_rollout(sim_fit), _rollout(held.q - err)]


def test_a_torque_replays_heldout_misfit_names_the_fixed_inertials():
    runs, rollouts = _pair("torque")
    a = assess(runs, rollouts, 1, noise_floor_mrad=0.3)
    line = next(m for m in a.messages if m.startswith("held-out error"))
    assert a.verdict == "misfit" and "worst on joints 7" in line
    assert "holds the link inertials fixed" in line and "--heldout" in line, line


def test_a_controller_runs_heldout_misfit_keeps_its_own_words():
    runs, rollouts = _pair("joint_pd")
    a = assess(runs, rollouts, 1, noise_floor_mrad=0.3)
    line = next(m for m in a.messages if m.startswith("held-out error"))
    assert a.verdict == "misfit" and "other gains or waveform" in line and "inertials" not in line, line
