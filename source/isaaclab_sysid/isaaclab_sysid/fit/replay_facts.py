"""The real controller's law, EE point and limits: from the runs where they record them, else from flags.

A log may not record facts that change the replay (``Run.meta.unrecorded``: the Franka
tooling's schema 2 records none of them). For such runs the fit refuses to guess and
names the flags that state them; given flags override a schema-1 sidecar's law too. What
was used is written back into :class:`~isaaclab_sysid.objective.problem_record.ReplayConfig` (so
``config.json`` and ``--resume`` state it: the EE offset always, the limits when given)
and printed. docs/data_format.md ("What the replay needs that a log may not record").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from isaaclab_sysid.data.run import LAW_FACTS, ImpedanceLaw, Run
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.problem_record import ReplayConfig
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.robots.config import RobotConfigError

#: the flag that states each replay fact (docs/data_format.md)
FLAG_OF = {
    "orientation_error": "--orientation_error rotvec|quat_vec|quat_2vec",
    "coriolis_compensation": "--coriolis_compensation or --no_coriolis_compensation",
    "ee_offset": "--ee_offset X Y Z",
    "torque_limit": "--torque_limit N_M [N_M ...]",
    "torque_rate_limit": "--torque_rate_limit N_M_PER_S [...]",
}


def stated(replay: ReplayConfig, fact: str) -> bool:
    """Whether the flag of ``fact`` was given."""
    return getattr(replay, fact) is not None


def missing_facts(replay: ReplayConfig, runs: Sequence[Run]) -> dict[str, list[str]]:
    """Fact -> names of the runs that do not record it and whose flag was not given (in FLAG_OF order)."""
    out: dict[str, list[str]] = {}
    for fact in FLAG_OF:
        names = [r.name for r in runs if fact in r.meta.unrecorded and not stated(replay, fact)]
        if names:
            out[fact] = names
    return out


def with_stated_law(replay: ReplayConfig, run: Run) -> Run:
    """``run`` with the law flags applied: the whole law for a run that does not record it (no clipping,
    no null-space term: a plain J^T F controller), the given fields over a recorded one."""
    if run.meta.controller != "task_impedance":
        return run
    given = {f: getattr(replay, f) for f in LAW_FACTS if stated(replay, f)}
    if run.meta.impedance is None:
        return run.with_law(ImpedanceLaw(**given))
    return run.with_law(replace(run.meta.impedance, **given)) if given else run


def limits_read(values: Sequence[float | None] | None) -> tuple[float, ...] | None:
    """Per-joint torque or rate limits as ``config.json`` holds them, with inf ("no limit") stored as null: the
    floats, null read as inf; None stays None."""
    return None if values is None else tuple(float("inf") if v is None else float(v) for v in values)


def resolve_replay_facts(
    replay: ReplayConfig, runs: Sequence[Run], heldout: Sequence[Run], robot: Robot, log: Callable[[str], None] = print
) -> tuple[list[Run], list[Run], Robot]:
    """Refuse runs whose unrecorded facts no flag states; apply the flags; record and print what is used.

    Returns:
        (fit runs, held-out runs) with their law stated, and the robot with the real controller's EE
        point and limits.
    Raises:
        FitError: one line naming the runs and the missing flags.
    """
    r = replay
    for lim in ("torque_limit", "torque_rate_limit"):
        setattr(r, lim, limits_read(getattr(r, lim)))
    missing = missing_facts(r, list(runs) + list(heldout))
    if missing:
        names = sorted({n for v in missing.values() for n in v})
        raise FitError(f"run(s) {', '.join(names)} do not record the real controller's "
                       f"{', '.join(missing)} (e.g. the Franka tooling's schema 2), and guessing them moves the "
                       f"replay by tens of mrad: give {'; '.join(FLAG_OF[f] for f in missing)} (docs/data_format.md)")
    try:
        robot = robot.with_real_controller(r.ee_offset, r.torque_limit, r.torque_rate_limit)
    except RobotConfigError as exc:
        raise FitError(f"--{str(exc)}") from None
    runs = [with_stated_law(r, run) for run in runs]
    heldout = [with_stated_law(r, run) for run in heldout]
    task = any(x.meta.controller == "task_impedance" for x in list(runs) + list(heldout))
    how_ee = "--ee_offset" if r.ee_offset is not None else (
        f"robot config {robot.name}: check that it is the real controller's EE frame (on a Franka: Desk's)" if task
        else f"robot config {robot.name}: the point the EE channel scores (a joint-space controller does not use it)")
    r.ee_offset = tuple(float(v) for v in robot.config.ee_offset)  # config.json states the EE point used
    if r.torque_limit is not None:
        r.torque_limit = tuple(float(v) for v in robot.config.torque_limit)  # type: ignore[union-attr]
        r.torque_clamp = True
    if r.torque_rate_limit is not None:
        r.torque_rate_limit = tuple(float(v) for v in robot.config.torque_rate_limit)  # type: ignore[union-attr]
        r.slew_limit = True
    lines = [f"EE frame: {robot.ee_frame} ({how_ee})"]
    if r.torque_clamp:
        lines.append(f"torque clamp [N m]: {', '.join(f'{v:g}' for v in robot.tau_max)}")
    if r.slew_limit and robot.config.torque_rate_limit is not None:
        lines.append(f"torque slew limit [N m/s]: {', '.join(f'{v:g}' for v in robot.config.torque_rate_limit)}")
    laws = sorted({(x.meta.impedance.orientation_error, x.meta.impedance.coriolis_compensation)
                   for x in list(runs) + list(heldout) if x.meta.controller == "task_impedance" and x.meta.impedance})
    if laws:
        lines.append("impedance law: " + "; ".join(f"orientation_error {o}, Coriolis {'on' if c else 'off'}" for o, c in laws))
    log("real controller: " + "; ".join(lines))
    return runs, heldout, robot
