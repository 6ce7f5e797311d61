"""Runs in the project's run format (``isaaclab_sysid.data``) as least-squares input.

A Franka run (CSV + sidecar or HDF5, validated by :func:`isaaclab_sysid.data.read_run`)
gives ``q``, ``dq`` and the measured joint torque ``tau_J`` [N m]. The output signal
of the identification is ``tau_J``.

What ``tau_J`` contains (the assumption to state): on a real Panda/FR3, libfranka's
``tau_J`` is the link-side torque sensor reading, which *includes gravity* even
though the controller's commanded ``tau`` is gravity-compensated (the robot adds
g(q) internally), and excludes most joint friction and rotor inertia (they act on
the motor side of the sensor). The regressor therefore keeps gravity on
(``RegressorOptions(gravity=True)``) for real logs; its armature/friction columns
then come out near zero, which costs nothing. The simulated twin's ``tau_J`` is the
torque that acted on a gravity-free arm (friction and armature included, gravity
not): identify twin runs with ``gravity=False``, or add g(q) first (what the tests
do, to mimic a real log).

What a file records decides it (:func:`gravity_record`), never a default: the sidecar's
``summary.includes_gravity`` (``{"tau_J": bool, "tau": bool}``, written by whoever changed the
signal, e.g. the tests that add g(q)), a torque replay's ``summary.torque_replay``, the Franka
tooling's schema 2 (libfranka: ``tau_J`` includes gravity, ``tau`` excludes it), the twin's
recorder (a simulated gravity-free arm when ``gravity_compensated``), and ``gravity_compensated``
itself for the commanded ``tau`` (and for ``tau_J`` when false). A measured ``tau_J`` of a
gravity-compensated real arm in schema 1 is the silent case: the flag must say it.
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.data import Run, unstated_robot_note
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, Processed, preprocess


def robot_of(runs: list[Run], override: str | None = None) -> str:
    """The robot config name: ``override`` or the runs' common ``meta.robot`` (a run whose sidecar names none is
    read as :data:`~isaaclab_sysid.data.DEFAULT_ROBOT`, and a note says so).

    Raises:
        ValueError: when the runs were recorded on different robots (names each).
    """
    if override:
        return override
    note = unstated_robot_note(runs)
    if note:
        print(note)
    names = sorted({r.meta.robot for r in runs})
    if len(names) != 1:
        detail = ", ".join(f"{r.name}: {r.meta.robot}" for r in runs)
        raise ValueError(f"runs recorded on different robots ({detail}); pass --robot")
    return names[0]


#: ``meta.summary["recorder"]`` of the simulated twin (``isaaclab_sysid.twin``).
TWIN_RECORDER = "isaaclab_sysid twin"


def gravity_record(run: Run, signal: str) -> tuple[bool | None, str]:
    """What the run's file records about gravity in its torque ``signal`` (``tau_J`` or ``tau``).

    Returns:
        (True/False, where the file says it) or (None, why the file is silent).
    """
    meta = run.meta
    summary = meta.summary if isinstance(meta.summary, dict) else {}
    stated = summary.get("includes_gravity")
    if isinstance(stated, dict) and isinstance(stated.get(signal), bool):
        return stated[signal], f"sidecar summary.includes_gravity.{signal}: {str(stated[signal]).lower()}"
    replay = summary.get("torque_replay")
    if isinstance(replay, dict) and replay.get("signal") == signal and isinstance(replay.get("includes_gravity"), bool):
        return replay["includes_gravity"], f"sidecar summary.torque_replay: includes_gravity {replay['includes_gravity']}"
    if meta.source_format == "franka_tooling/2":
        if signal == "tau_J":
            return True, "Franka tooling log (schema 2): libfranka's tau_J is the link-side sensor, gravity included"
        return False, "Franka tooling log (schema 2): the commanded tau excludes gravity (the robot adds it)"
    gc = f"gravity_compensated: {str(meta.gravity_compensated).lower()}"
    if summary.get("recorder") == TWIN_RECORDER:
        return (not meta.gravity_compensated,
                f"sidecar {gc}, recorded by the twin (a simulated arm: its torques hold gravity only without compensation)")
    if signal == "tau":
        return not meta.gravity_compensated, f"sidecar {gc} (the commanded torque holds gravity only without it)"
    if not meta.gravity_compensated:
        return True, f"sidecar {gc} (the arm held its own weight: the measured torque includes gravity)"
    return None, (f"sidecar {gc} says the controller cancels gravity; a real arm's link-side sensor still reads it, "
                  "a simulated gravity-free arm's does not")


def process_run(
    run: Run, options: PreprocessOptions, signal: str = "tau_J", use_logged_velocity: bool = True
) -> Processed:
    """Preprocess one run for least squares; its ``signal`` (``tau_J`` or ``tau``) becomes ``signals[signal]``.

    Args:
        run: a validated run.
        options: preprocessing (filter, resampling).
        signal: ``"tau_J"`` (measured joint torque, the default) or ``"tau"`` (commanded).
        use_logged_velocity: filter the logged ``dq`` like the positions and differentiate
            it for the acceleration (else differentiate the filtered positions twice).
    """
    if signal not in ("tau_J", "tau"):
        raise ValueError(f"signal must be 'tau_J' or 'tau'; got {signal!r}")
    y = np.asarray(getattr(run, signal), dtype=float)
    src = str(run.source or run.name)
    empty = [j for j in range(y.shape[1]) if not np.isfinite(y[:, j]).any()]
    if empty:
        what, other = ("measured", "tau") if signal == "tau_J" else ("commanded", "tau_J")
        more = f"; {len(empty)} joints" if len(empty) > 1 else ""
        raise ValueError(f"{src}: column {signal}{empty[0] + 1} is empty (NaN in every row{more}): the least squares "
                         f"needs the {what} torque; log it, or pass --torque_signal {other}")
    return preprocess(run.t, run.q, {signal: y}, options, source=src, velocity=run.dq if use_logged_velocity else None)


def commanded_trajectory(run: Run, options: PreprocessOptions) -> Processed:
    """The commanded joint trajectory ``q_des`` of a joint_pd run, preprocessed on the same
    grid as :func:`process_run` (filtered, differentiated twice): the instrument of an
    instrumental-variable estimate (Janot, Vandanjon and Gautier, IEEE TCST 2014).

    Raises:
        ValueError: the run has no joint targets (task_impedance).
    """
    if run.q_des is None:
        raise ValueError(
            f"{run.source or run.name}: no q_des (controller {run.meta.controller}); the instrumental-variable "
            "estimate needs joint targets (joint_pd runs)"
        )
    src = str(run.source or run.name)
    return preprocess(run.t, np.asarray(run.q_des, dtype=float), {}, options, source=f"{src} (q_des)")
