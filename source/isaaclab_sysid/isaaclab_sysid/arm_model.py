"""The arm's own rigid-body torque from its link inertials, for stages that subtract it.

Built on the rigid-body regressor (``rigid_body.regressor``, Pinocchio) with the link
columns only: ``tau_arm(q, qd, qdd) = Y(q, qd, qdd) pi_arm``, pi_arm the robot's link
inertials (the URDF's, or the least-squares result applied with :func:`with_body_inertials`).
"""

from __future__ import annotations

import numpy as np

from isaaclab_sysid.data import Run
from isaaclab_sysid.robots.regressor import Regressor, RegressorOptions
from isaaclab_sysid.robots import LinkInertial, Robot
from isaaclab_sysid.robots.overrides import (
    InertialError,
    engine_ready,
    engine_violation,
    inertial_violation,
    principal_moments,
)


def gravity_in_signal(run: Run, signal: str) -> bool:
    """Whether a run's torque ``signal`` holds the arm's gravity torque: the measured ``tau_J`` does
    (a link-side sensor reads it; libfranka's does), the commanded ``tau`` only when the controller
    does not compensate gravity (``meta.gravity_compensated``)."""
    return signal == "tau_J" or not run.meta.gravity_compensated


class ArmModel:
    """Link-only regressors of one robot (with and without gravity), built on demand."""

    def __init__(self, robot: Robot) -> None:
        self.robot = robot
        self.n_dof = robot.n_dof
        self._reg: dict[bool, Regressor] = {}

    def regressor(self, gravity: bool = True) -> Regressor:
        if gravity not in self._reg:
            opts = RegressorOptions(armature=False, viscous=False, coulomb=False, offset=False, gravity=gravity)
            self._reg[gravity] = Regressor(self.robot, opts)
        return self._reg[gravity]

    def arm_torque(self, q: np.ndarray, qd: np.ndarray | None = None, qdd: np.ndarray | None = None,
                   gravity: bool = True) -> np.ndarray:
        """(T, N) the arm's rigid-body torque [N m] (no payload, no joint friction) at (T, N) q, qd, qdd
        (qd, qdd default to 0)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        qd = np.zeros_like(q) if qd is None else qd
        qdd = np.zeros_like(q) if qdd is None else qdd
        reg = self.regressor(gravity)
        return reg.predict(reg.prior(), q, qd, qdd)

    def body_inertials(self) -> dict[str, LinkInertial]:
        """Each moving body's inertials (Pinocchio's, fixed children merged in)."""
        reg = self.regressor(True)
        return reg.link_inertials(reg.prior())


def fixed_children(robot: Robot) -> dict[str, tuple[str, ...]]:
    """Moving body (Pinocchio's, one per joint) -> the links with mass fixed to it that Pinocchio merges in
    (the Franka's link 7: panda_hand and the fingers; empty for most bodies)."""
    import xml.etree.ElementTree as ET

    import pinocchio as pin

    massive = set()
    for link in ET.fromstring(robot.urdf_text()).findall("link"):
        mass = link.find("inertial/mass")
        if mass is not None and float(mass.get("value", 0.0)) > 0:
            massive.add(link.get("name"))
    model = robot.build_pinocchio()
    out = {}
    for j in range(1, model.njoints):
        names = [f.name for f in model.frames if f.parentJoint == j and f.type == pin.FrameType.BODY]
        out[names[0]] = tuple(n for n in names[1:] if n in massive)
    return out


def link_overrides(robot: Robot, bodies: dict[str, LinkInertial]) -> dict[str, LinkInertial]:
    """The per-link overrides (URDF links, what MuJoCo and Isaac Lab build) that give ``robot``'s moving
    bodies the inertials ``bodies``: each body's inertials less its fixed children's share."""
    current = ArmModel(robot).body_inertials()
    unknown = sorted(set(bodies) - set(current))
    if unknown:
        raise InertialError(f"no moving body {', '.join(unknown)} in robot {robot.name} "
                            f"(bodies: {', '.join(current)})")
    probe = ArmModel(robot.with_inertials({n: current[n] for n in bodies})).body_inertials()
    out = {}
    for n, target in bodies.items():
        children = probe[n].to_pi() - current[n].to_pi()
        pi = target.to_pi() - children
        if not pi[0] > 0:
            raise InertialError(f"{_body_words(n, robot)}: mass {target.mass:.6g} kg leaves {pi[0]:.6g} kg once its "
                                f"fixed children's {children[0]:.6g} kg are taken out (not positive)")
        out[n] = LinkInertial.from_pi(pi)
    return out


def _body_words(name: str, robot: Robot) -> str:
    kids = fixed_children(robot).get(name, ())
    return f"{name} (without its fixed children {', '.join(kids)})" if kids else name


def with_body_inertials(robot: Robot, bodies: dict[str, LinkInertial]) -> Robot:
    """``robot`` whose moving bodies (Pinocchio's, one per joint, fixed children merged in) have
    the given inertials.

    ``Robot.with_inertials`` overrides one URDF link; Pinocchio then merges the links fixed
    to it (the Franka's hand and fingers into link 7), so overriding a link with a merged
    body's inertials counts those children twice. Here each override is the target minus
    the children's share ``C = merged(X0) - X0`` (in the additive 10-parameter form).

    Raises:
        InertialError: a link override the replay engines would refuse or change (MuJoCo: ``A + B >= C``;
            :func:`~isaaclab_sysid.robots.overrides.engine_violation`), naming the link and its principal
            moments; when ``bodies`` came from :func:`~isaaclab_sysid.robots.identified.load_nominal`, the file too.
    """
    check_bodies(robot, bodies)
    return robot.with_inertials(link_overrides(robot, bodies))


def check_bodies(robot: Robot, bodies: dict[str, LinkInertial]) -> None:
    """The readers' check of body inertials for ``robot`` (what :func:`with_body_inertials` and every writer of
    ``nominal_inertials.json`` apply): every body physical and every link override derived from it inside the one
    rule with the engines' margin (:func:`~isaaclab_sysid.robots.overrides.inertial_violation`).

    Raises:
        InertialError: naming the file (``bodies.source`` where set), the link and what breaks the rule.
    """
    source = getattr(bodies, "source", None)
    where = f"{source}: " if source is not None else ""
    for n, li in bodies.items():
        why = inertial_violation(li, engine_margin=False)
        if why is not None:
            raise InertialError(f"{where}{n}: not physical: {why}")
    try:
        out = link_overrides(robot, bodies)
    except InertialError as exc:
        raise InertialError(f"{where}{exc}") from None
    for n, li in out.items():
        why = engine_violation(li)
        if why is not None:
            raise InertialError(f"{where}{_body_words(n, robot)}: {why}; identify_rigid_body.py writes only links "
                                "that pass this rule: this file was written otherwise (by hand or an older version)")


def engine_ready_bodies(robot: Robot, bodies: dict[str, LinkInertial]) -> tuple[dict[str, LinkInertial], list[str]]:
    """``bodies`` (moving bodies, fixed children merged in) changed as little as needed so that every link
    override :func:`with_body_inertials` derives passes the engines' margin (MuJoCo, Newton): a link that
    fails has its principal second moments raised (:func:`~isaaclab_sysid.robots.overrides.engine_ready`;
    mass, centre of mass and axes kept), and its body is re-merged. Returns the bodies and one note per change.

    Raises:
        InertialError: a body whose mass does not exceed its fixed children's.
    """
    overrides = link_overrides(robot, bodies)
    current = ArmModel(robot).body_inertials()
    probe = ArmModel(robot.with_inertials({n: current[n] for n in bodies})).body_inertials()
    out, notes = dict(bodies), []
    for n, li in overrides.items():
        why = engine_violation(li)
        if why is None:
            continue
        fixed = engine_ready(li)
        children = probe[n].to_pi() - current[n].to_pi()
        out[n] = LinkInertial.from_pi(fixed.to_pi() + children)
        ev = principal_moments(fixed.inertia)
        notes.append(f"{_body_words(n, robot)}: {why}; raised to {ev[0]:.6g} {ev[1]:.6g} {ev[2]:.6g} kg m^2 "
                     "(mass, centre of mass and axes kept)")
    return out, notes


class NominalRefused(InertialError):
    """The identified body inertials cannot be made into links any engine builds (a body lighter than its fixed
    children): no ``nominal_inertials.json`` is written; the message says why and what to change (never to rerun
    the same writer)."""


def write_nominal(path, robot: Robot, bodies: dict[str, LinkInertial], meta: dict | None = None,
                  verdict: dict | None = None) -> tuple["Path", list[str]]:
    """The one writer of ``nominal_inertials.json`` from identified body inertials: each body made engine-ready
    (:func:`engine_ready_bodies`), then checked with the readers' own check (:func:`check_bodies`), then written
    (:func:`~isaaclab_sysid.robots.identified.save_nominal`). Whatever it writes, every reader accepts.

    Returns:
        (the path, one note per link raised to the engines' margin).
    Raises:
        NominalRefused: a body lighter than its fixed children (no file written; a stale one at ``path`` is
            removed so that no reader picks it up), naming the body, both masses and what the arm must be said
            to carry.
    """
    from pathlib import Path

    from isaaclab_sysid.robots.identified import save_nominal

    path = Path(path)
    try:
        ready, notes = engine_ready_bodies(robot, bodies)
        check_bodies(robot, ready)
    except InertialError as exc:
        path.unlink(missing_ok=True)
        raise NominalRefused(f"{path.name} not written: {exc}. {carried_hint(robot)}") from None
    if notes:
        meta = {**(meta or {}), "engine_adjustments": notes}
    return save_nominal(path, ready, meta=meta, verdict=verdict), notes


def carried_hint(robot: Robot) -> str:
    """What to change when a body comes out lighter than the fixed children the config gives it: the end effector
    the config says the arm carries, and the configs of the same arm that carry something else."""
    from isaaclab_sysid.robots.config import arm_variants

    others = [c for c in arm_variants(robot.config) if c != robot.config.source]
    alt = ", ".join(f"--robot {p.stem}" for p in others)
    return (f"The config {robot.name} says the arm carries {robot.config.end_effector}; state what it carries"
            + (f" ({alt}, or a config with its tool: docs/rigid_body.md)" if alt else
               " (a config with its tool: docs/rigid_body.md)"))
