"""Is the model adequate? A verdict in plain words from the fitted replay's residuals.

A fit always returns numbers; this stage says whether the model could explain the
data, from four diagnostics of the fitted candidate's joint-position residual
``e = q_real - q_sim`` (docs/fit.md, "Model adequacy"):

* **held-out over fit**: q RMS on the held-out runs over q RMS on the fit runs. A
  right model generalizes (about 1); a model that fitted the fit runs by bending
  its parameters does not. A held-out run that moves a joint at least twice as fast
  (RMS |dq|) as any fit run takes it beyond the speeds the fit runs cover, where its
  numbers are extrapolated: the message names it (:func:`excitation_gaps`; the worst
  joints only) before a missing model term.
* **residual over noise floor**: the fit runs' q RMS over a floor measured from two
  repeats of one excitation (``--noise_floor_from A.csv B.csv``: RMS of their q
  difference / sqrt(2), :mod:`isaaclab_sysid.evaluate.noise_floor`), or one the user
  gives (``--noise_floor_mrad``), else over
  an estimate of the white measurement noise from the residual's first
  differences, ``sqrt(mean(diff(e)^2) / 2)`` (model error and process noise are
  smooth, so they stay out of it). On the twins a right model leaves about 1x it
  at 1 kHz and a missing static friction 2.5-10x (docs/fit.md); an arm with large
  unmodelled disturbances shows them here too: give a floor measured from repeats.
* **speed dependence**: the residual RMS in the fastest third of samples over the
  slowest third, per joint. Rows older than assumed (stale 50 Hz states) or a
  missing delay give an error proportional to the speed (ratio >> 1); joints that
  stick where the model slides (static friction) give an error at low speed
  (ratio << 1). Runs whose rows have a modelled random state age are reported but
  not judged: the age's spread leaves an error proportional to the speed by itself
  (removing its expected variance, age_var x dq^2, still cried wolf on right models).
  Torque runs (``--replay torque``) are not judged either: their error grows with the
  time into each shooting window, not with the speed; their floor is the drift of the
  measured start states (:mod:`isaaclab_sysid.objective.shooting_floor`).
* **torque replays: what is missing** (:mod:`isaaclab_sysid.evaluate.torque_residual`): the residual's
  shapes within the windows name a constant torque offset, a lag between torque and state or a sensor
  filter (each a misfit), and the logged torque's noise when it accounts for a floor excess.
* **self-motion share** (redundant arms under task impedance): the share of the
  joint-error energy in the null space of the EE Jacobian at the measured q; the
  impedance law does not hold that motion, so what the model misses in friction
  shows there first.

A fifth signal needs the backend and runs in :mod:`isaaclab_sysid.evaluate.friction_score`: for a
Coulomb-only fit, a score test of the omitted static-friction group at the optimum
(:meth:`Adequacy.with_static_friction_test`); it finds a missing static friction the
residual hides (50 Hz rows' random state age), and a verdict it fires on is ``misfit``.

``misfit`` when the held-out ratio exceeds ``max_heldout_ratio``, the residual
exceeds the floor by ``max_floor_ratio``, or a joint's speed ratio leaves
``[1 / max_speed_ratio, max_speed_ratio]`` (2: a right model stays within 0.9-1.2 on
the study twins). Intervals fitted under a misfit are
marked unreliable (intervals/combine.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.evaluate.metrics import rms
from isaaclab_sysid.evaluate.noise_floor import NoiseFloor
from isaaclab_sysid.evaluate.torque_residual import TorqueResidualDiagnostics
from isaaclab_sysid.evaluate.torque_residual import messages as torque_messages
from isaaclab_sysid.objective.adequacy_record import MISFIT_NUMBERS, Adequacy, AdequacyLimits, RunResidualStats
from isaaclab_sysid.sim.friction import law_of_groups
from isaaclab_sysid.sim.interface import RunRollout


def speed_ratio(e: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """(N,) residual RMS in the fastest third of samples over the slowest third, per joint (e, dq: (T, N))."""
    out = np.empty(e.shape[1])
    for j in range(e.shape[1]):
        order = np.argsort(np.abs(dq[:, j]))
        k = max(1, len(order) // 3)
        out[j] = rms(e[order[-k:], j]) / max(float(rms(e[order[:k], j])), 1e-300)
    return out


def self_motion(e: np.ndarray, q: np.ndarray, jacobian) -> tuple[float, list[int]]:
    """Share of sum |e|^2 in the null space of J(q) (rows of e, q: (T, N)) and the joints carrying most of it."""
    tot, null = 0.0, np.zeros(e.shape[1])
    for t in range(0, e.shape[0], max(1, e.shape[0] // 400)):  # 400 samples are plenty for a share
        J = jacobian(q[t])
        Nproj = np.eye(J.shape[1]) - np.linalg.pinv(J) @ J
        en = Nproj @ e[t]
        null += en**2
        tot += float(e[t] @ e[t])
    share = float(null.sum() / tot) if tot > 0 else 0.0
    joints = [int(j) + 1 for j in np.argsort(null)[::-1] if null[j] >= 0.1 * null.max()] if null.max() > 0 else []
    return share, sorted(joints)


def ee_jacobian(robot):
    """A function q (N,) -> (6, N) EE Jacobian (LOCAL_WORLD_ALIGNED) of ``robot`` (Pinocchio)."""
    import pinocchio as pin

    from isaaclab_sysid.robots.robot import EE_NAME

    model = robot.build_pinocchio()
    data = model.createData()
    fid = model.getFrameId(EE_NAME)

    def jac(q: np.ndarray) -> np.ndarray:
        return pin.computeFrameJacobian(model, data, np.asarray(q, dtype=float), fid, pin.LOCAL_WORLD_ALIGNED)

    return jac


def run_stats(run: Run, q_sim: np.ndarray, heldout: bool, jacobian=None) -> RunResidualStats:
    """Diagnostics of one run's fitted replay ``q_sim`` (T, N)."""
    e = run.q - q_sim
    q_rms = rms(e, axis=0) * 1e3
    white = np.sqrt(np.mean(np.diff(e, axis=0) ** 2, axis=0) / 2.0) * 1e3
    share, joints = (None, [])
    if jacobian is not None and run.meta.controller == "task_impedance" and run.n_dof > 6:
        share, joints = self_motion(e, run.q, jacobian)
    return RunResidualStats(run.name, heldout, q_rms.tolist(), float(rms(e) * 1e3), white.tolist(),
                            speed_ratio(e, run.dq).tolist(), share, joints)


def assess(
    runs: Sequence[Run],
    fitted: Sequence[RunRollout],
    n_fit: int,
    robot=None,
    noise_floor_mrad: float | NoiseFloor | None = None,
    limits: AdequacyLimits = AdequacyLimits(),
    candidate: int = 1,
    age_max_ms: Sequence[float] | None = None,
    torque_diagnostics: TorqueResidualDiagnostics | None = None,
    at_bounds: Sequence[str] = (),
    fitted_groups: Sequence[str] = (),
) -> Adequacy:
    """The verdict from the fitted candidate's rollouts (``fitted[r].q[candidate]``) on ``runs`` (first ``n_fit`` fit).

    ``noise_floor_mrad``: a :class:`~isaaclab_sysid.evaluate.noise_floor.NoiseFloor` (measured from repeats,
    :func:`~isaaclab_sysid.evaluate.noise_floor.resolve_noise_floor`), a number [mrad] (given), or None (estimated
    from the fit runs' residual). ``age_max_ms[r]``: the modelled state age of run r's rows, 0..N ms uniform
    (0 or None: fresh); such runs are left out of the speed test. ``torque_diagnostics``: a torque replay's
    residual shapes (:func:`~isaaclab_sysid.evaluate.torque_residual.diagnose`): the verdict names an offset, a
    lag or sensor filter (each a misfit) and torque noise (an explanation of a floor excess) when they show.
    ``at_bounds``: the fitted numbers at a search bound, one line each (:meth:`BoundHit.describe`); an adequate
    verdict names them (a bound can stand in for what the model lacks). ``fitted_groups``: the fit's parameter
    groups (a floor excess suggests the static-friction group only to a fit without it).

    Without a held-out run an adequate verdict says that it was judged on the fit runs only: a residual at the
    floor on the runs the numbers were fitted to does not show that the model predicts another run (issue 46:
    task-impedance fits at the floor on their two runs at one gain miss a run at other gains by 2.6-2.9x the floor).
    """
    jac = ee_jacobian(robot) if robot is not None and robot.n_dof > 6 else None
    ages = list(age_max_ms or [0.0] * len(runs))
    stats = [run_stats(r, ro.q[candidate], i >= n_fit, jac) for i, (r, ro) in enumerate(zip(runs, fitted))]
    fit_s, held_s = stats[:n_fit], stats[n_fit:]
    fit_rms = float(np.sqrt(np.mean([s.q_rms_all_mrad**2 for s in fit_s])))
    ratio = float(np.sqrt(np.mean([s.q_rms_all_mrad**2 for s in held_s])) / max(fit_rms, 1e-300)) if held_s else None
    files: list[list[str]] = []
    if isinstance(noise_floor_mrad, NoiseFloor):
        nf = noise_floor_mrad
        floor, source, per_joint, method = nf.pooled_mrad, nf.source, nf.per_joint_mrad, nf.method
        files = [list(p) for p in nf.files]
    elif noise_floor_mrad is not None:
        floor, source, per_joint, method = float(noise_floor_mrad), "given", None, "given by the user (--noise_floor_mrad)"
    else:
        white = np.array([s.white_floor_mrad for s in fit_s])  # (runs, N)
        floor, source = float(np.sqrt(np.mean(np.square(white)))), "estimated"
        per_joint = [float(v) for v in np.sqrt(np.mean(np.square(white), axis=0))]
        method = ("estimated as the white measurement noise of the fit runs' residual, sqrt(mean(diff(e)^2) / 2) "
                  "(smooth model error stays out of it; give repeats with --noise_floor_from to measure it)")
    over = fit_rms / max(floor, 1e-300)
    msgs: list[str] = []
    bad = False
    if ratio is not None and ratio > limits.max_heldout_ratio:
        bad = True
        msgs.append(_heldout_message(ratio, held_s, limits,
                                     torque=any(r.meta.controller == "torque" for r in runs[n_fit:]),
                                     gaps=excitation_gaps([r.dq for r in runs[:n_fit]], [r.dq for r in runs[n_fit:]]),
                                     fitted_groups=fitted_groups))
    if over > limits.max_floor_ratio:
        bad = True
        what = {"given": "the given noise floor", "repeats": "the noise floor measured from the repeats",
                "shooting": "the drift floor of the windows' measured start states"}.get(
            source, "the white measurement noise estimated from it")
        advice = static_advice(fitted_groups)
        hint = f"; joints that stick: try {advice}" if advice else ""
        if source == "estimated":
            hint += ("; this floor was estimated without repeats and leaves out noise that moves the arm (torque noise "
                     "acting on it leaves a smooth residual): give repeats with --noise_floor_from to measure it")
        msgs.append(f"the fit runs' residual is {over:.1f}x {what} ({fit_rms:.3g} vs {floor:.3g} mrad): the model leaves "
                    "structure the noise does not explain (a friction law, a timing, a disturbance it lacks)" + hint
                    + ("; in a torque replay also noise on the logged torque, which drives the replay (errors in "
                       "variables: light joints' friction and armature biased)" if source == "shooting" else ""))
    if torque_diagnostics is not None:
        names = list(robot.joint_names) if robot is not None else [f"joint {j + 1}" for j in range(runs[0].n_dof)]
        lines, missing = torque_messages(torque_diagnostics, names, fit_rms, floor, limits.max_floor_ratio)
        bad |= missing
        msgs += lines
    timed = [s for s, a, r in zip(stats, ages, runs) if not a and r.meta.controller != "torque"]
    if timed:
        bad |= _speed_messages(timed, limits, msgs, fitted_groups)
    verdict = "misfit" if bad else "adequate"
    stated = [r.name for r in runs[:n_fit] if r.meta.controller == "joint_pd" and np.all(np.isfinite(r.meta.kp))
              and np.all(np.isfinite(r.meta.kd))]
    if bad and stated:  # the fit held the runs' stated gains fixed: they are a suspect the data cannot clear
        msgs.append(_stated_gains_message(runs[0], len(stated)))
    if verdict == "adequate":
        msgs.append(_adequate_message(ratio, over, source, list(at_bounds)))
    else:
        msgs.append(MISFIT_NUMBERS)
    if source in ("repeats", "shooting"):
        msgs.append(f"noise floor {floor:.3g} mrad: {method}")
    return Adequacy(verdict, msgs, ratio, floor, source, over, stats, limits, per_joint, method, files)


def _adequate_message(ratio: float | None, over: float, source: str, at_bounds: list[str]) -> str:
    """The adequate verdict's line: what it was judged on (held-out runs, or the fit runs only) and what it cannot
    clear (numbers at a bound)."""
    floor = f"residual {over:.2f}x the {_SOURCE_WORDS.get(source, source)} noise floor"
    if ratio is not None:
        text = f"model adequate: held-out error {ratio:.2f}x the fit error; {floor}"
    else:
        text = (f"model adequate on the fit runs only: {floor}; no held-out run was given, so nothing shows the "
                "model predicts a run at other gains or another waveform (a model can pass on its own runs and miss "
                "such a run several times over: docs/friction.md, 'The verdict'); give one with --heldout_csv before "
                "trusting it beyond these runs")
    if at_bounds:
        shown = "; ".join(at_bounds[:4]) + (f"; and {len(at_bounds) - 4} more" if len(at_bounds) > 4 else "")
        text += (f"; {len(at_bounds)} fitted number(s) at a search bound ({shown}): a bound can stand in for what "
                 "the model lacks" + (", which only a held-out run can clear" if ratio is None else ""))
    return text


def _stated_gains_message(run: Run, n: int) -> str:
    """The suspect a joint-PD misfit names: the gains the runs state, which the fit kept (sim/servo.py)."""
    kp = ", ".join(f"{v:.3g}" for v in run.meta.kp)
    kd = ", ".join(f"{v:.3g}" for v in run.meta.kd)
    return (f"the {n} fit run(s) state their joint-PD gains (kp [{kp}] N m/rad, kd [{kd}] N m s/rad for "
            f"{run.name}) and the fit held them fixed: stated gains that are wrong misfit like this (a servo's "
            "register values, e.g. LeRobot's P_Coefficient 16 / D_Coefficient 32, are not N m/rad); refit with the "
            "gains unknown (import mapping gains: unknown, --fit_groups kp,kd,...) and compare (docs/servo_arms.md)")


#: how the verdict's messages name each floor source
_SOURCE_WORDS = {"given": "given", "estimated": "estimated", "repeats": "repeat-measured",
                 "shooting": "start-state drift"}


#: a joint the held-out runs move at least this many times faster (RMS |dq|) than the fastest fit run moves it is
#: "exercised beyond the fit runs": a plain "twice as fast as any fit run" rule, not tuned to any twin
EXCITATION_RATIO = 2.0
#: [rad/s] a joint slower than this counts as "still" in the message's share: a plain slow-joint mark (0.6 deg/s),
#: reported for the reader, never a test
STILL_DQ = 0.01


@dataclass(frozen=True)
class ExcitationGap:
    """A joint the held-out runs move faster than any fit run: ``joint`` (1-based), ``ratio`` = ``held_rms`` over
    ``fit_rms`` (inf when the fit runs hold it exactly still), ``held_rms`` the held-out runs' pooled RMS |dq| and
    ``fit_rms`` the largest fit run's [rad/s], ``still_share`` the share of the fit runs' finite samples with
    |dq| < :data:`STILL_DQ` (0..1)."""

    joint: int
    ratio: float
    held_rms: float
    fit_rms: float
    still_share: float


def excitation_gaps(fit_dq: Sequence[np.ndarray], held_dq: Sequence[np.ndarray]) -> list[ExcitationGap]:
    """The joints exercised beyond the fit runs, from the measured joint velocities ``fit_dq[r]``, ``held_dq[r]``
    ((T_r, N) [rad/s]): those whose held-out RMS |dq| (pooled over the held-out runs' samples) is at least
    :data:`EXCITATION_RATIO` times the largest fit run's RMS |dq|: the held-out run takes such a joint beyond the
    speeds the fit runs cover, where its friction and armature are extrapolated. NaN samples are left out; a joint without a finite sample
    in the fit runs or in the held-out runs is skipped (nothing to compare). ``still_share`` counts the fit runs'
    samples below :data:`STILL_DQ` (0.01 rad/s): a plain slow-joint mark that shows how little the fit runs move it."""
    if not fit_dq or not held_dq:
        return []
    fits = [np.asarray(d, dtype=float) for d in fit_dq]  # each (T_r, N)
    held = np.concatenate([np.asarray(d, dtype=float) for d in held_dq], axis=0)  # (sum T_r, N)
    out: list[ExcitationGap] = []
    for j in range(held.shape[1]):
        per_run = [d[np.isfinite(d[:, j]), j] for d in fits]
        h = held[np.isfinite(held[:, j]), j]
        if not h.size or not any(v.size for v in per_run):
            continue
        held_rms = float(rms(h))
        top = max(float(rms(v)) for v in per_run if v.size)
        ratio = held_rms / top if top > 0 else (np.inf if held_rms > 0 else 1.0)
        if ratio >= EXCITATION_RATIO:
            still = float(np.mean(np.abs(np.concatenate(per_run)) < STILL_DQ))
            out.append(ExcitationGap(j + 1, float(ratio), held_rms, top, still))
    return out


def _excitation_clause(gaps: Sequence[ExcitationGap]) -> str:
    """The held-out line's clause for the joints exercised beyond the fit runs (:func:`excitation_gaps`)."""
    names = "/".join(str(g.joint) for g in gaps)
    one = len(gaps) == 1
    whose = "that joint's" if one else "those joints'"
    ratios = "/".join(f"{g.ratio:.1f}x" if np.isfinite(g.ratio) else "many times" for g in gaps)
    return (f"joint{'' if one else 's'} {names} move{'s' if one else ''} {ratios} faster in the held-out runs than "
            f"in any fit run (RMS |dq| {'/'.join(f'{g.held_rms:.2g}' for g in gaps)} against at most "
            f"{'/'.join(f'{g.fit_rms:.2g}' for g in gaps)} rad/s; still in "
            f"{'/'.join(f'{100 * g.still_share:.0f}' for g in gaps)} % of the fit runs' samples): the held-out run "
            f"takes {'it' if one else 'them'} beyond the speeds the fit runs cover, where {whose} friction and "
            f"armature are extrapolated; record a fit run that moves joint{'' if one else 's'} {names} (another gain "
            "or a wider excitation) before reading this as a missing model term")


#: the static-friction groups the verdict suggests (the Stribeck law at its default speed and shape)
STATIC_GROUPS = "armature,mu_static,dynamic_ratio,viscous,delay"


def static_advice(fitted_groups: Sequence[str] = ()) -> str | None:
    """What the verdict suggests for joints that stick, given the fit's parameter groups (``()``: not known).

    None where the fit already has static friction (``mu_static``); the static-friction groups where its law is
    Coulomb; where it fitted another law (load, sigmoid, Dahl), the same groups as a fit of their own in place of that
    law, since one fit runs one law (:func:`~isaaclab_sysid.sim.friction.law_of_groups`)."""
    gs = set(fitted_groups)
    if "mu_static" in gs:
        return None
    try:
        law = law_of_groups(gs).name
    except ValueError:
        law = "coulomb"
    if law == "coulomb":
        return f"static friction (--fit_groups {STATIC_GROUPS})"
    return (f"static friction in place of the fitted {law} law (one law per fit: --fit_groups {STATIC_GROUPS} as a "
            "fit of its own, compared with this one on the held-out run)")


def _heldout_message(ratio: float, held: list[RunResidualStats], limits: AdequacyLimits, torque: bool = False,
                     gaps: Sequence[ExcitationGap] = (), fitted_groups: Sequence[str] = ()) -> str:
    """The held-out line: the worst joints and the suspect the evidence names. ``torque``: the held-out runs are
    torque replays, whose link inertials the fit holds fixed (they are a suspect the fit runs cannot clear).
    ``gaps``: the joints the held-out runs exercise beyond the fit runs (:func:`excitation_gaps`); those among the
    worst joints are named as the cause in place of a missing model term (the worst joints not among them keep that
    clause; a gap on a joint whose held-out error is small is not a cause and is not named). ``fitted_groups``: the
    fit's groups; the self-motion clause suggests static friction only to a fit without it (:func:`static_advice`)."""
    q = np.sqrt(np.mean([np.square(s.q_rms_mrad) for s in held], axis=0))
    worst = [int(j) + 1 for j in np.argsort(q)[::-1][:4] if q[j] >= 0.5 * q.max()]
    gaps = [g for g in gaps if g.joint in worst]
    text = f"held-out error is {ratio:.1f}x the fit error, worst on joints {'/'.join(map(str, sorted(worst)))}"
    shares = [s.self_motion_share for s in held if s.self_motion_share is not None]
    if shares and float(np.mean(shares)) > limits.self_motion_share:
        joints = sorted({j for s in held for j in s.self_motion_joints})
        advice = static_advice(fitted_groups)
        text += (f", {100 * float(np.mean(shares)):.0f} % of it in self-motion (joints {'/'.join(map(str, joints))}): "
                 + (f"consider {advice} or a null-space term" if advice else
                    "the fit already has static friction (mu_static); consider a null-space term"))
        if gaps:
            text += "; " + _excitation_clause(gaps)
    elif torque:
        text += (": a torque replay holds the link inertials fixed (the robot config's, or --nominal's), and an "
                 "inertial error that depends on the posture (the wrist's gravity most) shows on a run in other poses "
                 "before it shows on the fit runs; compare the rigid-body step's torque prediction on this run (scripts/identify_rigid_body.py with it "
                 "in --heldout) and identify on more poses (docs/rigid_body.md) before a richer friction law")
    else:
        generic = "the model misses something the held-out run exercises (other gains or waveform)"
        rest = sorted(set(worst) - {g.joint for g in gaps})
        if not gaps:
            text += ": " + generic
        else:
            text += ": " + _excitation_clause(gaps)
            if rest:
                text += f"; on joint{'' if len(rest) == 1 else 's'} {'/'.join(map(str, rest))} {generic}"
    return text


def _speed_messages(stats: list[RunResidualStats], limits: AdequacyLimits, msgs: list[str],
                    fitted_groups: Sequence[str] = ()) -> bool:
    r = np.exp(np.mean([np.log(np.maximum(s.speed_ratio, 1e-300)) for s in stats], axis=0))  # geometric mean over runs
    fast = [int(j) + 1 for j in np.where(r > limits.max_speed_ratio)[0]]
    slow = [int(j) + 1 for j in np.where(r < 1.0 / limits.max_speed_ratio)[0]]
    if fast:
        msgs.append(f"the residual grows with joint speed on joints {'/'.join(map(str, fast))} (fast/slow "
                    f"{', '.join(f'{r[j - 1]:.1f}x' for j in fast)}): stale or mistimed states; check --state_age_ms "
                    "for logs below 1 kHz and the delay bounds")
    if slow:
        msgs.append(f"the residual concentrates in slow segments on joints {'/'.join(map(str, slow))} (slow/fast "
                    f"{', '.join(f'{1 / r[j - 1]:.1f}x' for j in slow)}): joints that stick; "
                    + (f"consider {advice}" if (advice := static_advice(fitted_groups)) else
                       "the fit already has static friction (mu_static)"
                       + ("" if "stribeck_velocity" in fitted_groups else
                          ", not its speed: --fit_groups auto also tries the Stribeck law with its velocity and shape")))
    return bool(fast or slow)
