"""``scripts/preflight.py``: the pre-flight report of a target run before any arm moves (excitation/preflight.py),
written as ``<run>_preflight.json`` and ``.png``; exit 0 safe to run, 3 a check FAILed, 2 a WARN with ``--strict``
or the run's facts missing."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.excitation.plots import plot_preflight
from isaaclab_sysid.excitation.preflight import preflight
from isaaclab_sysid.excitation.verdict import EXIT_FAIL, WARN, WARN_FRAC
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.problem_record import ReplayConfig
from isaaclab_sysid.fit.replay_facts import resolve_replay_facts
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.json_io import jsonable


@dataclass
class PreflightOptions:
    """Pre-flight checks of a target run (CSV + sidecar)."""

    run: tyro.conf.Positional[Path]
    """The target run's CSV (its sidecar is the same name with .json; or after --runs, the shared spelling)."""
    out_dir: Annotated[Path | None, tyro.conf.arg(name="out")] = None
    """Folder for the report (default: the run's folder; --out, the shared spelling; --out_dir still works)."""
    warn_frac: float = WARN_FRAC
    """A check WARNs when its ratio exceeds this fraction of its limit (it FAILs above 1: past the limit)."""
    identifiability: bool = True
    """Compute the identifiability table (one batched replay of 1 + 2 x 22 candidates)."""
    replay: bool = True
    """Replay the loop to predict torques (turn off for kinematics + cond only)."""
    strict: bool = False
    """Exit with status 2 when any check WARNs (a FAIL exits 3 regardless)."""
    orientation_error: Literal["rotvec", "quat_vec", "quat_2vec"] | None = None
    """The real controller's orientation error, for a run that does not record it (the Franka tooling's schema 2)."""
    coriolis_compensation: tyro.conf.DisallowNone[bool | None] = None
    """Whether the real controller adds C(q, qd) qd, for a run that does not record it."""
    ee_offset: tuple[float, float, float] | None = None
    """The real controller's EE point in the robot config's EE link frame [m] (e.g. 0 0 0.1034: the Franka TCP)."""
    torque_limit: tuple[float, ...] | None = None
    """Per-joint torque limits of the real controller [N m] (overrides the robot config)."""
    torque_rate_limit: tuple[float, ...] | None = None
    """Per-joint torque-rate limits of the real controller [N m/s] (overrides the robot config)."""


def preflight_main(a: PreflightOptions) -> int:
    try:
        run = read_run(a.run)
    except RunFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    facts = {k: getattr(a, k) for k in ("orientation_error", "coriolis_compensation", "ee_offset", "torque_limit",
                                          "torque_rate_limit")}
    try:  # a log that does not record the law / EE point / limits is refused unless the flags state them
        (run,), _, robot = resolve_replay_facts(ReplayConfig(**facts), [run], [], load_robot(run.meta.robot))
    except FitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rep = preflight(robot, run, warn_frac=a.warn_frac, replay=a.replay, ident=a.identifiability,
                    peaks=run.meta.summary.get("reference_peaks"))
    print(rep.format())
    out = a.out_dir or a.run.parent
    p = out / f"{run.name}_preflight.json"
    atomic_write_json(p, jsonable(rep.to_dict()))
    print(f"wrote {p}")
    if rep.replay:
        print(f"wrote {plot_preflight(rep, robot, out / f'{run.name}_preflight.png')}")
    print(f"pre-flight: {rep.verdict.overall_line()}")
    if not rep.safe:
        return EXIT_FAIL
    return 2 if (a.strict and (rep.warnings or rep.verdict.count(WARN))) else 0
