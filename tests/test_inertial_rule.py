"""One physical-validity rule for link inertials, shared by the writer and every reader (issue 43).

The writer (``arm_model.write_nominal``: identify_rigid_body.py's and CLIE's ``nominal_inertials.json``) must emit
only what every reader takes (``load_nominal``, ``with_body_inertials``, MuJoCo unchanged; Newton and PhysX through
the margin of ``robots/overrides.py``), or refuse with a message that does not send the user back to the writer.
"""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest

from isaaclab_sysid.arm_model import (
    ArmModel,
    NominalRefused,
    check_bodies,
    link_overrides,
    with_body_inertials,
    write_nominal,
)
from isaaclab_sysid.robots import LinkInertial, load_robot
from isaaclab_sysid.robots.identified import NominalFileError, load_nominal, save_nominal
from isaaclab_sysid.robots.overrides import (
    InertialError,
    engine_floor,
    engine_ready,
    engine_violation,
    inertial_violation,
    principal_moments,
)


def _from_points(masses: np.ndarray, points: np.ndarray) -> LinkInertial:
    """The inertials of point masses (an SDP output is a pseudo-inertia: a cloud of point masses, PSD)."""
    m = float(masses.sum())
    c = (masses[:, None] * points).sum(0) / m
    d = points - c
    sigma = (masses[:, None, None] * np.einsum("ki,kj->kij", d, d)).sum(0)
    return LinkInertial(m, c, np.trace(sigma) * np.eye(3) - sigma)


def _random_body(rng: np.random.Generator, mass: float) -> LinkInertial:
    """A random SDP-like body of ``mass``: a point mass, a rod, a flat plate (A + B = C exactly), a plate
    perturbed just across or inside the triangle inequality, or a general body."""
    kind = rng.integers(0, 6)
    k = {0: 1, 1: 2, 2: 3, 3: 3, 4: 3}.get(int(kind), int(rng.integers(4, 8)))
    pts = rng.normal(0.0, rng.uniform(0.005, 0.12), (k, 3)) + rng.normal(0.0, 0.05, 3)
    w = rng.uniform(0.1, 1.0, k)
    li = _from_points(mass * w / w.sum(), pts)
    if kind in (3, 4):  # near-triangle: the solver's tolerance either side of A + B = C
        ev, vec = np.linalg.eigh(li.inertia)
        ev = ev + np.array([0.0, 0.0, 1.0]) * (1 if kind == 3 else -1) * rng.uniform(1e-12, 1e-7) * ev[2]
        li = LinkInertial(li.mass, li.com, (vec * ev) @ vec.T)
    return li


def test_engine_ready_uses_the_margin_of_its_result_the_issue_43_loop():
    # the link the issue's reader refused: s = (5.23e-4, -4.2e-4, -4.2e-4); its largest moment grows from 1.03e-4
    # to 5.23e-4 when raised, and the margin with it (the old writer kept the old one: 4.1e-10 under 1.05e-9)
    s = np.array([5.23e-4, -4.2e-4, -4.2e-4])
    li = LinkInertial(0.003, np.zeros(3), np.diag(s.sum() - s))
    assert "violate A + B >= C" in engine_violation(li)
    fixed = engine_ready(li)
    assert engine_violation(fixed) is None
    ev = principal_moments(fixed.inertia)
    assert ev[0] + ev[1] - ev[2] >= 2 * engine_floor(ev[2])
    assert fixed.mass == li.mass and np.array_equal(fixed.com, li.com)


@pytest.mark.parametrize("ev", [(0.0, 0.0, 0.0), (0.0, 1e-3, 1e-3), (1e-3, 1e-3, 2e-3), (-1e-3, 5e-4, 5e-4),
                                (1e-20, 1e-20, 1e-20), (2e-3, 1e-3, 1e-3), (1.0, 1.0, 1e-9)])
def test_engine_ready_output_passes_the_rule_degenerate_cases(ev):
    fixed = engine_ready(LinkInertial(0.5, np.array([0.01, 0.0, 0.02]), np.diag(ev)))
    assert engine_violation(fixed) is None
    assert inertial_violation(fixed, engine_margin=False) is None


def test_engine_ready_refuses_what_no_inertia_fixes():
    with pytest.raises(InertialError, match="not positive"):
        engine_ready(LinkInertial(0.0, np.zeros(3), np.eye(3)))
    with pytest.raises(InertialError, match="not finite"):
        engine_ready(LinkInertial(1.0, np.zeros(3), np.full((3, 3), np.nan)))


@pytest.mark.parametrize("robot_name", ["franka_panda", "franka_panda_nohand"])
def test_whatever_the_writer_emits_every_reader_accepts(robot_name, tmp_path):
    """Random SDP-like body inertials, degenerate ones included, through the one writer: either written, and then
    read by load_nominal, applied by with_body_inertials and compiled by MuJoCo with the moments unchanged; or
    refused (only a body lighter than its fixed children) with a message naming the end effector, not the writer."""
    robot = load_robot(robot_name)
    prior = ArmModel(robot).body_inertials()
    children_mass = {n: ArmModel(robot.with_inertials({n: prior[n]})).body_inertials()[n].mass - prior[n].mass
                     for n in prior}
    rng = np.random.default_rng(43)
    written = refused = 0
    for trial in range(24):
        bodies = {}
        for n, li in prior.items():
            scale = rng.choice([rng.uniform(0.2, 0.6), rng.uniform(0.8, 1.3), rng.uniform(1e-3, 1e-2)],
                               p=[0.25, 0.65, 0.1])
            bodies[n] = _random_body(rng, float(li.mass * scale))
        path = tmp_path / f"nominal_{trial}.json"
        path.write_text("{}")  # a stale file: gone when the writer refuses
        lighter = [n for n, b in bodies.items() if b.mass <= children_mass[n]]
        try:
            out, _ = write_nominal(path, robot, bodies, meta={"source": "test"})
        except NominalRefused as exc:
            refused += 1
            msg = str(exc)
            assert lighter, msg  # refused only when a body is lighter than what the config fixes to it
            assert not path.exists() and "not written" in msg and "identify_rigid_body" not in msg
            assert "--robot franka_panda_nohand" in msg and "carries" in msg
            continue
        written += 1
        assert not lighter
        loaded = load_nominal(out)
        for n, b in bodies.items():  # mass and centre of mass as identified; only the inertia may be raised
            assert loaded[n].mass == pytest.approx(b.mass, rel=1e-12)
            np.testing.assert_allclose(loaded[n].com, b.com, rtol=1e-9, atol=1e-12)
        check_bodies(robot, loaded)
        applied = with_body_inertials(robot, loaded)
        model = applied.build_mujoco()
        for n, li in link_overrides(robot, loaded).items():
            assert engine_violation(li) is None
            # MuJoCo took it unchanged: its principal moments are ours
            np.testing.assert_allclose(sorted(model.body(n).inertia), principal_moments(li.inertia),
                                       rtol=1e-9, atol=1e-15)
            assert model.body(n).mass[0] == pytest.approx(li.mass, rel=1e-12)
        mujoco.mj_forward(model, mujoco.MjData(model))
    assert written >= 8
    if robot_name == "franka_panda":
        assert refused >= 2  # link 7 lighter than the hand the config fixes to it


def test_the_reader_names_a_file_written_otherwise_without_sending_the_user_back(tmp_path):
    robot = load_robot("franka_panda")
    bodies = ArmModel(robot).body_inertials()
    # link 7 lumped with the hand, made rod-like so that the link less the hand breaks the rule
    s = np.array([5.23e-4, -4.2e-4, -4.2e-4])
    hand = {n: li for n, li in bodies.items()}
    merged_children = ArmModel(robot.with_inertials({"panda_link7": bodies["panda_link7"]})).body_inertials()
    children = merged_children["panda_link7"].to_pi() - bodies["panda_link7"].to_pi()
    link = LinkInertial(0.003, np.array([0.0, 0.0, 0.05]), np.diag(s.sum() - s))
    hand["panda_link7"] = LinkInertial.from_pi(link.to_pi() + children)
    bad = save_nominal(tmp_path / "bad.json", hand)
    with pytest.raises(InertialError) as err:
        with_body_inertials(robot, load_nominal(bad))
    msg = str(err.value)
    assert str(bad) in msg and "panda_link7" in msg and "A + B >= C" in msg and "rewrite" not in msg
    # the one writer turns the same bodies into a file every reader takes
    good, notes = write_nominal(tmp_path / "good.json", robot, hand)
    assert notes and "raised to" in notes[0]
    with_body_inertials(robot, load_nominal(good)).build_mujoco()
    assert json.loads(good.read_text())["meta"]["engine_adjustments"] == notes


def test_loader_applies_the_same_rule_to_bodies(tmp_path):
    robot = load_robot("franka_panda")
    bodies = ArmModel(robot).body_inertials()
    path = save_nominal(tmp_path / "n.json", bodies)
    body = json.loads(path.read_text())
    body["links"]["panda_link3"]["inertia"] = np.diag([1e-3, 1e-3, 3e-3]).tolist()  # A + B < C
    path.write_text(json.dumps(body))
    with pytest.raises(NominalFileError, match=r"links.panda_link3: not physical: .*violate A \+ B >= C"):
        load_nominal(path)
