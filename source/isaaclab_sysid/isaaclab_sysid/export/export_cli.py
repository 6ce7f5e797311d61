"""``scripts/export_dr.py``: a fit, its intervals and randomization ranges exported to Isaac Lab configs (the neutral
record, the Isaac Lab module, and on request the servo part, the USD variant and the MJCF), the export stage of the
one pipeline (jobs/pipeline.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from isaaclab_sysid.timebase import TICK_S


@dataclass
class ExportOptions:
    """Export the identified joint dynamics and their ranges to Isaac Lab configs."""

    fit_dir: str
    """Fit output folder holding sysid_best_params.json and config.json."""
    out: Annotated[str | None, tyro.conf.arg(aliases=("--out_dir",))] = None
    """Where to write sysid_dr.{json,yaml} and sysid_dr_isaaclab.py (default: <fit_dir>/export; also --out_dir)."""
    rb_params: str | None = None
    """rb_params.json of the rigid-body identification: link-mass intervals and randomize_rigid_body_mass terms."""
    level: float = 0.95
    """Two-sided confidence level of the intervals (0.95 -> +-1.96 standard errors)."""
    interval_method: Literal["curvature", "bootstrap", "widest"] = "curvature"
    """Intervals used for the ranges: curvature (HAC sandwich, default), bootstrap (moving blocks), widest (union of both)."""
    recompute: bool = False
    """Recompute <fit_dir>/intervals.json even if it exists."""
    fd_step: float = 1e-3
    """Finite-difference step in the normalized parameter space (fraction of each parameter's bound width)."""
    n_boot: int = 1000
    """Block-bootstrap resamples (cheap: no rollouts)."""
    allowance: Literal["heldout", "none"] = "heldout"
    """Structure-error allowance: from the held-out residual ratio rho (heldout) or none (ranges = intervals)."""
    combine: Literal["linear", "quadrature"] = "linear"
    """How the allowance joins the interval: linear (half-width x (1 + sqrt(rho-1)); cautious) or quadrature (x sqrt(rho))."""
    rho: float | None = None
    """Override the held-out / fit loss ratio rho (dimensionless; 1 = no allowance)."""
    rel_margin: float = 0.0
    """Extra margin on every range as a fraction of the fitted value (0.1 = +-10 %)."""
    unidentified: Literal["bounds", "skip"] = "bounds"
    """Numbers with an unbounded interval: randomize over the fit's search bounds, or emit no term (a warning either way)."""
    delay_margin: int | None = None
    """Ticks (1 ms) added to each side of the delay interval (default: 1 if rho > 2, else 0)."""
    viscous: Literal["independent", "envelope", "coulomb"] = "independent"
    """Joint terms: independent (the module's own term draws armature, Coulomb and viscous friction each from its own
    range), or Isaac Lab's randomize_joint_parameters, which scales static/dynamic/viscous friction by one factor whose
    range covers both the Coulomb and the viscous range (envelope: a range can be exceeded) or follows the Coulomb one."""
    physics: Literal["newton", "physx"] = "newton"
    """Physics backend of the Isaac Lab task: friction is a torque [N m] on both (Newton: MJWarp frictionloss; PhysX 5:
    static/dynamic friction efforts); PhysX before Isaac Sim 5 (a unitless coefficient) is refused when the module runs,
    and a static/dynamic friction fit is refused for Newton (one Coulomb level)."""
    usd: bool = False
    """Also write <robot>_sysid.usda (+ <robot>.usdc): the fitted joint physics as the USD variant Physics = "sysid"."""
    mjcf: bool = False
    """Also write <robot>_sysid.xml: the fitted model as MJCF (armature, frictionloss, damping; a servo's kp, kd, encoder
    offset and torque limit as its actuators; delay and static friction as <custom> numerics). Refused (exit 2) unless
    plain MuJoCo replays the fit's held-out runs on it within 1e-6 rad of the fit's own replay."""
    servo_model: str | None = None
    """Also write the servo part file here (a servo fit: motor_kt, motor_r fitted): kt, R, armature, friction law,
    viscous and delay with their intervals, the family from the fit's robot config. Written before the other exports."""
    servo_joint: str | None = None
    """The joint whose servo --servo_model writes (default: the fit's only joint)."""
    no_isaaclab: tyro.conf.FlagCreatePairsOff[bool] = False
    """Skip sysid_dr.{json,yaml} and sysid_dr_isaaclab.py: write only what --servo_model, --mjcf and --usd ask for (e.g.
    a servo fit with the load-dependent law, which the Isaac Lab export refuses and the MJCF writes exactly)."""
    asset_name: str = "robot"
    """Scene entity name of the arm in the Isaac Lab task (SceneEntityCfg)."""
    physics_dt: float = TICK_S
    """Physics step sim.dt of the Isaac Lab task [s]; every delay (1 ms ticks) must be a whole number of steps (else refused).
    The delay counts physics steps whatever the task's decimation."""
    quiet: bool = False
    """Print only warnings and the output paths."""


def export_main(args: ExportOptions) -> int:
    from pathlib import Path

    from isaaclab_sysid.export.build import ExportError, FitContext, export, intervals_for
    from isaaclab_sysid.export.ranges import RangePolicy

    log = (lambda s: None) if args.quiet else print
    try:
        if not (0 < args.level < 1):
            raise ExportError("--level must lie in (0, 1)")
        if args.physics_dt <= 0:
            raise ExportError("--physics_dt must be > 0")
        ctx = FitContext.load(args.fit_dir)
        _check_physics(ctx, args)
        rep = intervals_for(ctx, args.recompute, args.level, args.interval_method, args.fd_step, args.n_boot, log)
        policy = RangePolicy(allowance=args.allowance, combine=args.combine, rel_margin=args.rel_margin,
                             unidentified=args.unidentified, delay_margin=args.delay_margin, rho_override=args.rho)
        out = Path(args.out) if args.out else ctx.fit_dir / "export"
        if args.servo_model:
            from isaaclab_sysid.export.build import export_servo_part

            part_path, _part = export_servo_part(ctx, rep, args.servo_model, args.servo_joint)
            print(f"wrote servo_model: {part_path}")
        paths, warns = {}, []
        if not args.no_isaaclab:
            paths, warns = export(ctx, out, rep, policy, args.rb_params, args.asset_name, args.viscous, args.physics_dt,
                                  physics=args.physics, log=log)
        if args.usd:
            from isaaclab_sysid.export.build import check_exported_law

            check_exported_law(ctx.space, "usd")  # the USD variant holds joint properties (also with --no_isaaclab)
            paths["usd"] = _write_usd(ctx, out, args.physics)
        if args.mjcf:
            from isaaclab_sysid.export.build import export_mjcf

            paths["mjcf"], check = export_mjcf(ctx, out, log=log)
            print("\n".join(check.lines()))
    except (ExportError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for w in warns:
        print(f"warning: {w}", file=sys.stderr)
    if not args.quiet:
        chosen = rep.chosen()
        print(f"intervals ({rep.selected}, level {rep.level}); rho = {rep.structure.get('rho')}")
        for iv in chosen.intervals:
            lo = "-inf" if iv.lower is None else f"{iv.lower:.4g}"
            hi = "+inf" if iv.upper is None else f"{iv.upper:.4g}"
            print(f"  {iv.label:18s} {iv.value:10.4g}  [{lo}, {hi}]")
    for k, p in paths.items():
        print(f"wrote {k}: {p}")
    return 0


def _check_physics(ctx, args: ExportOptions) -> None:
    """A static/dynamic friction fit's USD variant needs --physics physx (a Newton USD joint has one Coulomb level; the
    module's actuator applies the Stribeck law on either engine): refused before the intervals are computed, with the
    command that works."""
    from isaaclab_sysid.export.build import ExportError

    ratio = ctx.result.values.get("dynamic_ratio")
    if args.usd and args.physics == "newton" and "mu_static" in ctx.result.values and ratio is not None \
            and any(abs(float(r) - 1.0) > 1e-9 for r in ratio):
        raise ExportError(f"{args.fit_dir}: the fit has static and dynamic friction (mu_static, dynamic_ratio != 1) and "
                          "a Newton USD joint has one Coulomb level: add --physics physx for --usd (python "
                          f"scripts/export_dr.py --fit_dir {args.fit_dir} --usd --physics physx), or fit the 'friction' group")


def _write_usd(ctx, out, physics: str):
    """The fitted joint physics as the USD physics variant (export/usd_variant.py) of the fit's arm."""
    from isaaclab_sysid.export.build import ExportError
    from isaaclab_sysid.export.check import robot_of_fit
    from isaaclab_sysid.fit.run_folder import RESULT_FILE

    try:
        from isaaclab_sysid.export.usd_variant import write_physics_variant

        return write_physics_variant(robot_of_fit(ctx.fit_dir), ctx.result.values, out, physics, str(ctx.fit_dir / RESULT_FILE))
    except ImportError as exc:
        raise ExportError(f"--usd needs pxr and urdf-usd-converter (pip install -e '.[isaaclab]'): {exc}") from None
