"""What the arm carried, as the identified masses say it: the evidence behind the verdict's first cause.

The last moving body (the Franka's ``panda_link7``) is identified lumped with the links fixed to it (the hand and its
fingers in ``franka_panda``, nothing in ``franka_panda_nohand``, a stated ``[tool]``). When its identified mass is far
from the config's lumped mass and near that of another config of the same arm, the arm most likely carried what
that config says (issue 43: a real Panda without its hand identified at 0.763 kg against the hand config's 1.496 kg,
of which the link alone is 0.736 kg).
"""

from __future__ import annotations

from dataclasses import dataclass

from isaaclab_sysid.arm_model import ArmModel, fixed_children
from isaaclab_sysid.robots import Robot, load_robot
from isaaclab_sysid.robots.config import RobotConfigError, arm_variants

#: The identified lumped mass must differ from the config's by more than this fraction of it before the evidence
#: names what the arm carried ...
FAR = 0.2
#: ... and at most this fraction of that distance from another config's for the evidence to name it (the SDP's prior
#: pulls the mass toward the config identified with: a hand-less twin's 0.67 kg link 7 comes out 0.93 kg with the
#: hand's 1.50 kg prior).
NEARER = 0.5


@dataclass(frozen=True)
class CarriedEvidence:
    """The last body's identified lumped mass against what each config of the arm says it carries.

    Attributes:
        body: the moving body (fixed children merged in).
        identified: its identified (SDP) mass [kg].
        config: the config's lumped mass [kg] and ``parts``: how the config makes it up, in words.
        variants: config name -> (lumped mass [kg], what it carries) for every config of the same arm.
        best: the config whose lumped mass is nearest the identified one.
        supported: a config other than the one used that the evidence supports (None: none does).
        unexplained: the identified mass is far from every config's (a tool no config states).
    """

    robot: str
    carries: str
    body: str
    identified: float
    config: float
    parts: str
    variants: dict[str, tuple[float, str]]
    best: str
    supported: str | None
    unexplained: bool

    def cause(self) -> str | None:
        """The verdict's cause in one line with the flag that fixes it, or None when the masses say nothing."""
        what = (f"identified {self.body} with its fixed children at {self.identified:.3f} kg; the config "
                f"{self.robot} says {self.config:.3f} kg ({self.parts})")
        if self.supported is not None:
            mass, carries = self.variants[self.supported]
            lead = "the arm carried no hand" if "no " in carries.lower() or carries.lower().startswith("nothing") \
                else f"the arm carried {carries}"
            return (f"{lead}: {what}, {self.supported} says {mass:.3f} kg ({carries}); identify with "
                    f"--robot {self.supported} (and give the same --robot to every later stage)")
        if self.unexplained:
            more = "more" if self.identified > self.config else "less"
            return (f"the arm carried {more} than its config says: {what}; state what it carries: a config with "
                    f"`extends = \"{self.robot}\"` and a [tool] (mass, centre of mass, inertia at the flange; "
                    "docs/rigid_body.md), then --robot that config")
        return None

    def summary(self) -> dict:
        return {"body": self.body, "identified_kg": self.identified, "config_kg": self.config, "parts": self.parts,
                "variants": {k: {"kg": m, "carries": c} for k, (m, c) in self.variants.items()},
                "supported": self.supported, "unexplained": self.unexplained}


def _lumped(robot: Robot, body: str) -> float:
    return float(ArmModel(robot).body_inertials()[body].mass)


def _parts(robot: Robot, body: str) -> str:
    """``panda_link7 0.736 kg + panda_hand 0.73 kg + ...``: the config's masses fixed into ``body``."""
    import xml.etree.ElementTree as ET

    masses = {}
    for link in ET.fromstring(robot.urdf_text()).findall("link"):
        m = link.find("inertial/mass")
        masses[link.get("name")] = float(m.get("value", 0.0)) if m is not None else 0.0
    names = (body, *fixed_children(robot).get(body, ()))
    return " + ".join(f"{n} {masses.get(n, 0.0):.3f} kg" for n in names)


def carried_evidence(robot: Robot, body_masses: dict[str, float]) -> CarriedEvidence | None:
    """What the identified mass of the last moving body says the arm carried.

    Args:
        robot: the config identified with.
        body_masses: moving body -> identified lumped mass [kg] (the SDP reconstruction's).
    Returns:
        the evidence, or None when the body is unknown.
    """
    body = robot.link_names[-1]
    if body not in body_masses:
        return None
    identified = float(body_masses[body])
    own = _lumped(robot, body)
    variants: dict[str, tuple[float, str]] = {robot.name: (own, robot.carries)}
    for path in arm_variants(robot.config):
        if path.stem in variants:
            continue
        try:
            other = load_robot(path)
        except (RobotConfigError, ValueError):
            continue
        if other.link_names[-1] == body:
            variants[other.name] = (_lumped(other, body), other.carries)
    best = min(variants, key=lambda k: abs(variants[k][0] - identified))
    far = abs(identified - own) > FAR * own
    supported = best if best != robot.name and far else None
    unexplained = far and supported is None
    if supported is not None and abs(variants[best][0] - identified) > NEARER * abs(own - identified):
        supported, unexplained = None, True  # not clearly nearer another config: a tool no config states
    return CarriedEvidence(robot.name, robot.carries, body, identified, own, _parts(robot, body), variants, best,
                           supported, unexplained)

