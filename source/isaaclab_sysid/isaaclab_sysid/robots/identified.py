"""What the rigid-body identification says about a robot, as files: ``rb_params.json`` (:class:`RbParams`, its one
reader and writer) and the link-inertial override (``--nominal FILE``). They live with the robot model (the fit, the
export and the seeds read them; only ``rigid_body/`` writes them).

Every file is written atomically with the shared :mod:`isaaclab_sysid.utils.atomic`
(a temporary file in the same folder, fsync, then ``os.replace``). The override file holds, per link name, mass [kg], centre of
mass (3,) [m] and inertia (3, 3) about the centre of mass [kg m^2] in the
link frame, exactly what :class:`~isaaclab_sysid.robots.LinkInertial` holds and
:meth:`Robot.with_inertials` consumes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isaaclab_sysid.robots import LinkInertial
from isaaclab_sysid.robots.overrides import inertial_violation
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.json_io import read_json
from isaaclab_sysid.utils.errors import UserError

NOMINAL_SCHEMA = "isaaclab_sysid.link_inertials/1"
RB_PARAMS_SCHEMA = "isaaclab_sysid.rb_params/1"


class NominalFileError(UserError, ValueError):
    """The inertial override file is malformed or marked not to be used (the message names the file and key)."""


class NominalInertials(dict):
    """link name -> :class:`LinkInertial` as read from a file: ``source`` (the file) and ``verdict``
    (its ``verdict`` entry, ``{}`` when it has none) ride along, so whoever applies them
    (:func:`~isaaclab_sysid.arm_model.with_body_inertials`) can name the file in an error."""

    source: Path | None = None
    verdict: dict = {}


#: The flag of the fit that reads a file marked not to be used anyway.
ADMIT_FLAG = "--admit_rejected_nominal"


def inertials_to_dict(inertials: dict[str, LinkInertial]) -> dict:
    """The JSON body of an override file."""
    return {
        "schema": NOMINAL_SCHEMA,
        "frame": "link frame; com [m] and inertia about the com [kg m^2]",
        "links": {
            name: {"mass": float(li.mass), "com": list(map(float, li.com)), "inertia": np.asarray(li.inertia).tolist()}
            for name, li in inertials.items()
        },
    }


def save_nominal(path: str | Path, inertials: dict[str, LinkInertial], meta: dict | None = None,
                 verdict: dict | None = None) -> Path:
    """Write the link-inertial override file that ``load_nominal`` and ``--nominal`` read; ``verdict``
    (``{"usable": bool, "reason": str, ...}``) marks whether it is fit to use (``load_nominal`` refuses
    ``usable: false``)."""
    body = inertials_to_dict(inertials)
    if verdict is not None:
        body["verdict"] = verdict
    if meta:
        body["meta"] = meta
    return atomic_write_json(path, body)


def load_nominal(path: str | Path, admit_rejected: bool = False) -> NominalInertials:
    """Read a link-inertial override file (or an ``rb_params.json``, using its ``link_inertials``).

    A file whose ``verdict.usable`` is false (the identification's consistency test rejected the
    estimate; :mod:`.writers`) is refused unless ``admit_rejected``.

    Returns:
        link name -> :class:`LinkInertial` (moving bodies, fixed children merged in), ready for
        :func:`~isaaclab_sysid.arm_model.with_body_inertials`; ``.source`` is ``path``.

    Raises:
        NominalFileError: naming the file and the offending key, or the verdict that rejected it.
    """
    path = Path(path)
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NominalFileError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise NominalFileError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from None
    verdict = body.get("verdict") if isinstance(body, dict) else None
    verdict = verdict if isinstance(verdict, dict) else {}
    if verdict.get("usable") is False and not admit_rejected:
        raise NominalFileError(f"{path}: marked not to be used: {verdict.get('reason', 'rejected')}; identify again "
                               f"(see the causes it printed), or pass {ADMIT_FLAG} to use it anyway")
    if isinstance(body, dict) and body.get("link_inertials") is None and body.get("link_inertials_refused"):
        raise NominalFileError(f"{path}: holds no link inertials: {body['link_inertials_refused']}")
    if isinstance(body, dict) and "link_inertials" in body and "links" not in body:
        body = body["link_inertials"]
    if not isinstance(body, dict) or not isinstance(body.get("links"), dict):
        raise NominalFileError(f"{path}: expected an object with a 'links' mapping")
    out = NominalInertials()
    out.source, out.verdict = path, verdict
    for name, entry in body["links"].items():
        where = f"{path}: links.{name}"
        try:
            mass = float(entry["mass"])
            com = np.asarray(entry["com"], dtype=float)
            inertia = np.asarray(entry["inertia"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise NominalFileError(f"{where}: needs numeric 'mass', 'com' (3) and 'inertia' (3x3): {exc}") from None
        if not (np.isfinite(mass) and mass > 0):
            raise NominalFileError(f"{where}.mass: must be positive and finite, got {mass}")
        if com.shape != (3,) or inertia.shape != (3, 3):
            raise NominalFileError(f"{where}: 'com' must be 3 numbers and 'inertia' 3x3, got shapes {com.shape} and "
                                   f"{inertia.shape}")
        # the one rule (robots/overrides.py), without the engines' margin: a body here may hold fixed children
        # merged in, which no engine builds as one; the links built from it are checked with the margin where the
        # robot is known (arm_model.with_body_inertials), by the same function
        why = inertial_violation(LinkInertial(mass=mass, com=com, inertia=inertia), engine_margin=False)
        if why is not None:
            raise NominalFileError(f"{where}: not physical: {why}")
        out[str(name)] = LinkInertial(mass=mass, com=com, inertia=inertia)
    return out


def write_rb_params(path: str | Path, payload: dict) -> Path:
    """Write ``rb_params.json`` (schema tag added) atomically."""
    return atomic_write_json(path, {"schema": RB_PARAMS_SCHEMA, **payload})


class RbParamsError(UserError, ValueError):
    """An ``rb_params.json`` that cannot be read or lacks what its reader needs (the message names the file and key)."""


@dataclass(frozen=True)
class QrSettings:
    """``base_parameters.qr``: the settings that reproduce the base-parameter map."""

    n_samples: int
    seed: int
    tol: float


@dataclass(frozen=True)
class RbParams:
    """``rb_params.json`` (identify_rigid_body.py, schema in docs/rigid_body.md) read back, typed.

    :meth:`read` checks the file is a JSON object and types every section it holds; a section the file lacks is
    None (or empty), and :meth:`need` refuses it for a reader that needs it, naming the file and the key.
    :meth:`write` is the one writer (the body from ``writers.rb_params_body``, schema tag added).

    Attributes:
        path: the file.
        robot: the robot config name it was identified on.
        signal, unit: the output the model was fitted to (``output.signal``, ``output.unit``; ``N m``: torques).
        param_names, regressor_options: the regressor's standard parameter names and options (``regressor``).
        base_names, qr: the base parameters' names and QR settings (``base_parameters``).
        theta, cov, cov_hac: the base-parameter estimate, its white and HAC covariances (``estimate``).
        standard: the SDP reconstruction's standard parameters, name -> value (``reconstruction.standard``).
        preprocessing: per identification run set, its preprocessing record (``options``, ``derivatives``).
        link_inertials: the reconstruction's link inertials (the ``--nominal`` override's ``links``).
        verdict: the consistency verdict (``{}`` when the file has none).
    """

    path: Path
    robot: str | None = None
    signal: str | None = None
    unit: str | None = None
    param_names: tuple[str, ...] | None = None
    regressor_options: dict | None = None
    base_names: tuple[str, ...] | None = None
    qr: QrSettings | None = None
    theta: np.ndarray | None = None
    cov: np.ndarray | None = None
    cov_hac: np.ndarray | None = None
    standard: dict[str, float] | None = None
    preprocessing: tuple[dict, ...] = ()
    link_inertials: dict | None = None
    verdict: dict = field(default_factory=dict)

    #: attribute -> the JSON key a reader names when the file lacks it
    KEYS = {"robot": "robot", "signal": "output.signal", "unit": "output.unit", "param_names": "regressor.param_names",
            "regressor_options": "regressor.options", "base_names": "base_parameters.names",
            "qr": "base_parameters.qr", "theta": "estimate.theta", "cov": "estimate.cov", "cov_hac": "estimate.cov_hac",
            "standard": "reconstruction.standard", "preprocessing": "preprocessing", "link_inertials": "link_inertials"}

    @classmethod
    def read(cls, path: str | Path) -> "RbParams":
        """Read and type ``path``.

        Raises:
            OSError: the file cannot be read; RbParamsError: not JSON, not an object, or a section of the wrong type.
        """
        path = Path(path)
        try:
            body = read_json(path, "rigid-body parameters")
        except ValueError as exc:
            raise RbParamsError(str(exc)) from None
        if not isinstance(body, dict):
            raise RbParamsError(f"{path}: not a JSON object (expected an rb_params.json of identify_rigid_body.py)")
        try:
            return cls._typed(path, body)
        except (KeyError, TypeError, ValueError) as exc:
            raise RbParamsError(f"{path}: a section of the wrong shape ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _typed(cls, path: Path, body: dict) -> "RbParams":
        def arr(sec: dict | None, key: str) -> np.ndarray | None:
            return None if not sec or key not in sec else np.asarray(sec[key], dtype=float)

        out, reg, base, est = (body.get(k) for k in ("output", "regressor", "base_parameters", "estimate"))
        rec = body.get("reconstruction")
        qr = base.get("qr") if isinstance(base, dict) else None
        links = body.get("link_inertials")
        return cls(
            path=path,
            robot=None if body.get("robot") is None else str(body["robot"]),
            signal=None if not out or out.get("signal") is None else str(out["signal"]),
            unit=None if not out or out.get("unit") is None else str(out["unit"]),
            param_names=None if not reg or "param_names" not in reg else tuple(map(str, reg["param_names"])),
            regressor_options=None if not reg or "options" not in reg else dict(reg["options"]),
            base_names=None if not base or "names" not in base else tuple(map(str, base["names"])),
            qr=None if not qr else QrSettings(int(qr["n_samples"]), int(qr["seed"]), float(qr["tol"])),
            theta=arr(est, "theta"), cov=arr(est, "cov"), cov_hac=arr(est, "cov_hac"),
            standard=None if not isinstance(rec, dict) or "standard" not in rec
            else {str(k): float(v) for k, v in rec["standard"].items()},
            preprocessing=tuple(dict(p) for p in body.get("preprocessing") or ()),
            link_inertials=dict(links) if isinstance(links, dict) else None,
            verdict=dict(body["verdict"]) if isinstance(body.get("verdict"), dict) else {},
        )

    def need(self, *names: str) -> None:
        """Refuse a file that lacks any of the attributes ``names``.

        Raises:
            RbParamsError: naming the file and the JSON key it lacks.
        """
        for name in names:
            value = getattr(self, name)
            if value is None or (name == "preprocessing" and not value):
                raise RbParamsError(f"{self.path}: not an rb_params.json of identify_rigid_body.py (no key "
                                    f"{self.KEYS[name]!r})")

    @staticmethod
    def write(path: str | Path, body: dict) -> Path:
        """Write ``rb_params.json`` (schema tag added) atomically."""
        return write_rb_params(path, body)
