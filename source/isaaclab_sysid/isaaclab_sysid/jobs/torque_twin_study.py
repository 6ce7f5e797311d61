"""The torque-replay twin's errors-in-variables proof (issue 28): fit, intervals, and what falls inside them.

At a given torque noise, with the offsets and the light wrist of :mod:`isaaclab_sysid.twin.torque_twin`:
the fit (``--replay torque``, groups armature, friction, viscous, delay, torque_offset), its intervals
(the export's: ``export.build.intervals_for``), and per group the truths inside their 95 % intervals, each
error in standard errors, the interval half-widths, the bound hits and the verdict.
``benchmarks/torque_replay_eiv.py`` runs it at 0.02, 0.05 and 0.1 N m; ``tests/test_torque_replay.py`` at CI size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.jobs.fit_job import run_fit
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.torque_twin import OFFSET, TRUTH, write_twin

GROUPS = ("armature", "friction", "viscous", "torque_offset")


@dataclass
class TwinCoverage:
    """One noise level's outcome.

    Attributes:
        noise: torque noise on the log [N m]; delay: the fitted delay [ticks] (truth :data:`DELAY`).
        inside: group -> (N,) truth inside its 95 % interval; z: group -> (N,) error / standard error;
        half_width_pct: group -> (N,) interval half-width [% of the truth; offsets: N m x 100].
        bound_hits: labels at a search bound; verdict, residual_over_floor: the adequacy verdict.
        torque_noise: (N,) the torque noise the fit measured from the log [N m]; warnings: the intervals'.
    """

    noise: float
    delay: int
    inside: dict[str, np.ndarray]
    z: dict[str, np.ndarray]
    half_width_pct: dict[str, np.ndarray]
    bound_hits: list[str]
    verdict: str
    residual_over_floor: float
    warnings: list[str] = field(default_factory=list)

    @property
    def n_inside(self) -> int:
        return int(sum(int(v.sum()) for v in self.inside.values()))

    @property
    def n_total(self) -> int:
        return int(sum(v.size for v in self.inside.values()))


def study(noise: float, work: Path, fit_s: float = 6.0, budget: tuple[int, int, int] = (16, 14, 6),
          log: Callable[[str], None] = lambda s: None) -> TwinCoverage:
    """Write the twin at ``noise`` [N m] with :data:`OFFSET`, fit it (population x generations + LM ``budget``),
    compute its intervals and score them against the truth."""
    from isaaclab_sysid.export.build import FitContext, intervals_for

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    fit_csv, held_csv = write_twin(load_robot("franka_panda"), work, noise, OFFSET, fit_s)
    args = FitArgs.build(real_csv=[str(fit_csv)], heldout_csv=[str(held_csv)], replay="torque", torque_signal="tau",
                         torque_includes_gravity=False, window_s=0.4, num_envs=budget[0], max_iter=budget[1],
                         refine_iter=budget[2], refine_delay_neighbours=1, log_dir=str(work / "fit"), quiet=True,
                         plots=False, seed=0, fit_groups="armature,friction,viscous,delay,torque_offset",
                         viscous_bounds=(0.0, 2.0), friction_bounds=(0.0, 2.0), armature_bounds=(0.0, 1.0),
                         delay_bounds=(0, 8), torque_offset_bounds=(-1.0, 1.0))
    run_dir = run_fit(args, log=log)
    res = RunFolder(run_dir).read_result()
    ctx = FitContext.load(run_dir)
    rep = intervals_for(ctx, log=log)
    truth = {"armature": TRUTH.armature, "friction": TRUTH.friction, "viscous": TRUTH.viscous, "torque_offset": OFFSET}
    joints = list(ctx.space.joint_names)
    n = len(joints)
    inside = {g: np.zeros(n, dtype=bool) for g in GROUPS}
    z = {g: np.full(n, np.nan) for g in GROUPS}
    hw = {g: np.full(n, np.nan) for g in GROUPS}
    for iv in rep.chosen().intervals:
        if iv.group in truth and iv.lower is not None and iv.upper is not None:
            j = joints.index(iv.joint)
            t, v = truth[iv.group][j], float(np.asarray(res.values[iv.group])[j])
            inside[iv.group][j] = iv.lower <= t <= iv.upper
            half = (iv.upper - iv.lower) / 2
            z[iv.group][j] = (v - t) / (half / 1.96)
            hw[iv.group][j] = 100 * half / (1.0 if iv.group == "torque_offset" else t)
    a = res.adequacy
    return TwinCoverage(noise, int(res.values["delay"]), inside, z, hw, [h.label for h in res.at_bounds()],
                        a.verdict if a else "", float(a.residual_over_floor) if a else float("nan"), list(rep.warnings))
