"""The rigid-body verdict's causes, each tested against the data where it can be, ranked on the evidence (issue 43).

Causes and their tests:

* **what the arm carried** (:mod:`.carried`): the last body's identified lumped mass against every config of the
  arm. Supported when it names another config (or no config: a tool to state).
* **gravity in the signal**: the LS is refitted with gravity flipped (out of the model when it was in, in when it
  was out; on at most :data:`FLIP_SAMPLES` samples); the residual RMS of both, pooled over joints, decides: the flipped fit at most :data:`FLIP_BETTER` x the
  assumed one supports the flip, at least :data:`FLIP_WORSE` x refutes it, between is inconclusive.
* **a constant torque bias**: the LS offsets (logged = model + offset, HAC standard errors) that are significant
  (:data:`BIAS_Z`) are fitted by the patterns a change of end effector or of gravity leaves over the runs' poses
  (:mod:`isaaclab_sysid.robots.end_effector`); a pattern that explains it supports that change; a significant bias
  no pattern explains is a sensor offset, which the offset columns take (refuted as a cause); none: refuted.
  Without offset columns, the LS residual's per-joint mean is the bias.
* **the robot's kinematics** and **the friction model**: not tested (listed, untested).

Ranked: supported causes first, then inconclusive and untested, then refuted; each with its one-line fix. Among the
supported, gravity comes first (the masses and the offsets the other tests read come from an LS fitted with that
gravity), then by strength (the carried mass: 1 + its relative distance from the config's; a bias: the share of it
the pattern explains).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from isaaclab_sysid.rigid_body.base_params import compute_base_parameters
from isaaclab_sysid.rigid_body.carried import CarriedEvidence
from isaaclab_sysid.rigid_body.estimate import estimate
from isaaclab_sysid.robots.end_effector import PatternFit, explain_bias, mean_gravity, variant_gravity
from isaaclab_sysid.robots.regressor import Regressor

#: the flipped-gravity LS residual at most this fraction of the assumed one supports the flip ...
FLIP_BETTER = 0.8
#: ... and at least this multiple refutes it
FLIP_WORSE = 1.25
#: the flipped refit uses at most this many samples (every k-th of the identification runs)
FLIP_SAMPLES = 20000
#: |offset / HAC std| above which a joint's constant torque bias counts
BIAS_Z = 4.0
#: a supported gravity cause's strength starts here, above any other's (they are at most 1 + a relative mass error)
GRAVITY_FIRST = 100.0
#: the order of statuses in the ranking
STATUS_ORDER = ("supported", "inconclusive", "untested", "refuted")


@dataclass(frozen=True)
class Cause:
    """One listed cause of a rejected (or warned) verdict, with what the data said about it.

    Attributes:
        key: "carried", "gravity", "bias", "robot" or "friction".
        status: "supported", "inconclusive", "untested" or "refuted".
        text: the cause and its evidence, one line (starts with the cause's name).
        fix: the one-line fix.
        strength: ranks supported causes (larger first): how decisively the data chose.
        evidence: the figures behind it (JSON-ready).
    """

    key: str
    status: str
    text: str
    fix: str
    strength: float = 0.0
    evidence: dict = field(default_factory=dict)

    def line(self) -> str:
        """``<text> [<status>]; fix: <fix>``."""
        return f"{self.text} [{self.status}]; fix: {self.fix}"

    def summary(self) -> dict:
        return {"key": self.key, "status": self.status, "text": self.text, "fix": self.fix,
                "strength": self.strength, "evidence": self.evidence}


def rank(causes: list[Cause]) -> list[Cause]:
    """Supported (strongest first), inconclusive, untested, refuted; stable within a status."""
    return sorted(causes, key=lambda c: (STATUS_ORDER.index(c.status), -c.strength if c.status == "supported" else 0))


def _pooled(sigma_joint: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(sigma_joint))))


def gravity_cause(res, source: str = "") -> Cause:
    """Refit the LS with gravity flipped and compare the residuals (module docstring).

    Args:
        res: the :class:`~isaaclab_sysid.rigid_body.pipeline.RigidBodyIdentification`.
        source: where the gravity choice came from (printed).
    """
    data, reg, opt = res.data, res.regressor, res.options
    flipped = Regressor(reg.robot, dataclasses.replace(reg.options, gravity=not reg.options.gravity))
    base = compute_base_parameters(flipped, opt.base_samples, opt.base_seed)
    total = sum(p.q.shape[0] for p in data.ident)
    k = max(1, int(np.ceil(total / FLIP_SAMPLES)))  # every k-th sample: a residual's size needs no more
    W = np.vstack([base.columns(flipped.matrix(p.q[::k], p.qd[::k], p.qdd[::k], data.gains)) for p in data.ident])
    y = np.concatenate([p.signals[data.signal][::k].ravel() for p in data.ident])
    fit = estimate(W, y, reg.n_dof, "ols")
    assumed, other = _pooled(res.fit.sigma_joint), _pooled(fit.sigma_joint)
    ratio = other / max(assumed, 1e-300)
    has = "with" if reg.options.gravity else "without"
    flip = "without" if reg.options.gravity else "with"
    unit = data.unit
    where = f" ({source})" if source else ""
    evidence = {"assumed_gravity": reg.options.gravity, "residual_rms_assumed": assumed,
                "residual_rms_flipped": other, "ratio": ratio,
                "residual_per_joint_assumed": res.fit.sigma_joint.tolist(),
                "residual_per_joint_flipped": fit.sigma_joint.tolist()}
    flag = "--no-tau-includes-gravity" if reg.options.gravity else "--tau-includes-gravity"
    fix = (f"{flag} where the files do not say, else correct the runs' sidecars (summary.includes_gravity)"
           if data.unit != "A" else "none on the command line: a motor current holds gravity (check the log's columns)")
    lead = f"gravity in the signal: the model took {data.signal} {has} gravity{where}"
    figures = (f"the LS residual is {assumed:.3g} {unit} RMS as taken, {other:.3g} {unit} {flip} gravity "
               f"({ratio:.2f}x)")
    if ratio <= FLIP_BETTER:  # first of all: every other test reads an LS fitted with this gravity
        return Cause("gravity", "supported", f"{lead}, but the data say {flip}: {figures}", fix,
                     GRAVITY_FIRST + 1.0 / ratio, evidence)
    if ratio >= FLIP_WORSE:
        return Cause("gravity", "refuted", f"{lead}, as the data say: {figures}", "none needed", 0.0, evidence)
    return Cause("gravity", "inconclusive", f"{lead}; the data barely tell: {figures}",
                 f"runs that move the arm against gravity (larger joint 2/4 swings); {fix}", 0.0, evidence)


def ls_offsets(res) -> tuple[np.ndarray, np.ndarray, str]:
    """The per-joint constant bias the LS found: (N,) offsets [N m] (the parameters are in torque units whatever the
    output), (N,) HAC std (inf where grouped), and what they are. Without offset columns: the LS residual's per-joint
    mean on the identification runs (times the drive gains of a current output) and its std over the effective
    samples (rows / HAC window)."""
    reg, base = res.regressor, res.base
    n = reg.n_dof
    if "offset" in reg.joint_terms:
        sl = reg.term_slice("offset")
        bias, std = np.zeros(n), np.full(n, np.inf)
        where = {int(k): i for i, k in enumerate(base.independent)}
        for j, k in enumerate(range(sl.start, sl.stop)):
            if k in where:
                i = where[k]
                bias[j], std[j] = res.fit.theta[i], float(np.sqrt(res.cov_hac[i, i]))
        return bias, std, "the LS offsets"
    data = res.data
    r = []
    for p in data.ident:
        W = base.columns(reg.matrix(p.q, p.qd, p.qdd, data.gains))
        r.append((p.signals[data.signal].ravel() - W @ res.fit.theta).reshape(-1, n))
    r = np.vstack(r)
    eff = max(r.shape[0] / max(res.hac_lags, 1), 1.0)
    k = np.ones(n) if data.gains is None else np.asarray(data.gains, dtype=float)
    return k * r.mean(axis=0), k * r.std(axis=0) / np.sqrt(eff), "the LS residual's mean (no offset columns)"


def _ident_poses(res, every: int = 10) -> np.ndarray:
    """(K, N) every ``every``-th pose of the identification runs [rad]."""
    return np.vstack([p.q[::every] for p in res.data.ident])


def bias_cause(res) -> Cause:
    """Test the LS's constant torque bias against a change of end effector and of gravity (module docstring)."""
    reg = res.regressor
    names = reg.robot.joint_names
    bias, std, what = ls_offsets(res)
    z = bias / std
    sig = [j for j in range(bias.size) if np.isfinite(z[j]) and abs(z[j]) > BIAS_Z]
    evidence = {"bias": bias.tolist(), "std": std.tolist(), "what": what, "significant": [names[j] for j in sig]}
    if not sig:
        return Cause("bias", "refuted", f"a constant torque bias: {what} are within {BIAS_Z:g} standard errors of 0",
                     "none needed", 0.0, evidence)
    listed = ", ".join(f"{names[j]} {bias[j]:+.3g} N m (z {z[j]:.1f})" for j in sig)
    q = _ident_poses(res)
    patterns = dict(variant_gravity(reg.robot, q))
    patterns["gravity"] = (mean_gravity(reg.robot, q) * (1.0 if not reg.options.gravity else -1.0), "")
    fits: list[PatternFit] = explain_bias(bias, np.where(np.isfinite(std), std, 1e12), patterns)
    evidence["patterns"] = [f.summary() for f in fits]
    best = fits[0] if fits[0].named else None
    if best is None:
        near = (f" (nearest: {fits[0].name} explains {100 * max(fits[0].explained, 0.0):.0f} % at scale "
                f"{fits[0].scale:.2f})" if fits else "")
        return Cause("bias", "refuted", f"a constant torque bias on {listed}: no change of end effector or of gravity "
                     f"explains its pattern over the poses{near}; what is left is an offset, which the offset columns "
                     "fit",
                     "none needed (the offset columns take it; the replay's --fit_groups ...,torque_offset)",
                     0.0, evidence)
    share = f"{100 * best.explained:.0f} % of it (scale {best.scale:.2f})"
    if best.name == "gravity":
        other = "--no-tau-includes-gravity" if reg.options.gravity else "--tau-includes-gravity"
        return Cause("bias", "supported", f"a constant torque bias on {listed}: the mean gravity of the arm over the "
                     f"runs' poses explains {share}: the signal's gravity is not what the model took",
                     f"{other} where the files do not say, else correct the runs' sidecars", best.explained, evidence)
    return Cause("bias", "supported", f"a constant torque bias on {listed}: the end effector of {best.name} "
                 f"({best.carries}) explains {share} by its gravity over the runs' poses",
                 f"--robot {best.name} (and the same --robot to every later stage)", best.explained, evidence)


def carried_cause(evidence: CarriedEvidence | None) -> Cause:
    """:mod:`.carried`'s evidence as a cause (supported when it names a config or asks for a tool)."""
    if evidence is None:
        return Cause("carried", "untested", "what the arm carried: the last body is not among the identified links",
                     "state the end effector (--robot)")
    line = evidence.cause()
    if line is None:
        return Cause("carried", "refuted", f"what the arm carried: {evidence.body} identified at "
                     f"{evidence.identified:.3f} kg with its fixed children, the config {evidence.robot} says "
                     f"{evidence.config:.3f} kg", "none needed", 0.0, evidence.summary())
    text, _, fix = line.partition("; identify with ")
    if not fix:
        text, _, fix = line.partition("; state what it carries: ")
    off = abs(evidence.identified - evidence.config) / max(evidence.config, 1e-12)
    return Cause("carried", "supported", text, fix, 1.0 + off, evidence.summary())


def untested_causes(res) -> list[Cause]:
    """The causes no test here can decide: the robot's kinematics and the friction model."""
    reg = res.regressor
    return [
        Cause("robot", "untested", f"wrong robot: {reg.robot.name} ({reg.robot.config.source}); its kinematics, fixed "
              "links and joint order must be the arm's", "--robot <the arm's config>"),
        Cause("friction", "untested", f"friction model: per joint {', '.join(reg.joint_terms)}; a friction the "
              "columns cannot follow (static friction, Stribeck, position-dependent) lands in the inertials",
              "--coulomb-deadband, longer or faster runs"),
    ]


def ranked_causes(res, evidence: CarriedEvidence | None, gravity_source: str = "") -> list[Cause]:
    """Every cause tested (module docstring) and ranked."""
    return rank([carried_cause(evidence), gravity_cause(res, gravity_source), bias_cause(res), *untested_causes(res)])
