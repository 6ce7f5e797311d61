"""benchmarks/vs_peers.py at its --quick size: every contender ran on both run sets and produced every figure.

It asserts that the benchmark ran and that each figure is there and sane (finite where the tool gives it), not who
wins; docs/benchmarks.md has the full-size table. mujoco.sysid needs the [peers] extra: without it that contender is
skipped with the reason shown (and the rest still runs).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from isaaclab_sysid.benchmarking.peers import QUICK, sysid_available

ROOT = Path(__file__).resolve().parents[1]
SYSID_MISSING = sysid_available()


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("peers") / "scores.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vs_peers.py"), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def _expected() -> set[tuple[str, str, str]]:
    names = {("ours", "low"), ("pace", "center"), ("ours@pace", "low")} | {("fast", s) for s in QUICK.starts}
    if SYSID_MISSING is None:
        names |= {("mujoco.sysid", s) for s in QUICK.sysid_starts} | {("ours@sysid", "low")}
    return {(c, n, s) for c in ("joint_pd", "task_impedance") for n, s in names}


def test_every_contender_ran_on_both_run_sets(quick):
    data, stdout = quick
    got = {(s["controller"], s["contender"], s["start"]) for s in data["scores"]}
    assert got == _expected()
    assert "| run set | contender |" in stdout and "wall / ours" in stdout and "rollouts to target" in stdout


def test_every_figure_is_there(quick):
    data, _ = quick
    for s in data["scores"]:
        who = (s["controller"], s["contender"], s["start"])
        assert s["wall_s"] > 0 and s["rollouts"] > 0 and s["env_steps"] >= s["rollouts"], who
        for g in ("armature", "friction", "viscous"):
            assert len(s["rel_err"][g]) == 7 and all(math.isfinite(v) and v >= 0 for v in s["rel_err"][g]), who
        assert 0 <= s["delay"] <= 4 and math.isfinite(s["delay_err"]), who
        assert s["floor_mrad"] > 0 and s["heldout_mrad"] > 0 and math.isfinite(s["heldout_over_floor"]), who
        if s["contender"] == "pace":
            assert s["coverage"] is None  # PACE gives no intervals
        elif s["coverage"] is not None:
            assert 0 <= s["coverage"] <= 1 and s["unbounded"] >= 0, who
        if s["contender"] in ("ours", "fast", "pace") or s["contender"].startswith("ours@"):
            assert s["trace"], who  # improvements traced for the time-to-error table


def test_sysid_skip_is_visible_or_it_ran(quick):
    data, stdout = quick
    if SYSID_MISSING is None:
        assert not data["skipped"]
        assert any(s["contender"] == "mujoco.sysid" for s in data["scores"])
    else:
        assert data["skipped"] and "pip install" in stdout
        pytest.skip(f"mujoco.sysid contender skipped: {SYSID_MISSING}")


# --------------------------------------------------------------------------- the fast strategy the benchmark measures
def _fast_search(tmp_path, fast_settings=None):
    import numpy as np

    from isaaclab_sysid.benchmarking.peers import space_of, workload
    from isaaclab_sysid.objective.loss import LossWeights
    from isaaclab_sysid.fit.optimizer import CmaesSettings
    from isaaclab_sysid.fit.problem import FitProblem
    from isaaclab_sysid.fit.search import Search, SearchSettings
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

    robot = load_robot("franka_panda")
    work = workload(robot, "joint_pd", QUICK)
    space = space_of(robot)
    problem = FitProblem(work.fit, [], robot, space, MujocoBackend(robot, ReplayOptions()), LossWeights(), np.ones(2))
    x0 = space.low_start()
    settings = SearchSettings(CmaesSettings(popsize=8, max_iter=2, x0=tuple(x0)), refine_iter=2, delay_neighbours=1,
                              quiet=True, strategy="fast", fast=fast_settings)
    return problem, settings, x0, Search(problem, settings, tmp_path, log=lambda _: None)


def test_fast_strategy_skips_cmaes_from_the_sliding_start_and_resumes(tmp_path):
    from isaaclab_sysid.fit.search import Search

    problem, settings, x0, search = _fast_search(tmp_path)
    res = search.run(x0_extra=x0)
    ev = search.state.fast.evidence
    assert ev is not None and not ev.stuck and ev.floor_ratio < 2.0, ev
    assert res.search is None and res.evaluations == 0 and res.refine is not None  # no CMA-ES generation ran
    again = Search.resumed(problem, settings, tmp_path, log=lambda _: None).run(x0_extra=x0)  # from its checkpoint
    assert again.best_score == res.best_score
    problem.backend.close()


def test_fast_strategy_falls_back_to_cmaes_when_its_evidence_says_stuck(tmp_path):
    from isaaclab_sysid.fit.fast_path import FastPathSettings

    # no fit can pass 0.5x; without the probe (probe_generations=0) a suspect answer falls back at once
    problem, _, x0, search = _fast_search(tmp_path, FastPathSettings(max_floor_ratio=0.5, probe_generations=0))
    res = search.run(x0_extra=x0)
    ev = search.state.fast.evidence
    assert ev.stuck and search.fell_back and "white measurement noise" in ev.reasons[0]
    assert res.search is not None and res.evaluations == 8 * 2  # the CMA-ES generations ran
    assert res.best_score <= search.state.fast.refine.best().loss  # the fallback never loses the fast optimum
    problem.backend.close()
