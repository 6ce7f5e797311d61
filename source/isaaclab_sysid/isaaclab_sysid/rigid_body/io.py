"""Files: ``rb_params.json`` and the link-inertial override (``--nominal FILE``).

Every file is written atomically with the shared :mod:`isaaclab_sysid.utils.atomic`
(a temporary file in the same folder, fsync, then ``os.replace``). The override file holds, per link name, mass [kg], centre of
mass (3,) [m] and inertia (3, 3) about the centre of mass [kg m^2] in the
link frame, exactly what :class:`~isaaclab_sysid.robots.LinkInertial` holds and
:meth:`Robot.with_inertials` consumes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from isaaclab_sysid.robots import LinkInertial
from isaaclab_sysid.utils.atomic import atomic_write_json

NOMINAL_SCHEMA = "isaaclab_sysid.link_inertials/1"
RB_PARAMS_SCHEMA = "isaaclab_sysid.rb_params/1"


class NominalFileError(ValueError):
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
        if com.shape != (3,) or not np.all(np.isfinite(com)):
            raise NominalFileError(f"{where}.com: must be 3 finite numbers, got shape {com.shape}")
        if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
            raise NominalFileError(f"{where}.inertia: must be a finite 3x3 matrix, got shape {inertia.shape}")
        if not np.allclose(inertia, inertia.T, atol=1e-9 * max(1.0, np.abs(inertia).max())):
            raise NominalFileError(f"{where}.inertia: not symmetric")
        ev = np.linalg.eigvalsh(inertia)
        if ev[0] <= 0 or ev[2] > ev[0] + ev[1] + 1e-12 * ev[2]:
            raise NominalFileError(f"{where}.inertia: not physical (eigenvalues {ev.tolist()} violate PD/triangle)")
        out[str(name)] = LinkInertial(mass=mass, com=com, inertia=inertia)
    return out


def write_rb_params(path: str | Path, payload: dict) -> Path:
    """Write ``rb_params.json`` (schema tag added) atomically."""
    return atomic_write_json(path, {"schema": RB_PARAMS_SCHEMA, **payload})
