"""Issue 26's misfit proof at full size: a model that cannot reach the noise, fitted with the fast path's probe off
(fall back to CMA-ES whenever the answer is suspect, the behaviour before issue 26) and on (the default).

The twin is the vs_peers joint-PD run set (benchmarking/peers.py, 2 fit runs of 2.5 s at 1 kHz, the held-out run of
another waveform at other gains) with Stribeck friction at twice the Coulomb level, fitted Coulomb-only from ``low``
with the full-size budgets (CMA-ES 64 x 40, LM 10 iterations per phase).

    python benchmarks/fast_path_misfit.py
"""

import argparse
import tempfile
import time

import numpy as np

from isaaclab_sysid.benchmarking import peers
from isaaclab_sysid.evaluate.adequacy import assess
from isaaclab_sysid.fit.fast_path import FastPathSettings, evidence_line
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.fit.optimizer import CmaesSettings
from isaaclab_sysid.fit.problem import FitProblem
from isaaclab_sysid.fit.search import Search, SearchSettings
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.evaluate.heldout import evaluate_params

argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
robot = load_robot("franka_panda")
work = peers.workload(robot, "joint_pd", peers.FULL, static_over_coulomb=2.0)
space = peers.space_of(robot)
for name, fast in (("before (probe off: fall back whenever suspect)", FastPathSettings(probe_generations=0)),
                   ("after (probe 3 x 16)", FastPathSettings())):
    backend = MujocoBackend(robot, ReplayOptions())
    problem = FitProblem(list(work.fit), [], robot, space, backend, LossWeights(), np.ones(len(work.fit)))
    x0 = space.low_start()
    settings = SearchSettings(CmaesSettings(popsize=64, max_iter=40, x0=tuple(x0)), refine_iter=10, quiet=True,
                              strategy="fast", fast=fast)
    with tempfile.TemporaryDirectory() as d:
        s = Search(problem, settings, d, log=lambda _: None)
        t0 = time.perf_counter(); res = s.run(x0_extra=x0); wall = time.perf_counter() - t0
    runs = [*work.fit, work.heldout]
    ev = evaluate_params(backend, res, runs)
    ad = assess(runs, ev.rollouts, len(work.fit), robot, work.floor_mrad)
    print(f"{name}: wall {wall:.1f} s, fell back {s.fell_back}, CMA-ES candidates {res.evaluations}, best loss "
          f"{res.best_score:.6e}, delay {res.delay}, held-out {ev.fitted[-1].q_rms_all_mrad / work.floor_mrad:.2f}x floor, "
          f"verdict {ad.verdict}; {evidence_line(s.state.fast.evidence)}", flush=True)
    backend.close()
