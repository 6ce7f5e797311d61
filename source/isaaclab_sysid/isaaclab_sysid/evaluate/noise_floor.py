"""The joint-position noise floor of a robot's runs, measured from repeats of one excitation.

Two runs of the same excitation (same setpoints, same gains, same time base) on the same arm
differ only by what no model of the arm can predict: measurement noise, quantization and
run-to-run variation. If each run carries independent noise of the same size ``sigma``, their
difference has ``sqrt(2) sigma``, so a perfect replay of one run leaves

    floor_j = RMS_t(q_A[t, j] - q_B[t, j]) / sqrt(2)                           [mrad], per joint j

and pooled over joints (and over several repeat pairs, by their rows)
``sqrt(sum d^2 / count) / sqrt(2)``. The adequacy verdict (:mod:`isaaclab_sysid.evaluate.adequacy`)
compares the fit runs' residual with this floor (``--noise_floor_from A.csv B.csv``; docs/fit.md,
"The noise floor").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.objective.adequacy_record import NoiseFloor
from isaaclab_sysid.utils.errors import UserError

#: setpoints of two repeats must agree to this [rad, m, -] (CSV round-off of one schedule)
SETPOINT_TOL = 1e-6
#: gains of two repeats must agree to this, relative
GAIN_RTOL = 1e-9


class NotRepeatsError(UserError, ValueError):
    """Two runs given as repeats are not repeats of one excitation (the message is one line naming both)."""


def check_repeats(a: Run, b: Run) -> None:
    """Refuse two runs that are not repeats of one excitation.

    Repeats share the robot, the controller, the gains, the log and setpoint rates, the rows'
    time base (same number of rows at the same ticks) and the setpoint schedule (ticks equal,
    values within :data:`SETPOINT_TOL`). The start posture is not checked: a real arm reaches it
    a little differently each time, and that difference is part of the floor.

    Raises:
        NotRepeatsError: one line naming both files and the first difference.
    """
    fa, fb = str(a.source or a.name), str(b.source or b.name)

    def refuse(reason: str) -> NotRepeatsError:
        return NotRepeatsError(f"{fa} and {fb} are not repeats of one excitation: {reason}")

    if fa == fb or a is b:
        raise refuse("the same run twice (give two recordings)")
    ma, mb = a.meta, b.meta
    for what, va, vb in (("robot", ma.robot, mb.robot), ("controller", ma.controller, mb.controller),
                         ("log rate [Hz]", ma.log_rate_hz, mb.log_rate_hz),
                         ("setpoint rate [Hz]", ma.control_rate_hz, mb.control_rate_hz)):
        if va != vb:
            raise refuse(f"{what} {va} vs {vb}")
    if a.q.shape != b.q.shape:
        raise refuse(f"{a.q.shape[0]} vs {b.q.shape[0]} rows of {a.q.shape[1]} vs {b.q.shape[1]} joints")
    for name, ga, gb in (("kp", ma.kp, mb.kp), ("kd", ma.kd, mb.kd)):
        if ga.shape != gb.shape or not np.allclose(ga, gb, rtol=GAIN_RTOL, atol=0.0):
            raise refuse(f"gains {name} {np.asarray(ga).tolist()} vs {np.asarray(gb).tolist()}")
    ta, tb = a.sample_ticks(), b.sample_ticks()
    if not np.array_equal(ta, tb):
        i = int(np.flatnonzero(ta != tb)[0])
        raise refuse(f"row {i + 2} is at tick {ta[i]} vs {tb[i]} (another time base)")
    (sa, va), (sb, vb) = a.setpoints(), b.setpoints()
    if not np.array_equal(sa, sb):
        n = min(len(sa), len(sb))
        i = int(np.flatnonzero(sa[:n] != sb[:n])[0]) if np.any(sa[:n] != sb[:n]) else n
        raise refuse(f"setpoint schedules differ ({len(sa)} vs {len(sb)} setpoints; setpoint {i + 1} "
                     f"takes effect at tick {sa[i] if i < len(sa) else '-'} vs {sb[i] if i < len(sb) else '-'})")
    dev = np.abs(va - vb)
    if dev.max(initial=0.0) > SETPOINT_TOL:
        i, c = np.unravel_index(int(np.argmax(dev)), dev.shape)
        raise refuse(f"setpoint {i + 1} (tick {sa[i]}) component {c + 1} differs by {dev[i, c]:.3g} "
                     f"(> {SETPOINT_TOL:g}: other targets)")


def repeat_noise_floor(pairs: Sequence[tuple[Run, Run]]) -> NoiseFloor:
    """The noise floor from repeat pairs (see module docstring), each pair checked by :func:`check_repeats`.

    Args:
        pairs: one or more (A, B) runs, each two recordings of one excitation; every pair has the same joints.
    Returns:
        A :class:`NoiseFloor` (``source = "repeats"``) with the per-joint and pooled floor [mrad].
    Raises:
        NotRepeatsError: a pair that is not a repeat, a floor of zero (identical q), or pairs of different robots.
    """
    if not pairs:
        raise ValueError("no repeat pairs given")
    sq, count, names, files = None, 0, [], []
    for a, b in pairs:
        check_repeats(a, b)
        d = a.q - b.q  # (T, N) [rad]
        if sq is not None and d.shape[1] != sq.shape[0]:
            raise NotRepeatsError(f"{a.source or a.name}: {d.shape[1]} joints, the other repeat pairs have {sq.shape[0]}")
        s = np.sum(d**2, axis=0)
        sq = s if sq is None else sq + s
        count += d.shape[0]
        names.append(f"{a.name} vs {b.name}")
        files.append((str(a.source or a.name), str(b.source or b.name)))
        if not np.any(d):
            raise NotRepeatsError(f"{files[-1][0]} and {files[-1][1]} have identical q in every row: one recording "
                                  "twice, not two repeats (the floor would be 0)")
    assert sq is not None
    per_joint = np.sqrt(sq / count / 2.0) * 1e3
    pooled = float(np.sqrt(np.sum(sq) / (count * sq.shape[0]) / 2.0) * 1e3)
    method = (f"measured from {len(pairs)} repeat pair(s) ({'; '.join(names)}): RMS(q_A - q_B) / sqrt(2) over "
              f"{count} rows x {sq.shape[0]} joints (each run's own noise, taking the two runs' noise as independent "
              "and equal; --noise_floor_from)")
    return NoiseFloor(pooled, [float(v) for v in per_joint], "repeats", method, files)


def given_noise_floor(mrad: float) -> NoiseFloor:
    """A floor the user states (``--noise_floor_mrad``) [mrad]; must be finite and positive."""
    if not (np.isfinite(mrad) and mrad > 0):
        raise ValueError(f"--noise_floor_mrad {mrad}: expected a positive number of mrad")
    return NoiseFloor(float(mrad), None, "given", "given by the user (--noise_floor_mrad)")


def resolve_noise_floor(noise_floor_mrad: float | None, noise_floor_from: Sequence[Sequence[str]],
                        log: Callable[[str], None] = print, admit_aborted: bool = False) -> NoiseFloor | None:
    """The floor the flags ask for: measured from ``--noise_floor_from`` pairs, given, or None (estimated later).

    Reads and checks every repeat run (a bad file, or two runs that are not repeats, stops here, before any fit).

    Raises:
        FitError: one line naming the flag and the file(s); both flags given.
    """
    from isaaclab_sysid.data import RunFormatError, read_run
    from isaaclab_sysid.objective.errors import FitError

    pairs = [tuple(p) for p in noise_floor_from or []]
    if noise_floor_mrad is not None and pairs:
        raise FitError("--noise_floor_mrad and --noise_floor_from both given: give the floor or the repeats, not both")
    if noise_floor_mrad is not None:
        try:
            return given_noise_floor(float(noise_floor_mrad))
        except ValueError as exc:
            raise FitError(str(exc)) from None
    if not pairs:
        return None
    runs = []
    for p in pairs:
        if len(p) != 2:
            raise FitError(f"--noise_floor_from {' '.join(map(str, p))}: expected two CSV files (A.csv B.csv)")
        try:
            runs.append((read_run(p[0], admit_abort=admit_aborted), read_run(p[1], admit_abort=admit_aborted)))
        except RunFormatError as exc:
            raise FitError(f"--noise_floor_from: {exc}") from None
    try:
        floor = repeat_noise_floor(runs)
    except NotRepeatsError as exc:
        raise FitError(f"--noise_floor_from: {exc}") from None
    log(f"noise floor {floor.pooled_mrad:.4g} mrad (per joint "
        f"{', '.join(f'{v:.3g}' for v in floor.per_joint_mrad or [])}): {floor.method}")
    return floor
