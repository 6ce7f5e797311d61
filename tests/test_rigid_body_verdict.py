"""The rigid-body verdict blocks a physical set only when it predicts torque measurably worse than the LS, and ranks
its causes on the evidence (issue 43; rigid_body/decision.py, rigid_body/causes.py).

On the hand-less twin (twin/nohand_twin.py): an optimistic covariance fails the consistency test, which now warns and
names the joints that differ; a physical set pinned to the hand's mass predicts measurably worse and is blocked; a
verdict without a held-out run says what it rests on; a sidecar that states the wrong gravity is the first cause,
supported by the refit with gravity flipped.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from isaaclab_sysid.rigid_body.causes import Cause, rank
from isaaclab_sysid.rigid_body.cli import IdentifyArgs, run
from isaaclab_sysid.rigid_body.decision import DECISION_Z, WORSE_POOLED, decide, newey_west_mean_z
from isaaclab_sysid.twin.nohand_twin import write_nohand_twin


def _runs(rng, n_runs=2, T=3000, N=3, rho=0.9, sigma=0.1):
    """Measured outputs and the LS's error: AR(1) residuals of std ``sigma`` per joint."""
    meas, e = {}, {}
    for r in range(n_runs):
        x = np.zeros((T, N))
        w = rng.normal(0, sigma * np.sqrt(1 - rho**2), (T, N))
        for t in range(1, T):
            x[t] = rho * x[t - 1] + w[t]
        meas[f"r{r}"] = rng.normal(0, 1, (T, N))
        e[f"r{r}"] = x
    return meas, e


def test_the_rule_blocks_only_a_measurably_worse_prediction():
    rng = np.random.default_rng(0)
    meas, e = _runs(rng)
    ls = {k: meas[k] - e[k] for k in meas}
    # the SDP set off by 5 % of the noise on every joint: same prediction, usable
    same = {k: ls[k] + 0.005 * rng.normal(size=ls[k].shape) for k in ls}
    d = decide(meas, ls, same, 25, "held-out runs")
    assert not d.blocked and d.ratio < 1.01 and d.differ == ()
    # one joint 50 % worse, the pool 1.14x... only joint 2 named when the pool stays within the limit
    one = {k: ls[k] + np.array([0.0, 0.06, 0.0]) for k in ls}
    d = decide(meas, ls, one, 25, "held-out runs")
    assert d.differ == (1,) and d.ratio < 1.0 + WORSE_POOLED and not d.blocked
    assert "joint b (" in d.joints_text(("joint a", "joint b", "joint c"), "N m")
    # every joint 30 % worse on 6000 samples: measurably worse, blocked
    worse = {k: ls[k] + 0.065 * np.sign(rng.normal(size=ls[k].shape)) for k in ls}
    d = decide(meas, ls, worse, 25, "held-out runs")
    assert d.ratio > 1.0 + WORSE_POOLED and d.z > DECISION_Z and d.blocked and d.differ == (0, 1, 2)
    # as much worse in size, all of it from one sample (a spike): not measurable, not blocked
    short = {k: v[:40] for k, v in meas.items()}
    ls_s = {k: short[k] - e[k][:40] for k in short}
    spike = {k: v.copy() for k, v in ls_s.items()}
    spike["r0"][5, 0] += 1.0
    d = decide(short, ls_s, spike, 10, "held-out runs")
    assert d.ratio > 1.0 + WORSE_POOLED and d.z < DECISION_Z and not d.blocked and d.differ == (0,)


def test_the_newey_west_error_counts_the_autocorrelation():
    rng = np.random.default_rng(1)
    T = 20000
    white = rng.normal(size=T)
    ar = np.zeros(T)
    for t in range(1, T):
        ar[t] = 0.9 * ar[t - 1] + white[t]
    shift = 0.05
    z_white = newey_west_mean_z([white + shift], 50)
    z_ar = newey_west_mean_z([ar * np.sqrt(1 - 0.81) + shift], 50)
    naive = shift * np.sqrt(T)  # both series have unit variance: the white-noise z
    assert abs(z_white / naive - 1) < 0.4
    assert z_ar < 0.5 * z_white  # the AR(1) long-run variance is 19x: the z falls by about sqrt(19)


def test_causes_rank_supported_then_untested_then_refuted():
    causes = [Cause("a", "refuted", "a", "-"), Cause("b", "untested", "b", "-"), Cause("c", "supported", "c", "-", 1.2),
              Cause("d", "inconclusive", "d", "-"), Cause("e", "supported", "e", "-", 3.0)]
    assert [c.key for c in rank(causes)] == ["e", "c", "d", "b", "a"]


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    return write_nohand_twin(tmp_path_factory.mktemp("nohand_verdict"))


def _identify(paths, out, heldout=True, **kw):
    args = IdentifyArgs(out=out, runs=tuple(paths[:2]), heldout=tuple(paths[2:]) if heldout else (), dt=0.01,
                        cutoff_hz=5.0, audit_uniform=200, audit_dense=100, audit_grid=2, seeds=(0,), no_plots=True, **kw)
    return run(args)


def test_a_failed_consistency_test_warns_and_names_the_joints(twin, tmp_path, capsys, monkeypatch):
    """The consistency test failed (forced here: the clean twin passes it under every covariance; the issue's real
    log failed it at p 7.6e-5 with a set that predicted as the LS does), the SDP set predicting the held-out run as the
    LS does: usable, with a warning naming the joints that differ."""
    from isaaclab_sysid.rigid_body import writers

    monkeypatch.setattr(writers, "CONSISTENCY_ALPHA", 1.01)
    res, files = _identify(twin.ls, tmp_path / "ols", robot="franka_panda_nohand")
    out = capsys.readouterr().out
    v = json.loads(files.rb_params.read_text())["verdict"]
    assert v["usable"] is True and v["decision"]["rests_on"] == "held-out runs" and not v["decision"]["blocked"]
    assert v["decision"]["ratio"] < 1.0 + WORSE_POOLED
    warn = v["warnings"][0]
    assert warn.startswith("the SDP set is statistically inconsistent") and "joints that differ: " in warn
    assert "panda_joint" in warn.split("joints that differ: ")[1]
    assert "verdict: usable (decided on the held-out runs" in out and "warning: the SDP set is statistically" in out


def test_a_physical_set_that_predicts_worse_is_blocked(twin, tmp_path, capsys):
    """The SDP held at the hand config's URDF inertials (prior weight 1e6: link 7 with the hand, 1.50 kg, on an arm
    whose link 7 is 0.67 kg): its held-out torque is measurably worse than the LS's, the set is blocked and the
    joints named."""
    res, files = _identify(twin.ls, tmp_path / "pinned", robot="franka_panda", prior_weight=1e6)
    out = capsys.readouterr().out
    v = json.loads(files.rb_params.read_text())["verdict"]
    d = v["decision"]
    print(f"\npinned: pooled {d['pooled_sdp']:.3f} against {d['pooled_ls']:.3f} N m (z {d['z']:.1f}); {d['differ']}")
    assert v["usable"] is False and d["blocked"] and d["ratio"] > 1.0 + WORSE_POOLED and d["z"] > DECISION_Z
    assert "panda_joint2" in d["differ"] or "panda_joint4" in d["differ"]
    assert "predict torque measurably worse than the least-squares estimate" in v["reason"]
    assert "verdict: REJECTED: the physical (SDP) link inertials predict torque measurably worse" in out


def test_without_a_heldout_run_the_verdict_says_what_it_rests_on(twin, tmp_path, capsys):
    res, files = _identify(twin.ls, tmp_path / "noheld", heldout=False, robot="franka_panda_nohand")
    out = capsys.readouterr().out
    v = json.loads(files.rb_params.read_text())["verdict"]
    assert v["decision"]["rests_on"].startswith("identification runs (no held-out run: in-sample")
    assert v["decision"]["runs"] == ["ls_multisine_1.csv", "ls_multisine_2.csv"]
    assert "decided on the identification runs (no held-out run" in out and "give --heldout" in out


def test_a_sidecar_with_the_wrong_gravity_is_the_first_cause(twin, tmp_path, capsys):
    """Sidecars that say tau_J holds no gravity when it does: the refit with gravity flipped leaves a fraction of the
    residual, so the verdict is rejected with gravity first (supported), its fix the sidecar."""
    runs = []
    for p in twin.ls:
        side = p.with_suffix(".json")
        body = json.loads(side.read_text())
        body["summary"]["includes_gravity"] = {"tau": False, "tau_J": False}
        (tmp_path / p.name).write_bytes(p.read_bytes())
        (tmp_path / side.name).write_text(json.dumps(body))
        runs.append(tmp_path / p.name)
    res, files = _identify(runs, tmp_path / "rb", robot="franka_panda_nohand")
    out = capsys.readouterr().out
    v = json.loads(files.rb_params.read_text())["verdict"]
    first = v["causes"][0]
    print(f"\nwrong gravity: {first['text']}")
    assert v["usable"] is False and first["key"] == "gravity" and first["status"] == "supported"
    assert first["evidence"]["ratio"] < 0.2 and "sidecars" in first["fix"]
    assert "the data say the signal's gravity is the other way" in v["reason"]
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("verdict: REJECTED"))
    assert lines[at + 1].startswith("  - gravity in the signal: the model took tau_J without gravity")
    assert "[supported]" in lines[at + 1]
