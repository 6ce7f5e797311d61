"""The commands behind ``scripts/identify_contact.py``: ``fit`` and ``twin``.

A bad flag or file stops with one line ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from isaaclab_sysid.cautious import PolicyError, parse_policy
from isaaclab_sysid.contact.export import REQUIRED, build_export, isaaclab_module
from isaaclab_sysid.contact.identify import ContactEstimate, ContactInputError, ContactOptions, identify_contact
from isaaclab_sysid.contact.io import read_contact_run, write_contact_run
from isaaclab_sysid.contact.mapping import body_invweight
from isaaclab_sysid.contact.twin import ContactTwin, record_contact_run
from isaaclab_sysid.data import RunFormatError
from isaaclab_sysid.export.ranges import RangePolicy
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.config import RobotConfigError
from isaaclab_sysid.utils.atomic import atomic_write_json, atomic_write_text

ERRORS = (OSError, ValueError, KeyError, RunFormatError, RobotConfigError, ContactInputError, PolicyError)


@dataclass
class FitArgs:
    """Identify contact stiffness (press runs) and damping (impact runs) and export them."""

    runs: tuple[Path, ...]
    """contact runs (run CSV; its <stem>_contact.csv and <stem>_contact.json beside it)"""
    robot: str | None = None
    """robot config (default: the runs' robot)"""
    f_min: float = 2.0
    """normal force above which a sample is in contact [N]"""
    press_cutoff_hz: float = 3.0
    """low-pass of a press's position and force before the fit [Hz]"""
    level: float = 0.95
    """two-sided confidence level"""
    policy: tuple[str, ...] = ()
    """which end each exported number takes, KEY:END (lower|value|upper), e.g. contact_stiffness:upper
    (a force limit: the squeeze distance from the upper stiffness); required for the export"""
    use: str = ""
    """name of the use the policy is for (recorded)"""
    damping: float | None = None
    """damping to map when no impact runs are given [N s/m] (stated, not identified)"""
    mujoco_body: str | None = None
    """the tool's body in the MuJoCo model, whose body_invweight0 the solref uses (default: the EE link)"""
    invweight: float | None = None
    """body_invweight0 [1/kg] of the tool body in the MuJoCo model the parameters go into (default: the
    robot's own MuJoCo model, no joint armature; a model with armature or another tool has its own)"""
    impedance: float = 0.001
    """MuJoCo's solimp d (flat): smaller makes the virtual mass smaller"""
    points: int = 1
    """contact points sharing the stiffness in PhysX (a flat face on a table: several)"""
    rel_margin: float = 0.0
    """randomization ranges: extra margin as a fraction of |value|"""
    out: Path = Path("logs/contact")
    """output folder: contact.json, contact_export.json, contact_isaaclab.py"""


@dataclass
class TwinArgs:
    """Write contact-twin runs (MuJoCo, a table below the tool): two presses and impacts at three speeds."""

    out: Path = Path("logs/contact_twin")
    """output folder"""
    stiffness: float = 2.0e4
    """true contact stiffness [N/m]"""
    damping: float = 30.0
    """true contact damping [N s/m]"""
    law: str = "explicit"
    """explicit (the law F = max(0, k phi + b phi_dot)) or mujoco (MuJoCo's soft contact, mapped solref/solimp)"""
    press_speeds: tuple[float, ...] = (0.002, 0.001)
    """press speeds of the tool target [m/s] (two: the quasi-static check)"""
    impact_speeds: tuple[float, ...] = (0.05, 0.1, 0.2)
    """impact approach speeds [m/s]"""
    seed: int = 0
    """noise seed"""


def print_estimate(e: ContactEstimate) -> None:
    print(f"contact on {e.robot} ({len(e.presses)} press(es), {len(e.impacts)} impact(s)):")
    for iv, unit in ((e.stiffness, "N/m"), (e.damping, "N s/m")):
        if iv is None:
            continue
        rel = 100 * (iv.upper - iv.lower) / (2 * iv.value)
        print(f"  {iv.label:>17}: {iv.value:.5g} {unit} [{iv.lower:.5g}, {iv.upper:.5g}] (+-{rel:.2g} %, {e.level:.0%})")
    for p in e.presses:
        print(f"  press {p.run}: k {p.k:.5g} +- {p.k_std:.3g} N/m, {p.n} samples, depth {1e3 * p.depth:.3g} mm, "
              f"halves {p.k_low:.5g} / {p.k_high:.5g} N/m")
    for i in e.impacts:
        print(f"  impact {i.run}: b {i.b:.4g} +- {i.b_std:.3g} N s/m at {i.speed:.3g} m/s, peak {i.peak:.3g} N")
    for w in e.warnings:
        print(f"  warning: {w}")


def run_fit(args: FitArgs) -> int:
    try:
        opts = ContactOptions(f_min=args.f_min, press_cutoff_hz=args.press_cutoff_hz, level=args.level)
        opts.validate()
        paths = [Path(p) for p in args.runs]
        given = {p.resolve() for p in paths}
        for p in [p for p in paths if p.stem.endswith("_contact")]:
            if p.with_name(p.stem[: -len("_contact")] + ".csv").resolve() in given:
                print(f"note: {p} is the contact CSV of a run given too; read with it")
                paths.remove(p)
        runs = [read_contact_run(p) for p in paths]
        if not runs:
            raise ContactInputError("no contact runs given")
        names = sorted({cr.run.meta.robot for cr in runs})
        if args.robot is None and len(names) != 1:
            raise ContactInputError(f"runs recorded on different robots ({', '.join(names)}); pass --robot")
        robot = load_robot(args.robot or names[0])
        est = identify_contact(robot, runs, opts)
        policy = parse_policy(args.policy, [iv.label for iv in est.intervals], REQUIRED, args.use) if args.policy else None
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_estimate(est)
    out = Path(args.out)
    atomic_write_json(out / "contact.json", est.to_json())
    print(f"wrote {out / 'contact.json'}")
    if policy is None:
        print("no export: state the end to act on, e.g. --policy contact_stiffness:upper (stay under a force limit)")
        return 0
    try:
        inv = args.invweight if args.invweight is not None else \
            body_invweight(robot.build_mujoco(), args.mujoco_body or robot.config.ee_link)
        if not inv > 0:
            raise ContactInputError(f"--invweight must be > 0 1/kg; got {inv}")
        exp = build_export(est, policy, inv, args.impedance, args.points,
                           RangePolicy(allowance="none", rel_margin=args.rel_margin), args.damping)
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic_write_json(out / "contact_export.json", exp.to_json())
    atomic_write_text(out / "contact_isaaclab.py", isaaclab_module(exp))
    print(f"  MuJoCo: solref {tuple(round(v, 6) for v in exp.mujoco.solref)}, solimp {exp.mujoco.solimp}, "
          f"virtual mass {exp.mujoco.virtual_mass:.3g} kg (body_invweight0 {inv:.4g} 1/kg"
          f"{'' if args.invweight is not None else ', the robot model without armature: --invweight for yours'})")
    print(f"  Isaac Lab (PhysX): {exp.physx}")
    print(f"wrote {out / 'contact_export.json'} and {out / 'contact_isaaclab.py'}")
    return 0


def run_twin(args: TwinArgs) -> int:
    try:
        robot = load_robot("franka_panda")
        twin = ContactTwin(stiffness=args.stiffness, damping=args.damping, law=args.law)
        paths = []
        for i, v in enumerate(args.press_speeds):
            cr = record_contact_run(robot, twin, "press", v, args.seed * 100 + i)
            paths.append(write_contact_run(cr, Path(args.out) / f"{cr.run.name}.csv"))
        for i, v in enumerate(args.impact_speeds):
            cr = record_contact_run(robot, twin, "impact", v, args.seed * 100 + 50 + i, above=0.02, depth=0.005)
            paths.append(write_contact_run(cr, Path(args.out) / f"{cr.run.name}.csv"))
    except ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic_write_json(Path(args.out) / "contact_truth.json", {"stiffness": args.stiffness, "damping": args.damping,
                                                             "law": args.law, "tip_offset": twin.tip_offset.tolist()})
    for p in paths:
        print(f"wrote {p}")
    print(f"hidden truth in {Path(args.out) / 'contact_truth.json'}")
    return 0
