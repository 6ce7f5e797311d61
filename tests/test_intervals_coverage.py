"""Coverage on the MuJoCo twin: across noise seeds, do the curvature intervals contain the true parameters?

CI-sized: 8 seeds of one 3 s task-impedance run of a Coulomb twin (the fit's model
structure: no Stribeck, one substep, no clamp/slew) with encoder, velocity and
actuator (process) noise. Each seed's optimum is found by Gauss-Newton from the
true parameters (the loss minimum near them, the point a converged CMA-ES fit
returns). Reports the rate per parameter group over the bounded intervals, and
checks that the export's ranges (interval + allowance) contain the truth at
least as often. benchmarks/interval_coverage.py runs the fuller study.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.objective.replay_objective import ReplayObjective
from isaaclab_sysid.export.ranges import RangePolicy, make_ranges
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS, ParamSpace
from isaaclab_sysid.fit.refine import refine_point
from isaaclab_sysid.intervals import curvature_intervals, sensitivity

TRUE = {
    "armature": np.array([0.18, 0.22, 0.12, 0.15, 0.04, 0.06, 0.03]),
    "friction": np.array([0.8, 1.2, 0.6, 0.9, 0.3, 0.35, 0.2]),
    "viscous": np.array([0.6, 0.9, 0.5, 0.7, 0.2, 0.25, 0.15]),
    "delay": 2,
}


def coverage_study(seeds, duration=3.0, n_runs=1, polish_iters=2, rho=1.5):
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.sim.interface import ReplayOptions
    from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
    from isaaclab_sysid.twin.demo import task_target
    from isaaclab_sysid.twin.params import TwinNoise, TwinParams
    from isaaclab_sysid.twin.recorder import record_twin

    robot = load_robot("franka_panda")
    params = TwinParams(robot="franka_panda", armature=TRUE["armature"], friction=TRUE["friction"],
                        viscous=TRUE["viscous"], delay=TRUE["delay"], torque_clamp=False, slew_limit=False,
                        noise=TwinNoise(q_std=5e-5, dq_std=2e-3, actuator_tau_std=0.02))
    space = ParamSpace.from_bounds({g: DEFAULT_BOUNDS[g] for g in ("armature", "friction", "viscous", "delay")}, 7)
    truth = space.decoded_vector(space.normalize(TRUE))
    be = MujocoBackend(robot, ReplayOptions())
    groups = ("armature", "friction", "viscous", "delay")
    iv_hits = {g: [] for g in groups}
    rg_hits = {g: [] for g in groups}
    n_unbounded = {g: 0 for g in groups}
    try:
        for seed in seeds:
            kinds = ("multiband", "chirp")
            targets = [task_target(robot, kinds[r % 2], duration, 200.0 if r % 2 == 0 else 500.0,
                                   20.0 if r % 2 == 0 else 30.0, seed=1000 + 17 * seed + r, name=f"cov{seed}_{r}")
                       for r in range(n_runs)]
            runs = [record_twin(robot, t, params, seed=seed) for t in targets]
            x = refine_point(ReplayObjective(space, be, runs), space.normalize(TRUE), max_iter=polish_iters)
            s = curvature_intervals(sensitivity(ReplayObjective(space, be, runs), x))
            bounds = {g.name: (g.lower, g.upper) for g in space.groups}
            ranges, _, _ = make_ranges(s.intervals, RangePolicy(rho_override=rho), None, bounds)
            rmap = {r.label: r for r in ranges}
            for k, iv in enumerate(s.intervals):
                if not iv.bounded:
                    n_unbounded[iv.group] += 1
                    continue
                iv_hits[iv.group].append(iv.contains(truth[k]))
                r = rmap[iv.label]
                rg_hits[iv.group].append(r.lower <= truth[k] <= r.upper)
    finally:
        be.close()
    rate = {g: (float(np.mean(v)) if v else float("nan"), len(v)) for g, v in iv_hits.items()}
    rrate = {g: (float(np.mean(v)) if v else float("nan"), len(v)) for g, v in rg_hits.items()}
    return rate, rrate, n_unbounded


def test_twin_coverage_per_group():
    rate, rrate, unb = coverage_study(range(8))
    print("\ninterval coverage (nominal 0.95) per group: rate, n =", rate)
    print("range coverage per group:", rrate, "unbounded:", unb)
    allv = [r for r, n in rate.values() if n]
    assert np.nanmean(allv) >= 0.8
    for g in rate:
        if rate[g][1]:
            assert rrate[g][0] >= rate[g][0] - 1e-12  # ranges contain the truth at least as often
    assert rate["friction"][0] >= 0.75 and rate["viscous"][0] >= 0.75 and rate["armature"][0] >= 0.75
