"""Where CLIE starts: the rigid-body identification (LS/SDP) and the joint fit's terms.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.rigid_body.base_params import BaseParameters, compute_base_parameters
from isaaclab_sysid.robots.identified import RbParams, RbParamsError
from isaaclab_sysid.rigid_body.options import require, RigidBodyError
from isaaclab_sysid.rigid_body.preprocess import PreprocessOptions
from isaaclab_sysid.robots.regressor import Regressor, RegressorOptions
from isaaclab_sysid.robots import Robot


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
        cov_white: (b, b) the LS white-noise covariance (the frame in which the refinement conditions
            ``cov``: :func:`isaaclab_sysid.rigid_body.estimate.conditioned_cov`).
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
    cov_white: np.ndarray | None = None

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
                   "logged velocity" in str(rec.get("derivatives", "")), cov_white=np.asarray(res.fit.cov, float))


def load_rigid_body(path: str | Path, robot: Robot) -> RigidBodyStart:
    """Read an ``rb_params.json`` (identify_rigid_body.py --runs) back into a :class:`RigidBodyStart`.

    The base-parameter map is recomputed with the file's QR settings and checked against its names.

    Raises:
        RigidBodyError: one line naming the file and what is wrong with it.
    """
    try:
        rb = RbParams.read(path)
    except (OSError, ValueError) as exc:
        raise RigidBodyError(str(exc)) from None
    path = rb.path
    try:
        require(rb.robot == robot.name, f"{path}: identified on robot {rb.robot!r}, the runs are from {robot.name!r}")
        rb.need("signal", "unit")
        require(rb.unit == "N m", f"{path}: output {rb.signal!r} in {rb.unit}: CLIE compares torques (identify with "
                "--runs)")
        rb.need("regressor_options", "param_names", "qr", "base_names", "theta", "cov_hac", "cov", "standard",
                "preprocessing")
        reg = Regressor(robot, RegressorOptions(**rb.regressor_options))
        require(rb.param_names == reg.param_names, f"{path}: regressor.param_names differ from robot {robot.name}'s")
        base = compute_base_parameters(reg, rb.qr.n_samples, rb.qr.seed, rb.qr.tol)
        require(base.names() == list(rb.base_names), f"{path}: base_parameters.names are not reproduced by its QR "
                "settings")
        theta, cov, cov_white = rb.theta, rb.cov_hac, rb.cov
        pi = np.array([rb.standard[n] for n in reg.param_names])
        pre = rb.preprocessing[0]
        options = PreprocessOptions(**pre["options"])
    except RbParamsError as exc:
        raise RigidBodyError(str(exc)) from None
    except KeyError as exc:
        raise RigidBodyError(f"{path}: not an rb_params.json of identify_rigid_body.py (no key {exc})") from None
    except (TypeError, ValueError) as exc:
        raise RigidBodyError(f"{path}: {exc}") from None
    b = base.rank
    require(theta.shape == (b,) and cov.shape == (b, b) and cov_white.shape == (b, b)
            and np.all(np.isfinite(theta)) and np.all(np.isfinite(cov)) and np.all(np.isfinite(cov_white)),
            f"{path}: estimate.theta/cov/cov_hac must be finite with {b} base parameters")
    require(np.all(np.isfinite(pi)), f"{path}: reconstruction.standard has non-finite values")
    return RigidBodyStart(reg, base, theta, cov, pi, options, rb.signal,
                          "logged velocity" in str(pre.get("derivatives", "")), str(path), cov_white)


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
    or a ``--x0`` seed file), or from a fit's output folder (its ``sysid_best_params.json``); ``delay``
    overrides the file's ``motor_delay_steps``. A fit with the static-friction groups (``mu_static``,
    ``dynamic_ratio``) and no Coulomb group starts the Coulomb-only refinement at its dynamic level
    ``mu_static * dynamic_ratio``, and ``source`` says so.

    Raises:
        RigidBodyError: the file is unreadable or lacks a group (names the file and the group).
    """
    from isaaclab_sysid.objective.param_space import GROUPS, ParamSpace
    from isaaclab_sysid.objective.result import FitResult
    from isaaclab_sysid.fit.run_folder import RESULT_FILE

    path = Path(path)
    if path.is_dir():
        require((path / RESULT_FILE).is_file(), f"--joint-fit {path}: a folder without {RESULT_FILE} (give the "
                                                "joint fit's output folder or its sysid_best_params.json)")
        path = path / RESULT_FILE
    n = len(joint_names)
    every_group = ParamSpace.from_bounds({g: GROUPS[g].default_bounds for g in GROUPS}, n, list(joint_names))
    try:  # a fit's result, or a --x0 seed file (no param_space: read in the groups it holds)
        dec = dict(FitResult.read(path, space=every_group, joint_names=list(joint_names)).values)
    except OSError as exc:
        raise RigidBodyError(str(exc)) from None
    except ValueError as exc:
        raise RigidBodyError(f"{exc} (expected the joint fit's sysid_best_params.json, each joint group {n} "
                             "numbers)") from None
    v = {}
    note = ""
    if "friction" not in dec and "mu_static" in dec and "dynamic_ratio" in dec:
        skey, rkey = GROUPS["mu_static"].result_key, GROUPS["dynamic_ratio"].result_key
        dec["friction"] = dec["mu_static"] * dec["dynamic_ratio"]
        note = f" (Coulomb friction started at its dynamic level {skey} x {rkey}: the refinement is Coulomb-only)"
    for g in JOINT_GROUPS:
        key = GROUPS[g].result_key
        if g not in dec:
            raise RigidBodyError(f"{path}: best_params_decoded has no {key!r} (fit that group, or start from "
                                 "--rb-params' joint terms with --delay)")
        a = np.asarray(dec[g], dtype=float)
        require(a.shape == (n,) and bool(np.all(np.isfinite(a))) and bool(np.all(a >= 0)),
                f"{path}: best_params_decoded.{key} must be {n} finite values >= 0")
        v[g] = a
    dkey = GROUPS["delay"].result_key
    d = dec.get("delay") if delay is None else delay
    require(d is not None, f"{path}: best_params_decoded has no {dkey!r}; give --delay")
    require(float(d) == int(d) and int(d) >= 0, f"{path}: {dkey} must be a whole number >= 0; got {d!r}")
    return JointStart(v["armature"], v["friction"], v["viscous"], int(d), str(path) + note)


def joint_start_from_rb_params(path: str | Path, joint_names: Sequence[str], delay: int) -> JointStart:
    """Joint terms from an ``rb_params.json``'s reconstruction (as ``seed_fit.py``), the delay given."""
    from isaaclab_sysid.rigid_body.fit_seed import joint_terms_from_rb_params

    try:
        values, _, src = joint_terms_from_rb_params(path, joint_names)
    except (OSError, ValueError) as exc:
        raise RigidBodyError(str(exc)) from None
    return JointStart(values["armature"], values["friction"], values["viscous"], int(delay), src)
