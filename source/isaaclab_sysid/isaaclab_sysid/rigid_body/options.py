"""The choices of one rigid-body identification, checked before any work starts.

:class:`PipelineOptions` holds every choice :func:`~isaaclab_sysid.rigid_body.pipeline.identify`
makes (estimator, base-parameter QR, audit pose set, SDP). :meth:`PipelineOptions.validate`
refuses a bad value with a :class:`RigidBodyError` naming the command-line flag
(``scripts/identify_rigid_body.py``) that sets it, so a typo costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from isaaclab_sysid.utils.errors import UserError

#: Estimators of :func:`~isaaclab_sysid.rigid_body.estimate.estimate`.
METHODS = ("ols", "wls", "tls", "iv")
#: SDP modes of :func:`~isaaclab_sysid.rigid_body.feasibility.reconstruct_standard`
#: ("penalized" is the earlier name of "map", still accepted).
SDP_MODES = ("map", "exact", "auto", "penalized")
#: Base-parameter covariances the SDP can use.
SDP_COVARIANCES = ("hac_conditioned", "hac", "ols")

#: Option -> the flag of ``identify_rigid_body.py`` that sets it (options without a flag keep their name).
FLAGS = {
    "method": "--method",
    "audit_grid": "--audit-grid",
    "audit_uniform": "--audit-uniform",
    "audit_dense": "--audit-dense",
    "audit_seeds": "--seeds",
    "sdp_mode": "--sdp-mode",
    "prior_rel_std": "--prior-rel-std",
    "prior_weight": "--prior-weight",
    "mass_upper_factor": "--mass-upper-factor",
    "mass_lower_factor": "--mass-lower-factor",
    "sdp_covariance": "--sdp-covariance",
    "hac_lag_s": "--hac-lag-s",
}


class RigidBodyError(UserError, ValueError):
    """A user-facing failure of the rigid-body identification: one line (it names the flag or
    file), printed as ``error: <message>`` with exit status 2 by the command-line tools."""


def flag(option: str) -> str:
    """The command-line flag that sets ``option`` (its own name when no flag does)."""
    return FLAGS.get(option, option)


def require(ok: bool, message: str) -> None:
    """Raise :class:`RigidBodyError` with ``message`` unless ``ok``."""
    if not ok:
        raise RigidBodyError(message)


def require_choice(option: str, value: str, choices: tuple[str, ...], shown: tuple[str, ...] | None = None) -> None:
    """``value`` must be one of ``choices`` (the message lists ``shown``, default all)."""
    require(value in choices, f"{flag(option)} must be one of {', '.join(shown or choices)}; got {value!r}")


def require_number(option: str, value: float, low: float = 0.0, strict: bool = True) -> None:
    """``value`` must be finite and above ``low`` (at least ``low`` unless ``strict``)."""
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (value > low if strict else value >= low)
    require(ok, f"{flag(option)} must be a finite number {'>' if strict else '>='} {low:g}; got {value!r}")


@dataclass(frozen=True)
class PipelineOptions:
    """Choices of one identification.

    Attributes:
        method: "ols", "wls", "tls" or "iv" (needs ``instruments`` in the
            :class:`~isaaclab_sysid.rigid_body.pipeline.IdentificationData`).
        base_samples, base_seed: random samples and seed of the base-parameter QR.
        audit_grid, audit_uniform, audit_dense, audit_seeds: the all-pose audit's pose set
            (grid points per joint, uniform and dense-region poses per seed, the seeds).
        sdp_eps: pseudo-inertia margin [kg m^2 scale]; sdp_mode: "map" (default), "exact", "auto".
        prior_rel_std: relative std of the URDF prior in the SDP (30 % of the link mass,
            scaled by the link's radius of gyration for moments and inertias).
        prior_weight: multiplier of the prior term (0: nearest to the data only).
        mass_upper_factor, mass_lower_factor: optional SDP bounds factor x URDF mass.
        sdp_covariance: covariance of the base parameters used by the SDP's Mahalanobis
            term: "hac_conditioned" (the Newey-West one with its eigenvalues against the white-noise
            one floored at their mean: :func:`.estimate.conditioned_cov`), "hac" (Newey-West as it is,
            residual autocorrelation within ``hac_lag_s``; nearly singular on short runs) or "ols".
        hac_lag_s: the HAC window [s].
        plots: write a PNG per held-out run.
    """

    method: str = "ols"
    base_samples: int = 300
    base_seed: int = 0
    audit_grid: int = 3
    audit_uniform: int = 2000
    audit_dense: int = 1000
    audit_seeds: tuple[int, ...] = (0, 1, 2)
    sdp_eps: float = 1e-6
    sdp_mode: str = "map"
    prior_rel_std: float = 0.3
    prior_weight: float = 1.0
    mass_upper_factor: float | None = None
    mass_lower_factor: float | None = None
    sdp_covariance: str = "hac_conditioned"
    hac_lag_s: float = 0.5
    plots: bool = True

    def validate(self) -> PipelineOptions:
        """Check every option; returns ``self``.

        Raises:
            RigidBodyError: the first bad option, naming its flag.
        """
        require_choice("method", self.method, METHODS)
        require_choice("sdp_mode", self.sdp_mode, SDP_MODES, SDP_MODES[:3])
        require_choice("sdp_covariance", self.sdp_covariance, SDP_COVARIANCES)
        for name in ("base_samples", "audit_grid", "audit_uniform", "audit_dense"):
            value = getattr(self, name)
            require(isinstance(value, int) and value >= 1, f"{flag(name)} must be a whole number >= 1; got {value!r}")
        require(len(self.audit_seeds) > 0, f"{flag('audit_seeds')} needs at least one seed")
        require_number("sdp_eps", self.sdp_eps, strict=False)
        require_number("prior_rel_std", self.prior_rel_std)
        require_number("prior_weight", self.prior_weight, strict=False)
        require_number("hac_lag_s", self.hac_lag_s)
        lo, hi = self.mass_lower_factor, self.mass_upper_factor
        if hi is not None:
            require_number("mass_upper_factor", hi)
        if lo is not None:
            require_number("mass_lower_factor", lo, strict=False)
        if lo is not None and hi is not None:
            require(lo <= hi, f"{flag('mass_lower_factor')} {lo:g} is above {flag('mass_upper_factor')} {hi:g}")
        return self
