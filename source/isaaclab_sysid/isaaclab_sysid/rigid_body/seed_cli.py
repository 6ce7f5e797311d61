"""The command behind ``scripts/seed_fit.py``: a start point for the replay fit from ``rb_params.json``.

The armature, Coulomb friction and viscous friction per joint come from the
SDP-reconstructed standard set (:mod:`.fit_seed`), and the torque offsets (the torque
replay's ``torque_offset`` group) from its offset column when it has one; the actuator delay only on
request (``--delay N`` or ``--delay-runs FILE...``). Each joint's Gaz sigmoid (``sigmoid_amplitude``, ``sigmoid_slope``,
``sigmoid_offset``) is fitted to the LS's friction torque on the identification runs (:mod:`.friction_seed`), within
``--sigmoid-*-bounds`` and ``--viscous-bounds`` (give the replay fit's); the output names the joints whose sigmoid
the data determine weakly; ``--law sigmoid`` writes the sigmoid law's whole start. A bad flag or file stops with
one line ``error: ...`` and exit status 2 (:func:`main_from_args`).
"""

from __future__ import annotations

import sys

import numpy as np

from dataclasses import dataclass
from pathlib import Path

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS
from isaaclab_sysid.rigid_body.fit_seed import FitSeed, build_seed, sigmoid_start, write_seed
from isaaclab_sysid.robots.identified import RbParams
from isaaclab_sysid.rigid_body.options import require
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.config import RobotConfigError


@dataclass
class SeedArgs:
    """Seed the CMA-ES replay fit from rb_params.json (armature, friction, viscous, torque offsets; delay on request)."""

    rb_params: Path
    """rb_params.json written by identify_rigid_body.py (its joint terms seed the fit)."""
    out: Path = Path("logs/fit_seed.json")
    """Seed file (best_params_decoded layout) for sysid_franka_osc.py --x0."""
    robot: str | None = None
    """Robot config name or path (default: the robot named in rb_params.json)."""
    delay: int | None = None
    """Actuator delay to seed [1 kHz ticks]; default: not seeded (the fit starts mid-range)."""
    delay_runs: tuple[Path, ...] = ()
    """Runs (run format) whose commanded torque does not react to the response (step or open-loop
    tests): the delay is the lag maximizing the cross-correlation of d(tau) and d(tau_J)."""
    max_lag_ticks: int = 20
    """Largest delay tried by the cross-correlation [1 kHz ticks]."""
    sigmoid: bool = True
    """Fit each joint's Gaz sigmoid to the LS's friction torque (re-reads the identification runs; --no-sigmoid
    skips)."""
    law: str = "coulomb"
    """The law whose start best_params_decoded holds: coulomb (the LS's viscous and offsets; the sigmoid's numbers ride
    along) or sigmoid (the sigmoid fit's own viscous and offsets, no Coulomb friction)."""
    sigmoid_amplitude_bounds: tuple[float, float] = DEFAULT_BOUNDS["sigmoid_amplitude"]
    """Bounds of the sigmoid's amplitude phi1 [N m] (the replay fit's --sigmoid_amplitude_bounds)."""
    sigmoid_slope_bounds: tuple[float, float] = DEFAULT_BOUNDS["sigmoid_slope"]
    """Bounds of the sigmoid's slope phi2 [s/rad] (the replay fit's --sigmoid_slope_bounds)."""
    sigmoid_offset_bounds: tuple[float, float] = DEFAULT_BOUNDS["sigmoid_offset"]
    """Bounds of the sigmoid's velocity offset phi3 [rad/s] (the replay fit's --sigmoid_offset_bounds)."""
    viscous_bounds: tuple[float, float] = DEFAULT_BOUNDS["viscous"]
    """Bounds of the viscous term fitted with the sigmoid [N m s/rad] (the replay fit's --viscous_bounds)."""

    def sigmoid_bounds(self) -> dict[str, tuple[float, float]]:
        """Group -> (lower, upper) of the sigmoid's fit (its three groups and the viscous fitted with it)."""
        return {"sigmoid_amplitude": tuple(self.sigmoid_amplitude_bounds),
                "sigmoid_slope": tuple(self.sigmoid_slope_bounds), "sigmoid_offset": tuple(self.sigmoid_offset_bounds),
                "viscous": tuple(self.viscous_bounds)}


def check_flags(args: SeedArgs) -> None:
    """Refuse bad values before any file is read (:class:`~.options.RigidBodyError` naming the flag)."""
    require(args.delay is None or args.delay >= 0, f"--delay must be >= 0 ticks; got {args.delay}")
    require(args.delay is None or not args.delay_runs, "give --delay or --delay-runs, not both")
    require(args.law in ("coulomb", "sigmoid"), f"--law must be coulomb or sigmoid; got {args.law!r}")
    require(args.law != "sigmoid" or args.sigmoid, "--law sigmoid needs the sigmoid fit (drop --no-sigmoid)")
    require(args.max_lag_ticks >= 1, f"--max-lag-ticks must be >= 1; got {args.max_lag_ticks}")
    for g, (lo, hi) in args.sigmoid_bounds().items():
        flag = f"--{g.replace('_', '-')}-bounds"
        require(bool(np.isfinite(lo) and np.isfinite(hi)) and lo < hi, f"{flag} must be finite with lower < upper; "
                f"got {lo} {hi}")
    require(args.sigmoid_slope_bounds[0] > 0, f"--sigmoid-slope-bounds must be above 0 s/rad; got "
            f"{args.sigmoid_slope_bounds[0]}")


def _robot_of(path: Path) -> str:
    """The robot an ``rb_params.json`` was identified on (RbParamsError, a ValueError, when it names none)."""
    rb = RbParams.read(path)
    rb.need("robot")
    return rb.robot


def main_from_args(args: SeedArgs) -> int:
    """Build and write the seed, print where each value came from; errors: one line, exit status 2."""
    try:
        check_flags(args)
        robot_name = args.robot or _robot_of(args.rb_params)
        robot = load_robot(robot_name)
        runs = [read_run(p) for p in args.delay_runs]
        seed = build_seed(args.rb_params, robot.joint_names, runs, args.max_lag_ticks, args.delay,
                          sigmoid=args.sigmoid, sigmoid_bounds=args.sigmoid_bounds())
        if args.law == "sigmoid":
            seed = sigmoid_start(seed)
    except (OSError, ValueError, KeyError, RunFormatError, RobotConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = write_seed(args.out, seed)
    print_seed(seed, robot.name, path)
    return 0


def print_seed(seed: FitSeed, robot_name: str, path: Path) -> None:
    """Every seeded value with its source, what was not seeded or clipped, and the next command."""
    print(f"seed for the replay fit ({robot_name}):")
    for key, v in seed.values.items():
        shown = str(v) if key == "motor_delay_steps" else " ".join(f"{a:.4g}" for a in v)
        print(f"  {key:>17}: {shown}   <- {seed.sources[key]}")
    if "torque_offset" not in seed.values:
        print("      torque_offset: not seeded (rb_params.json has no offset column)")
    if "motor_delay_steps" not in seed.values:
        print("  motor_delay_steps: not seeded (the fit starts mid-range; --delay or --delay-runs to seed it)")
    if seed.clipped:
        print("  clipped negative values to 0: " + ", ".join(seed.clipped))
    for line in sigmoid_lines(seed):
        print(line)
    print(f"wrote {path}; start the fit with: python scripts/sysid_franka_osc.py --x0 {path}")
    if "torque_offset" in seed.values:
        print("  a torque replay (--replay torque) with --nominal applies these offsets only when it fits them: add "
              "torque_offset to --fit_groups (auto,torque_offset with the default friction choice; the LS's gravity is its inertials and its offsets together; the "
              "inertials alone leave a constant bias where an offset is large, issue 43)")


def sigmoid_lines(seed: FitSeed) -> list[str]:
    """What the sigmoid seed says: not seeded (why), or each joint's fit against the LS's Coulomb (RMS [N m]) and which
    joints' sigmoid the data determine weakly (why), with the flag that starts a fit from it."""
    sig = seed.sigmoid
    if sig is None:
        return [f"  sigmoid_*: not seeded ({seed.sigmoid_skipped})"] if seed.sigmoid_skipped else []
    names = seed.joint_names or tuple(str(i) for i in range(len(sig.rms_sigmoid)))
    out = ["  sigmoid fit to the LS's friction torque, RMS [N m] sigmoid / LS Coulomb: " + ", ".join(
        f"{j} {a:.3g}/{b:.3g}" for j, a, b in zip(names, sig.rms_sigmoid, sig.rms_coulomb))]
    if sig.weak:
        out.append("  sigmoid weakly determined on: " + "; ".join(f"{j} ({why})" for j, why in sig.weak.items()))
    else:
        out.append("  sigmoid weakly determined on: none (every joint has samples in its ramp, no slope or offset at "
                   "a bound)")
    if "friction" in seed.values:
        out.append("  a fit of the sigmoid law (--fit_groups armature,sigmoid,viscous,...; the same "
                   "--sigmoid_*_bounds) starts from these; --law sigmoid also writes the sigmoid fit's own viscous and offsets (viscous "
                   + " ".join(f"{x:.4g}" for x in sig.viscous) + "); a Coulomb fit does not use them")
    else:
        out.append("  best_params_decoded is the sigmoid law's start (--law sigmoid: the sigmoid fit's own viscous and "
                   "offsets, no Coulomb friction)")
    return out
