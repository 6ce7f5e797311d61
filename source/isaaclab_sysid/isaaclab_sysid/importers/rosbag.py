"""ROS 2 bags (sqlite3 or MCAP storage, a bag folder or a bare ``.db3`` / ``.mcap``), read with ``rosbags``.

The mapping file's ``topics`` section (docs/data_format.md)::

    topics:
      joint_states: /joint_states      # sensor_msgs/msg/JointState: position, velocity, effort
      setpoint: /joint_command         # JointState or trajectory_msgs/msg/JointTrajectory (joint_pd),
                                       # geometry_msgs/msg/PoseStamped (task_impedance)

Stamps come from the message headers (a zero stamp is refused); joints are matched by name
(``joints`` in the mapping, default the robot's joint names; other names, e.g. the fingers, are
ignored). Each joint-state message is a row; its setpoint is the last setpoint stamped at or before
it (rows before the first setpoint are dropped and counted). JointState ``effort`` is the measured
torque: it becomes ``tau_J`` and, since a bag has no commanded torque, ``tau`` too (recorded).
Errors name the bag, the topic and the message index.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.importers.common import ImportSpec, Streams, require

JOINT_STATE = "sensor_msgs/msg/JointState"
TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
POSE = "geometry_msgs/msg/PoseStamped"


def _stamp(msg) -> int:
    """Header stamp [ns] (an integer: epoch seconds as a float would lose 0.2 us)."""
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def _by_name(names, values, joints, file, label, i, field, names_field: str = "name") -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if len(values) != len(names):
        raise RunFormatError(file, i, field, f"{len(values)} values for {len(names)} joint names", row_label=label)
    pos = {n: k for k, n in enumerate(names)}
    missing = [j for j in joints if j not in pos]
    if missing:
        raise RunFormatError(file, i, names_field, f"joint(s) {', '.join(missing)} not in the message (it names "
                             f"{', '.join(names)}); set 'joints' in the mapping file", row_label=label)
    return values[[pos[j] for j in joints]]


def read_bag(path: str | Path, spec: ImportSpec, robot, fmt: str = "rosbag2") -> Streams:
    """Read a bag into :class:`Streams` (module docstring).

    Raises:
        RunFormatError: an unreadable or truncated bag, a missing topic or joint, empty velocities,
            a zero stamp (naming the bag, the topic and the message index).
        ImportDependencyError: ``rosbags`` is missing.
    """
    require("rosbags", fmt)
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    path = Path(path)
    file = str(path)
    if not path.exists():
        raise RunFormatError(file, None, "-", "bag not found")
    if fmt == "mcap" and not (path.suffix == ".mcap" or any(path.glob("*.mcap"))):
        raise RunFormatError(file, None, "-", "not MCAP storage (no .mcap file); use --format rosbag2")
    unknown = set(spec.topics) - {"joint_states", "setpoint"}
    if unknown:
        raise RunFormatError(spec.file, None, f"topics.{sorted(unknown)[0]}", "unknown key (joint_states, setpoint)")
    js_topic = spec.topics.get("joint_states", "/joint_states")
    sp_topic = spec.topics.get("setpoint")
    if not sp_topic:
        raise RunFormatError(spec.file, None, "topics.setpoint", "missing: the setpoint topic (JointState, "
                             "JointTrajectory or PoseStamped)")
    joints = list(spec.joints or robot.joint_names)
    store = get_typestore(Stores.ROS2_HUMBLE)
    task = spec.controller == "task_impedance"
    js_label, sp_label = f"topic {js_topic} index", f"topic {sp_topic} index"
    rows: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    sps: list[tuple[int, np.ndarray]] = []
    try:
        with Reader(path) as reader:
            topics = {c.topic: c for c in reader.connections}
            for topic in (js_topic, sp_topic):
                if topic not in topics:
                    raise RunFormatError(file, None, "topic", f"no topic {topic} in the bag (it has "
                                         f"{', '.join(sorted(topics)) or 'none'}); see topics in the mapping file")
            js_c, sp_c = topics[js_topic], topics[sp_topic]
            if js_c.msgtype != JOINT_STATE:
                raise RunFormatError(file, None, "topic", f"{js_topic} is {js_c.msgtype}, expected {JOINT_STATE}")
            want = (POSE,) if task else (JOINT_STATE, TRAJECTORY)
            if sp_c.msgtype not in want:
                raise RunFormatError(file, None, "topic", f"{sp_topic} is {sp_c.msgtype}; a {spec.controller} "
                                     f"setpoint is {' or '.join(want)}")
            counts = {js_topic: 0, sp_topic: 0}
            for conn, _, raw in reader.messages(connections=[js_c, sp_c]):
                i = counts[conn.topic]
                counts[conn.topic] += 1
                msg = store.deserialize_cdr(raw, conn.msgtype)
                label = js_label if conn.topic == js_topic else sp_label
                t = _stamp(msg)
                if t == 0:
                    raise RunFormatError(file, i, "header.stamp", "zero stamp (the publisher did not set it)",
                                         row_label=label)
                if conn.topic == js_topic:
                    if len(msg.velocity) == 0:
                        raise RunFormatError(file, i, "velocity", "empty: the joint velocities are needed",
                                             row_label=label)
                    if len(msg.effort) == 0:
                        raise RunFormatError(file, i, "effort", "empty: the joint torques are needed", row_label=label)
                    rows.append((t, *(_by_name(msg.name, getattr(msg, f), joints, file, label, i, f)
                                      for f in ("position", "velocity", "effort"))))
                elif conn.msgtype == POSE:
                    p, o = msg.pose.position, msg.pose.orientation
                    sps.append((t, np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w], dtype=float)))
                elif conn.msgtype == TRAJECTORY:
                    if not msg.points:
                        raise RunFormatError(file, i, "points", "empty trajectory", row_label=label)
                    sps.append((t, _by_name(msg.joint_names, msg.points[0].positions, joints, file, label, i,
                                            "points[0].positions", "joint_names")))
                else:
                    sps.append((t, _by_name(msg.name, msg.position, joints, file, label, i, "position")))
    except RunFormatError:
        raise
    except Exception as exc:  # noqa: BLE001 - rosbags/sqlite/mcap errors: a bag that cannot be read to the end
        raise RunFormatError(file, None, "-", f"cannot read the bag to its end (truncated or corrupt?): "
                             f"{type(exc).__name__}: {exc}".replace("\n", " ")) from None
    if not rows:
        raise RunFormatError(file, None, "topic", f"no messages on {js_topic}")
    if not sps:
        raise RunFormatError(file, None, "topic", f"no messages on {sp_topic}")
    t_ns0 = rows[0][0]
    sp_t = np.array([s[0] - t_ns0 for s in sps], dtype=np.int64)
    order = np.argsort(sp_t, kind="stable")
    sp_t, sp_v = sp_t[order], np.stack([sps[k][1] for k in order])
    t_rel = np.array([r[0] - t_ns0 for r in rows], dtype=np.int64)
    hold = np.searchsorted(sp_t, t_rel, side="right") - 1
    keep = hold >= 0
    if not keep.any():
        raise RunFormatError(file, None, "topic", f"every {js_topic} message is stamped before the first setpoint")
    idx = np.flatnonzero(keep)
    q, dq, eff = (np.stack([rows[k][c] for k in idx]) for c in (1, 2, 3))
    names = {"time": ["header.stamp"], "q": [f"position[{j}]" for j in joints],
             "dq": [f"velocity[{j}]" for j in joints], "tau": [f"effort[{j}]" for j in joints],
             "targets": ["x", "y", "z", "qx", "qy", "qz", "qw"] if task else [f"setpoint[{j}]" for j in joints]}
    return Streams(
        name=path.stem if path.is_dir() or path.suffix else path.name, file=file, row_label=js_label, rows=idx,
        t=t_rel[idx] * 1e-9, q=q, dq=dq, tau=eff, tau_J=eff.copy(), targets=sp_v[hold[idx]], names=names,
        notes={"rows_before_first_setpoint": int((~keep).sum()), "setpoints": len(sps), "first_stamp_ns": int(t_ns0),
               "tau": "a bag has no commanded torque: the measured effort is copied into tau"},
    )
