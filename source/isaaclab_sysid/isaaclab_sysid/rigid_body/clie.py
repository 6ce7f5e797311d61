"""Closed-loop input-error (CLIE) refinement of the link inertials through the replay (seed 003, Sec. IV-C).

After least squares, the SDP reconstruction and the all-pose audit, the inertial parameters of
chosen moving bodies (and, jointly, the joints' armature, Coulomb and viscous friction) are
refined by replaying the measured closed loop: every candidate arm runs the run's own controller,
gains and setpoints in MuJoCo (the replay semantics of docs/replay.md, the native loop of
:class:`~isaaclab_sysid.sim.mujoco_backend.MujocoBackend`), and the controller's simulated torque
command is compared with the logged command ``tau`` (the *input* error: what the controller had to
do to make this arm follow the setpoints). The actuator delay stays at the joint fit's value.

Parametrization: each refined body by its 10 log-Cholesky coordinates (:mod:`.log_cholesky`), so
every candidate is a physical body; the joint terms by their values, bounded below by 0.

Objective (a sum of squares, minimized by scipy's trust-region-reflective least squares with a
batched forward-difference Jacobian, one rollout per coordinate)::

    sum_runs sum_t sum_j ((tau_sim - tau_log)_tj / sigma_j)^2                 (closed-loop input error)
  + ls_weight    (K_I pi - theta_I)^T Cov_II^-1 (K_I pi - theta_I)              (the LS base parameters)
  + prior_weight sum_k ((pi_k - pi_URDF,k) / s_k)^2   over the refined bodies   (the SDP's URDF prior)

``I`` are the base parameters whose group holds no friction/offset term (viscous, Coulomb and
offset are left to the replay, whose friction is MuJoCo's; docs/rigid_body.md says why the LS
friction groups are biased); Cov is the LS HAC covariance. With the replay term removed the
objective is the SDP's MAP objective on those base parameters, so the refinement starts at (near)
its own optimum without the replay and moves only as far as the closed loop asks. ``sigma_j`` is
the input-error RMS of joint j times sqrt(kappa_j), kappa_j the long-run variance ratio of its
autocorrelation (the replay's samples are strongly correlated in time; without kappa they would
count as independent and outweigh the LS data), re-estimated before each pass (two by default).

The start is the SDP reconstruction (seed 003: CLIE from an arbitrary start can diverge). The
refined set is accepted only when the all-pose audit of M(q) (:func:`.feasibility.audit_mass_matrix`,
the pipeline's pose set) passes; otherwise the SDP set stands and the reason is reported.

Uncertainty: a sandwich covariance ``H^-1 S H^-1`` (H = J^T J of the whitened residuals); S is the
Newey-West estimate of the input-error scores within each run (the residuals are correlated in
time) plus the information of the LS and prior terms. Reported for the identifiable base
parameters of the inertial subset and for the joint terms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import scipy.optimize

from isaaclab_sysid.arm_model import ArmModel
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.robots import LinkInertial, Robot
from isaaclab_sysid.rigid_body.base_params import BaseParameters, compute_base_parameters
from isaaclab_sysid.rigid_body.feasibility import AuditResult, audit_mass_matrix, default_domain, prior_std
from isaaclab_sysid.rigid_body.log_cholesky import (
    from_log_cholesky,
    parameter_jacobian,
    pseudo_inertia,
    to_log_cholesky,
)
from isaaclab_sysid.rigid_body.options import RigidBodyError, require
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.rigid_body.regressor import Regressor, RegressorOptions
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions, RunRollout
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend


# ------------------------------------------------------------------ backend
def _mj_body_pi(model: mujoco.MjModel, body: int) -> np.ndarray:
    """(10,) Pinocchio parameters of one MuJoCo body's own inertial, in its body frame."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, model.body_iquat[body])
    rot = rot.reshape(3, 3)
    inertia = rot @ np.diag(model.body_inertia[body]) @ rot.T
    return LinkInertial(float(model.body_mass[body]), np.array(model.body_ipos[body]), inertia).to_pi()


@dataclass(frozen=True)
class BodyFields:
    """MuJoCo inertial fields of the moving bodies for P candidates.

    Attributes:
        mass: (P, N) [kg]; ipos: (P, N, 3) [m]; iquat: (P, N, 4) wxyz; inertia: (P, N, 3) principal [kg m^2].
        valid: (P,) False where a body's own share (the target minus its fixed children) is not physical.
    """

    mass: np.ndarray
    ipos: np.ndarray
    iquat: np.ndarray
    inertia: np.ndarray
    valid: np.ndarray


class InertialBackend(MujocoBackend):
    """The MuJoCo replay backend with per-candidate inertials of the moving bodies.

    A candidate's moving body j (Pinocchio's body of joint j: the joint's child link with the
    links fixed to it merged in, e.g. the Franka's hand and fingers in link 7) gets the 10
    parameters ``links[p, j]``, expressed in the joint's frame. The MuJoCo model keeps fixed links
    as separate welded bodies, so the whole merged inertial is written into the joint's body and
    the welded children get zero mass (the same rigid body; the sites, e.g. ``ee``, stay where
    they are). The fields are written into the worker's model copy before the native replay
    recomputes the model constants (``mj_setConst``), so a candidate's dynamics are those of a
    model compiled with its inertials (tests/test_clie.py checks it against
    :func:`~isaaclab_sysid.arm_model.with_body_inertials`). Plain :meth:`rollout` replays the
    robot's own inertials.

    Args:
        robot: the arm (its link inertials are the nominal ones).
        options: replay semantics knobs.
        n_threads, chunk_size: as :class:`MujocoBackend`.
    """

    def __init__(self, robot: Robot, options: ReplayOptions | None = None, *, n_threads: int | None = None,
                 chunk_size: int = 64) -> None:
        super().__init__(robot, options, n_threads=n_threads, chunk_size=chunk_size)
        m = self._model
        self._bodies = np.array([int(m.jnt_bodyid[j]) for j in range(self.n_dof)])
        moving = set(self._bodies.tolist())
        welded = []
        for b in range(1, m.nbody):
            a = b
            while a > 0 and m.body_jntnum[a] == 0:
                a = int(m.body_parentid[a])
            if a in moving and a != b:
                welded.append(b)
        #: MuJoCo ids of the bodies welded to a moving body (their inertial is merged into it)
        self.welded = np.array(welded, dtype=int)
        #: (N, 10) each moving body's nominal parameters (Pinocchio's merged bodies)
        self.nominal_links = np.array([li.to_pi() for li in ArmModel(robot).body_inertials().values()])
        self._nominal_fields = self.fields(self.nominal_links[None])
        self._pending: BodyFields | None = None
        self._call = threading.Lock()

    def fields(self, links: np.ndarray) -> BodyFields:
        """MuJoCo fields of (P, N, 10) moving-body parameters; a body whose pseudo-inertia is not
        positive definite makes its candidate invalid."""
        links = np.asarray(links, dtype=float)
        P, n = links.shape[0], self.n_dof
        if links.shape != (P, n, 10):
            raise ValueError(f"links must be (P, {n}, 10); got {links.shape}")
        mass, ipos = np.zeros((P, n)), np.zeros((P, n, 3))
        iquat, inertia = np.tile([1.0, 0, 0, 0], (P, n, 1)), np.zeros((P, n, 3))
        valid = np.all(np.isfinite(links), axis=(1, 2))
        for p in range(P):
            for j in range(n):
                if not valid[p] or np.linalg.eigvalsh(pseudo_inertia(links[p, j]))[0] <= 0:
                    valid[p] = False
                    continue
                li = LinkInertial.from_pi(links[p, j])
                ev, vec = np.linalg.eigh(0.5 * (li.inertia + li.inertia.T))
                if np.linalg.det(vec) < 0:
                    vec[:, 0] *= -1.0
                q = np.zeros(4)
                mujoco.mju_mat2Quat(q, vec.ravel())
                mass[p, j], ipos[p, j], iquat[p, j], inertia[p, j] = li.mass, li.com, q, ev
        return BodyFields(mass, ipos, iquat, inertia, valid)

    def rollout_links(self, batch: CandidateBatch, links: np.ndarray, runs: Sequence[Run], *,
                      with_command: bool = False) -> list[RunRollout]:
        """Replay P candidates: joint groups from ``batch``, moving-body parameters ``links`` (P, N, 10).

        A candidate with a non-physical body is returned diverged (NaN states) without a replay.
        """
        if np.shape(links)[0] != batch.size:
            raise ValueError(f"{np.shape(links)[0]} inertial sets for {batch.size} candidates")
        pending = self.fields(links)
        with self._call:
            self._pending = pending
            try:
                return super().rollout(batch, runs, with_command=with_command)
            finally:
                self._pending = None

    def rollout(self, batch: CandidateBatch, runs: Sequence[Run], **kwargs) -> list[RunRollout]:
        """:meth:`MujocoBackend.rollout` with the robot's own inertials."""
        with self._call:
            return super().rollout(batch, runs, **kwargs)

    def _run_job(self, s, dist, params, p, out, *rest) -> None:  # noqa: ANN001 - MujocoBackend's own job
        # one (candidate, run[, window]) job of MujocoBackend.rollout: write candidate p's bodies, then replay
        f = self._pending
        k = p
        if f is None:
            f, k = self._nominal_fields, 0
        if not f.valid[k]:
            out.diverged[p] = True
            for arr in (out.q, out.dq, out.ee_pos, out.ee_quat, out.tau, *out.extra.values()):
                arr[p] = np.nan
            return
        model, _ = self._worker()
        b = self._bodies
        model.body_mass[b] = f.mass[k]
        model.body_ipos[b] = f.ipos[k]
        model.body_iquat[b] = f.iquat[k]
        model.body_inertia[b] = f.inertia[k]
        if self.welded.size:
            model.body_mass[self.welded] = 0.0
            model.body_inertia[self.welded] = 0.0
        super()._run_job(s, dist, params, p, out, *rest)


# ------------------------------------------------------------------ options
#: Option -> the flag of ``scripts/refine_inertials.py`` that sets it.
FLAGS = {
    "bodies": "--bodies", "joint_terms": "--no-joint-terms", "ls_weight": "--ls-weight",
    "prior_weight": "--prior-weight", "prior_rel_std": "--prior-rel-std", "stride": "--stride",
    "passes": "--passes", "max_iter": "--max-iter", "fd_step": "--fd-step", "ftol": "--ftol",
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
        prior_weight, prior_rel_std: the SDP's URDF prior on the refined bodies (:func:`.feasibility.prior_std`).
        stride: use every ``stride``-th logged sample of the input error (1 kHz logs: 10 -> 100 Hz).
        passes: least-squares passes; the per-joint noise level sigma is re-estimated before each one.
        max_iter: caps a pass at 3 x max_iter residual evaluations (about max_iter trust-region iterations).
        fd_step: forward-difference step [log-Cholesky units; relative for the joint terms].
        ftol: relative cost change that ends a pass (seed 003: 1e-6).
        hac_lag_s: Newey-West window of the input-error scores [s].
        clamp_margin: with ``torque_clamp``, samples where a logged |tau| reaches this fraction of the
            robot's limit are left out (seed 003, App. D-F: 0.98).
        torque_clamp, slew_limit, warmup_ticks: replay options, as the joint fit's.
        audit_grid, audit_uniform, audit_dense, audit_seeds: the all-pose audit of the refined set.
        n_threads: replay threads (None: all cores).
    """

    bodies: tuple[str, ...] = ()
    joint_terms: bool = True
    ls_weight: float = 1.0
    prior_weight: float = 1.0
    prior_rel_std: float = 0.3
    stride: int = 10
    passes: int = 2
    max_iter: int = 20
    fd_step: float = 1e-4
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


# ------------------------------------------------------------------- starts
#: replay-fit joint group -> the rigid-body regressor's joint term
GROUP_TO_TERM = {"armature": "armature", "friction": "coulomb", "viscous": "viscous"}
JOINT_GROUPS = tuple(GROUP_TO_TERM)


@dataclass
class RigidBodyStart:
    """What the LS/SDP stage hands the refinement.

    Attributes:
        regressor: the identification's regressor (nominal robot, its joint terms and gravity choice).
        base: the base-parameter map K (b, P).
        theta: (b,) LS base parameters [torque units]; cov: (b, b) their (HAC) covariance.
        pi_sdp: (P,) the SDP reconstruction (physically consistent standard set).
        preprocess: how the identification preprocessed its runs (the held-out torque prediction repeats it).
        signal: the LS output signal (``tau_J`` or ``tau``); logged_velocity: the logged dq was used.
        source: where it came from (a file, or "identify()").
    """

    regressor: Regressor
    base: BaseParameters
    theta: np.ndarray
    cov: np.ndarray
    pi_sdp: np.ndarray
    preprocess: PreprocessOptions
    signal: str = "tau_J"
    logged_velocity: bool = True
    source: str = "identify()"

    @property
    def pi_ols(self) -> np.ndarray:
        """(P,) the LS estimate as a standard vector (zero dependents; usually not physical)."""
        return self.base.to_standard(self.theta)

    @classmethod
    def from_identification(cls, res: "RigidBodyIdentification") -> "RigidBodyStart":  # noqa: F821
        """From an in-memory :class:`~isaaclab_sysid.rigid_body.pipeline.RigidBodyIdentification`."""
        rec = res.data.ident[0].record
        require(res.data.gains is None, "CLIE compares torques: identify from runs with a torque output (--runs)")
        return cls(res.regressor, res.base, np.asarray(res.fit.theta, float), np.asarray(res.cov_hac, float),
                   np.asarray(res.reconstruction.pi, float), PreprocessOptions(**rec["options"]), res.data.signal,
                   "logged velocity" in str(rec.get("derivatives", "")))


def load_rigid_body(path: str | Path, robot: Robot) -> RigidBodyStart:
    """Read an ``rb_params.json`` (identify_rigid_body.py --runs) back into a :class:`RigidBodyStart`.

    The base-parameter map is recomputed with the file's QR settings and checked against its names.

    Raises:
        RigidBodyError: one line naming the file and what is wrong with it.
    """
    from isaaclab_sysid.utils.json_io import read_json

    path = Path(path)
    try:
        body = read_json(path, "rigid-body parameters")
    except (OSError, ValueError) as exc:
        raise RigidBodyError(str(exc)) from None
    try:
        require(body.get("robot") == robot.name, f"{path}: identified on robot {body.get('robot')!r}, "
                f"the runs are from {robot.name!r}")
        require(body["output"]["unit"] == "N m", f"{path}: output {body['output']['signal']!r} in "
                f"{body['output']['unit']}: CLIE compares torques (identify with --runs)")
        reg = Regressor(robot, RegressorOptions(**body["regressor"]["options"]))
        require(tuple(body["regressor"]["param_names"]) == reg.param_names,
                f"{path}: regressor.param_names differ from robot {robot.name}'s")
        qr = body["base_parameters"]["qr"]
        base = compute_base_parameters(reg, int(qr["n_samples"]), int(qr["seed"]), float(qr["tol"]))
        require(base.names() == list(body["base_parameters"]["names"]),
                f"{path}: base_parameters.names are not reproduced by its QR settings")
        theta = np.asarray(body["estimate"]["theta"], dtype=float)
        cov = np.asarray(body["estimate"]["cov_hac"], dtype=float)
        std = body["reconstruction"]["standard"]
        pi = np.array([float(std[n]) for n in reg.param_names])
        pre = body["preprocessing"][0]
        options = PreprocessOptions(**pre["options"])
    except KeyError as exc:
        raise RigidBodyError(f"{path}: not an rb_params.json of identify_rigid_body.py (no key {exc})") from None
    except (TypeError, ValueError) as exc:
        raise RigidBodyError(f"{path}: {exc}") from None
    b = base.rank
    require(theta.shape == (b,) and cov.shape == (b, b) and np.all(np.isfinite(theta)) and np.all(np.isfinite(cov)),
            f"{path}: estimate.theta/cov_hac must be finite with {b} base parameters")
    require(np.all(np.isfinite(pi)), f"{path}: reconstruction.standard has non-finite values")
    return RigidBodyStart(reg, base, theta, cov, pi, options, body["output"]["signal"],
                          "logged velocity" in str(pre.get("derivatives", "")), str(path))


@dataclass
class JointStart:
    """The joint fit's values the refinement starts from (and holds, with ``joint_terms`` off).

    Attributes:
        armature [kg m^2], friction (Coulomb) [N m], viscous [N m s/rad]: (N,) each.
        delay: actuator delay [1 ms ticks] (held fixed).
        source: where they came from.
    """

    armature: np.ndarray
    friction: np.ndarray
    viscous: np.ndarray
    delay: int
    source: str = ""

    def values(self) -> dict[str, np.ndarray]:
        return {g: np.asarray(getattr(self, g), dtype=float) for g in JOINT_GROUPS}


def joint_start_from_fit(path: str | Path, joint_names: Sequence[str], delay: int | None = None) -> JointStart:
    """Joint terms and delay from a file's ``best_params_decoded`` (the replay fit's ``sysid_best_params.json``,
    or a ``--x0`` seed file); ``delay`` overrides the file's ``motor_delay_steps``.

    Raises:
        RigidBodyError: the file is unreadable or lacks a group (names the file and the group).
    """
    from isaaclab_sysid.fit.param_space import GROUPS
    from isaaclab_sysid.utils.json_io import read_json

    try:
        dec = read_json(path, "parameters")["best_params_decoded"]
    except (OSError, ValueError) as exc:
        raise RigidBodyError(str(exc)) from None
    except (KeyError, TypeError):
        raise RigidBodyError(f"{path}: no 'best_params_decoded' (expected the joint fit's sysid_best_params.json)") from None
    v = {}
    n = len(joint_names)
    for g in JOINT_GROUPS:
        key = GROUPS[g].result_key
        if key not in dec:
            raise RigidBodyError(f"{path}: best_params_decoded has no {key!r} (fit that group, or start from "
                                 "--rb-params' joint terms with --delay)")
        try:
            a = np.asarray(dec[key], dtype=float)
        except (TypeError, ValueError):
            a = np.zeros(0)
        require(a.shape == (n,) and bool(np.all(np.isfinite(a))) and bool(np.all(a >= 0)),
                f"{path}: best_params_decoded.{key} must be {n} finite values >= 0")
        v[g] = a
    dkey = GROUPS["delay"].result_key
    d = dec.get(dkey) if delay is None else delay
    require(d is not None, f"{path}: best_params_decoded has no {dkey!r}; give --delay")
    require(float(d) == int(d) and int(d) >= 0, f"{path}: {dkey} must be a whole number >= 0; got {d!r}")
    return JointStart(v["armature"], v["friction"], v["viscous"], int(d), str(path))


def joint_start_from_rb_params(path: str | Path, joint_names: Sequence[str], delay: int) -> JointStart:
    """Joint terms from an ``rb_params.json``'s reconstruction (as ``seed_fit.py``), the delay given."""
    from isaaclab_sysid.rigid_body.fit_seed import joint_terms_from_rb_params

    try:
        values, _, src = joint_terms_from_rb_params(path, joint_names)
    except (OSError, ValueError) as exc:
        raise RigidBodyError(str(exc)) from None
    return JointStart(values["armature"], values["friction"], values["viscous"], int(delay), src)


# ---------------------------------------------------------------- objective
def _whiten(cov: np.ndarray) -> np.ndarray:
    """(b, b) L^-1 with |L^-1 e|^2 = e^T Cov^-1 e (eigenvalues floored at 1e-12 of the largest)."""
    w, V = np.linalg.eigh(0.5 * (cov + cov.T))
    floor = max(1e-12 * float(w.max()), 1e-300) if w.max() > 0 else 1.0
    return (V / np.sqrt(np.maximum(w, floor))).T


def inertial_subset(reg: Regressor, base: BaseParameters) -> np.ndarray:
    """Indices of the base parameters whose group holds no viscous, Coulomb or offset term."""
    K = base.K
    cols = [reg.term_slice(t) for t in ("viscous", "coulomb", "offset") if t in reg.joint_terms]
    if not cols:
        return np.arange(base.rank)
    touch = np.zeros(base.rank, dtype=bool)
    for c in cols:
        touch |= np.any(np.abs(K[:, c]) > 1e-12, axis=1)
    return np.flatnonzero(~touch)


class ClieObjective:
    """The whitened residual vector of the refinement and its Jacobian (see the module docstring).

    Coordinates z (D,): the log-Cholesky coordinates of each refined body (10 each, in the order of
    ``bodies``), then armature, friction, viscous (N each) when ``options.joint_terms``.

    Args:
        robot: the nominal arm (the replay model; its link inertials are replaced per candidate).
        runs: the fit runs (closed-loop: joint_pd or task_impedance).
        start: the LS/SDP stage; joints: the joint fit's values.
        options: the refinement's choices.
    """

    def __init__(self, robot: Robot, runs: Sequence[Run], start: RigidBodyStart, joints: JointStart,
                 options: ClieOptions) -> None:
        self.options = options.validate()
        self.reg, self.start, self.joints = start.regressor, start, joints
        reg, n = start.regressor, start.regressor.n_dof
        self.n_dof = n
        self.runs = list(runs)
        require(len(self.runs) > 0, "CLIE needs at least one fit run (--runs)")
        for r in self.runs:
            require(r.meta.controller in ("joint_pd", "task_impedance"),
                    f"run {r.name}: controller {r.meta.controller!r}; CLIE replays the closed loop "
                    "(joint_pd or task_impedance runs)")
            require(r.n_dof == n, f"run {r.name}: {r.n_dof} joints, robot {robot.name} has {n}")
        names = list(reg.link_names)
        unknown = [b for b in options.bodies if b not in names]
        if unknown:
            raise RigidBodyError(f"--bodies: {unknown[0]!r} is not a moving body of {robot.name} ({', '.join(names)})")
        self.body_idx = [names.index(b) for b in options.bodies] if options.bodies else list(range(n))
        self.body_names = tuple(names[i] for i in self.body_idx)
        for g in JOINT_GROUPS:
            v = np.asarray(getattr(joints, g), dtype=float)
            require(v.shape == (n,) and np.all(np.isfinite(v)) and np.all(v >= 0),
                    f"{joints.source}: {g} must be {n} finite values >= 0; got {v.tolist()}")
        require(int(joints.delay) >= 0, f"--delay must be >= 0 ticks; got {joints.delay}")
        links = start.pi_sdp[: 10 * n].reshape(n, 10)
        theta0 = []
        for i in self.body_idx:
            try:
                theta0.append(to_log_cholesky(links[i]))
            except ValueError as exc:
                raise RigidBodyError(f"{start.source}: the SDP set's body {names[i]}: {exc}") from None
        jv = joints.values()
        z_joint = np.concatenate([jv[g] for g in JOINT_GROUPS]) if options.joint_terms else np.zeros(0)
        self.z0 = np.concatenate([np.ravel(theta0), z_joint])
        self.n_body_coords = 10 * len(self.body_idx)
        self.lower = np.concatenate([np.full(self.n_body_coords, -np.inf), np.zeros(z_joint.size)])
        self.upper = np.full(self.z0.size, np.inf)
        self.backend = InertialBackend(robot, ReplayOptions(warmup_ticks=options.warmup_ticks,
                                                            torque_clamp=options.torque_clamp,
                                                            slew_limit=options.slew_limit),
                                       n_threads=options.n_threads)
        # the input-error samples of each run: every stride-th row, clamp-saturated rows left out
        tau_max = robot.tau_max
        self.rows, self.tau_log = [], []
        for r in self.runs:
            rows = np.arange(0, r.q.shape[0], options.stride)
            if options.torque_clamp:
                sat = np.any(np.abs(r.tau[rows]) >= options.clamp_margin * tau_max[None], axis=1)
                rows = rows[~sat]
            require(rows.size > 0, f"run {r.name}: no input-error sample left (every one at the torque clamp)")
            self.rows.append(rows)
            self.tau_log.append(np.asarray(r.tau, dtype=float)[rows])
        # the LS term on the inertial base parameters; the URDF prior on the refined bodies
        self.subset = inertial_subset(reg, start.base)
        K = start.base.K
        self.K_I = K[self.subset]
        self.theta_I = start.theta[self.subset]
        self.W_I = _whiten(start.cov[np.ix_(self.subset, self.subset)])
        self.prior = reg.prior()
        s = prior_std(reg, self.prior, options.prior_rel_std)
        self.prior_cols = np.concatenate([np.arange(10 * i, 10 * i + 10) for i in self.body_idx])
        self.prior_inv_s = 1.0 / s[self.prior_cols]
        self.sigma = np.ones(n)
        self._cache: tuple[bytes, np.ndarray, bool] | None = None
        self.n_rollouts = 0

    # ------------------------------------------------------------ decoding
    def links(self, z: np.ndarray) -> np.ndarray:
        """(N, 10) every moving body's parameters at z (refined from z, the others the SDP's)."""
        out = self.start.pi_sdp[: 10 * self.n_dof].reshape(self.n_dof, 10).copy()
        for k, i in enumerate(self.body_idx):
            out[i] = from_log_cholesky(z[10 * k: 10 * k + 10])
        return out

    def joint_values(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """Armature, friction, viscous (N,) each at z (the joint fit's when they are not refined)."""
        if not self.options.joint_terms:
            return self.joints.values()
        zj = z[self.n_body_coords:]
        n = self.n_dof
        return {g: zj[k * n: (k + 1) * n].copy() for k, g in enumerate(JOINT_GROUPS)}

    def standard(self, z: np.ndarray) -> np.ndarray:
        """(P,) the regressor's standard vector at z: links, the joint terms the regressor has; the rest SDP's."""
        pi = self.start.pi_sdp.copy()
        pi[: 10 * self.n_dof] = self.links(z).ravel()
        for g, v in self.joint_values(z).items():
            if GROUP_TO_TERM[g] in self.reg.joint_terms:
                pi[self.reg.term_slice(GROUP_TO_TERM[g])] = v
        return pi

    def dstandard(self, z: np.ndarray) -> np.ndarray:
        """(P, D) d standard / d z."""
        G = np.zeros((self.reg.n_params, z.size))
        for k, i in enumerate(self.body_idx):
            G[10 * i: 10 * i + 10, 10 * k: 10 * k + 10] = parameter_jacobian(z[10 * k: 10 * k + 10])
        if self.options.joint_terms:
            n = self.n_dof
            for k, g in enumerate(JOINT_GROUPS):
                if GROUP_TO_TERM[g] in self.reg.joint_terms:
                    cols = self.reg.term_slice(GROUP_TO_TERM[g])
                    G[cols, self.n_body_coords + k * n + np.arange(n)] = np.eye(n)
        return G

    # -------------------------------------------------------------- replay
    def _batch(self, Z: np.ndarray) -> tuple[CandidateBatch, np.ndarray]:
        vals = [self.joint_values(z) for z in Z]
        batch = CandidateBatch(**{g: np.array([v[g] for v in vals]) for g in JOINT_GROUPS},
                               delay=np.full(len(Z), int(self.joints.delay)))
        return batch, np.array([self.links(z) for z in Z])

    def input_errors(self, Z: np.ndarray, runs: Sequence[Run] | None = None,
                     rows: Sequence[np.ndarray] | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Per run (K, T', N) simulated minus logged command [N m] of K candidates (K, D), and divergence (K,).

        ``runs``/``rows`` default to the fit runs and their input-error samples.
        """
        Z = np.atleast_2d(Z)
        runs = self.runs if runs is None else list(runs)
        rows = self.rows if rows is None and runs is self.runs else rows
        batch, links = self._batch(Z)
        ros = self.backend.rollout_links(batch, links, runs, with_command=True)
        self.n_rollouts += len(Z) * len(runs)
        out, div = [], np.zeros(len(Z), dtype=bool)
        for k, (ro, r) in enumerate(zip(ros, runs)):
            sel = np.arange(r.q.shape[0]) if rows is None else rows[k]
            e = ro.extra["tau_cmd"][:, sel] - np.asarray(r.tau, dtype=float)[sel][None]
            div |= np.asarray(ro.diverged, dtype=bool) | ~np.all(np.isfinite(e), axis=(1, 2))
            out.append(e)
        return out, div

    def _replay_block(self, errors: list[np.ndarray]) -> np.ndarray:
        """(K, M) whitened input errors, runs side by side, rows sample-major (t, joint)."""
        return np.concatenate([(e / self.sigma[None, None]).reshape(e.shape[0], -1) for e in errors], axis=1)

    def hac_lags(self) -> int:
        """The Newey-West window [input-error samples] of ``hac_lag_s``."""
        dt = self.options.stride / min(float(r.meta.log_rate_hz) for r in self.runs)
        return max(1, int(round(self.options.hac_lag_s / dt)))

    def set_sigma(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Set the per-joint weight sigma (N,) [N m] at z: the input-error RMS times sqrt(kappa_j), kappa_j the
        long-run variance ratio 1 + 2 sum_l (1 - l/(L+1)) rho_j(l) of its autocorrelation (Bartlett, L = the
        HAC window; at least 1), so that the correlated samples count as many as they are worth.
        Returns (sigma, kappa)."""
        errors, div = self.input_errors(z[None])
        if div[0]:
            raise RigidBodyError("the replay diverges at the start point: check the joint fit's values and --delay")
        L = self.hac_lags()
        e2 = np.zeros(self.n_dof)
        acf = np.zeros((L + 1, self.n_dof))
        for x in errors:
            x = x[0]
            e2 += np.sum(x ** 2, axis=0)
            for lag in range(0, min(L, x.shape[0] - 1) + 1):
                acf[lag] += np.sum(x[lag:] * x[: x.shape[0] - lag], axis=0)
        rho = acf / np.maximum(acf[0], 1e-300)
        w = 1.0 - np.arange(L + 1) / (L + 1.0)
        kappa = np.maximum(1.0 + 2.0 * np.sum(w[1:, None] * rho[1:], axis=0), 1.0)
        count = sum(x.shape[1] for x in errors)
        rms = np.maximum(np.sqrt(e2 / count), 1e-9)
        self.sigma = rms * np.sqrt(kappa)
        self._cache = None
        return self.sigma.copy(), kappa

    # ------------------------------------------------------ residual, jacobian
    def _prior_terms(self, z: np.ndarray, pi: np.ndarray) -> np.ndarray:
        o = self.options
        ls = np.sqrt(o.ls_weight) * (self.W_I @ (self.K_I @ pi - self.theta_I))
        pr = np.sqrt(o.prior_weight) * (pi[self.prior_cols] - self.prior[self.prior_cols]) * self.prior_inv_s
        return np.concatenate([ls, pr])

    def _prior_jacobian(self, z: np.ndarray) -> np.ndarray:
        o = self.options
        G = self.dstandard(z)
        ls = np.sqrt(o.ls_weight) * (self.W_I @ self.K_I @ G)
        pr = np.sqrt(o.prior_weight) * (self.prior_inv_s[:, None] * G[self.prior_cols])
        return np.vstack([ls, pr])

    def n_replay(self) -> int:
        """Number of replay residuals M."""
        return sum(int(r.size) * self.n_dof for r in self.rows)

    def residuals(self, z: np.ndarray) -> np.ndarray:
        """(M + L,) the whitened residual vector at z (inf where the replay diverges or z overflows: a trial
        step the trust region then rejects)."""
        z = np.asarray(z, dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):
            pi = self.standard(z)
            if not np.all(np.isfinite(pi)):
                return np.full(self.n_replay() + self.subset.size + self.prior_cols.size, np.inf)
            errors, div = self.input_errors(z[None])
            R = self._replay_block(errors)[0]
            self._cache = (z.tobytes(), R, bool(div[0]))
            if div[0]:
                R = np.full(R.shape, np.inf)
            return np.concatenate([R, self._prior_terms(z, pi)])

    def steps(self, z: np.ndarray) -> np.ndarray:
        """(D,) forward-difference steps: ``fd_step`` for log-Cholesky coordinates, relative for joint terms."""
        h = np.full(z.size, self.options.fd_step)
        zj = z[self.n_body_coords:]
        h[self.n_body_coords:] = self.options.fd_step * np.maximum(np.abs(zj), 1e-2) * 10.0
        return h

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """(M + L, D) Jacobian at z: forward differences of the replay in one batched rollout
        (a column whose neighbour diverged is 0), the LS and prior terms analytic."""
        z = np.asarray(z, dtype=float)
        h = self.steps(z)
        Z = z[None] + np.diag(h)
        cached = self._cache is not None and self._cache[0] == z.tobytes()
        if not cached:
            Z = np.vstack([z[None], Z])
        errors, div = self.input_errors(Z)
        R = self._replay_block(errors)
        if cached:
            r0, d0 = self._cache[1], self._cache[2]
        else:
            r0, d0, R, div = R[0], bool(div[0]), R[1:], div[1:]
        J = ((R - r0[None]) / h[:, None]).T
        J[:, div] = 0.0
        if d0:
            J[:] = 0.0
        return np.vstack([J, self._prior_jacobian(z)])

    def close(self) -> None:
        """Stop the replay threads."""
        self.backend.close()


# --------------------------------------------------------------- refinement
@dataclass
class ClieResult:
    """The refined set, its uncertainty, the audit and the acceptance.

    Attributes:
        pi: (P,) the refined standard set; pi_start: (P,) the SDP set it started from.
        accepted: the refined set passed the audit (else the SDP set stands: :attr:`pi_accepted`).
        reason: why it was not accepted ("" when it was).
        bodies: the refined bodies; z, z0: (D,) coordinates at the end and the start.
        joint, joint_start: armature, friction, viscous (N,) each, refined and the joint fit's; delay [ticks].
        sigma: (N,) the input-error noise level of the last pass [N m].
        passes: per pass: sigma, kappa, cost at start and end, evaluations, Jacobians, status message.
        cov_z: (D, D) sandwich covariance of z.
        subset: indices of the inertial base parameters; base, base_std: their refined values and std;
            base_start: the SDP's; base_ls, base_ls_std: the LS estimate and its (HAC) std.
        clean: (len(subset),) the base parameter depends on refined coordinates only (its std is complete);
            one that also holds a body left at the SDP set carries that body's error outside ``base_std``.
        joint_std: armature, friction, viscous std (N,) each (zeros when not refined).
        audit: the all-pose audit of the refined set.
        link_min_eig: (N,) smallest pseudo-inertia eigenvalue of every moving body.
        n_rollouts: (candidate, run) replays spent; timing_s: wall time per step [s].
    """

    pi: np.ndarray
    pi_start: np.ndarray
    accepted: bool
    reason: str
    bodies: tuple[str, ...]
    z: np.ndarray
    z0: np.ndarray
    joint: dict[str, np.ndarray]
    joint_start: dict[str, np.ndarray]
    delay: int
    sigma: np.ndarray
    passes: list[dict]
    cov_z: np.ndarray
    subset: np.ndarray
    base: np.ndarray
    base_std: np.ndarray
    base_start: np.ndarray
    base_ls: np.ndarray
    base_ls_std: np.ndarray
    joint_std: dict[str, np.ndarray]
    clean: np.ndarray
    audit: AuditResult
    link_min_eig: np.ndarray
    n_rollouts: int = 0
    timing_s: dict[str, float] = field(default_factory=dict)

    @property
    def pi_accepted(self) -> np.ndarray:
        """(P,) the set to use: the refined one when accepted, else the SDP's."""
        return self.pi if self.accepted else self.pi_start

    @property
    def joint_accepted(self) -> dict[str, np.ndarray]:
        """The joint terms to use with :attr:`pi_accepted`."""
        return self.joint if self.accepted else self.joint_start


def hac_scores(J: np.ndarray, r: np.ndarray, blocks: Sequence[tuple[int, int]], n_dof: int, lags: int) -> np.ndarray:
    """(D, D) Newey-West sum of the scores g_t = J_t^T r_t (one per sample t, joints summed), lags within each block.

    Args:
        J: (M, D) Jacobian rows of the whitened residuals r (M,), sample-major within each block.
        blocks: (start, stop) row ranges of the runs; n_dof: rows per sample; lags: the window [samples].
    """
    D = J.shape[1]
    S = np.zeros((D, D))
    for a, b in blocks:
        g = (J[a:b] * r[a:b, None]).reshape(-1, n_dof, D).sum(axis=1)  # (T, D)
        S += g.T @ g
        for lag in range(1, min(lags, g.shape[0] - 1) + 1):
            G = g[lag:].T @ g[:-lag]
            S += (1.0 - lag / (lags + 1.0)) * (G + G.T)
    return S


def _sandwich(obj: ClieObjective, J: np.ndarray, r: np.ndarray) -> np.ndarray:
    """(D, D) H^-1 S H^-1: H = J^T J; S = Newey-West of the replay scores + the LS and prior information."""
    M = obj.n_replay()
    H = J.T @ J
    blocks, a = [], 0
    for rows in obj.rows:
        blocks.append((a, a + rows.size * obj.n_dof))
        a += rows.size * obj.n_dof
    S = hac_scores(J[:M], r[:M], blocks, obj.n_dof, obj.hac_lags()) + J[M:].T @ J[M:]
    Hi = np.linalg.pinv(H, rcond=1e-12)
    cov = Hi @ S @ Hi
    return 0.5 * (cov + cov.T)


def refine(obj: ClieObjective, log=print) -> ClieResult:  # noqa: ANN001 - a print-like callable
    """Run the refinement passes, the covariance and the audit (see the module docstring)."""
    o, timing = obj.options, {}
    z = obj.z0.copy()
    passes = []
    t0 = time.perf_counter()
    for k in range(o.passes):
        sigma, kappa = obj.set_sigma(z)
        cost0 = 0.5 * float(np.sum(obj.residuals(z) ** 2))
        res = scipy.optimize.least_squares(
            obj.residuals, z, jac=obj.jacobian, bounds=(obj.lower, obj.upper), method="trf", x_scale="jac",
            ftol=o.ftol, xtol=1e-12, gtol=1e-12, max_nfev=3 * o.max_iter,
        )
        z = res.x
        passes.append({"pass": k + 1, "sigma": sigma.tolist(), "kappa": kappa.tolist(), "cost_start": cost0,
                       "cost_end": float(res.cost),
                       "evaluations": int(res.nfev), "jacobians": int(res.njev or 0), "status": int(res.status),
                       "message": str(res.message)})
        log(f"[clie pass {k + 1}/{o.passes}] kappa {' '.join(f'{v:.3g}' for v in kappa)}; cost {cost0:.6g} -> "
            f"{res.cost:.6g} after {res.njev} Jacobians ({res.message})")
    timing["refine"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = obj.residuals(z)
    J = obj.jacobian(z)
    cov_z = _sandwich(obj, J, r)
    timing["covariance"] = time.perf_counter() - t0
    pi = obj.standard(z)
    dpi = obj.dstandard(z)
    G = obj.K_I @ dpi
    free = np.zeros(obj.reg.n_params, dtype=bool)  # standard parameters that move with z
    free[obj.prior_cols] = True
    if o.joint_terms:
        for g in JOINT_GROUPS:
            if GROUP_TO_TERM[g] in obj.reg.joint_terms:
                free[obj.reg.term_slice(GROUP_TO_TERM[g])] = True
    clean = ~np.any((np.abs(obj.K_I) > 1e-12) & ~free[None], axis=1)
    base_cov = G @ cov_z @ G.T
    joint_std = {g: np.zeros(obj.n_dof) for g in JOINT_GROUPS}
    if o.joint_terms:
        d = np.sqrt(np.maximum(np.diag(cov_z)[obj.n_body_coords:], 0.0))
        joint_std = {g: d[k * obj.n_dof: (k + 1) * obj.n_dof] for k, g in enumerate(JOINT_GROUPS)}
    t0 = time.perf_counter()
    audit = audit_mass_matrix(obj.reg, pi, domain=default_domain(obj.reg), grid_points=o.audit_grid,
                              n_uniform=o.audit_uniform, n_dense=o.audit_dense, seeds=tuple(o.audit_seeds))
    timing["audit"] = time.perf_counter() - t0
    links = obj.links(z)
    lmin = np.array([np.linalg.eigvalsh(pseudo_inertia(p))[0] for p in links])
    reason = ""
    if not audit.passed:
        reason = (f"the all-pose audit failed: {audit.n_violations} of {audit.n_poses} poses with "
                  f"lambda_min(M) <= {audit.threshold:g} (min {audit.min_eig:.3g})")
    elif not np.isfinite(r).all():
        reason = "the replay diverges at the refined set"
    std_ls = np.sqrt(np.diag(obj.start.cov))[obj.subset]
    return ClieResult(
        pi=pi, pi_start=obj.start.pi_sdp.copy(), accepted=not reason, reason=reason, bodies=obj.body_names,
        z=z, z0=obj.z0.copy(), joint=obj.joint_values(z), joint_start=obj.joints.values(),
        delay=int(obj.joints.delay), sigma=obj.sigma.copy(), passes=passes, cov_z=cov_z, subset=obj.subset,
        base=obj.K_I @ pi, base_std=np.sqrt(np.maximum(np.diag(base_cov), 0.0)),
        base_start=obj.K_I @ obj.start.pi_sdp, base_ls=obj.theta_I.copy(), base_ls_std=std_ls,
        joint_std=joint_std, clean=clean, audit=audit, link_min_eig=lmin, n_rollouts=obj.n_rollouts, timing_s=timing,
    )


# ------------------------------------------------------- what each stage is worth
#: The stages scored on the held-out runs, in pipeline order.
STAGES = ("URDF", "OLS", "SDP", "CLIE")


@dataclass
class StageScores:
    """Every stage scored the same way on the held-out runs (seed 003, Sec. VI-D), per joint, pooled.

    Attributes:
        torque: stage -> (N,) RMSE of the inverse-dynamics prediction of the LS signal [N m]
            (the held-out runs preprocessed as the identification's).
        input_error: stage -> (N,) RMSE of the replayed controller command against the logged one [N m]
            (None: the stage cannot be replayed, see ``notes``).
        q_rms_mrad: stage -> RMS joint-position error of that replay [mrad] (None likewise).
        notes: stage -> what the stage's set is made of.
        runs: the held-out run names.
    """

    torque: dict[str, np.ndarray]
    input_error: dict[str, np.ndarray | None]
    q_rms_mrad: dict[str, float | None]
    notes: dict[str, str]
    runs: list[str]

    def summary(self) -> dict:
        """JSON-ready dict (``clie.json["heldout"]``)."""
        return {"runs": self.runs, "notes": self.notes,
                "torque_rmse": {k: v.tolist() for k, v in self.torque.items()},
                "input_error_rmse": {k: None if v is None else v.tolist() for k, v in self.input_error.items()},
                "q_rms_mrad": self.q_rms_mrad}

    def table(self, joint_names: Sequence[str]) -> str:
        """A Markdown table: one row per stage, mean over joints and per joint."""
        head = "| stage | torque RMSE [N m] (mean) | input error RMSE [N m] (mean) | q RMS [mrad] | per joint input error |"
        lines = [head, "|---|---|---|---|---|"]
        for st in STAGES:
            if st not in self.torque:
                continue
            ie = self.input_error.get(st)
            q = self.q_rms_mrad.get(st)
            lines.append(f"| {st} | {np.mean(self.torque[st]):.4f} | "
                         f"{'-' if ie is None else f'{np.mean(ie):.4f}'} | {'-' if q is None else f'{q:.3f}'} | "
                         f"{'-' if ie is None else ' '.join(f'{x:.4f}' for x in ie)} |")
        return "\n".join(lines)


def score_stages(obj: ClieObjective, result: ClieResult, heldout: Sequence[Run]) -> StageScores | None:
    """URDF, OLS, SDP and CLIE on the held-out runs (None without any): the inverse-dynamics torque
    prediction for all four; the closed-loop replay (joint fit's terms for URDF and SDP, the refined
    ones for CLIE) for every stage whose bodies are physical."""
    if not heldout:
        return None
    from isaaclab_sysid.rigid_body.runs_input import process_run

    reg, start, n = obj.reg, obj.start, obj.n_dof
    pi_urdf = start.pi_sdp.copy()
    pi_urdf[: 10 * n] = reg.prior()[: 10 * n]
    sets = {"URDF": pi_urdf, "OLS": start.pi_ols, "SDP": start.pi_sdp, "CLIE": result.pi}
    notes = {"URDF": "URDF links, the SDP's joint terms (replay: the joint fit's)",
             "OLS": "LS base parameters, zero dependents (not a physical set: not replayed)",
             "SDP": "SDP reconstruction (replay: the joint fit's joint terms)",
             "CLIE": "refined bodies and joint terms" + ("" if result.accepted else f" (NOT accepted: {result.reason})")}
    sq = {k: [] for k in sets}
    for run in heldout:
        p = process_run(run, start.preprocess, start.signal, start.logged_velocity)
        W = reg.matrix(p.q, p.qd, p.qdd)
        meas = p.signals[start.signal]
        for k, pi in sets.items():
            sq[k].append((meas - (W @ pi).reshape(-1, n)) ** 2)
    torque = {k: np.sqrt(np.mean(np.vstack(v), axis=0)) for k, v in sq.items()}
    joint0 = obj.joints.values()
    replay = {"URDF": (pi_urdf, joint0), "OLS": (start.pi_ols, joint0), "SDP": (start.pi_sdp, joint0),
              "CLIE": (result.pi, result.joint)}
    batch = CandidateBatch(**{g: np.array([j[g] for _, j in replay.values()]) for g in JOINT_GROUPS},
                           delay=np.full(len(replay), int(obj.joints.delay)))
    links = np.array([pi[: 10 * n].reshape(n, 10) for pi, _ in replay.values()])
    ros = obj.backend.rollout_links(batch, links, list(heldout), with_command=True)
    e2 = np.zeros((len(replay), n))
    q2 = np.zeros(len(replay))
    count, qcount = 0, 0
    div = np.zeros(len(replay), dtype=bool)
    for ro, run in zip(ros, heldout):
        e = ro.extra["tau_cmd"] - np.asarray(run.tau, dtype=float)[None]
        e2 += np.sum(e ** 2, axis=1)
        q2 += np.sum((ro.q - run.q[None]) ** 2, axis=(1, 2))
        count += e.shape[1]
        qcount += e.shape[1] * n
        div |= np.asarray(ro.diverged, dtype=bool) | ~np.all(np.isfinite(e), axis=(1, 2))
    input_error, q_rms = {}, {}
    for k, name in enumerate(replay):
        input_error[name] = None if div[k] else np.sqrt(e2[k] / count)
        q_rms[name] = None if div[k] else float(1e3 * np.sqrt(q2[k] / qcount))
    return StageScores(torque, input_error, q_rms, notes, [r.name for r in heldout])


# ------------------------------------------------------------------- files
CLIE_SCHEMA = "isaaclab_sysid.clie/1"


def clie_body(obj: ClieObjective, result: ClieResult, scores: StageScores | None) -> dict:
    """The body of ``clie.json`` (layout in docs/rigid_body.md)."""
    reg, n = obj.reg, obj.n_dof
    names = obj.start.base.names()
    links = obj.links(result.z)
    lc = {name: result.z[10 * k: 10 * k + 10].tolist() for k, name in enumerate(result.bodies)}
    inertials = reg.link_inertials(result.pi)
    std_mass = {}
    for k, name in enumerate(result.bodies):
        # m = exp(2 alpha): std(m) = 2 m std(alpha)
        std_mass[name] = float(2.0 * links[obj.body_idx[k], 0] * np.sqrt(max(result.cov_z[10 * k, 10 * k], 0.0)))
    return {
        "schema": CLIE_SCHEMA,
        "robot": reg.robot.name,
        "joint_names": list(reg.robot.joint_names),
        "sources": {"rigid_body": obj.start.source, "joint_start": obj.joints.source,
                    "runs": [r.name for r in obj.runs]},
        "options": asdict(obj.options),
        "accepted": result.accepted,
        "reason": result.reason,
        "bodies": list(result.bodies),
        "delay_ticks": result.delay,
        "sigma_input_error": result.sigma.tolist(),
        "passes": result.passes,
        "joint_terms": {g: {"value": result.joint[g].tolist(), "std": result.joint_std[g].tolist(),
                            "start": result.joint_start[g].tolist()} for g in JOINT_GROUPS},
        "base_parameters": {
            "names": [names[i] for i in result.subset], "value": result.base.tolist(),
            "std": result.base_std.tolist(), "sdp": result.base_start.tolist(), "ls": result.base_ls.tolist(),
            "ls_std": result.base_ls_std.tolist(), "clean": result.clean.tolist(),
        },
        "refined_bodies": {name: {"mass": float(inertials[name].mass), "mass_std": std_mass[name],
                                  "com": inertials[name].com.tolist(), "inertia": inertials[name].inertia.tolist(),
                                  "log_cholesky": lc[name]} for name in result.bodies},
        "link_min_eig": result.link_min_eig.tolist(),
        "standard_refined": dict(zip(reg.param_names, result.pi.tolist())),
        "standard_accepted": dict(zip(reg.param_names, result.pi_accepted.tolist())),
        "audit": result.audit.summary(),
        "heldout": None if scores is None else scores.summary(),
        "n_rollouts": result.n_rollouts,
        "timing_s": result.timing_s,
    }


def write_clie(out_dir: str | Path, obj: ClieObjective, result: ClieResult,
               scores: StageScores | None) -> dict[str, Path]:
    """Write ``clie.json``, ``nominal_inertials.json`` (the accepted set: ``--nominal`` of the joint fit)
    and ``fit_seed.json`` (the accepted joint terms and the delay: its ``--x0``) atomically."""
    from isaaclab_sysid.rigid_body.io import atomic_write_json, save_nominal

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = "CLIE refinement" if result.accepted else f"SDP set (CLIE not accepted: {result.reason})"
    paths = {
        "clie": atomic_write_json(out / "clie.json", clie_body(obj, result, scores)),
        "nominal": save_nominal(out / "nominal_inertials.json", obj.reg.link_inertials(result.pi_accepted),
                                meta={"source": src}),
    }
    ja = result.joint_accepted
    seed = {"best_params_decoded": {**{g: ja[g].tolist() for g in JOINT_GROUPS}, "motor_delay_steps": result.delay},
            "seed_sources": {"all": src}}
    paths["fit_seed"] = atomic_write_json(out / "fit_seed.json", seed)
    return paths


# --------------------------------------------------------------------- CLI
@dataclass
class RefineArgs:
    """Refine the link inertials (and joint terms) by replaying the measured closed loop (CLIE, seed 003)."""

    rb_params: Path
    """rb_params.json of identify_rigid_body.py --runs (the LS estimate, its covariance, the SDP start)."""
    runs: tuple[Path, ...] = ()
    """Fit runs (run format: CSV + sidecar, or HDF5): closed-loop joint_pd / task_impedance runs."""
    heldout: tuple[Path, ...] = ()
    """Held-out runs: every stage (URDF, OLS, SDP, CLIE) is scored on them."""
    joint_fit: Path | None = None
    """The joint fit's sysid_best_params.json (armature, friction, viscous, delay start); default:
    rb_params.json's joint terms with --delay."""
    delay: int | None = None
    """Actuator delay [1 ms ticks], held fixed (default: the joint fit's)."""
    out: Path = Path("logs/clie")
    """Output folder: clie.json, nominal_inertials.json (--nominal of the fit), fit_seed.json (--x0)."""
    robot: str | None = None
    """Robot config name or path (default: the runs' sidecar robot)."""
    bodies: tuple[str, ...] = ()
    """Moving bodies (link names) to refine; default: all."""
    joint_terms: bool = True
    """Refine armature, Coulomb and viscous friction jointly (--no-joint-terms holds the joint fit's)."""
    ls_weight: float = 1.0
    """Weight of the LS base-parameter term (0: the closed loop and the prior only)."""
    prior_weight: float = 1.0
    """Weight of the SDP's URDF prior on the refined bodies."""
    prior_rel_std: float = 0.3
    """Relative std of that prior (as identify_rigid_body.py --prior-rel-std)."""
    stride: int = 10
    """Use every stride-th logged sample of the input error."""
    passes: int = 2
    """Least-squares passes (the noise level is re-estimated before each)."""
    max_iter: int = 20
    """Caps a pass at 3 x this many residual evaluations (about this many trust-region iterations)."""
    fd_step: float = 1e-4
    """Forward-difference step (log-Cholesky units; x10 relative for the joint terms)."""
    ftol: float = 1e-6
    """Relative cost change that ends a pass."""
    hac_lag_s: float = 0.5
    """Newey-West window of the input-error scores [s]."""
    torque_clamp: bool = False
    """Replay with the robot's torque clamp (and leave out samples near it), as the joint fit's --torque_clamp."""
    slew_limit: bool = False
    """Replay with the robot's torque slew limit, as the joint fit's --slew_limit."""
    clamp_margin: float = 0.98
    """With --torque-clamp: samples where a logged |tau| reaches this fraction of the limit are left out."""
    warmup_ticks: int = 50
    """Replay warm-up ticks (as the joint fit's)."""
    audit_grid: int = 3
    """Grid points per joint of the all-pose audit (joint 1 held)."""
    audit_uniform: int = 2000
    """Uniform poses per seed in the audit."""
    audit_dense: int = 1000
    """Dense-region poses per seed in the audit."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Audit seeds."""
    threads: int | None = None
    """Replay threads (default: all cores)."""

    def options(self) -> ClieOptions:
        """The :class:`ClieOptions` of these flags (checked)."""
        return ClieOptions(
            bodies=tuple(self.bodies), joint_terms=self.joint_terms, ls_weight=self.ls_weight,
            prior_weight=self.prior_weight, prior_rel_std=self.prior_rel_std, stride=self.stride,
            passes=self.passes, max_iter=self.max_iter, fd_step=self.fd_step, ftol=self.ftol,
            hac_lag_s=self.hac_lag_s, clamp_margin=self.clamp_margin, torque_clamp=self.torque_clamp,
            slew_limit=self.slew_limit, warmup_ticks=self.warmup_ticks, audit_grid=self.audit_grid,
            audit_uniform=self.audit_uniform, audit_dense=self.audit_dense, audit_seeds=tuple(self.seeds),
            n_threads=self.threads,
        ).validate()


def check_flags(args: RefineArgs) -> ClieOptions:
    """Every flag checked before any file is read; returns the options.

    Raises:
        RigidBodyError: one line naming the flag.
    """
    opt = args.options()
    require(len(args.runs) > 0, "--runs: give at least one fit run")
    require(args.delay is None or (isinstance(args.delay, int) and args.delay >= 0),
            f"--delay must be a whole number >= 0 [ticks]; got {args.delay!r}")
    require(args.joint_fit is not None or args.delay is not None,
            "give --joint-fit FILE (the joint fit's sysid_best_params.json) or --delay N (start from "
            "--rb-params' joint terms)")
    require(args.threads is None or args.threads >= 1, f"--threads must be >= 1; got {args.threads}")
    overlap = {Path(p).resolve() for p in args.runs} & {Path(p).resolve() for p in args.heldout}
    require(not overlap, f"--heldout repeats a fit run: {sorted(map(str, overlap))[0] if overlap else ''}")
    return opt


def main_from_args(args: RefineArgs, log=print) -> int:  # noqa: ANN001 - a print-like callable
    """Refine, score, write; a bad flag or file is one line ``error: ...`` and exit status 2 (nothing written)."""
    from isaaclab_sysid.data import RunFormatError
    from isaaclab_sysid.rigid_body.runs_input import read_runs, robot_of
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.robots.config import RobotConfigError

    try:
        opt = check_flags(args)
        runs = read_runs(list(args.runs))
        heldout = read_runs(list(args.heldout))
        robot = load_robot(robot_of(runs + heldout, args.robot))
        start = load_rigid_body(args.rb_params, robot)
        if args.joint_fit is not None:
            joints = joint_start_from_fit(args.joint_fit, robot.joint_names, args.delay)
        else:
            joints = joint_start_from_rb_params(args.rb_params, robot.joint_names, int(args.delay))
        obj = ClieObjective(robot, runs, start, joints, opt)
    except (RigidBodyError, RunFormatError, RobotConfigError, OSError, ValueError) as exc:
        log(f"error: {exc}")
        return 2
    try:
        log(f"CLIE: {len(obj.body_names)} bodies ({', '.join(obj.body_names)}), joint terms "
            f"{'refined' if opt.joint_terms else 'held'}, delay {joints.delay} ticks, {len(runs)} fit runs, "
            f"{obj.n_replay()} input-error residuals, {obj.z0.size} coordinates")
        try:
            result = refine(obj, log)
        except RigidBodyError as exc:
            log(f"error: {exc}")
            return 2
        scores = score_stages(obj, result, heldout)
    finally:
        obj.close()
    paths = write_clie(args.out, obj, result, scores)
    print_summary(obj, result, scores, paths, log)
    return 0


def print_summary(obj: ClieObjective, result: ClieResult, scores: StageScores | None, paths: dict[str, Path],
                  log=print) -> None:  # noqa: ANN001
    """The verdict, the masses, the joint terms, the held-out stage table and the files."""
    verdict = "ACCEPTED" if result.accepted else f"NOT accepted ({result.reason}); the SDP set stands"
    a = result.audit
    log(f"audit of the refined set: {'PASS' if a.passed else 'FAIL'} min eig {a.min_eig:.4g} over {a.n_poses} poses; "
        f"{verdict}")
    links = obj.links(result.z)
    sdp = obj.start.pi_sdp
    log("masses [kg] (SDP -> CLIE): " + ", ".join(
        f"{obj.reg.link_names[i]} {sdp[10 * i]:.3f}->{links[i, 0]:.3f}" for i in obj.body_idx))
    for g in JOINT_GROUPS:
        log(f"{g:>9}: " + " ".join(f"{v:.4g}+-{s:.2g}" for v, s in zip(result.joint[g], result.joint_std[g])))
    if scores is not None:
        log(f"held-out ({', '.join(scores.runs)}):")
        for line in scores.table(obj.reg.robot.joint_names).splitlines():
            log("  " + line)
    for k, p in paths.items():
        log(f"wrote {k}: {p}")
