"""Pose design for the payload: poses that make its mass and centre separable.

At one static pose the payload's gravity wrench at the link has only three independent
components that depend on it (the force m g and the two components of m c x g
perpendicular to gravity), so one pose cannot separate mass and centre: the centre's
component along gravity is invisible. Turning the last link between poses makes
every component visible. The design chooses, from random candidate poses inside the
joint limits (with a margin, the EE above ``z_min``), the set with the smallest
condition number of the scaled static regressor (greedy selection, then one exchange
sweep), and reports that condition number after each added pose.

Scaling: the unknowns are measured in the units a user cares about, the mass in
``mass_scale`` kg and the first moment in ``mass_scale x length_scale`` kg m (a
centre shift of ``length_scale`` m), so the condition number compares "1 kg" with
"10 cm" and does not depend on SI units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.excitation.conditioning import cond_of
from isaaclab_sysid.payload.holds import PayloadInputError
from isaaclab_sysid.payload.model import PayloadModel
from isaaclab_sysid.robots import Robot


@dataclass(frozen=True)
class DesignOptions:
    """How poses are chosen."""

    n_poses: int = 4
    """poses to choose (>= 2: one pose cannot separate mass and centre)"""
    n_candidates: int = 600
    """random candidate poses inside the joint limits"""
    margin: float = 0.3
    """distance kept from every joint limit [rad]"""
    z_min: float = 0.25
    """lowest EE height above the base [m] (table clearance)"""
    mass_scale: float = 1.0
    """expected payload mass [kg] (scales the condition number)"""
    length_scale: float = 0.1
    """centre-of-mass shift of interest [m] (scales the condition number)"""
    seed: int = 0
    """candidate seed"""

    def validate(self) -> None:
        if self.n_poses < 2:
            raise PayloadInputError(f"--n_poses must be >= 2 (one pose cannot separate mass and centre); got {self.n_poses}")
        if self.n_candidates < self.n_poses:
            raise PayloadInputError(f"--n_candidates must be >= --n_poses; got {self.n_candidates}")
        if not (self.mass_scale > 0 and self.length_scale > 0 and self.margin >= 0):
            raise PayloadInputError("--mass_scale and --length_scale must be > 0, --margin >= 0")


@dataclass
class PoseDesign:
    """Chosen poses and how well they separate the payload's parameters.

    Attributes:
        poses: (K, N) joint positions [rad].
        cond: condition number of the scaled static regressor of all K poses.
        cond_by_count: condition number after the first 1, 2, ..., K poses (inf: not separable yet).
        ee_z: (K,) EE height of each pose [m].
    """

    poses: np.ndarray
    cond: float
    cond_by_count: list[float]
    ee_z: np.ndarray


def scaled_static_regressor(model: PayloadModel, poses: np.ndarray, mass_scale: float, length_scale: float) -> np.ndarray:
    """(K N, 4) static regressor of (m, m c) at ``poses``, columns scaled to (mass_scale kg, mass_scale length_scale kg m)."""
    W = model.columns(np.atleast_2d(poses))[:, :, :4].reshape(-1, 4)
    return W * np.array([mass_scale] + [mass_scale * length_scale] * 3)


def poses_condition(model: PayloadModel, poses: np.ndarray, mass_scale: float = 1.0, length_scale: float = 0.1) -> float:
    """Condition number of the scaled static regressor at ``poses`` (K, N) (inf: not separable)."""
    return cond_of(scaled_static_regressor(model, poses, mass_scale, length_scale))


def design_poses(robot: Robot, options: DesignOptions = DesignOptions(), link: str | None = None,
                 start: np.ndarray | None = None) -> PoseDesign:
    """Choose ``n_poses`` static poses (greedy condition-number selection over random candidates; ``start`` is kept first if given)."""
    options.validate()
    o = options
    model = PayloadModel(robot, link)
    rng = np.random.default_rng(o.seed)
    lo, hi = robot.q_lower + o.margin, robot.q_upper - o.margin
    if np.any(hi <= lo):
        raise PayloadInputError(f"--margin {o.margin} rad leaves no room inside the joint limits")
    cand = rng.uniform(lo, hi, size=(o.n_candidates, robot.n_dof))
    z = np.array([robot.ee_pose(q)[0][2] for q in cand])
    cand, z = cand[z >= o.z_min], z[z >= o.z_min]
    if start is not None:
        cand = np.vstack([np.asarray(start, dtype=float)[None], cand])
        z = np.r_[robot.ee_pose(start)[0][2], z]
    if len(cand) < o.n_poses:
        raise PayloadInputError(f"only {len(cand)} candidate poses have the EE above --z_min {o.z_min} m; "
                                "lower it or raise --n_candidates")
    infos = np.stack([b.T @ b for b in (scaled_static_regressor(model, c, o.mass_scale, o.length_scale) for c in cand)])

    def cond_info(F: np.ndarray) -> float:
        ev = np.linalg.eigvalsh(F)
        return float(np.sqrt(ev[-1] / ev[0])) if ev[0] > 1e-12 * ev[-1] else np.inf

    # greedy: the first pose by its information (one pose is never separable), then the pose that
    # lowers the condition number most; then one exchange sweep (swap a pose for a better candidate)
    chosen: list[int] = [0] if start is not None else [int(np.argmax(np.trace(infos, axis1=1, axis2=2)))]
    while len(chosen) < o.n_poses:
        F = infos[chosen].sum(axis=0)
        eps = 1e-9 * np.trace(F) * np.eye(4)
        scores = [cond_info(F + infos[i] + eps) if i not in chosen else np.inf for i in range(len(cand))]
        chosen.append(int(np.argmin(scores)))
    best = cond_info(infos[chosen].sum(axis=0))
    for slot in range(1 if start is not None else 0, len(chosen)):
        rest = infos[[c for k, c in enumerate(chosen) if k != slot]].sum(axis=0)
        trial = [cond_info(rest + infos[i]) if i not in chosen else np.inf for i in range(len(cand))]
        k = int(np.argmin(trial))
        if trial[k] < best:
            chosen[slot], best = k, trial[k]
    poses = cand[chosen]
    by_count = [poses_condition(model, poses[: k + 1], o.mass_scale, o.length_scale) for k in range(len(chosen))]
    return PoseDesign(poses, by_count[-1], by_count, z[chosen])
