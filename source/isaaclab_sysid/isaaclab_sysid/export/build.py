"""The export job behind ``scripts/export_dr.py`` and ``scripts/compute_intervals.py``.

fit folder (``sysid_best_params.json`` + ``config.json``) -> ``intervals.json``
(computed once, one batched rollout) -> ranges (policy) -> ``sysid_dr.json``,
``sysid_dr.yaml`` and ``sysid_dr_isaaclab.py``, all written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.export.isaaclab_module import generate_module
from isaaclab_sysid.export.masses import mass_intervals
from isaaclab_sysid.export.neutral import write_neutral
from isaaclab_sysid.export.ranges import RangePolicy, make_ranges
from isaaclab_sysid.intervals.combine import INTERVALS_FILE, IntervalReport, compute_all, read_intervals, write_intervals
from isaaclab_sysid.utils.atomic import atomic_write_text


class ExportError(Exception):
    """A user-facing failure (printed as one line)."""


@dataclass
class FitContext:
    """What a fit folder gives: result, args, runs, robot, space and backend (built lazily)."""

    fit_dir: Path
    result: dict
    config: dict
    _cache: dict = field(default_factory=dict)

    @classmethod
    def load(cls, fit_dir: str | Path) -> "FitContext":
        d = Path(fit_dir)
        rp = d / "sysid_best_params.json"
        if not rp.is_file():
            raise ExportError(f"{d}: no sysid_best_params.json (give the folder a fit wrote, e.g. logs/sysid_franka/<time>)")
        try:
            result = json.loads(rp.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ExportError(f"{rp}: invalid JSON: {exc}") from None
        cp = d / "config.json"
        config = json.loads(cp.read_text(encoding="utf-8")) if cp.is_file() else {}
        return cls(d, result, config)

    @property
    def args(self):
        from isaaclab_sysid.fit.pipeline import FitArgs

        if not self.config:
            raise ExportError(f"{self.fit_dir}: no config.json: cannot rebuild the runs to compute intervals")
        return FitArgs.from_dict(self.config["args"])

    def space(self):
        from isaaclab_sysid.fit.param_space import GroupSpec, ParamSpace

        ps = self.result["param_space"]
        groups = [GroupSpec(g["name"], g["lower"], g["upper"]) for g in ps["groups"]]
        labels = ps["labels"]
        n = ps["n_dof"]
        jn = [lab.split("[", 1)[1][:-1] for lab in labels if "[" in lab][:n] or None
        fixed = {k: np.asarray(v) for k, v in (ps.get("fixed") or {}).items()}
        return ParamSpace(groups, n, jn, fixed or None)

    def build(self):
        """(runs, heldout, robot, backend, weights, traj_weights) from config.json."""
        if "built" in self._cache:
            return self._cache["built"]
        from isaaclab_sysid.fit.loss import LossWeights
        from isaaclab_sysid.fit.pipeline import FitError, build_backend, build_robot, parse_traj_weights, read_runs

        a = self.args
        try:
            runs = read_runs(a.real_csv, a.real_sidecar)
            held = read_runs(a.heldout_csv, a.heldout_sidecar, "--heldout_csv") if a.heldout_csv else []
            robot = build_robot(a, runs + held)
            backend = build_backend(a, robot)
            tw = parse_traj_weights(a.traj_weights, len(runs))
        except FitError as exc:
            raise ExportError(str(exc)) from None
        out = (runs, held, robot, backend, LossWeights(a.w_q, a.w_dq, a.w_x), tw)
        self._cache["built"] = out
        return out

    def robot_joint_names(self) -> list[str] | None:
        try:
            from isaaclab_sysid.robots import load_robot

            a = self.args
            name = a.robot or self.config.get("robot")
            if name is None:
                from isaaclab_sysid.data import read_run

                name = read_run(a.real_csv[0], a.real_sidecar[0] if a.real_sidecar else None).meta.robot
            return list(load_robot(name).joint_names)
        except Exception:
            return None


def intervals_for(ctx: FitContext, recompute: bool = False, level: float = 0.95, method: str = "curvature",
                  fd_step: float = 1e-3, n_boot: int = 1000, log: Callable[[str], None] = print) -> IntervalReport:
    """Read ``<fit_dir>/intervals.json`` or compute and write it."""
    path = ctx.fit_dir / INTERVALS_FILE
    if path.is_file() and not recompute:
        rep = read_intervals(path)
        if abs(rep.level - level) > 1e-12 or rep.selected != method:
            log(f"{path}: level/method differ from the request; recomputing")
        else:
            log(f"using {path}")
            return rep
    runs, held, _robot, backend, weights, tw = ctx.build()
    space = ctx.space()
    log(f"computing intervals: one batched rollout of the optimum, {2 * space.dim + 5} finite-difference/delay "
        f"candidates on {len(runs)} run(s), held-out on {len(held)}")
    rep = compute_all(backend, space, runs, ctx.result, held, weights, tw, level, method, fd_step, n_boot,
                      source=str(ctx.fit_dir / "sysid_best_params.json"))
    write_intervals(path, rep)
    log(f"wrote {path}")
    return rep


def build_payload(ctx: FitContext, rep: IntervalReport, policy: RangePolicy, rb_params: str | None = None,
                  joint_names: list[str] | None = None) -> tuple[dict, list[str]]:
    """The neutral export dict and warnings."""
    space = ctx.space()
    chosen = rep.chosen()
    warns = list(rep.warnings)
    bounds = {g.name: (g.lower, g.upper) for g in space.groups}
    rho = rep.structure.get("rho") if rep.structure else None
    ranges, rho_used, w = make_ranges(chosen.intervals, policy, rho, bounds)
    warns += w
    jn = joint_names or list(space.joint_names)
    if len(jn) != space.n_dof:
        raise ExportError(f"{len(jn)} joint names for {space.n_dof} joints")
    lab2joint = dict(zip(space.joint_names, jn))
    fitted = {}
    labels_per_joint = {}
    dec = ctx.result["best_params_decoded"]
    for g in space.groups:
        if g.per_joint:
            fitted[g.name] = [float(v) for v in dec[g.name]]
            labels_per_joint[g.name] = [f"{g.name}[{j}]" for j in jn]
    intervals = {}
    for iv in chosen.intervals:
        lab = _relabel(iv.label, lab2joint)
        intervals[lab] = {"value": iv.value, "lower": iv.lower, "upper": iv.upper, "std": iv.std,
                          "identifiable": iv.identifiable, "note": iv.note}
    rmap = {}
    for r in ranges:
        rmap[_relabel(r.label, lab2joint)] = {"value": r.value, "lower": r.lower, "upper": r.upper, "source": r.source}
    masses = []
    if rb_params:
        mivs, mrho, mw = mass_intervals(rb_params, rep.level)
        warns += mw
        mranges, mrho_used, mw2 = make_ranges(mivs, policy, mrho, None)
        warns += mw2
        for iv in mivs:
            intervals[iv.label] = {"value": iv.value, "lower": iv.lower, "upper": iv.upper, "std": iv.std,
                                   "identifiable": iv.identifiable, "note": iv.note}
            masses.append({"label": iv.label, "link": iv.joint, "value": iv.value})
        for r in mranges:
            rmap[r.label] = {"value": r.value, "lower": r.lower, "upper": r.upper, "source": r.source}
    delay = None
    if "delay" in space.group_names:
        div = next(iv for iv in chosen.intervals if iv.group == "delay")
        dr = rmap.get("delay")
        delay = {"value_ticks": int(dec["motor_delay_steps"]), "interval_ticks": [div.lower, div.upper],
                 "range_ticks": None if dr is None else [dr["lower"], dr["upper"]], "tick_s": 0.001}
    all_methods = {m: {(_relabel(iv.label, lab2joint)): [iv.lower, iv.upper] for iv in s.intervals} for m, s in rep.sets.items()}
    payload = {
        "source": str(ctx.fit_dir / "sysid_best_params.json"),
        "robot_joint_names": jn,
        "joint_names": jn,
        "units": {"armature": "kg m^2", "friction": "N m", "viscous": "N m s/rad", "delay": "ticks of 1 ms", "mass": "kg"},
        "fitted": fitted,
        "delay": delay,
        "level": rep.level,
        "interval_method": rep.selected,
        "intervals": intervals,
        "intervals_all_methods": all_methods,
        "range_policy": policy.to_dict(),
        "rho": rho,
        "rho_used": rho_used,
        "ranges": rmap,
        "masses": masses,
        "labels_per_joint": labels_per_joint,
        "structure": rep.structure,
        "warnings": warns,
    }
    return payload, warns


def _relabel(label: str, lab2joint: dict) -> str:
    if "[" in label:
        g, j = label.split("[", 1)
        j = j[:-1]
        return f"{g}[{lab2joint.get(j, j)}]"
    return label


def export(ctx: FitContext, out_dir: str | Path, rep: IntervalReport, policy: RangePolicy, rb_params: str | None = None,
           asset_name: str = "robot", viscous: str = "envelope", physics_dt: float = 0.001,
           joint_names: list[str] | None = None, stem: str = "sysid_dr") -> tuple[dict[str, Path], list[str]]:
    """Write the neutral JSON/YAML and the Isaac Lab module; returns paths and warnings."""
    payload, warns = build_payload(ctx, rep, policy, rb_params, joint_names or ctx.robot_joint_names())
    src, w2 = generate_module(payload, asset_name, viscous, physics_dt)
    warns += w2
    payload["warnings"] = warns
    payload["isaaclab"] = {"asset_name": asset_name, "viscous": viscous, "physics_dt": physics_dt}
    pj, py = write_neutral(out_dir, payload, stem)
    pm = Path(out_dir) / f"{stem}_isaaclab.py"
    atomic_write_text(pm, src)
    return {"json": pj, "yaml": py, "module": pm}, warns
