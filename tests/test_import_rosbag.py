"""ROS 2 bags (sqlite3 and MCAP storage), written here with the rosbags writer: imported runs equal the source."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rosbags")

from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from isaaclab_sysid.data import RunFormatError, read_run  # noqa: E402
from isaaclab_sysid.importers import import_runs  # noqa: E402

N = 7
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
STORE = get_typestore(Stores.ROS2_HUMBLE)
T = STORE.types
T0 = 1_700_000_000


def _header(k_ns: int):
    return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=T0 + k_ns // 10**9,
                                                                          nanosec=k_ns % 10**9), frame_id="")


def _arrays(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = Q0 + 0.1 * np.sin(np.arange(n)[:, None] * 0.07 + np.arange(N)) + 1e-4 * rng.standard_normal((n, N))
    return q, rng.standard_normal((n, N)), rng.standard_normal((n, N))


def write_bag(path: Path, storage: StoragePlugin, setpoint: str = "joint_state", n: int = 50, rate: float = 100.0,
              names=None, order=None, drop_velocity_at: int | None = None):
    """JointState at `rate` (joint names shuffled + the fingers) and a setpoint every 2nd state, stamped first."""
    q, dq, eff = _arrays(n)
    names = names or JOINTS + ["panda_finger_joint1"]
    perm = order if order is not None else [3, 0, 6, 1, 5, 2, 4]
    msg_names = [names[p] for p in perm] + names[7:]
    targets = q + 0.02
    pose = np.column_stack([0.3 + 0.001 * np.arange(n), np.zeros(n), np.full(n, 0.5), np.zeros((n, 3)), np.ones(n)])
    with Writer(path, version=9, storage_plugin=storage) as w:
        js = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=STORE)
        kind = {"joint_state": "sensor_msgs/msg/JointState", "trajectory": "trajectory_msgs/msg/JointTrajectory",
                "pose": "geometry_msgs/msg/PoseStamped"}[setpoint]
        sp = w.add_connection("/command", kind, typestore=STORE)
        for k in range(n):
            t_ns = int(round(k * 1e9 / rate))
            if k % 2 == 0:
                if setpoint == "joint_state":
                    m = T[kind](header=_header(t_ns), name=msg_names[:7],
                                position=targets[k][perm], velocity=np.zeros(0), effort=np.zeros(0))
                elif setpoint == "trajectory":
                    pt = T["trajectory_msgs/msg/JointTrajectoryPoint"](
                        positions=targets[k][perm], velocities=np.zeros(0), accelerations=np.zeros(0),
                        effort=np.zeros(0), time_from_start=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0))
                    m = T[kind](header=_header(t_ns), joint_names=msg_names[:7], points=[pt])
                else:
                    p = T["geometry_msgs/msg/Pose"](
                        position=T["geometry_msgs/msg/Point"](x=pose[k, 0], y=pose[k, 1], z=pose[k, 2]),
                        orientation=T["geometry_msgs/msg/Quaternion"](x=pose[k, 3], y=pose[k, 4], z=pose[k, 5],
                                                                      w=pose[k, 6]))
                    m = T[kind](header=_header(t_ns), pose=p)
                w.write(sp, T0 * 10**9 + t_ns, STORE.serialize_cdr(m, kind))
            extra = np.zeros(len(names) - 7)
            vel = np.zeros(0) if k == drop_velocity_at else np.concatenate([dq[k][perm], extra])
            m = T["sensor_msgs/msg/JointState"](header=_header(t_ns), name=msg_names,
                                                position=np.concatenate([q[k][perm], extra]), velocity=vel,
                                                effort=np.concatenate([eff[k][perm], extra]))
            w.write(js, T0 * 10**9 + t_ns + 1000, STORE.serialize_cdr(m, "sensor_msgs/msg/JointState"))
    return q, dq, eff, targets, pose


def mapping(tmp: Path, controller: str = "joint_pd", **over) -> Path:
    n_gain = 7 if controller == "joint_pd" else 6
    m = {"controller": controller, "rate_hz": 100, "gains": {"kp": [50.0] * n_gain, "kd": [5.0] * n_gain},
         "topics": {"joint_states": "/joint_states", "setpoint": "/command"}}
    m.update(over)
    p = tmp / "map.yaml"
    p.write_text(yaml.safe_dump(m))
    return p


@pytest.mark.parametrize("storage,fmt", [(StoragePlugin.SQLITE3, "rosbag2"), (StoragePlugin.MCAP, "mcap"),
                                         (StoragePlugin.MCAP, "rosbag2")])
@pytest.mark.parametrize("setpoint", ["joint_state", "trajectory"])
def test_bag_import_equals_the_source(tmp_path, storage, fmt, setpoint):
    q, dq, eff, targets, _ = write_bag(tmp_path / "bag", storage, setpoint)
    runs, reps = import_runs(tmp_path / "bag", fmt, mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    run = read_run(tmp_path / "out" / "bag.csv")
    assert not reps[0].resampled and run.n_samples == 50
    np.testing.assert_array_equal(run.q, q)  # matched by name, not position
    np.testing.assert_array_equal(run.dq, dq)
    np.testing.assert_array_equal(run.tau_J, eff)
    np.testing.assert_array_equal(run.q_des, targets[(np.arange(50) // 2) * 2])  # the setpoint in force
    np.testing.assert_allclose(run.t, np.arange(50) / 100.0, atol=1e-9)  # header stamps, not log times


def test_bare_mcap_file_and_pose_setpoint(tmp_path):
    q, dq, eff, _, pose = write_bag(tmp_path / "bag", StoragePlugin.MCAP, "pose")
    mcap = next((tmp_path / "bag").glob("*.mcap"))
    runs, _ = import_runs(mcap, "mcap", mapping(tmp_path, "task_impedance"), None, log=lambda s: None)
    run = runs[0]
    np.testing.assert_array_equal(run.q, q)
    np.testing.assert_array_equal(run.x_des, pose[(np.arange(50) // 2) * 2, :3])
    assert run.meta.impedance is None and "ee_offset" in run.meta.unrecorded  # a ROS controller's law: unknown


def test_bad_bags(tmp_path):
    write_bag(tmp_path / "a", StoragePlugin.SQLITE3, names=[f"joint_{i}" for i in range(8)])
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "a", "rosbag2", mapping(tmp_path), None, log=lambda s: None)
    assert exc.value.row_label == "topic /command index" and exc.value.row == 0 and exc.value.column == "name"
    assert "panda_joint1" in str(exc.value) and "'joints'" in str(exc.value)
    write_bag(tmp_path / "b", StoragePlugin.SQLITE3, drop_velocity_at=7)
    with pytest.raises(RunFormatError) as exc:
        import_runs(tmp_path / "b", "rosbag2", mapping(tmp_path), None, log=lambda s: None)
    assert str(exc.value).endswith("topic /joint_states index 7, column velocity: empty: the joint velocities are needed")
    with pytest.raises(RunFormatError, match="no topic /nope"):
        import_runs(tmp_path / "b", "rosbag2", mapping(tmp_path, topics={"setpoint": "/nope"}), None, log=lambda s: None)
    with pytest.raises(RunFormatError, match="PoseStamped"):
        import_runs(tmp_path / "b", "rosbag2", mapping(tmp_path, "task_impedance"), None, log=lambda s: None)
    # a truncated bag (the recorder died): the storage file cut in half
    for storage, name in ((StoragePlugin.MCAP, "c"), (StoragePlugin.SQLITE3, "d")):
        write_bag(tmp_path / name, storage)
        f = next(p for p in (tmp_path / name).iterdir() if p.suffix in (".mcap", ".db3"))
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
        with pytest.raises(RunFormatError) as exc:
            import_runs(tmp_path / name, "rosbag2", mapping(tmp_path), tmp_path / "out", log=lambda s: None)
        assert "cannot read the bag" in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "out").exists()
