"""The command behind scripts/refine_inertials.py (flags checked first; one error line, exit 2).

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from isaaclab_sysid.rigid_body.clie.files import write_clie
from isaaclab_sysid.rigid_body.clie.objective import ClieObjective
from isaaclab_sysid.rigid_body.clie.options import ClieOptions
from isaaclab_sysid.rigid_body.clie.refinement import ClieResult, refine
from isaaclab_sysid.rigid_body.clie.stages import score_stages, StageScores
from isaaclab_sysid.rigid_body.clie.starts import (
    JOINT_GROUPS,
    joint_start_from_fit,
    joint_start_from_rb_params,
    load_rigid_body,
)
from isaaclab_sysid.rigid_body.options import require, RigidBodyError


@dataclass
class RefineArgs:
    """Refine the link inertials (and joint terms) by replaying the measured closed loop (CLIE: closed-loop input error)."""

    rb_params: Path
    """rb_params.json of identify_rigid_body.py --runs (the LS estimate, its covariance, the SDP start)."""
    runs: tuple[Path, ...] = ()
    """Fit runs (run format: CSV + sidecar, or HDF5): closed-loop joint_pd / task_impedance runs."""
    heldout: tuple[Path, ...] = ()
    """Held-out runs: every stage (URDF, OLS, SDP, CLIE) is scored on them."""
    joint_fit: Path | None = None
    """The joint fit's output folder or its sysid_best_params.json (armature, friction, viscous, delay start; a
    static-friction fit starts Coulomb friction at mu_static x dynamic_ratio); default: rb_params.json's joint
    terms with --delay."""
    delay: int | None = None
    """Actuator delay [1 ms ticks], held fixed (default: the joint fit's)."""
    out: Path = Path("logs/clie")
    """Output folder: clie.json, nominal_inertials.json (--nominal of the fit), fit_seed.json (--x0)."""
    robot: str | None = None
    """Robot config name or path (default: the runs' sidecar robot)."""
    bodies: tuple[str, ...] = ()
    """Moving bodies (link names) to refine; default: all."""
    joint_terms: bool = True
    """Refine armature, Coulomb and viscous friction jointly (--no_joint_terms holds the joint fit's)."""
    ls_weight: float = 1.0
    """Weight of the LS base-parameter term (0: the closed loop and the prior only)."""
    ls_consistency: bool = True
    """Re-weight the LS term by its variance factor against the closed loop (Helmert; the weight never rises
    above --ls_weight) before each pass after the first, and widen its share of the intervals by the final
    factor when above 1 (--no_ls_consistency: take the LS covariance as it is)."""
    prior_weight: float = 1.0
    """Weight of the SDP's URDF prior on the refined bodies."""
    prior_rel_std: float = 0.3
    """Relative std of that prior (as identify_rigid_body.py --prior_rel_std)."""
    stride: int = 10
    """Use every stride-th logged sample of the input error."""
    passes: int = 2
    """Least-squares passes (the noise level is re-estimated before each)."""
    max_iter: int = 20
    """Caps a pass at 3 x this many residual evaluations (about this many trust-region iterations)."""
    restarts: int = 2
    """A least-squares attempt that still lowered the cost by more than 1 (or a first one that ran out of
    budget) restarts its trust region from its end point, at most this many times per pass (the last
    attempt decides 'converged')."""
    fd_step: float = 1e-3
    """Forward-difference step (log-Cholesky units; x10 relative for the joint terms)."""
    ftol: float = 1e-6
    """Relative cost change that ends a pass."""
    hac_lag_s: float = 0.5
    """Newey-West window of the input-error scores [s]."""
    torque_clamp: bool = False
    """Replay with the robot's torque clamp (and leave out samples near it), as the joint fit's --torque_clamp."""
    slew_limit: bool = False
    """Replay with the robot's torque slew limit, as the joint fit's --slew_limit."""
    clamp_margin: float = 0.98
    """With --torque_clamp: samples where a logged |tau| reaches this fraction of the limit are left out."""
    warmup_ticks: int = 50
    """Replay warm-up ticks (as the joint fit's)."""
    audit_grid: int = 3
    """Grid points per joint of the all-pose audit (joint 1 held)."""
    audit_uniform: int = 2000
    """Uniform poses per seed in the audit."""
    audit_dense: int = 1000
    """Dense-region poses per seed in the audit."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Audit seeds."""
    threads: int | None = None
    """Replay threads (default: all cores)."""

    def options(self) -> ClieOptions:
        """The :class:`ClieOptions` of these flags (checked)."""
        return ClieOptions(
            bodies=tuple(self.bodies), joint_terms=self.joint_terms, ls_weight=self.ls_weight,
            ls_consistency=self.ls_consistency,
            prior_weight=self.prior_weight, prior_rel_std=self.prior_rel_std, stride=self.stride,
            passes=self.passes, max_iter=self.max_iter, restarts=self.restarts, fd_step=self.fd_step, ftol=self.ftol,
            hac_lag_s=self.hac_lag_s, clamp_margin=self.clamp_margin, torque_clamp=self.torque_clamp,
            slew_limit=self.slew_limit, warmup_ticks=self.warmup_ticks, audit_grid=self.audit_grid,
            audit_uniform=self.audit_uniform, audit_dense=self.audit_dense, audit_seeds=tuple(self.seeds),
            n_threads=self.threads,
        ).validate()


def check_flags(args: RefineArgs) -> ClieOptions:
    """Every flag checked before any file is read; returns the options.

    Raises:
        RigidBodyError: one line naming the flag.
    """
    opt = args.options()
    require(len(args.runs) > 0, "--runs: give at least one fit run")
    require(args.delay is None or (isinstance(args.delay, int) and args.delay >= 0),
            f"--delay must be a whole number >= 0 [ticks]; got {args.delay!r}")
    require(args.joint_fit is not None or args.delay is not None,
            "give --joint-fit FILE (the joint fit's sysid_best_params.json) or --delay N (start from "
            "--rb-params' joint terms)")
    require(args.threads is None or args.threads >= 1, f"--threads must be >= 1; got {args.threads}")
    overlap = {Path(p).resolve() for p in args.runs} & {Path(p).resolve() for p in args.heldout}
    require(not overlap, f"--heldout repeats a fit run: {sorted(map(str, overlap))[0] if overlap else ''}")
    return opt


def main_from_args(args: RefineArgs, log=print) -> int:  # noqa: ANN001 - a print-like callable
    """Refine, score, write; a bad flag or file is one line ``error: ...`` and exit status 2 (nothing written)."""
    from isaaclab_sysid.data import RunFormatError
    from isaaclab_sysid.data import read_runs
    from isaaclab_sysid.rigid_body.runs_input import robot_of
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.robots.config import RobotConfigError

    try:
        opt = check_flags(args)
        runs = read_runs(list(args.runs))
        heldout = read_runs(list(args.heldout))
        robot = load_robot(robot_of(runs + heldout, args.robot))
        start = load_rigid_body(args.rb_params, robot)
        if args.joint_fit is not None:
            joints = joint_start_from_fit(args.joint_fit, robot.joint_names, args.delay)
        else:
            joints = joint_start_from_rb_params(args.rb_params, robot.joint_names, int(args.delay))
        obj = ClieObjective(robot, runs, start, joints, opt)
    except (RigidBodyError, RunFormatError, RobotConfigError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log(robot.arm_line())  # what the arm carries, once every flag is checked (a bad flag stays one line)
    try:
        log(f"CLIE: {len(obj.body_names)} bodies ({', '.join(obj.body_names)}), joint terms "
            f"{'refined' if opt.joint_terms else 'held'}, delay {joints.delay} ticks, {len(runs)} fit runs, "
            f"{obj.n_replay()} input-error residuals, {obj.z0.size} coordinates; joint terms from {joints.source}")
        try:
            result = refine(obj, log)
        except RigidBodyError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        scores = score_stages(obj, result, heldout)
    finally:
        obj.close()
    from isaaclab_sysid.robots.overrides import InertialError

    try:
        paths = write_clie(args.out, obj, result, scores)
    except InertialError as exc:  # a body lighter than its fixed children: no file, the cause said
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_summary(obj, result, scores, paths, log)
    return 0


def print_summary(obj: ClieObjective, result: ClieResult, scores: StageScores | None, paths: dict[str, Path],
                  log=print) -> None:  # noqa: ANN001
    """The verdict, the masses, the joint terms, the held-out stage table and the files."""
    verdict = "ACCEPTED" if result.accepted else f"NOT accepted ({result.reason}); the SDP set stands"
    a = result.audit
    log(f"audit of the refined set: {'PASS' if a.passed else 'FAIL'} min eig {a.min_eig:.4g} over {a.n_poses} poses; "
        f"{verdict}")
    if not result.convergence.get("converged", True):
        log(f"warning: {result.convergence['warning']}")
    links = obj.links(result.z)
    sdp = obj.start.pi_sdp
    log("masses [kg] (SDP -> CLIE): " + ", ".join(
        f"{obj.reg.link_names[i]} {sdp[10 * i]:.3f}->{links[i, 0]:.3f}" for i in obj.body_idx))
    for g in JOINT_GROUPS:
        log(f"{g:>9}: " + " ".join(f"{v:.4g}+-{s:.2g}" for v, s in zip(result.joint[g], result.joint_std[g])))
    if scores is not None:
        log(f"held-out ({', '.join(scores.runs)}):")
        for line in scores.table(obj.reg.robot.joint_names).splitlines():
            log("  " + line)
    for k, p in paths.items():
        log(f"wrote {k}: {p}")
