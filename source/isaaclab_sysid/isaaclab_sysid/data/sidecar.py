"""Sidecar JSON <-> :class:`RunMeta`, with validation that names the offending key."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError, RunFormatWarning
from isaaclab_sysid.data.formats.text import read_text
from isaaclab_sysid.data.run import LAW_FACTS, REPLAY_FACTS, ImpedanceLaw, Run, RunMeta
from isaaclab_sysid.data.schema import (
    CONTROLLERS,
    JOINT_SPACE_CONTROLLERS,
    LEGACY_ORIENTATION_ERRORS,
    ORIENTATION_ERRORS,
    QUAT_NORM_TOL,
    STATE_AGE_MODELS,
    SUPPORTED_SCHEMA_VERSIONS,
)
from isaaclab_sysid.timebase import TICK_HZ


#: The robot a sidecar that names none was recorded on. The Franka tooling's logs (schema 1 before the "robot" key,
#: and schema 2) were all recorded on a Franka Panda, so such a sidecar is read as one; the rule is stated here once,
#: the run says so (``RunMeta.robot_stated`` False) and the stages that load its robot print
#: :func:`unstated_robot_note`.
DEFAULT_ROBOT = "franka_panda"


def sidecar_robot(raw: Any) -> tuple[str, bool]:
    """(robot config name, whether the sidecar states it) of a sidecar's JSON (:data:`DEFAULT_ROBOT` if it does not)."""
    if isinstance(raw, dict) and raw.get("robot") is not None:
        return str(raw["robot"]), True
    return DEFAULT_ROBOT, False


def unstated_robot_note(runs: Sequence[Run]) -> str | None:
    """The line to print when some of ``runs`` name no robot in their sidecar (None when every run names one)."""
    unstated = [r.name for r in runs if not r.meta.robot_stated]
    if not unstated:
        return None
    return (f"note: {', '.join(unstated)}: the sidecar names no robot; read as {DEFAULT_ROBOT} (the Franka tooling's "
            "logs; add \"robot\" to the sidecar or give --robot)")


def _err(file: str, key: str, reason: str) -> RunFormatError:
    return RunFormatError(file, None, key, reason)


def _number(raw: dict[str, Any], key: str, file: str, path: str | None = None) -> float:
    path = path or key
    if key not in raw:
        raise _err(file, path, "missing")
    val = raw[key]
    if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val):
        raise _err(file, path, f"expected a finite number, got {val!r}")
    return float(val)


def _vector(raw: dict[str, Any], key: str, n: int, file: str, path: str | None = None) -> np.ndarray:
    path = path or key
    if key not in raw or raw[key] is None:
        raise _err(file, path, f"missing (expected {n} numbers)")
    val = raw[key]
    if not isinstance(val, list):
        raise _err(file, path, f"expected a list of {n} numbers, got {type(val).__name__}")
    if len(val) != n:
        raise _err(file, path, f"has {len(val)} entries, expected {n}")
    for i, v in enumerate(val):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _err(file, f"{path}[{i}]", f"expected a finite number, got {v!r}")
    return np.asarray(val, dtype=float)


def _gain_vector(gains: dict[str, Any], key: str, n: int, file: str, may_be_unstated: bool) -> np.ndarray:
    """``gains.<key>``; a joint_pd run may leave entries null: unstated (NaN), a servo whose gains are unknown
    (the fit's kp / kd groups fill them, sim/servo.py)."""
    val = gains.get(key)
    if may_be_unstated and isinstance(val, list) and len(val) == n and any(v is None for v in val):
        vec = _vector({key: [0.0 if v is None else v for v in val]}, key, n, file, f"gains.{key}")
        vec[[i for i, v in enumerate(val) if v is None]] = np.nan
        return vec
    return _vector(gains, key, n, file, f"gains.{key}")


def parse_sidecar(raw: Any, file: str, n_dof: int, q_lower: np.ndarray, q_upper: np.ndarray) -> RunMeta:
    """Validate a decoded schema-1 sidecar and build its :class:`RunMeta`.

    (Schema 2, the Franka tooling's sidecar, is read with its CSV by :mod:`isaaclab_sysid.data.formats.franka_v2`.)

    Args:
        raw: the decoded JSON object.
        file: name used in error messages.
        n_dof: number of joints of the sidecar's robot.
        q_lower, q_upper: (N,) joint limits [rad] (``q_init`` is checked against them).
    Raises:
        RunFormatError: naming the sidecar file and the key.
    """
    from isaaclab_sysid.data.schema import JOINT_LIMIT_SLACK

    if not isinstance(raw, dict):
        raise _err(file, "-", "sidecar must be a JSON object")
    if "schema_version" not in raw:
        raise _err(file, "schema_version", "missing")
    version = raw["schema_version"]
    if version not in SUPPORTED_SCHEMA_VERSIONS or isinstance(version, bool):
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        raise _err(file, "schema_version", f"unknown schema_version {version!r} (supported: {supported})")
    if version != 1:
        raise _err(file, "schema_version", f"schema_version {version} (the Franka tooling's log) is read with its CSV "
                   "(read_run), not stored in this container; import it to schema 1 first")
    controller = raw.get("controller")
    if controller not in CONTROLLERS:
        raise _err(file, "controller", f"unknown controller {controller!r} (expected one of {', '.join(CONTROLLERS)})")
    rate = _number(raw, "control_rate_hz", file)
    if rate <= 0 or rate > TICK_HZ:
        raise _err(file, "control_rate_hz", f"{rate} Hz must be in (0, {TICK_HZ}] Hz (e.g. 30, 50, 100, 1000)")
    log_rate = _number(raw, "log_rate_hz", file) if "log_rate_hz" in raw else rate
    if log_rate not in (rate, float(TICK_HZ)):
        raise _err(file, "log_rate_hz", f"{log_rate} Hz: must equal control_rate_hz ({rate}) or {TICK_HZ}")
    num = raw.get("num_samples")
    if isinstance(num, bool) or not isinstance(num, int) or num < 2:
        raise _err(file, "num_samples", f"expected an integer >= 2, got {num!r}")
    q_init = _vector(raw, "q_init", n_dof, file)
    bad = np.flatnonzero((q_init < q_lower - JOINT_LIMIT_SLACK) | (q_init > q_upper + JOINT_LIMIT_SLACK))
    if bad.size:
        i = int(bad[0])
        raise _err(
            file, f"q_init[{i}]", f"{q_init[i]:.4f} rad outside joint limits [{q_lower[i]:.4f}, {q_upper[i]:.4f}]"
        )
    anchor = raw.get("anchor_pose")
    if not isinstance(anchor, dict):
        raise _err(file, "anchor_pose", "missing (expected {\"position\": [x,y,z], \"quat_xyzw\": [x,y,z,w]})")
    anchor_pos = _vector(anchor, "position", 3, file, "anchor_pose.position")
    anchor_quat = _vector(anchor, "quat_xyzw", 4, file, "anchor_pose.quat_xyzw")
    if abs(np.linalg.norm(anchor_quat) - 1.0) > QUAT_NORM_TOL:
        raise _err(file, "anchor_pose.quat_xyzw", f"not a unit quaternion (norm {np.linalg.norm(anchor_quat):.4f})")
    gains = raw.get("gains")
    if not isinstance(gains, dict):
        raise _err(file, "gains", "missing (expected {\"kp\": [...], \"kd\": [...]})")
    joint = controller in JOINT_SPACE_CONTROLLERS
    n_gain = n_dof if joint else 6
    kp = _gain_vector(gains, "kp", n_gain, file, joint)
    kd = _gain_vector(gains, "kd", n_gain, file, joint)
    for name, vec in (("kp", kp), ("kd", kd)):
        # a servo's firmware loop may have no D term (the XL330's position mode: P only): kd 0 is stated, not unknown
        zero_ok = controller == "servo" and name == "kd"
        nonpos = np.flatnonzero(vec < 0 if zero_ok else vec <= 0)
        if nonpos.size:
            i = int(nonpos[0])
            raise _err(file, f"gains.{name}[{i}]",
                       f"gain must be {'>= 0' if zero_ok else 'positive'}, got {vec[i]}")
    unrecorded = _parse_unrecorded(raw.get("unrecorded", []), file)
    law: ImpedanceLaw | None = ImpedanceLaw()
    if controller == "task_impedance" and any(f in unrecorded for f in LAW_FACTS):
        if not all(f in unrecorded for f in LAW_FACTS):
            raise _err(file, "unrecorded", f"names part of the impedance law; list all of {', '.join(LAW_FACTS)} or none")
        if raw.get("impedance") is not None:
            raise _err(file, "impedance", "must be null when 'unrecorded' lists the impedance law")
        law = None
    elif controller == "task_impedance":
        law = _parse_law(raw.get("impedance", {}), file, n_dof)
    state_age = _parse_state_age(raw.get("state_age"), file, log_rate)
    robot, stated = sidecar_robot(raw)
    return RunMeta(
        schema_version=int(raw["schema_version"]),
        robot=robot,
        robot_stated=stated,
        controller=str(controller),
        control_rate_hz=rate,
        log_rate_hz=log_rate,
        num_samples=num,
        q_init=q_init,
        anchor_pos=anchor_pos,
        anchor_quat=anchor_quat,
        kp=kp,
        kd=kd,
        impedance=law,
        gravity_compensated=bool(raw.get("gravity_compensated", True)),
        excitation=dict(raw.get("excitation", {})),
        summary=dict(raw.get("summary", {})),
        unrecorded=unrecorded,
        state_age_ms=state_age,
    )


def _parse_state_age(raw: Any, file: str, log_rate_hz: float) -> int | None:
    """The optional ``state_age`` block -> the rows' maximum state age [ms] (None: absent or null).

    ``{"model": "uniform", "max_ms": N}``: each row's state is 0..N ms old, uniform (the newest frame
    of a state stream: 10 for a 100 Hz stream, 0 for fresh states). Only logs below 1 kHz have an age.
    """
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _err(file, "state_age", f"expected an object {{\"model\": \"uniform\", \"max_ms\": N}} or null, got {raw!r}")
    for key in raw:
        if key not in ("model", "max_ms"):
            raise _err(file, f"state_age.{key}", "unknown key (known: max_ms, model)")
    model = raw.get("model", "uniform")
    if model not in STATE_AGE_MODELS:
        raise _err(file, "state_age.model", f"unknown state-age model {model!r} (expected {', '.join(STATE_AGE_MODELS)})")
    age = raw.get("max_ms")
    if isinstance(age, bool) or not isinstance(age, int) or age < 0:
        raise _err(file, "state_age.max_ms", f"expected an integer number of ms >= 0 (the 1 ms tick), got {age!r}")
    if age > 0 and log_rate_hz >= TICK_HZ:
        raise _err(file, "state_age.max_ms", f"{age} ms on a {log_rate_hz:g} Hz log: its rows are every controller tick, "
                   "fresh; a state age applies to logs below 1 kHz only (0 or null here)")
    return int(age)


def _parse_unrecorded(raw: Any, file: str) -> tuple[str, ...]:
    """The ``unrecorded`` list: replay facts the run does not record (names from REPLAY_FACTS)."""
    if not isinstance(raw, list):
        raise _err(file, "unrecorded", f"expected a list of names ({', '.join(REPLAY_FACTS)})")
    for i, name in enumerate(raw):
        if name not in REPLAY_FACTS:
            raise _err(file, f"unrecorded[{i}]", f"unknown replay fact {name!r} (known: {', '.join(REPLAY_FACTS)})")
    return tuple(dict.fromkeys(raw))


def _parse_law(raw: Any, file: str, n_dof: int) -> ImpedanceLaw:
    if not isinstance(raw, dict):
        raise _err(file, "impedance", "expected an object")
    known = {
        "coriolis_compensation",
        "orientation_error",
        "max_position_error",
        "max_orientation_error",
        "nullspace_stiffness",
        "q_rest",
    }
    for key in raw:
        if key not in known:
            raise _err(file, f"impedance.{key}", f"unknown key (known: {', '.join(sorted(known))})")
    conv = raw.get("orientation_error", "quat_2vec")
    if conv in LEGACY_ORIENTATION_ERRORS:
        new = LEGACY_ORIENTATION_ERRORS[conv]
        # one line (no source line under it): the file and key are in the message
        warnings.warn_explicit(f"{file}: impedance.orientation_error {conv!r} is deprecated and read as {new!r} "
                               "(2 vec(q_des q^-1)); write quat_2vec, or quat_vec for libfranka's "
                               "cartesian_impedance_example", RunFormatWarning, "isaaclab_sysid", 0)
        conv = new
    if conv not in ORIENTATION_ERRORS:
        raise _err(file, "impedance.orientation_error",
                   f"unknown convention {conv!r} (expected {', '.join(ORIENTATION_ERRORS)})")
    clip: dict[str, float | None] = {}
    for key in ("max_position_error", "max_orientation_error"):
        if raw.get(key) is None:
            clip[key] = None
        else:
            clip[key] = _number(raw, key, file, f"impedance.{key}")
            if clip[key] <= 0:  # type: ignore[operator]
                raise _err(file, f"impedance.{key}", "must be positive or null")
    ns = _number(raw, "nullspace_stiffness", file, "impedance.nullspace_stiffness") if "nullspace_stiffness" in raw else 0.0
    if ns < 0:
        raise _err(file, "impedance.nullspace_stiffness", "must be >= 0")
    q_rest = _vector(raw, "q_rest", n_dof, file, "impedance.q_rest") if raw.get("q_rest") is not None else None
    return ImpedanceLaw(
        coriolis_compensation=bool(raw.get("coriolis_compensation", True)),
        orientation_error=conv,
        max_position_error=clip["max_position_error"],
        max_orientation_error=clip["max_orientation_error"],
        nullspace_stiffness=ns,
        q_rest=q_rest,
    )


def meta_to_dict(meta: RunMeta) -> dict[str, Any]:
    """The sidecar JSON object of ``meta`` (inverse of :func:`parse_sidecar`)."""
    out: dict[str, Any] = {
        "schema_version": 1,
        "robot": meta.robot,
        "controller": meta.controller,
        "control_rate_hz": meta.control_rate_hz,
        "log_rate_hz": meta.log_rate_hz,
        "num_samples": meta.num_samples,
        "q_init": meta.q_init.tolist(),
        "anchor_pose": {"position": meta.anchor_pos.tolist(), "quat_xyzw": meta.anchor_quat.tolist()},
        "gains": {"kp": meta.kp.tolist(), "kd": meta.kd.tolist()},
        "gravity_compensated": meta.gravity_compensated,
        "excitation": meta.excitation,
        "summary": meta.summary,
    }
    law = meta.impedance
    if meta.unrecorded:
        out["unrecorded"] = list(meta.unrecorded)
    if meta.state_age_ms is not None:
        out["state_age"] = {"model": "uniform", "max_ms": int(meta.state_age_ms)}
    if meta.controller == "task_impedance" and law is None:
        out["impedance"] = None
    elif meta.controller == "task_impedance":
        out["impedance"] = {
            "coriolis_compensation": law.coriolis_compensation,
            "orientation_error": law.orientation_error,
            "max_position_error": law.max_position_error,
            "max_orientation_error": law.max_orientation_error,
            "nullspace_stiffness": law.nullspace_stiffness,
            "q_rest": None if law.q_rest is None else np.asarray(law.q_rest).tolist(),
        }
    return out


def load_sidecar_json(path: Path) -> Any:
    """Read and decode a sidecar file (UTF-8 with or without a byte-order mark, UTF-16 with one); malformed JSON
    names line and column."""
    text = read_text(path, "sidecar file")
    if not text.strip():
        raise RunFormatError(str(path), None, "-", "sidecar file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFormatError(str(path), exc.lineno, f"char {exc.colno}", f"invalid JSON: {exc.msg}") from None
