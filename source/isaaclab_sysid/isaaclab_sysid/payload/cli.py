"""The commands behind ``scripts/identify_payload.py``: ``design``, ``fit`` and ``twin``.

A bad flag or file stops with one line ``error: ...`` and exit status 2; a mass far from
the expected one prints the wrong-part message and exits 3 without exporting (unless
``--export-flagged``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from typing import Annotated

import tyro

from isaaclab_sysid.arm_model import with_body_inertials
from isaaclab_sysid.cautious import PolicyError, parse_policy
from isaaclab_sysid.data import RunFormatError, read_runs, write_run
from isaaclab_sysid.export.ranges import RangePolicy
from isaaclab_sysid.payload.design import DesignOptions, design_poses
from isaaclab_sysid.payload.export import REQUIRED, build_export, isaaclab_module
from isaaclab_sysid.payload.holds import HoldOptions, PayloadInputError
from isaaclab_sysid.payload.identify import PayloadEstimate, PayloadOptions, identify_payload
from isaaclab_sysid.payload.model import PayloadModel
from isaaclab_sysid.payload.twin import PayloadTwin, hold_trajectory, record_payload_runs, wrist_motion
from isaaclab_sysid.robots.identified import NominalFileError, load_nominal
from isaaclab_sysid.rigid_body.runs_input import robot_of
from isaaclab_sysid.robots import LinkInertial, Robot, load_robot
from isaaclab_sysid.robots.config import RobotConfigError
from isaaclab_sysid.utils.atomic import atomic_write_json, atomic_write_text

ERRORS = (OSError, ValueError, KeyError, RunFormatError, RobotConfigError, NominalFileError, PayloadInputError,
          PolicyError)


@dataclass
class DesignArgs:
    """Suggest static poses that make the payload's mass and centre separable; print the condition number."""

    robot: str = "franka_panda"
    """robot config name or path"""
    options: tyro.conf.OmitArgPrefixes[DesignOptions] = field(default_factory=DesignOptions)
    hold_s: float = 2.0
    """hold time per pose in the written target [s]"""
    move_s: float = 3.0
    """minimum-jerk move time between poses [s]"""
    out: Path | None = None
    """write the design as a joint_pd target run (CSV + sidecar) to drive the arm through the holds"""


@dataclass
class FitArgs:
    """Identify the payload from loaded runs (and reference runs at the same poses without it)."""

    loaded: Annotated[tuple[Path, ...], tyro.conf.arg(aliases=("--runs",))]
    """runs with the payload (CSV with sidecar, or HDF5)"""
    reference: tuple[Path, ...] = ()
    """the same poses (or, with --motion, the same trajectories in order) without the payload;
    none: the arm model predicts the unloaded torque (its error is not in the error bars)"""
    robot: str | None = None
    """robot config (default: the runs' robot)"""
    nominal: Path | None = None
    """the arm's link inertials: a nominal_inertials.json or rb_params.json (default: the URDF's)"""
    link: str | None = None
    """link the payload is fixed to (default: the last link)"""
    signal: Annotated[str, tyro.conf.arg(name="torque_signal")] = "tau_J"
    """torque signal: tau_J (measured) or tau (commanded) (--torque_signal, the shared spelling; --signal still
    works)"""
    motion: bool = False
    """also fit the inertia from every sample of moving runs (paired with --reference in order)"""
    run_offsets: bool = False
    """with --motion: fit a constant torque offset per joint and run (sensor offsets that differ between the
    loaded and reference sessions; needs motions that turn the link through gravity on every joint)"""
    level: float = 0.95
    """two-sided confidence level"""
    v_max: float = 0.01
    """largest |dq| of a static hold [rad/s]"""
    min_s: float = 0.5
    """shortest hold [s]"""
    settle_s: float = 0.2
    """seconds dropped at each end of a hold [s]"""
    pose_tol: float = 0.02
    """largest joint difference between a loaded hold and its reference [rad]"""
    expected_mass: float | None = None
    """the part's expected mass [kg]; with --mass_tolerance flags a wrong part"""
    mass_tolerance: float | None = None
    """how far the mass interval may sit from --expected_mass [kg]"""
    policy: tuple[str, ...] = ()
    """which end each exported number takes, KEY:END (lower|value|upper), e.g. payload_mass:upper
    (required for the export; payload_com / payload_inertia default to value)"""
    use: str = ""
    """name of the use the policy is for (recorded), e.g. 'lift check'"""
    rel_margin: float = 0.0
    """randomization ranges: extra margin as a fraction of |value|"""
    asset_name: str = "robot"
    """scene entity of the arm in the Isaac Lab module"""
    attach_body: str | None = None
    """the Isaac Lab body the payload is added to (default: --link)"""
    attach_mass: float | None = None
    """that body's own mass in the target asset [kg] (default: the arm model's link)"""
    attach_com: tuple[float, float, float] | None = None
    """that body's own centre of mass [m, in its frame] (default: the arm model's link)"""
    export_flagged: bool = False
    """export even when the mass is flagged as far from the expected one"""
    mc_samples: int = 20000
    """Monte Carlo draws of the propagation check"""
    seed: int = 0
    """Monte Carlo seed"""
    out: Path = Path("logs/payload")
    """output folder: payload.json, payload_export.json, payload_isaaclab.py"""


@dataclass
class TwinArgs:
    """Write payload-twin runs with a known payload (hidden truth) in the run format."""

    out: Path = Path("logs/payload_twin")
    """output folder"""
    robot: str = "franka_panda"
    """robot config"""
    mass: float = 0.8
    """true payload mass [kg]"""
    com: tuple[float, float, float] = (0.01, -0.02, 0.15)
    """true centre of mass in the last link's frame [m]"""
    inertia_diag: tuple[float, float, float] = (2e-3, 2e-3, 1e-3)
    """true principal inertia about the centre [kg m^2]"""
    n_poses: int = 4
    """designed static poses"""
    motion_s: float = 0.0
    """also write a wrist-motion pair of this duration [s] (0: none)"""
    seed: int = 0
    """noise seed"""
    rate_hz: float = 200.0
    """log rate [Hz] (1000: a 1 kHz log)"""


# --------------------------------------------------------------------------- design
def run_design(args: DesignArgs) -> int:
    try:
        robot = load_robot(args.robot)
        d = design_poses(robot, args.options)
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"payload pose design on {robot.name}: {len(d.poses)} poses, condition number {d.cond:.3g} "
          f"(mass in {args.options.mass_scale:g} kg, centre in {args.options.length_scale:g} m)")
    for k, (q, z, c) in enumerate(zip(d.poses, d.ee_z, d.cond_by_count)):
        print(f"  pose {k + 1}: q = [{', '.join(f'{v:+.3f}' for v in q)}] rad, EE z {z:.3f} m, "
              f"condition number with poses 1..{k + 1}: {c:.3g}")
    if args.out is not None:
        traj = hold_trajectory(d.poses, args.hold_s, args.move_s, 1000.0)
        run = _target_run(robot, traj, args.out.stem)
        csv, side = write_run(run, args.out)
        print(f"wrote the target run {csv} (+ {side}): hold {args.hold_s:g} s per pose, {args.move_s:g} s moves")
    return 0


def _target_run(robot: Robot, traj, name: str):
    from isaaclab_sysid.twin.targets import skeleton_run

    t, q, qd, _qdd, _ = traj
    run = skeleton_run(robot, "joint_pd", t, q, np.full(robot.n_dof, 600.0), np.full(robot.n_dof, 50.0),
                       q_init=q[0], control_rate_hz=1000.0, name=name,
                       excitation={"kind": "payload_holds", "generator": "isaaclab_sysid.payload.design"})
    run.q, run.dq = q.copy(), qd.copy()
    run.tick = np.arange(t.size, dtype=np.int64)
    run.setpoint_tick = run.tick.copy()
    run.meta.log_rate_hz = 1000.0
    return run


# ------------------------------------------------------------------------------ fit
def _options(args: FitArgs) -> PayloadOptions:
    return PayloadOptions(link=args.link, signal=args.signal, motion=args.motion, run_offsets=args.run_offsets,
                          level=args.level,
                          mc_samples=args.mc_samples, seed=args.seed,
                          holds=HoldOptions(args.v_max, args.min_s, args.settle_s, args.pose_tol),
                          expected_mass=args.expected_mass, mass_tolerance=args.mass_tolerance)


def print_estimate(e: PayloadEstimate) -> None:
    """The numbers with both ends, the fit's statistics and the propagation check."""
    what = "static holds" if e.mode == "static" else "motion samples"
    print(f"payload on {e.robot} link {e.link} from {what} ({e.n_holds or e.n_rows // max(len(e.sigma_joint), 1)} "
          f"{'holds' if e.mode == 'static' else 'samples'}, {e.reference} reference):")
    print(f"  residual {e.sigma:.4g} N m, {e.n_rows} equations, {e.dof} degrees of freedom, condition number {e.cond:.3g}")
    for iv in e.intervals:
        unit = "kg" if iv.group == "mass" else ("m" if iv.group == "com" else "kg m^2")
        print(f"  {iv.label:>20}: {iv.value:+.5g} {unit}  [{iv.lower:+.5g}, {iv.upper:+.5g}] ({e.level:.0%}, {iv.note.split(' (')[0]})")
    for c in e.checks:
        if c.label != "payload_mass":
            print(f"  check {c.label}: first-order std {c.linear_std:.3g}, Monte Carlo std {c.mc_std:.3g} -> {c.used}")
    for w in e.warnings:
        print(f"  warning: {w}")
    if e.flag:
        print(f"  FLAG: {e.flag}")


def run_fit(args: FitArgs) -> int:
    try:
        opts = _options(args)
        opts.validate()
        loaded = read_runs(list(args.loaded))
        reference = read_runs(list(args.reference)) if args.reference else None
        robot = load_robot(robot_of(loaded + (reference or []), args.robot))
        if args.nominal is not None:
            robot = with_body_inertials(robot, load_nominal(args.nominal))
        labels_needed = bool(args.policy)
        est = identify_payload(robot, loaded, reference, opts)
        policy = None
        if labels_needed:
            policy = parse_policy(args.policy, [iv.label for iv in est.intervals], REQUIRED, args.use)
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_estimate(est)
    out = Path(args.out)
    atomic_write_json(out / "payload.json", est.to_json())
    print(f"wrote {out / 'payload.json'}")
    if policy is None:
        print("no export: state the end to act on, e.g. --policy payload_mass:upper (lift or speed check)")
        return 3 if est.flag else 0
    if est.flag and not args.export_flagged:
        print("no export: the mass is flagged (check the grasp; --export-flagged to export anyway)")
        return 3
    try:
        model = PayloadModel(robot, args.link)
        li = model.link_inertial()
        attach = LinkInertial(args.attach_mass if args.attach_mass is not None else li.mass,
                              np.asarray(args.attach_com if args.attach_com is not None else li.com, dtype=float),
                              li.inertia)
        if not attach.mass > 0:
            raise PayloadInputError(f"--attach-mass must be > 0 kg; got {attach.mass}")
        exp = build_export(est, policy, args.attach_body or model.link, attach,
                           RangePolicy(allowance="none", rel_margin=args.rel_margin), args.mc_samples, args.seed)
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic_write_json(out / "payload_export.json", exp.to_json())
    atomic_write_text(out / "payload_isaaclab.py", isaaclab_module(exp, args.asset_name))
    for k, v in exp.override.items():
        end, stated = exp.ends_used[k]
        print(f"  export {k}: {v:+.5g} ({end}{'' if stated else ', default'})")
    print(f"wrote {out / 'payload_export.json'} and {out / 'payload_isaaclab.py'}")
    return 3 if est.flag else 0


# ----------------------------------------------------------------------------- twin
def run_twin(args: TwinArgs) -> int:
    try:
        robot = load_robot(args.robot)
        payload = LinkInertial(args.mass, np.asarray(args.com, dtype=float), np.diag(args.inertia_diag))
        twin = PayloadTwin(payload, rate_hz=args.rate_hz)
        d = design_poses(robot, DesignOptions(n_poses=args.n_poses, mass_scale=args.mass, seed=args.seed))
        runs = list(record_payload_runs(robot, hold_trajectory(d.poses, 2.0, 2.5, args.rate_hz), twin, args.seed,
                                        "payload_holds"))
        if args.motion_s > 0:
            motion = wrist_motion(d.poses[0], args.motion_s, args.rate_hz, args.seed,
                                  limits=(robot.q_lower, robot.q_upper))
            # one offset for a whole motion run would be a per-session sensor offset: see --run-offsets
            runs += record_payload_runs(robot, motion, PayloadTwin(payload, rate_hz=args.rate_hz, hold_bias_std=0.0),
                                        args.seed + 1, "payload_motion")
        paths = [write_run(r, Path(args.out) / f"{r.name}.csv")[0] for r in runs]
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    truth = {"mass": args.mass, "com": list(args.com), "inertia_diag": list(args.inertia_diag),
             "link": robot.link_names[-1], "arm_seed": twin.arm_seed,
             "noise": {"tau_std": twin.tau_std, "hold_bias_std": twin.hold_bias_std, "q_std": twin.q_std}}
    atomic_write_json(Path(args.out) / "payload_truth.json", truth)
    for p in paths:
        print(f"wrote {p}")
    print(f"hidden truth in {Path(args.out) / 'payload_truth.json'}")
    return 0

