"""What a torque replay's residual says is missing (issue 28, item 4): an offset, a lag or filter, torque noise.

Every shooting window starts at the measured state, so a window's joint-position residual
``e = q_real - q_sim`` is what the model's torque error did over the window, integrated twice. Mapped through
the mass matrix at the window's start, ``y = (M(q_a) + diag(armature)) e`` [N m s^2] is that torque error's
double integral, and the defects a torque log can carry leave their own shapes in it (t from the window start):

* a **constant torque offset** b (logged = acted + b; the model lacks ``torque_offset``): ``y = -b t^2 / 2``
  (friction and damping resist that drift, so the size read off is low: 50-95 % of the injected one on the twin);
* a **lag between torque and state** of delta seconds (the torque acts delta after the replay applies it):
  ``y = -delta I(t)``, ``I(t) = int_0^t (tau(s) - tau(0)) ds`` of the logged torque. A first-order low-pass
  **sensor filter** of time constant T on the logged torque is exactly ``acted = logged + T d(logged)/dt``,
  so it shows as a *negative* lag of T: the motion leads the logged torque, which the fitted delay (>= 0)
  cannot represent (states stamped late look the same);
* each window's unknown start error adds ``c0 + c1 t`` (the measured start state's noise): projected out per
  window, so only the shared shapes are estimated.

Per joint, the coefficients of ``t^2 / 2`` and ``I(t)`` are estimated jointly by least squares over every
window of the fit runs (after the per-window projection), with standard errors from the windows as clusters
(a window's samples share its start noise). A term is **named** when it is significant (|z| > :data:`Z_MIN`)
and matters: the q error it alone leaves on its joint (RMS over the windows, through ``(M^-1)_jj``) is at least
:data:`FLOOR_SHARE_MIN` x the drift floor, and, for a lag, it is at least a tick (1 ms: the delay's resolution;
a right model of the twin leaves sub-tick lags of 0.3-0.5 ms, its integrator's timing).

* **what explains a bias** (:mod:`isaaclab_sysid.robots.end_effector`): a constant bias found this way is the mean,
  over the windows' poses, of the torque the model gets wrong. An inertial error of the end effector (the Franka Hand
  modelled but absent, or the reverse; a tool no config states) leaves the pattern of its gravity over those poses:
  each other config of the arm (``g_variant - g_config``), a point mass at the flange (its scale the mass [kg]), and
  the arm's own gravity (the log's gravity taken the wrong way) are fitted to the bias, weighted by its standard
  errors; one that explains :data:`~isaaclab_sysid.robots.end_effector.EXPLAINED_MIN` of it is named with the flag or
  config that fixes it (``--robot franka_panda_nohand``) instead of the offset group.
* **torque noise**: white noise of std sigma on the logged torque (measured from the log,
  :func:`~isaaclab_sysid.objective.torque_noise.torque_noise`) moves the replay by what :func:`torque_noise_floor`
  simulates: the fitted model replayed with the logged torque and with fresh white noise of sigma added, the q
  RMS of the difference per joint (friction constraints and damping included; the free-motion formula
  ``sigma^2 h t^3 / (3 M^2)`` overstated it 2-4x on the twin's light wrist). The start-state drift floor
  (:mod:`~isaaclab_sysid.objective.shooting_floor`) does not hold it. It is named when the residual exceeds the drift
  floor by the verdict's limit, no offset or lag was named, and the drift floor and this torque-noise floor
  together account for the residual (within the same limit). The sigma from first differences counts a stiff
  loop's real high-frequency torque too, so this floor errs high; it is an explanation, never a reason to
  pass a fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots.end_effector import (
    FLANGE_MASS,
    PatternFit,
    explain_bias,
    flange_gravity,
    mean_gravity,
    variant_gravity,
)
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayBackend, RunRollout
from isaaclab_sysid.timebase import TICK_HZ

#: |estimate / standard error| above which a shape counts as present
Z_MIN = 4.0
#: the q error [x the drift floor] a shape must leave alone to be named
FLOOR_SHARE_MIN = 0.5
#: the smallest lag named [ms] (a tick: the fitted delay's resolution)
LAG_MIN_MS = 1.0


@dataclass(frozen=True)
class TorqueResidualDiagnostics:
    """The shapes found in a torque replay's residual, per joint (N,).

    Attributes:
        offset_nm, offset_z, offset_q_mrad: the constant torque bias (logged - acted) [N m], its z and the q error
            it alone leaves on its joint [mrad RMS].
        lag_ms, lag_z, lag_q_mrad: the lag [ms] (> 0: the torque acts after the replay applies it; < 0: the
            motion leads the logged torque: a sensor filter or late states), its z and q error [mrad RMS].
        torque_noise_nm: the logged torque's white noise [N m]; torque_noise_floor_mrad: the q floor it leaves.
        windows: windows used (finite ones).
        explanations: the end-effector and gravity patterns fitted to the offsets, best first (module docstring).
    """

    offset_nm: np.ndarray
    offset_z: np.ndarray
    offset_q_mrad: np.ndarray
    lag_ms: np.ndarray
    lag_z: np.ndarray
    lag_q_mrad: np.ndarray
    torque_noise_nm: np.ndarray
    torque_noise_floor_mrad: np.ndarray
    windows: int
    explanations: tuple[PatternFit, ...] = ()

    def explanation(self) -> PatternFit | None:
        """The pattern that explains the offsets (the best named one), or None."""
        return next((f for f in self.explanations if f.named), None)

    def offset_joints(self, floor_mrad: float) -> list[int]:
        """0-based joints whose offset is named against the drift floor ``floor_mrad`` (module docstring)."""
        return [j for j in range(self.offset_nm.size)
                if abs(self.offset_z[j]) > Z_MIN and self.offset_q_mrad[j] >= FLOOR_SHARE_MIN * floor_mrad]

    def lag_joints(self, floor_mrad: float) -> list[int]:
        """0-based joints whose lag (either sign) is named against the drift floor ``floor_mrad``."""
        return [j for j in range(self.lag_ms.size) if abs(self.lag_z[j]) > Z_MIN and abs(self.lag_ms[j]) >= LAG_MIN_MS
                and self.lag_q_mrad[j] >= FLOOR_SHARE_MIN * floor_mrad]


def _mass(robot, armature: np.ndarray | None):
    """q (N,) -> (N, N) joint-space inertia [kg m^2] of ``robot`` (Pinocchio) plus ``diag(armature)``."""
    import pinocchio as pin

    model = robot.build_pinocchio()
    data = model.createData()
    arm = np.zeros(model.nv) if armature is None else np.asarray(armature, dtype=float)

    def m(q: np.ndarray) -> np.ndarray:
        M = pin.crba(model, data, np.asarray(q, dtype=float))
        M = np.triu(M) + np.triu(M, 1).T
        return M + np.diag(arm)

    return m


def _project(t: np.ndarray) -> np.ndarray:
    """(K, K) projector onto the complement of span{1, t} (the window's start-error shapes)."""
    B = np.column_stack([np.ones_like(t), t])
    Q, _ = np.linalg.qr(B)
    return np.eye(t.size) - Q @ Q.T


def torque_noise_floor(backend: ReplayBackend, batch: CandidateBatch, runs: Sequence[Run], sigma_nm: np.ndarray,
                       replicates: int = 2, seed: int = 0) -> np.ndarray:
    """(N,) q RMS [mrad] that white torque noise of ``sigma_nm`` (N,) [N m per row] moves the replay of ``batch``
    (one candidate) on ``runs`` by: each replicate replays the runs with the logged torque + fresh noise, against
    the replay with the logged torque; finite samples pooled over runs and replicates."""
    base = backend.rollout(batch, list(runs))
    rng = np.random.default_rng(seed + 29)
    sig = np.asarray(sigma_nm, dtype=float)
    sq, cnt = np.zeros(runs[0].n_dof), 0
    for _ in range(replicates):
        noisy = [dataclasses.replace(r, tau=r.tau + sig[None, :] * rng.standard_normal(r.tau.shape)) for r in runs]
        for b, o in zip(base, backend.rollout(batch, noisy)):
            d = o.q[0] - b.q[0]
            ok = np.all(np.isfinite(d), axis=1)
            sq += np.sum(d[ok] ** 2, axis=0)
            cnt += int(ok.sum())
    return 1e3 * np.sqrt(sq / max(cnt, 1))


def diagnose(runs: Sequence[Run], rollouts: Sequence[RunRollout], windows: Sequence[np.ndarray], robot,
             torque_noise_nm: np.ndarray, torque_noise_floor_mrad: np.ndarray, armature: np.ndarray | None = None,
             candidate: int = 1) -> TorqueResidualDiagnostics:
    """The shapes of the module docstring in the residual of ``rollouts[r].q[candidate]`` on ``runs``.

    Args:
        runs: torque runs (fit runs); rollouts: their rollouts; windows: per run, (W, 2) [start, stop) samples.
        robot: the replayed arm (its inertials: the mass matrix).
        torque_noise_nm: (N,) white noise of the logged torque [N m]; torque_noise_floor_mrad: (N,) the q floor it
            leaves (:func:`torque_noise_floor`) [mrad].
        armature: (N,) the replayed armature [kg m^2] (added to the mass matrix), or None.
        candidate: the rollouts' candidate scored.

    Returns:
        A :class:`TorqueResidualDiagnostics`.
    """
    mass = _mass(robot, armature)
    n = runs[0].n_dof
    per_win: list[tuple[np.ndarray, ...]] = []  # (K, N) y, x_offset, x_lag; (N,) diag of M^-1
    poses: list[np.ndarray] = []  # the windows' poses, every 20th sample: where the bias is averaged
    for run, ro, wins in zip(runs, rollouts, windows):
        e = run.q - ro.q[candidate]
        ticks = run.sample_ticks()
        for a, b in wins:
            if b - a < 4 or not np.all(np.isfinite(e[a:b])):
                continue
            t = (ticks[a:b] - ticks[a]) / TICK_HZ
            M = mass(run.q[a])
            y = e[a:b] @ M.T
            tau = run.tau[a:b] - run.tau[a]
            integ = np.vstack([np.zeros((1, n)), np.cumsum(0.5 * (tau[1:] + tau[:-1]) * np.diff(t)[:, None], axis=0)])
            P = _project(t)
            Minv = np.linalg.inv(M)
            per_win.append((P @ y, P @ np.repeat((t**2 / 2)[:, None], n, axis=1), P @ integ, np.diag(Minv).copy()))
            poses.append(run.q[a:b:20])
    if not per_win:
        raise ValueError("no finite shooting window to diagnose")
    beta = np.zeros((n, 2))
    se = np.full((n, 2), np.inf)
    q_part = np.zeros((n, 2))
    samples = sum(w[0].shape[0] for w in per_win)
    for j in range(n):
        A = np.zeros((2, 2))
        g = np.zeros(2)
        for y, x1, x2, _ in per_win:
            X = np.column_stack([x1[:, j], x2[:, j]])
            A += X.T @ X
            g += X.T @ y[:, j]
        Ainv = np.linalg.pinv(A)
        bj = Ainv @ g
        meat = np.zeros((2, 2))
        part = np.zeros(2)
        for y, x1, x2, minv in per_win:
            X = np.column_stack([x1[:, j], x2[:, j]])
            r = y[:, j] - X @ bj
            s = X.T @ r
            meat += np.outer(s, s)
            part += minv[j] ** 2 * np.sum((X * bj) ** 2, axis=0)
        cov = Ainv @ meat @ Ainv
        beta[j] = bj
        se[j] = np.sqrt(np.maximum(np.diag(cov), 1e-300))
        q_part[j] = 1e3 * np.sqrt(part / samples)
    z = beta / se
    explanations = explain_offsets(robot, np.vstack(poses), -beta[:, 0], se[:, 0])
    return TorqueResidualDiagnostics(
        offset_nm=-beta[:, 0], offset_z=-z[:, 0], offset_q_mrad=q_part[:, 0],
        lag_ms=-1e3 * beta[:, 1], lag_z=-z[:, 1], lag_q_mrad=q_part[:, 1],
        torque_noise_nm=np.asarray(torque_noise_nm, dtype=float),
        torque_noise_floor_mrad=np.asarray(torque_noise_floor_mrad, dtype=float),
        windows=len(per_win), explanations=tuple(explanations))


def explain_offsets(robot, poses: np.ndarray, offset_nm: np.ndarray, se_nm: np.ndarray) -> list[PatternFit]:
    """The end-effector and gravity patterns over ``poses`` (K, N) [rad] fitted to the offsets (N,) [N m] with
    standard errors ``se_nm`` (N,), best first (module docstring; empty without finite standard errors)."""
    if not np.all(np.isfinite(se_nm)):
        return []
    patterns = dict(variant_gravity(robot, poses))
    g = mean_gravity(robot, poses)
    patterns["gravity in the log"] = (g, "")
    patterns["gravity not in the log"] = (-g, "")
    patterns[FLANGE_MASS] = (flange_gravity(robot, poses), "")
    return explain_bias(offset_nm, se_nm, patterns)


def _offset_fix(d: TorqueResidualDiagnostics) -> str:
    """What fixes the offsets: the end effector or gravity that explains them, else the offset group."""
    f = d.explanation()
    if f is None:
        return ("fit the offset (--fit_groups ...,torque_offset, or auto,torque_offset; seed_fit.py seeds it from the LS offsets: with --nominal "
                "from identify_rigid_body.py the LS's gravity is its inertials and its offsets together, so a replay "
                "that drops the offsets shows them here)")
    share = f"{100 * f.explained:.0f} % of it"
    if f.name == FLANGE_MASS:
        more = "more" if f.scale > 0 else "less"
        return (f"an inertial error of the end effector explains it: a point mass of {abs(f.scale):.2f} kg {more} at "
                f"the flange than the config states explains {share} by its gravity over the run's poses; state what the "
                "arm carries (a config with a [tool], docs/rigid_body.md) and give it as --robot to "
                "identify_rigid_body.py and to this fit")
    if f.name.startswith("gravity"):
        flag = "--torque_includes_gravity" if f.name == "gravity in the log" else "--no_torque_includes_gravity"
        return (f"the arm's gravity over the run's poses explains {share} (scale {f.scale:.2f}): the log's gravity is "
                f"the other way: {flag}")
    return (f"an inertial error of the end effector explains it: the end effector of {f.name} ({f.carries}) explains "
            f"{share} by its gravity over the run's poses (scale {f.scale:.2f}): --robot {f.name} (with --nominal from "
            f"identify_rigid_body.py --robot {f.name})")


def messages(d: TorqueResidualDiagnostics, joint_names: Sequence[str], residual_mrad: float, drift_floor_mrad: float,
             max_floor_ratio: float) -> tuple[list[str], bool]:
    """The verdict's lines naming what the residual says is missing, and whether a model term is missing (an offset
    or a lag/filter: the verdict is then a misfit).

    Args:
        d: the diagnostics; joint_names: (N,) names.
        residual_mrad, drift_floor_mrad: the fit runs' pooled q RMS and drift floor [mrad].
        max_floor_ratio: the verdict's floor limit.
    """
    out: list[str] = []
    off, lag = d.offset_joints(drift_floor_mrad), d.lag_joints(drift_floor_mrad)
    if off:
        out.append("the residual carries a constant torque bias (a torque offset the model lacks, or a gravity or "
                   "inertial error that acts like one) on " + ", ".join(
                       f"{joint_names[j]} ({d.offset_nm[j]:+.3g} N m, z {d.offset_z[j]:.1f})" for j in off)
                   + ": " + _offset_fix(d))
    late = [j for j in lag if d.lag_ms[j] > 0]
    early = [j for j in lag if d.lag_ms[j] < 0]
    if late:
        out.append("the residual says the torque acts later than the replay applies it (a lag between torque and "
                   "state) on " + ", ".join(f"{joint_names[j]} ({d.lag_ms[j]:+.2g} ms, z {d.lag_z[j]:.1f})" for j in late)
                   + ": fit the delay or widen --delay_bounds")
    if early:
        out.append("the motion leads the logged torque on " + ", ".join(
            f"{joint_names[j]} ({d.lag_ms[j]:+.2g} ms, z {d.lag_z[j]:.1f})" for j in early)
            + ": a low-pass sensor filter on the torque (a first-order filter of time constant T acts as a lag of -T) "
            "or states stamped late; the fitted delay (>= 0) cannot represent it: undo the filter (tau + T dtau/dt) "
            "or shift the torque column earlier")
    over = residual_mrad / max(drift_floor_mrad, 1e-300)
    tn = float(np.sqrt(np.mean(np.square(d.torque_noise_floor_mrad))))
    combined = float(np.hypot(drift_floor_mrad, tn))
    if over > max_floor_ratio and not (off or lag) and residual_mrad <= max_floor_ratio * combined:
        top = [int(j) for j in np.argsort(d.torque_noise_floor_mrad)[::-1][:3]]
        out.append(f"the residual's excess over the drift floor is what the logged torque's white noise leaves "
                   f"(measured {' '.join(f'{v:.3g}' for v in d.torque_noise_nm)} N m per joint: a q floor of "
                   f"{tn:.3g} mrad, most on {', '.join(joint_names[j] for j in top)}; drift and torque noise together "
                   f"{combined:.3g} mrad, the residual {residual_mrad / combined:.2f}x that): torque noise is missing "
                   "from the floor, not a term from the model (errors in variables: intervals/torque_input_noise.py "
                   "widens the intervals by it; the noise from first differences errs high)")
    return out, bool(off or lag)
