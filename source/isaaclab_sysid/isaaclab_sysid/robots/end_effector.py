"""Does an end-effector error or a gravity error explain a constant torque bias? (issue 43)

A constant per-joint torque bias b (N,) [N m] found in a residual (the LS offsets of a rigid-body identification, a
torque replay's offset shape) is the average, over the run's poses, of whatever torque the model gets wrong. Two
inertial errors leave a bias of a known *pattern* over the poses:

* **the end effector**: the arm carried another end effector than the config states (a hand that is absent, a tool
  not stated). Its pattern is the mean over the poses of ``g_variant(q) - g_config(q)``, the gravity torque another
  config of the same arm adds (``configs/robots``: ``franka_panda`` with the Franka Hand, ``franka_panda_nohand``
  without), both at their URDF inertials: only the end effector differs;
* **a mass at the flange** no config states: the mean gravity torque of 1 kg at the EE point (:func:`flange_gravity`);
  its scale is the mass [kg] the arm carries beyond its config (negative: less);
* **gravity**: the signal holds gravity and the model does not, or the reverse: the mean of the arm's own g(q).

:func:`explain_bias` fits each pattern to b with one scale (weighted by the bias's standard errors) and says how
much of b it explains; :data:`EXPLAINED_MIN` of it, at a scale in :data:`SCALE_RANGE`, names that pattern.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.robots.config import RobotConfigError, arm_variants
from isaaclab_sysid.robots.robot import Robot, load_robot

#: the share of the bias (weighted sum of squares) a pattern must explain to be named
EXPLAINED_MIN = 0.8
#: the scale a named pattern may take: a replay's drift is resisted by friction and damping, so the bias it reads is
#: 50-95 % of the torque error (evaluate/torque_residual.py); a mass error of a tool needs no exact match either
SCALE_RANGE = (0.65, 1.35)
#: the pattern name of a point mass at the flange (:func:`flange_gravity`) and the smallest mass [kg] it names
FLANGE_MASS = "flange_mass"
FLANGE_MASS_MIN = 0.05


def mean_gravity(robot: Robot, q: np.ndarray) -> np.ndarray:
    """(N,) the mean over the poses ``q`` (K, N) [rad] of ``robot``'s gravity torque g(q) [N m] (Pinocchio)."""
    import pinocchio as pin

    model = robot.build_pinocchio(gravity=True)
    data = model.createData()
    q = np.atleast_2d(np.asarray(q, dtype=float))
    return np.mean([pin.computeGeneralizedGravity(model, data, qk) for qk in q], axis=0)


def flange_gravity(robot: Robot, q: np.ndarray) -> np.ndarray:
    """(N,) the mean over the poses ``q`` (K, N) [rad] of the torque [N m per kg] that holds 1 kg at ``robot``'s EE
    point against gravity: ``J_v(q)^T [0, 0, 9.81]`` (Pinocchio, world-aligned linear Jacobian)."""
    import pinocchio as pin

    from isaaclab_sysid.robots.robot import EE_NAME

    model = robot.build_pinocchio(gravity=True)
    data = model.createData()
    frame = model.getFrameId(EE_NAME)
    up = -np.asarray(model.gravity.linear, dtype=float)
    out = []
    for qk in np.atleast_2d(np.asarray(q, dtype=float)):
        J = pin.computeFrameJacobian(model, data, qk, frame, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        out.append(J[:3].T @ up)
    return np.mean(out, axis=0)


def _config_robot(robot: Robot) -> Robot:
    """``robot``'s config at its URDF inertials (identified overrides dropped): what the variants are compared to."""
    return load_robot(robot.config.source) if robot.config.source is not None else robot


def variant_gravity(robot: Robot, q: np.ndarray) -> dict[str, tuple[np.ndarray, str]]:
    """The end-effector patterns over the poses ``q`` (K, N): every other config of ``robot``'s arm -> ((N,) mean of
    ``g_variant(q) - g_config(q)`` [N m], what that config carries). Empty when the arm has no other config."""
    own = _config_robot(robot)
    g_own = None
    out: dict[str, tuple[np.ndarray, str]] = {}
    for path in arm_variants(robot.config):
        if path.stem == own.name:
            continue
        try:
            other = load_robot(path)
        except (RobotConfigError, ValueError):
            continue
        if other.joint_names != robot.joint_names:
            continue
        if g_own is None:
            g_own = mean_gravity(own, q)
        out[other.name] = (mean_gravity(other, q) - g_own, other.carries)
    return out


@dataclass(frozen=True)
class PatternFit:
    """One pattern fitted to a bias: ``bias ~ scale x pattern``.

    Attributes:
        name: the pattern (a config name, ``"gravity"`` or :data:`FLANGE_MASS`); carries: what that config carries
            ("" otherwise).
        pattern: (N,) [N m] (per kg for :data:`FLANGE_MASS`); scale: the fitted scale (the mass [kg] for
            :data:`FLANGE_MASS`); explained: the share of the bias's weighted sum of squares it explains
            (1 - |b - s p|^2_w / |b|^2_w; may be negative).
    """

    name: str
    carries: str
    pattern: np.ndarray
    scale: float
    explained: float

    @property
    def named(self) -> bool:
        """Whether this pattern explains the bias: :data:`EXPLAINED_MIN` of it, at a scale in :data:`SCALE_RANGE`
        (a flange mass: any mass of at least :data:`FLANGE_MASS_MIN`)."""
        if self.explained < EXPLAINED_MIN:
            return False
        if self.name == FLANGE_MASS:
            return abs(self.scale) >= FLANGE_MASS_MIN
        return SCALE_RANGE[0] <= self.scale <= SCALE_RANGE[1]

    def summary(self) -> dict:
        return {"name": self.name, "carries": self.carries, "pattern_nm": self.pattern.tolist(), "scale": self.scale,
                "explained": self.explained, "named": self.named}


def fit_pattern(bias: np.ndarray, se: np.ndarray, pattern: np.ndarray, name: str, carries: str = "") -> PatternFit:
    """Fit ``bias`` (N,) [N m] with standard errors ``se`` (N,) by ``scale x pattern`` (N,), weighted by 1/se^2."""
    b, p = np.asarray(bias, dtype=float), np.asarray(pattern, dtype=float)
    w = 1.0 / np.maximum(np.asarray(se, dtype=float), 1e-12) ** 2
    pp = float(np.sum(w * p * p))
    scale = float(np.sum(w * b * p) / pp) if pp > 0 else 0.0
    bb = float(np.sum(w * b * b))
    explained = 1.0 - float(np.sum(w * (b - scale * p) ** 2)) / bb if bb > 0 else 0.0
    return PatternFit(name, carries, p, scale, explained)


def explain_bias(bias: np.ndarray, se: np.ndarray, patterns: dict[str, tuple[np.ndarray, str]]) -> list[PatternFit]:
    """Every pattern (name -> ((N,) pattern [N m], carries)) fitted to ``bias`` (N,) [N m] (standard errors ``se``),
    best explanation first."""
    fits = [fit_pattern(bias, se, p, name, carries) for name, (p, carries) in patterns.items()]
    return sorted(fits, key=lambda f: (not f.named, -f.explained))
