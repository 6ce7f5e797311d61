"""CLIE's options, checked before any file is read.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.rigid_body.options import require


#: Option -> the flag of ``scripts/refine_inertials.py`` that sets it.
FLAGS = {
    "bodies": "--bodies", "joint_terms": "--no-joint-terms", "ls_weight": "--ls-weight",
    "ls_consistency": "--no-ls-consistency", "prior_weight": "--prior-weight", "prior_rel_std": "--prior-rel-std",
    "stride": "--stride", "passes": "--passes", "max_iter": "--max-iter", "restarts": "--restarts",
    "fd_step": "--fd-step", "ftol": "--ftol",
    "hac_lag_s": "--hac-lag-s", "clamp_margin": "--clamp-margin", "audit_grid": "--audit-grid",
    "audit_uniform": "--audit-uniform", "audit_dense": "--audit-dense", "audit_seeds": "--seeds",
    "warmup_ticks": "--warmup-ticks",
}


@dataclass(frozen=True)
class ClieOptions:
    """Choices of one CLIE refinement (each checked by :meth:`validate`, naming its flag).

    Attributes:
        bodies: moving-body (link) names to refine; () = every moving body.
        joint_terms: refine armature, Coulomb and viscous friction jointly (else hold the joint fit's).
        ls_weight: weight of the LS base-parameter term (1: the LS data as they are; 0: replay only).
        ls_consistency: before each pass after the first, divide that weight by the LS term's variance
            factor (its Helmert variance component against the closed loop, when above 1), and scale the
            LS information in the sandwich by the final one: an LS estimate that disagrees with the
            closed loop by more than its covariance allows counts for what the disagreement says.
        prior_weight, prior_rel_std: the SDP's URDF prior on the refined bodies (:func:`.feasibility.prior_std`).
        stride: use every ``stride``-th logged sample of the input error (1 kHz logs: 10 -> 100 Hz).
        passes: least-squares passes; the per-joint noise level sigma is re-estimated before each one.
        max_iter: caps a pass at 3 x max_iter residual evaluations (about max_iter trust-region iterations).
        restarts: a least-squares attempt that still lowered the cost by more than
            :data:`.refinement.PROGRESS_COST` (it ran out of budget, or its trust region shrank against
            replays that diverge and ``ftol`` stopped it on a tiny step), or a first attempt that ran out
            of budget, is restarted from its end point with a fresh trust region, at most this many
            times per pass.
        fd_step: forward-difference step [log-Cholesky units; relative for the joint terms].
        ftol: relative cost change that ends a pass (default 1e-6).
        hac_lag_s: Newey-West window of the input-error scores [s].
        clamp_margin: with ``torque_clamp``, samples where a logged |tau| reaches this fraction of the
            robot's limit are left out (default 0.98).
        torque_clamp, slew_limit, warmup_ticks: replay options, as the joint fit's.
        audit_grid, audit_uniform, audit_dense, audit_seeds: the all-pose audit of the refined set.
        n_threads: replay threads (None: all cores).
    """

    bodies: tuple[str, ...] = ()
    joint_terms: bool = True
    ls_weight: float = 1.0
    ls_consistency: bool = True
    prior_weight: float = 1.0
    prior_rel_std: float = 0.3
    stride: int = 10
    passes: int = 2
    max_iter: int = 20
    restarts: int = 2
    fd_step: float = 1e-3
    ftol: float = 1e-6
    hac_lag_s: float = 0.5
    clamp_margin: float = 0.98
    torque_clamp: bool = False
    slew_limit: bool = False
    warmup_ticks: int = 50
    audit_grid: int = 3
    audit_uniform: int = 2000
    audit_dense: int = 1000
    audit_seeds: tuple[int, ...] = (0, 1, 2)
    n_threads: int | None = None

    def validate(self) -> "ClieOptions":
        """Check every option; returns ``self``.

        Raises:
            RigidBodyError: the first bad option, naming its flag.
        """
        def f(name: str) -> str:
            return FLAGS.get(name, name)

        for name in ("ls_weight", "prior_weight"):
            v = getattr(self, name)
            require(_finite(v) and v >= 0, f"{f(name)} must be a finite number >= 0; got {v!r}")
        for name in ("prior_rel_std", "fd_step", "ftol", "hac_lag_s"):
            v = getattr(self, name)
            require(_finite(v) and v > 0, f"{f(name)} must be a finite number > 0; got {v!r}")
        require(_finite(self.clamp_margin) and 0 < self.clamp_margin <= 1,
                f"{f('clamp_margin')} must be in (0, 1]; got {self.clamp_margin!r}")
        for name in ("stride", "passes", "max_iter", "audit_grid", "audit_uniform", "audit_dense"):
            v = getattr(self, name)
            require(isinstance(v, int) and v >= 1, f"{f(name)} must be a whole number >= 1; got {v!r}")
        require(isinstance(self.restarts, int) and not isinstance(self.restarts, bool) and self.restarts >= 0,
                f"{f('restarts')} must be a whole number >= 0; got {self.restarts!r}")
        require(isinstance(self.warmup_ticks, int) and self.warmup_ticks >= 0,
                f"{f('warmup_ticks')} must be a whole number >= 0; got {self.warmup_ticks!r}")
        require(len(self.audit_seeds) > 0, f"{f('audit_seeds')} needs at least one seed")
        require(len(set(self.bodies)) == len(self.bodies), f"{f('bodies')} names a body twice: {list(self.bodies)}")
        require(self.prior_weight > 0 or self.ls_weight > 0,
                f"{f('prior_weight')} and {f('ls_weight')} are both 0: the directions the closed loop does not "
                "see would be undetermined")
        return self


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))
