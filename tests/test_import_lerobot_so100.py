"""SO-100 datasets in LeRobot's units are refused in one line (docs/servo_arms.md section 1): LeRobot's angles are
about each calibrated range's middle, the so100 URDF's zeros are its CAD pose, and the offsets and directions
between them cannot be told from the URDF. Also checked here: the URDF facts that section states (the SO-100
URDF's shoulder_pan turns the other way from the SO-101 URDF's; its range middles against the SO-101 URDF's
zeros, the pose LeRobot's angles are taken about for the SO-101)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

pytest.importorskip("pyarrow")

from isaaclab_sysid.data import RunFormatError, read_run  # noqa: E402
from isaaclab_sysid.importers import import_runs  # noqa: E402
from isaaclab_sysid.importers.lerobot_dataset import (Episode, json_calibration, write_calibration,  # noqa: E402
                                                     write_lerobot_dataset)
from isaaclab_sysid.importers.lerobot_units import MotorCalibration, from_radians  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402

MOTORS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
LEROBOT_UNITS = ["range_m100_100"] * 5 + ["range_0_100"]


def _dataset(tmp: Path, units: list[str]) -> tuple[Path, np.ndarray]:
    """A 2 s SO-100 dataset about the so100 URDF's range middles, written in ``units`` with a calibration file and
    its mapping; returns the mapping's path and the angles [rad] (T, 6)."""
    robot = load_robot("so100")
    mid = 0.5 * (robot.q_lower + robot.q_upper)
    t = np.arange(60) / 30.0
    q = mid + 0.3 * np.sin(2 * np.pi * 0.5 * t[:, None] + np.arange(6))
    cal = json_calibration(MOTORS, [2047] * 6, [1300] * 6, [0] * 6)
    write_calibration(tmp / "so100_follower.json", cal)
    mc = {m: MotorCalibration(c["drive_mode"], 0, c["range_min"], c["range_max"]) for m, c in cal.items()}
    conv = lambda a: np.stack([from_radians(a[:, j], units[j], mc[m]) for j, m in enumerate(MOTORS)], axis=1)  # noqa
    write_lerobot_dataset(tmp / "ds", [Episode(state=conv(q), action=conv(q + 0.01))], MOTORS, 30)
    feats = {"q": {"feature": "observation.state"}, "dq": "differentiate", "tau": "none",
             "targets": {"feature": "action"}, "units": units, "calibration": "so100_follower.json"}
    mapping = tmp / "so100.yaml"
    mapping.write_text(yaml.safe_dump({"robot": "so100", "controller": "joint_pd", "gains": "unknown",
                                       "gravity_compensated": False, "features": feats}))
    return mapping, q


@pytest.mark.parametrize("units", [LEROBOT_UNITS, ["servo_deg"] * 5 + ["range_0_100"], ["servo_deg"] + ["rad"] * 5])
def test_so100_in_lerobot_units_is_refused_in_one_line(tmp_path, units):
    mapping, _ = _dataset(tmp_path, units)
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "ds", "lerobot", mapping, tmp_path / "out", log=lambda s: None)
    msg = str(exc.value)
    assert exc.value.file == str(mapping) and exc.value.column == "features.units" and "\n" not in msg
    assert "refused for robot so100" in msg and "docs/servo_arms.md section 1" in msg and "units rad or deg" in msg
    assert not (tmp_path / "out").exists()


def test_so100_in_the_urdfs_angles_imports_as_given(tmp_path):
    mapping, q = _dataset(tmp_path, ["rad"] * 6)
    runs, _ = import_runs(tmp_path / "ds", "lerobot", mapping, tmp_path / "out", log=lambda s: None)
    run = read_run(tmp_path / "out" / f"{runs[0].name}.csv")
    assert run.meta.robot == "so100"
    np.testing.assert_allclose(run.q, q, atol=1e-6)  # float32 in the dataset


def _joint_axes_and_points(name: str, q: np.ndarray, turn: np.ndarray) -> tuple[dict, dict]:
    """World joint axes and joint origins of robot ``name`` at ``q``, in a frame turned by ``turn`` (3, 3)."""
    robot = load_robot(name)
    model = robot.build_pinocchio()
    data = model.createData()
    pin.forwardKinematics(model, data, q)
    unit = {"JointModelRX": [1.0, 0, 0], "JointModelRY": [0, 1.0, 0], "JointModelRZ": [0, 0, 1.0]}
    axes, points = {}, {}
    for j in robot.joint_names:
        jid = model.getJointId(j)
        axes[j] = turn @ data.oMi[jid].rotation @ unit[model.joints[jid].shortname()]
        points[j] = turn @ data.oMi[jid].translation
    return axes, points


def test_so100_urdf_against_the_so101_urdf_the_facts_docs_state():
    """The SO-101 URDF's arm reaches along +x at q = 0, the SO-100 URDF's along -y: turned onto each other about the
    vertical, the SO-100's shoulder_pan axis points the other way (+z against -z), the other five the same way; and
    the SO-100 URDF at its range middles stands within 3 deg (shoulder_lift), 0.1 deg (elbow_flex) and 5 deg
    (wrist_flex) of the SO-101 URDF's zero pose, measured on the links between the joint origins."""
    so100 = load_robot("so100")
    mid = 0.5 * (so100.q_lower + so100.q_upper)
    np.testing.assert_allclose(mid, [0.0, 1.75, -np.pi / 2, -0.65, 0.0, 0.9], atol=1e-4)
    a1, p1 = _joint_axes_and_points("so101", np.zeros(6), np.eye(3))
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # the SO-100's -y onto the SO-101's +x
    a0, p0 = _joint_axes_and_points("so100", mid, turn)
    assert (p1["wrist_roll"] - p1["shoulder_lift"])[0] > 0.2 and (p0["wrist_roll"] - p0["shoulder_lift"])[0] > 0.2
    dots = {j: float(a1[j] @ a0[j]) for j in MOTORS}
    assert dots["shoulder_pan"] == pytest.approx(-1.0, abs=1e-6)
    assert all(dots[j] > 0.99 for j in MOTORS[1:]), dots

    def elevation(p, a, b):  # the link a -> b's angle above the horizontal, in the arm's plane [deg]
        v = p[b] - p[a]
        return np.degrees(np.arctan2(v[2], v[0]))

    links = [("shoulder_lift", "elbow_flex"), ("elbow_flex", "wrist_flex"), ("wrist_flex", "wrist_roll")]
    e1 = np.array([elevation(p1, a, b) for a, b in links])
    e0 = np.array([elevation(p0, a, b) for a, b in links])
    # each joint's own share: the link's elevation less the one before it (a positive joint angle tilts down)
    rel = lambda e: np.diff(np.concatenate([[90.0], e]))  # noqa: E731 - the upper arm against the vertical
    gap = rel(e0) - rel(e1)
    np.testing.assert_allclose(gap, [2.9, 0.0, 4.5], atol=0.15)
