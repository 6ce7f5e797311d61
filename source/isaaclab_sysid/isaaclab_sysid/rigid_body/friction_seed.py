"""The Gaz sigmoid friction law seeded from the rigid-body least squares (issue 46).

Gaz et al. (RA-L 2019) identify each joint's friction of the Franka Panda as a sigmoid of its velocity, fitted to the
torque the rigid-body model leaves unexplained. This module does the same on the rigid-body step's own data:

1. **The friction torque the LS attributes to friction**, per joint and sample [N m]: the measured output (the motor
   current times the drive gains, or the joint torque) less the identified model's link inertials and armature. That
   is the LS's ``Fc sign(qd) + Fv qd + F0`` plus its residual (:func:`friction_torque`). The offset ``F0`` stays in:
   a sigmoid with an offset phi3 is asymmetric, its mean at speed is ``phi1 (1/2 - sigma(phi2 phi3))``, which the
   LS's offset column took; taken out, phi3 could not be seen.
2. **Per joint**, ``scipy.optimize.least_squares`` fits
   ``f(v) = phi1 / (1 + exp(-phi2 (v + phi3))) - phi1 / (1 + exp(-phi2 phi3)) + Fv v + c`` to it, within the replay
   fit's group bounds (``sigmoid_amplitude``, ``sigmoid_slope``, ``sigmoid_offset``, ``viscous``), with its own
   viscous ``Fv`` and torque offset ``c`` (a shallow sigmoid is nearly linear over the runs' speeds, and the LS's
   viscous took that part: held at the LS's, the amplitude came out at half the truth's on the twin). Samples at
   rest (``|v| <`` the regressor's Coulomb deadband, at least 1e-6 rad/s) are left out: there the friction is
   whatever holds the joint, not a function of ``v`` (:func:`fit_sigmoid`). The seed keeps the LS's ``viscous`` and
   ``torque_offset`` for the Coulomb law; :meth:`SigmoidSeed.start_values` (``seed_fit.py --law sigmoid``) gives
   the sigmoid fit's own.
3. **Weakly determined joints** are named: the slope and offset are fixed only by the samples inside the sigmoid's
   ramp (``|v + phi3| < 2 / phi2``, where it is between 12 % and 88 % of its swing); fewer than
   :data:`MIN_RAMP_SAMPLES` there, or a slope or offset at its bound, and the joint's sigmoid is flagged with why.

``f`` is the torque the motor spends on friction; the replay's sigmoid law applies its negative to the joint
(``sim/friction.py``), the same sign. :func:`sigmoid_seed_from_rb_params` re-reads the identification runs an
``rb_params.json`` records (its ``preprocessing`` entries: file and options), rebuilds the regressor and runs 1-3
with the SDP reconstruction's standard parameters, the values the rest of the seed comes from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.optimize

from isaaclab_sysid.objective.param_space import DEFAULT_BOUNDS
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions, Processed

#: the sigmoid law's groups, in the order of phi1, phi2, phi3
SIGMOID_GROUPS = ("sigmoid_amplitude", "sigmoid_slope", "sigmoid_offset")
#: fewer samples than this inside a joint's ramp (|v + phi3| < 2 / phi2) and its slope and offset are weakly determined
MIN_RAMP_SAMPLES = 50
#: starting slopes [s/rad] of the multi-start (each clipped into the slope's bounds)
START_SLOPES = (3.0, 10.0, 30.0, 100.0)


@dataclass(frozen=True)
class FrictionSamples:
    """The friction torque the rigid-body LS attributes to friction, stacked over the identification runs.

    Attributes:
        qd: (M, N) joint velocity [rad/s].
        tau: (M, N) friction torque [N m]: the LS's Coulomb and viscous terms plus its residual.
        coulomb, viscous, offset: (N,) the LS's Coulomb [N m], viscous [N m s/rad] and offset [N m] terms.
        runs: how many runs were stacked.
    """

    qd: np.ndarray
    tau: np.ndarray
    coulomb: np.ndarray
    viscous: np.ndarray
    offset: np.ndarray
    runs: int


@dataclass(frozen=True)
class SigmoidSeed:
    """Each joint's Gaz sigmoid fitted to the LS's friction torque.

    Attributes:
        values: group -> (N,): ``sigmoid_amplitude`` phi1 [N m], ``sigmoid_slope`` phi2 [s/rad], ``sigmoid_offset``
            phi3 [rad/s].
        viscous: (N,) the sigmoid fit's own viscous term [N m s/rad].
        torque_offset: (N,) the sigmoid fit's own constant [N m], in the LS offset's convention (logged = model +
            offset).
        rms_sigmoid, rms_coulomb: (N,) RMS [N m] over the moving samples of the friction torque less the fitted
            sigmoid + viscous + constant, and less the LS's ``Fc sign(v) + Fv v + F0``.
        ramp_samples: (N,) samples inside each joint's ramp, ``|v + phi3| < 2 / phi2``.
        samples: (N,) moving samples fitted per joint (``|v|`` above the deadband).
        weak: joint name -> why its sigmoid is weakly determined (absent: determined).
        bounds: group -> (lower, upper) the fit stayed within.
    """

    values: dict[str, np.ndarray]
    viscous: np.ndarray
    torque_offset: np.ndarray
    rms_sigmoid: np.ndarray
    rms_coulomb: np.ndarray
    ramp_samples: np.ndarray
    samples: np.ndarray
    weak: dict[str, str] = field(default_factory=dict)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    def start_values(self) -> dict[str, np.ndarray]:
        """The sigmoid law's start, group -> (N,): ``sigmoid_*``, the fit's own ``viscous`` and ``torque_offset``."""
        return {**{g: v.copy() for g, v in self.values.items()}, "viscous": self.viscous.copy(),
                "torque_offset": self.torque_offset.copy()}

    def to_json(self, joint_names: Sequence[str]) -> dict:
        """The seed file's ``sigmoid_fit`` entry: per joint, the numbers, the fit's RMS, the ramp count, the verdict."""
        return {
            "what": "each joint's Gaz sigmoid + viscous + constant fitted to the LS's friction torque (Coulomb + "
                    "viscous + offset + residual) against qd (rigid_body/friction_seed.py); viscous and torque_offset "
                    "here are the sigmoid law's own (seed_fit.py --law sigmoid writes them into best_params_decoded)",
            "bounds": {g: list(b) for g, b in self.bounds.items()},
            "joints": {
                j: {"sigmoid_amplitude": float(self.values["sigmoid_amplitude"][i]),
                    "sigmoid_slope": float(self.values["sigmoid_slope"][i]),
                    "sigmoid_offset": float(self.values["sigmoid_offset"][i]),
                    "viscous": float(self.viscous[i]), "torque_offset": float(self.torque_offset[i]),
                    "rms_sigmoid": float(self.rms_sigmoid[i]),
                    "rms_coulomb": float(self.rms_coulomb[i]), "ramp_samples": int(self.ramp_samples[i]),
                    "samples": int(self.samples[i]), "weak": self.weak.get(j)}
                for i, j in enumerate(joint_names)
            },
        }


def sigmoid_torque(v: np.ndarray, phi1: float, phi2: float, phi3: float) -> np.ndarray:
    """The Gaz sigmoid [N m] at velocities ``v`` [rad/s] (any shape): phi1 (sigma(phi2 (v + phi3)) - sigma(phi2 phi3));
    0 at v = 0. The replay's sigmoid law applies its negative."""
    v = np.asarray(v, dtype=float)
    return phi1 * (_logistic(phi2 * (v + phi3)) - _logistic(phi2 * phi3))


def _logistic(x: np.ndarray | float) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def friction_torque(reg, runs: Sequence[Processed], pi: np.ndarray, signal: str,
                    gains: np.ndarray | None = None) -> FrictionSamples:
    """The torque the identified model attributes to friction and offset, on each run's samples.

    Args:
        reg: the identification's :class:`~isaaclab_sysid.robots.regressor.Regressor` (with Coulomb and viscous
            columns).
        runs: the preprocessed identification runs (``q``, ``qd``, ``qdd`` (T, N) and ``signals[signal]`` (T, N)).
        pi: (P,) the identified standard parameters (torque units).
        signal: the output signal's name; a motor current [A] when ``gains`` is given, else a torque [N m].
        gains: (N,) drive gains [N m/A] of a current output, None for a torque output.

    Returns:
        The velocity and the measured torque less the identified link inertials and armature, (M, N) each (the LS's
        Coulomb, viscous and offset terms plus its residual).
    """
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (reg.n_params,):
        raise ValueError(f"pi must be ({reg.n_params},); got {pi.shape}")
    for term in ("coulomb", "viscous"):
        if term not in reg.joint_terms:
            raise ValueError(f"the regressor has no {term} column: the LS attributes no torque to friction")
    if not runs:
        raise ValueError("friction_torque needs at least one run")
    rest = pi.copy()
    for term in ("coulomb", "viscous", "offset"):
        if term in reg.joint_terms:
            rest[reg.term_slice(term)] = 0.0
    offset = pi[reg.term_slice("offset")].copy() if "offset" in reg.joint_terms else np.zeros(reg.n_dof)
    g = None if gains is None else np.asarray(gains, dtype=float)
    qds, taus = [], []
    for p in runs:
        y = np.asarray(p.signals[signal], dtype=float)
        measured = y * g[None, :] if g is not None else y
        model = (reg.rows(p.q, p.qd, p.qdd) @ rest)
        qds.append(np.asarray(p.qd, dtype=float))
        taus.append(measured - model)
    return FrictionSamples(np.vstack(qds), np.vstack(taus), pi[reg.term_slice("coulomb")].copy(),
                           pi[reg.term_slice("viscous")].copy(), offset, len(runs))


def _bounds_of(bounds: Mapping[str, tuple[float, float]] | None) -> dict[str, tuple[float, float]]:
    out = {g: tuple(map(float, DEFAULT_BOUNDS[g])) for g in (*SIGMOID_GROUPS, "viscous")}
    for g, b in (bounds or {}).items():
        if g in out:
            lo, hi = float(b[0]), float(b[1])
            if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                raise ValueError(f"{g} bounds must be finite with lower < upper; got {b}")
            out[g] = (lo, hi)
    if out["sigmoid_slope"][0] <= 0:
        raise ValueError(f"sigmoid_slope bounds must be above 0 s/rad; got {out['sigmoid_slope']}")
    return out


def _fit_joint(v: np.ndarray, f: np.ndarray, fc: float, fv: float, b: dict[str, tuple[float, float]]) -> np.ndarray:
    """(phi1, phi2, phi3, Fv, C) of one joint, ``f ~ phi1 sigma(phi2 (v + phi3)) + Fv v + C``: least squares from the
    multi-start over :data:`START_SLOPES`, the lowest cost."""
    big = 1e6 * (1.0 + float(np.max(np.abs(f))))
    lo = np.array([b[g][0] for g in (*SIGMOID_GROUPS, "viscous")] + [-big])
    hi = np.array([b[g][1] for g in (*SIGMOID_GROUPS, "viscous")] + [big])
    scale = max(float(np.std(f)), 1e-9)

    def resid(x: np.ndarray) -> np.ndarray:
        return (x[0] * _logistic(x[1] * (v + x[2])) + x[3] * v + x[4] - f) / scale

    a0 = 2.0 * fc if fc > 0 else 2.0 * float(np.mean(np.abs(f - np.mean(f))))  # at offset 0 it tends to phi1 / 2
    best, best_cost = None, np.inf
    for s0 in START_SLOPES:
        x0 = np.clip([a0, s0, 0.0, fv, float(np.mean(f)) - 0.5 * a0], lo, hi)
        pad = 1e-9 * (hi - lo)
        x0 = np.minimum(np.maximum(x0, lo + pad), hi - pad)
        r = scipy.optimize.least_squares(resid, x0, bounds=(lo, hi), x_scale="jac", max_nfev=300)
        if r.cost < best_cost:
            best, best_cost = r.x, r.cost
    return np.asarray(best, dtype=float)


def fit_sigmoid(samples: FrictionSamples, joint_names: Sequence[str],
                bounds: Mapping[str, tuple[float, float]] | None = None, deadband: float = 1e-3) -> SigmoidSeed:
    """Each joint's Gaz sigmoid + viscous + constant fitted to ``samples``, within ``bounds``.

    Args:
        samples: the LS's friction torque (:func:`friction_torque`).
        joint_names: (N,) names, for the weak-joint verdicts.
        bounds: group -> (lower, upper) for ``sigmoid_amplitude``, ``sigmoid_slope``, ``sigmoid_offset`` and
            ``viscous`` (default: the replay fit's default bounds, ``objective/param_space.GROUPS``); give the replay
            fit's own bounds.
        deadband: |v| [rad/s] below which a sample counts as at rest and is left out (at least 1e-6).
    """
    b = _bounds_of(bounds)
    n = samples.qd.shape[1]
    if len(joint_names) != n:
        raise ValueError(f"{len(joint_names)} joint names for {n} joints")
    vals = {g: np.zeros(n) for g in SIGMOID_GROUPS}
    visc, off = samples.viscous.copy(), samples.offset.copy()
    rms_s, rms_c, ramp, count = np.zeros(n), np.zeros(n), np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    weak: dict[str, str] = {}
    eps = max(float(deadband), 1e-6)
    for j, name in enumerate(joint_names):
        v_all, f_all = samples.qd[:, j], samples.tau[:, j]
        moving = np.abs(v_all) >= eps
        v, f = v_all[moving], f_all[moving]
        count[j] = v.size
        if v.size < 10:
            weak[name] = f"{v.size} moving samples: not seeded from data (the fit's default start)"
            vals["sigmoid_amplitude"][j] = b["sigmoid_amplitude"][0]
            vals["sigmoid_slope"][j] = min(max(10.0, b["sigmoid_slope"][0]), b["sigmoid_slope"][1])
            vals["sigmoid_offset"][j] = min(max(0.0, b["sigmoid_offset"][0]), b["sigmoid_offset"][1])
            continue
        x = _fit_joint(v, f, float(samples.coulomb[j]), float(samples.viscous[j]), b)
        phi = x[:3]
        for g, val in zip(SIGMOID_GROUPS, phi):
            vals[g][j] = val
        visc[j] = x[3]
        off[j] = x[4] + phi[0] * float(_logistic(phi[1] * phi[2]))  # the Gaz form is 0 at v = 0: its constant
        fitted = sigmoid_torque(v, *phi) + visc[j] * v + off[j]
        rms_s[j] = float(np.sqrt(np.mean((f - fitted) ** 2)))
        ls = samples.coulomb[j] * np.sign(v) + samples.viscous[j] * v + samples.offset[j]
        rms_c[j] = float(np.sqrt(np.mean((f - ls) ** 2)))
        ramp[j] = int(np.count_nonzero(np.abs(v + phi[2]) < 2.0 / phi[1]))
        why = []
        if ramp[j] < MIN_RAMP_SAMPLES:
            why.append(f"{ramp[j]} samples inside its ramp |v + phi3| < {2.0 / phi[1]:.3g} rad/s (fewer than "
                       f"{MIN_RAMP_SAMPLES}: little data near v = 0)")
        for g, val in zip((*SIGMOID_GROUPS, "viscous"), x[:4]):
            lo, hi = b[g]
            tol = 1e-3 * (hi - lo)
            if g in ("sigmoid_slope", "sigmoid_offset") and (val <= lo + tol or val >= hi - tol):
                why.append(f"{g} {val:.4g} at its {'lower' if val <= lo + tol else 'upper'} bound")
            if g in ("sigmoid_amplitude", "viscous") and val >= hi - tol:
                why.append(f"{g} {val:.4g} at its upper bound {hi:g} (widen it)")
        if why:
            weak[name] = "; ".join(why)
    return SigmoidSeed(vals, visc, off, rms_s, rms_c, ramp, count, weak, b)


def _load_run(record: dict, signal: str) -> Processed:
    """One identification run re-read and preprocessed as its ``preprocessing`` record says."""
    from isaaclab_sysid.data import read_run
    from isaaclab_sysid.rigid_body.pipeline import load_ur10e_processed
    from isaaclab_sysid.rigid_body.runs_input import process_run

    source = record.get("source")
    if not source or not Path(source).is_file():
        raise ValueError(f"identification run {source!r} not found (the sigmoid is seeded from the runs the LS used)")
    opt = PreprocessOptions(**record["options"])
    if signal == "current":
        return load_ur10e_processed(Path(source), opt, int(record.get("dropped_corrupt_head_rows") or 0))
    logged_velocity = "logged velocity" in str(record.get("derivatives", ""))
    return process_run(read_run(source), opt, signal, logged_velocity)


def sigmoid_seed_from_rb_params(path: str | Path, joint_names: Sequence[str],
                                bounds: Mapping[str, tuple[float, float]] | None = None) -> SigmoidSeed:
    """Each joint's sigmoid from an ``rb_params.json``: its identification runs re-read (its ``preprocessing``
    records), its regressor rebuilt, the SDP standard parameters' friction torque fitted (:func:`fit_sigmoid`).

    Raises:
        ValueError: the file lacks what this needs, a run is gone, or the regressor's columns differ from the file's
            (the message says which).
    """
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.robots.identified import RbParams
    from isaaclab_sysid.robots.regressor import Regressor, RegressorOptions

    rb = RbParams.read(path)
    rb.need("robot", "signal", "param_names", "regressor_options", "standard", "preprocessing")
    robot = load_robot(rb.robot)
    if tuple(robot.joint_names) != tuple(joint_names):
        raise ValueError(f"{rb.path}: robot {rb.robot} has joints {list(robot.joint_names)}, the seed "
                         f"{list(joint_names)}")
    reg = Regressor(robot, RegressorOptions(**rb.regressor_options))
    if tuple(reg.param_names) != tuple(rb.param_names):
        raise ValueError(f"{rb.path}: the rebuilt regressor's columns differ from the file's (another robot config?)")
    missing = [n for n in reg.param_names if n not in rb.standard]
    if missing:
        raise ValueError(f"{rb.path}: reconstruction.standard has no {missing[0]!r}")
    pi = np.array([rb.standard[n] for n in reg.param_names])
    gains = None
    if rb.signal == "current":
        body = json.loads(Path(rb.path).read_text(encoding="utf-8"))
        g = (body.get("output") or {}).get("drive_gains")
        if g is None:
            raise ValueError(f"{rb.path}: a current output without output.drive_gains")
        gains = np.asarray(g, dtype=float)
    runs = [_load_run(r, rb.signal) for r in rb.preprocessing]
    samples = friction_torque(reg, runs, pi, rb.signal, gains)
    return fit_sigmoid(samples, joint_names, bounds, deadband=float(rb.regressor_options.get("coulomb_deadband", 0.0)))
