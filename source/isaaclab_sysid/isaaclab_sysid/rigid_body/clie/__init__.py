"""CLIE = closed-loop input error: refine link inertials (and joint friction) by replaying the logged closed loop.

The name says what is compared: the *input* of the arm (the torque its controller commands) in a
*closed-loop* replay against the logged one, as in DIDIM (Gautier, Janot and Vandanjon, IEEE TCST 2013).

After least squares, the SDP reconstruction and the all-pose audit, the inertial parameters of
chosen moving bodies (and, jointly, the joints' armature, Coulomb and viscous friction) are
refined by replaying the measured closed loop: every candidate arm runs the run's own controller,
gains and setpoints in MuJoCo (the replay semantics of docs/replay.md, the native loop of
:class:`~isaaclab_sysid.sim.mujoco_backend.MujocoBackend`), and the controller's simulated torque
command is compared with the logged command ``tau`` (the *input* error: what the controller had to
do to make this arm follow the setpoints). The actuator delay stays at the joint fit's value.

Parametrization: each refined body by its 10 log-Cholesky coordinates (:mod:`isaaclab_sysid.rigid_body.log_cholesky`), so
every candidate is a physical body; the joint terms by their values, bounded below by 0.

Objective (a sum of squares, minimized by scipy's trust-region-reflective least squares with a
batched forward-difference Jacobian, one rollout per coordinate)::

    sum_runs sum_t sum_j ((tau_sim - tau_log)_tj / sigma_j)^2                 (closed-loop input error)
  + ls_weight/c  (K_I pi - theta_I)^T Cov_II^-1 (K_I pi - theta_I)              (the LS base parameters)
  + prior_weight sum_k ((pi_k - pi_URDF,k) / s_k)^2   over the refined bodies   (the SDP's URDF prior)

``I`` are the base parameters whose group holds no friction/offset term (viscous, Coulomb and
offset are left to the replay, whose friction is MuJoCo's; docs/rigid_body.md says why the LS
friction groups are biased); Cov is the LS HAC covariance conditioned by :func:`conditioned_cov`
(estimated from few effectively independent stretches, it is nearly singular as it comes); c is the
LS term's variance factor against the closed loop (:func:`ls_variance_factor`, Helmert), 1 in the
first pass, then the running product of the factors (never below 1, so the weight never rises above
``ls_weight``; ``ls_consistency``). With the replay term removed the
objective is the SDP's MAP objective on those base parameters, so the refinement starts at (near)
its own optimum without the replay and moves only as far as the closed loop asks. ``sigma_j`` is
the input-error RMS of joint j times sqrt(kappa_j), kappa_j the long-run variance ratio of its
autocorrelation (the replay's samples are strongly correlated in time; without kappa they would
count as independent and outweigh the LS data), re-estimated before each pass (two by default).

The start is the SDP reconstruction (from an arbitrary start the closed-loop refinement can diverge). The
refined set is accepted only when the all-pose audit of M(q) (:func:`isaaclab_sysid.rigid_body.feasibility.audit_mass_matrix`,
the pipeline's pose set) passes; otherwise the SDP set stands and the reason is reported.

Uncertainty: a sandwich covariance ``H^-1 S H^-1`` (H = J^T J of the whitened residuals); S is the
Newey-West estimate of the input-error scores within each run (the residuals are correlated in
time) plus the information of the LS term (times its final variance factor, when above 1) and of
the prior. Reported for the identifiable base
parameters of the inertial subset and for the joint terms.

Modules, in pipeline order: ``backend`` (the replay with per-candidate inertials), ``options``,
``starts`` (LS/SDP and joint-fit starts), ``objective``, ``refinement`` (least squares, sandwich,
audit gate), ``stages`` (URDF / OLS / SDP / CLIE on held-out runs), ``files``, ``cli``.
"""

from __future__ import annotations

from isaaclab_sysid.rigid_body.clie.backend import BodyFields, InertialBackend
from isaaclab_sysid.rigid_body.clie.options import FLAGS, ClieOptions
from isaaclab_sysid.rigid_body.clie.starts import (
    GROUP_TO_TERM,
    JOINT_GROUPS,
    RigidBodyStart,
    load_rigid_body,
    JointStart,
    joint_start_from_fit,
    joint_start_from_rb_params,
)
from isaaclab_sysid.rigid_body.clie.objective import conditioned_cov, inertial_subset, ClieObjective
from isaaclab_sysid.rigid_body.clie.refinement import ClieResult, hac_scores, ls_variance_factor, refine
from isaaclab_sysid.rigid_body.clie.stages import STAGES, StageScores, score_stages
from isaaclab_sysid.rigid_body.clie.files import CLIE_SCHEMA, clie_body, write_clie
from isaaclab_sysid.rigid_body.clie.cli import RefineArgs, check_flags, main_from_args, print_summary

__all__ = [
    "BodyFields",
    "InertialBackend",
    "FLAGS",
    "ClieOptions",
    "GROUP_TO_TERM",
    "JOINT_GROUPS",
    "RigidBodyStart",
    "load_rigid_body",
    "JointStart",
    "joint_start_from_fit",
    "joint_start_from_rb_params",
    "conditioned_cov",
    "inertial_subset",
    "ClieObjective",
    "ClieResult",
    "hac_scores",
    "ls_variance_factor",
    "refine",
    "STAGES",
    "StageScores",
    "score_stages",
    "CLIE_SCHEMA",
    "clie_body",
    "write_clie",
    "RefineArgs",
    "check_flags",
    "main_from_args",
    "print_summary",
]
