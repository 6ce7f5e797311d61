"""``--replay torque``: the fit's inputs for a torque-driven, multiple-shooting replay (docs/replay.md).

Everything the torque replay needs that a log does not say is stated by flags and checked
here before any simulation: which signal is the torque (``--torque_signal``), whether it
holds gravity (``--torque_includes_gravity``), the drive gains of a current log, the window
length against every run, and the memory of one batched rollout against ``--max_batch_mb``.
``--window_s`` unset, the window is chosen from the data (:func:`resolve_window`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.importers.torque_runs import TorqueRunError, TorqueSource, read_ur10e_torque_run, torque_run
from isaaclab_sysid.objective.adequacy_record import AdequacyLimits
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.problem_record import ProblemRecord
from isaaclab_sysid.objective.shooting_floor import choose_window
from isaaclab_sysid.objective.torque_noise import torque_noise
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.shooting import shooting_windows
from isaaclab_sysid.timebase import TICK_HZ

def sample_bytes(n_dof: int) -> int:
    """Bytes one candidate's rollout holds per sample (q, dq, tau, EE position and quaternion; float64)."""
    return 8 * (3 * n_dof + 7)


#: per window and candidate: the native job (about 400 bytes) and its start state
WINDOW_BYTES = 512


def check_torque_args(record: ProblemRecord) -> None:
    """Refuse torque-replay options that cannot work (one line naming the flag), before any file is read."""
    r = record.replay
    if record.runs.log_format == "ur10e" and r.replay != "torque":
        raise FitError("--log_format ur10e: a UR10e log records no replayable controller; add --replay torque "
                       "--torque_signal current --drive_gains ... --torque_includes_gravity")
    if not r.max_batch_mb > 0:
        raise FitError("--max_batch_mb must be > 0 [MB]")
    if r.replay != "torque":
        if "torque_offset" in record.params.groups():
            raise FitError("--fit_groups torque_offset: the offset of a logged torque applies to --replay torque only")
        return
    if r.torque_signal is None:
        raise FitError("--replay torque needs --torque_signal tau_J|tau|current (which logged torque acted on the joints)")
    if r.torque_includes_gravity is None:
        raise FitError("--replay torque needs --torque_includes_gravity or --no_torque_includes_gravity (whether "
                       f"--torque_signal {r.torque_signal} holds the gravity torque: libfranka's tau_J and a UR's motor "
                       "current do)")
    if r.window_s is not None and not (np.isfinite(r.window_s) and r.window_s * TICK_HZ >= 2):
        raise FitError(f"--window_s {r.window_s}: a shooting window must be at least 2 ms (0.1-1 s is typical)")
    if r.backend != "mujoco":
        raise FitError(f"--replay torque runs on --backend mujoco (the {r.backend} backend replays controller runs only)")
    if record.runs.state_age_ms is not None:
        raise FitError("--state_age_ms does not apply to --replay torque: a row's state and torque are taken as "
                       "simultaneous (a common age only shifts the run in time; a lag between them is the fitted delay)")
    if r.torque_clamp or r.slew_limit or r.torque_limit or r.torque_rate_limit:
        raise FitError("--replay torque applies the measured torque as it acted: --torque_clamp, --slew_limit, "
                       "--torque_limit and --torque_rate_limit do not apply")
    try:
        torque_source(record)
    except TorqueRunError as exc:
        raise FitError(str(exc)) from None


def torque_source(record: ProblemRecord) -> TorqueSource:
    """The :class:`TorqueSource` the flags state."""
    r = record.replay
    return TorqueSource(r.torque_signal, bool(r.torque_includes_gravity), r.drive_gains)  # type: ignore[arg-type]


def run_reader(record: ProblemRecord) -> Callable[[str, str | None], Run]:
    """The reader of one torque run (CSV, its sidecar or None): a run-format file's ``--torque_signal``, or a raw
    UR10e CSV with ``--log_format ur10e``; a bad file raises :class:`FitError` naming it."""
    source = torque_source(record)
    robot = load_robot(record.replay.robot or "ur10e") if record.runs.log_format == "ur10e" else None

    def read(csv: str, sidecar: str | None) -> Run:
        try:
            if robot is not None:
                return read_ur10e_torque_run(csv, source, robot)
            return torque_run(read_run(csv, sidecar, admit_abort=record.replay.admit_aborted), source)
        except (RunFormatError, TorqueRunError) as exc:
            raise FitError(str(exc)) from None

    return read


def window_ticks(record: ProblemRecord) -> int | None:
    """The shooting window [ticks] of ``--window_s`` for a torque replay (None for a controller replay).

    Raises:
        ValueError: a torque replay whose window was not resolved yet (:func:`resolve_window`).
    """
    if record.replay.replay != "torque":
        return None
    if record.replay.window_s is None:
        raise ValueError("the torque replay's window is unresolved: call fit.torque_replay.resolve_window first")
    return int(round(record.replay.window_s * TICK_HZ))


def resolve_window(record: ProblemRecord, runs: Sequence[Run], robot: Robot, start: CandidateBatch,
                   log: Callable[[str], None]) -> float:
    """``--window_s`` unset: choose it from the fit runs and the start model ``start`` (one candidate: the decoded
    ``--x0``), :func:`~isaaclab_sysid.objective.shooting_floor.choose_window`; store it in ``record`` (so config.json,
    ``--resume`` and the export replay the same windows) and log every option and the reason. Given: kept.
    Returns the window [s]."""
    r = record.replay
    if r.window_s is not None:
        return float(r.window_s)
    opts = dict(warmup_ticks=r.warmup_ticks, stribeck_velocity=record.params.stribeck_velocity)

    def backend_for(ticks: int) -> MujocoBackend:
        return MujocoBackend(robot, ReplayOptions(window_ticks=ticks, **opts), substeps=r.substeps)

    try:
        choice = choose_window(backend_for, start, runs, AdequacyLimits().max_floor_ratio)
    except ValueError as exc:
        raise FitError(f"--window_s unset: {exc}") from None
    for line in choice.lines():
        log(line)
    r.window_s = choice.window_s
    return choice.window_s


def check_windows(record: ProblemRecord, runs: Sequence[Run]) -> int:
    """Refuse a window longer than a run; returns the total number of windows over ``runs``."""
    w = window_ticks(record)
    total = 0
    for r in runs:
        ticks = r.sample_ticks()
        if w is not None and ticks[-1] < w:
            raise FitError(f"{r.source or r.name}: the run lasts {ticks[-1] / TICK_HZ:.3f} s, shorter than --window_s "
                           f"{record.replay.window_s:g}: shorten the window or drop the run")
        total += shooting_windows(ticks, w).shape[0]
    return total


def check_batch_memory(record: ProblemRecord, runs: Sequence[Run], n_dof: int, n_params: int,
                       population: int = 0) -> float:
    """Refuse a batch whose rollout would exceed ``--max_batch_mb``; returns its estimate [MB].

    The largest batch is the CMA-ES population (``population``: ``--num_envs``) or the refinement's
    central-difference stencil (2 D + 1 candidates), whichever is bigger; each candidate holds every sample
    of every run (:func:`sample_bytes`) and a job per shooting window (:data:`WINDOW_BYTES`).
    """
    p = max(int(population), 2 * n_params + 1)
    samples = sum(r.n_samples for r in runs)
    windows = check_windows(record, runs)
    mb = p * (samples * sample_bytes(n_dof) + windows * WINDOW_BYTES) / 1e6
    if mb > record.replay.max_batch_mb:
        raise FitError(f"one batched rollout would hold {mb:.0f} MB ({p} candidates x {samples} samples x "
                       f"{sample_bytes(n_dof)} B + {windows} windows x {WINDOW_BYTES} B) > --max_batch_mb "
                       f"{record.replay.max_batch_mb:g}: lower --num_envs, use fewer or shorter runs, a longer --window_s, "
                       "or raise --max_batch_mb")
    return mb


def describe(record: ProblemRecord, runs: Sequence[Run], robot: Robot, log: Callable[[str], None]) -> None:
    """One log line saying how the torque replay runs (what was stated, what is assumed)."""
    r = record.replay
    windows = check_windows(record, runs)
    gains = f", drive gains {list(r.drive_gains)} N m/A" if r.torque_signal == "current" else ""
    log(f"torque replay: {r.torque_signal}{gains} applied open loop to {robot.name} with gravity "
        f"{'on' if r.torque_includes_gravity else 'off'}, {windows} shooting windows of "
        f"{r.window_s:g} s each started from the measured q, qd; the loss scores q and qd (w_x = 0); each row's "
        "state and torque are taken as simultaneous (a lag between them is the fitted delay)")
    sigma = torque_noise(runs)
    log(f"  logged torque, white part (first differences, objective/torque_noise.py): {' '.join(f'{v:.3g}' for v in sigma)} N m "
        "per joint: noise on the input drives the replay (errors in variables; docs/replay.md)")
    for run in runs:
        rec = run.meta.summary.get("torque_replay", {})
        dropped = {k: rec.get(k) for k in ("dropped_head_rows", "dropped_same_tick_rows", "dropped_truncated_last_row")}
        if any(dropped.values()):
            log(f"  {run.source or run.name}: dropped {dropped['dropped_head_rows']} corrupt head row(s), "
                f"{dropped['dropped_same_tick_rows']} row(s) on the tick of the row before"
                + (", a truncated last line" if dropped["dropped_truncated_last_row"] else ""))
