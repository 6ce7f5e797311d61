"""The three orientation-error conventions, named by what they compute, and the old name "quat".

``quat_vec`` is libfranka's / franka_ros's cartesian_impedance_example; it is checked against a
direct transcription of that example's formula. The backends run ``quat_vec`` as ``quat_2vec`` at
half the rotational stiffness (sim.schedule.backend_law): the native replay is checked against the
plain-Python reference, which computes ``quat_vec`` directly.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import make_run
from scipy.spatial.transform import Rotation

from isaaclab_sysid.data import read_run, write_run
from isaaclab_sysid.data.errors import RunFormatWarning
from isaaclab_sysid.data.run import ImpedanceLaw
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.robots.overrides import JointOverrides
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.reference import orientation_error, reference_replay
from isaaclab_sysid.twin.targets import Q_READY, pose_offsets, skeleton_run, task_targets

N = 7


@pytest.mark.parametrize("angle", [0.3, 1.2, 2.9])
def test_each_convention_at_a_known_rotation(angle):
    axis = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
    R = Rotation.from_rotvec([0.4, 0.1, -0.7]).as_matrix()  # current orientation, arbitrary
    R_des = Rotation.from_rotvec(angle * axis).as_matrix() @ R  # the target: `angle` about `axis`, world frame
    q_des = Rotation.from_matrix(R_des).as_quat()
    np.testing.assert_allclose(orientation_error(q_des, R, "rotvec"), angle * axis, atol=1e-12)
    np.testing.assert_allclose(orientation_error(q_des, R, "quat_vec"), np.sin(angle / 2) * axis, atol=1e-12)
    np.testing.assert_allclose(orientation_error(q_des, R, "quat_2vec"), 2 * np.sin(angle / 2) * axis, atol=1e-12)
    # the sign of the stored quaternion does not matter (short way)
    np.testing.assert_allclose(orientation_error(-q_des, R, "quat_vec"), np.sin(angle / 2) * axis, atol=1e-12)


# ---- a direct transcription of libfranka's examples/cartesian_impedance_control.cpp (Eigen, xyzw coeffs)
def _eigen_mul(a, b):
    """Eigen::Quaterniond a * b, coefficients (x, y, z, w)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


def _libfranka_wrench(position, R, position_d, orientation_d, stiffness, damping, jacobian, dq):
    """tau_task of the example: error = [x - x_d; -R vec(q^-1 q_d)], tau = J^T (-K error - D J dq)."""
    orientation = Rotation.from_matrix(R).as_quat()  # Eigen::Quaterniond orientation(transform.linear())
    error = np.zeros(6)
    error[:3] = position - position_d
    if orientation_d @ orientation < 0.0:
        orientation = -orientation
    inverse = np.array([-orientation[0], -orientation[1], -orientation[2], orientation[3]])  # unit: inverse = conj
    error_quaternion = _eigen_mul(inverse, orientation_d)
    error[3:] = error_quaternion[:3]
    error[3:] = -R @ error[3:]
    return jacobian.T @ (-stiffness @ error - damping @ (jacobian @ dq))


def test_quat_vec_is_the_libfranka_example_at_random_poses():
    rng = np.random.default_rng(0)
    K = np.diag([200.0, 200.0, 200.0, 20.0, 20.0, 20.0])
    D = np.diag([28.0, 28.0, 28.0, 9.0, 9.0, 9.0])
    worst = 0.0
    for _ in range(200):
        R = Rotation.random(random_state=rng).as_matrix()
        q_d = Rotation.random(random_state=rng).as_quat()
        x, x_d = rng.normal(size=3), rng.normal(size=3)
        J, dq = rng.normal(size=(6, N)), rng.normal(size=N)
        # ours: tau = J^T (Kp e - Kd J dq), e = [x_d - x; e_rot(quat_vec)] (docs/replay.md)
        e = np.concatenate([x_d - x, orientation_error(q_d, R, "quat_vec")])
        ours = J.T @ (np.diag(K) * e - np.diag(D) * (J @ dq))
        theirs = _libfranka_wrench(x, R, x_d, q_d, K, D, J, dq)
        worst = max(worst, float(np.abs(ours - theirs).max()))
    assert worst < 1e-12
    # and it is half of quat_2vec, not the rotation vector (about half the angle for small errors)
    R, q_d = np.eye(3), Rotation.from_rotvec([0.0, 0.0, 0.2]).as_quat()
    assert orientation_error(q_d, R, "quat_vec")[2] == pytest.approx(np.sin(0.1), abs=1e-15)


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


def _task_run(robot, law):
    pos, quat = robot.ee_pose(Q_READY)
    t, off = pose_offsets("multiband", 0.6, 50.0, seed=4, scale=3.0)
    x, qd = task_targets(pos, quat, off)
    kp = np.array([200.0, 200.0, 200.0, 30.0, 30.0, 30.0])
    return skeleton_run(robot, "task_impedance", t, np.hstack([x, qd]), kp, 2 * np.sqrt(kp), law=law, name="ori")


@pytest.mark.parametrize("clip", [None, 0.02])
def test_native_quat_vec_matches_the_reference(robot, clip):
    run = _task_run(robot, ImpedanceLaw(orientation_error="quat_vec", max_orientation_error=clip))
    be = MujocoBackend(robot, ReplayOptions(), n_threads=1)
    b = CandidateBatch(armature=np.full((1, N), 0.1), friction=np.full((1, N), 0.1), viscous=np.full((1, N), 0.2),
                       delay=np.array([2]))
    out = be.rollout(b, [run])[0]
    ref = reference_replay(robot, run, JointOverrides(np.full(N, 0.1), np.full(N, 0.1), np.full(N, 0.2)), 2)
    np.testing.assert_allclose(out.q[0], ref["q"], atol=1e-9)
    np.testing.assert_allclose(out.tau[0], ref["tau"], atol=1e-7)
    # quat_vec at rotational stiffness 2K is quat_2vec at K, bit for bit
    run2 = _task_run(robot, ImpedanceLaw(orientation_error="quat_2vec",
                                         max_orientation_error=None if clip is None else 2 * clip))
    run.meta.kp[3:] *= 2.0
    a, c = be.rollout(b, [run])[0], be.rollout(b, [run2])[0]
    np.testing.assert_array_equal(a.q, c.q)
    # quat_vec and quat_2vec at the same K differ: a libfranka-example run replayed as quat_2vec is at 2K
    gap = np.abs(out.q[0] - c.q[0]).max()
    assert gap > 1e4 * 1e-9, gap  # far above the 1e-9 agreement with the reference (a 0.6 s run)
    be.close()


def test_schema1_quat_reads_as_quat_2vec_with_one_note(tmp_path):
    run = make_run("task_impedance", 50.0, n=20)
    csv, side = write_run(run, tmp_path / "old.csv")
    assert json.loads(side.read_text())["impedance"]["orientation_error"] == "quat_2vec"
    raw = json.loads(side.read_text())
    raw["impedance"]["orientation_error"] = "quat"
    side.write_text(json.dumps(raw))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = read_run(csv)
    notes = [w for w in caught if issubclass(w.category, RunFormatWarning)]
    assert len(notes) == 1 and "\n" not in str(notes[0].message) and str(side) in str(notes[0].message)
    assert "quat_2vec" in str(notes[0].message)
    assert got.meta.impedance.orientation_error == "quat_2vec"
    raw["impedance"]["orientation_error"] = "quaternion"
    side.write_text(json.dumps(raw))
    with pytest.raises(Exception, match="rotvec, quat_vec, quat_2vec"):
        read_run(csv)
