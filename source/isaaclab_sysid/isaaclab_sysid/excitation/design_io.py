"""A design as a target run (the run format at 1 kHz) and back.

A *target run* is a run whose setpoint columns hold the design and whose state
columns hold the planned reference (see docs/excitation.md):

* one row per 1 kHz tick (``log_rate_hz`` 1000, ``tick`` from 0);
* setpoints at ``control_rate_hz`` (50 Hz): row ``tick`` carries the setpoint
  sampled at ``setpoint_tick = tick - tick % 20``, exactly what a 50 Hz
  sender followed by a zero-order hold produces;
* ``q``/``dq`` = the joint reference (IK of a task-space design, or the
  Fourier trajectory), ``ee_*`` = its forward kinematics;
* ``tau`` = the rigid-body inverse dynamics of the reference (without gravity
  when the arm compensates it: the controller's share), ``tau_J`` = the same.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin

from isaaclab_sysid.data import ImpedanceLaw, Run, RunMeta, write_run
from isaaclab_sysid.data.schema import TICK_HZ
from isaaclab_sysid.excitation.taskspace import TaskDesign
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.robots.robot import EE_NAME


def impedance_gains(kp_trans: float, kp_rot: float, kd_trans: float | None = None, kd_rot: float | None = None):
    """6-vectors (x, y, z, rx, ry, rz) of task stiffness [N/m, N m/rad] and damping (default 2 sqrt(kp))."""
    kd_t = 2.0 * np.sqrt(kp_trans) if kd_trans is None else kd_trans
    kd_r = 2.0 * np.sqrt(kp_rot) if kd_rot is None else kd_rot
    return np.array([kp_trans] * 3 + [kp_rot] * 3, dtype=float), np.array([kd_t] * 3 + [kd_r] * 3, dtype=float)


def _forward(robot: Robot, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, gravity: bool):
    model = robot.build_pinocchio(gravity=gravity)
    data = model.createData()
    fid = model.getFrameId(EE_NAME)
    n = len(q)
    pos = np.zeros((n, 3))
    quat = np.zeros((n, 4))
    tau = np.zeros_like(q)
    for k in range(n):
        tau[k] = pin.rnea(model, data, q[k], dq[k], ddq[k])
        pin.forwardKinematics(model, data, q[k])
        pin.updateFramePlacement(model, data, fid)
        oMf = data.oMf[fid]
        pos[k] = oMf.translation
        qq = pin.Quaternion(oMf.rotation)
        quat[k] = (qq.x, qq.y, qq.z, qq.w)
    # sign-continuous quaternions
    flips = np.cumsum(np.r_[0, np.sum(quat[1:] * quat[:-1], axis=1) < 0]) % 2 == 1
    quat[flips] = -quat[flips]
    return pos, quat, tau


def _hold_index(n: int, control_rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
    per = int(round(TICK_HZ / control_rate_hz))
    tick = np.arange(n, dtype=np.int64)
    sp = tick - tick % per
    return tick, sp


def target_run(
    robot: Robot,
    name: str,
    controller: str,
    t: np.ndarray,
    q: np.ndarray,
    dq: np.ndarray,
    ddq: np.ndarray,
    setpoints: np.ndarray,
    kp: np.ndarray,
    kd: np.ndarray,
    anchor_pos: np.ndarray,
    anchor_quat: np.ndarray,
    excitation: dict,
    control_rate_hz: float = 50.0,
    impedance: ImpedanceLaw | None = None,
    summary: dict | None = None,
) -> Run:
    """Assemble a target :class:`Run` at 1 kHz.

    Args:
        setpoints: (T, D) the design at every tick (D = 7: x ++ quat xyzw for
            task_impedance, D = N: q for joint_pd); it is sampled-and-held at
            ``control_rate_hz`` here.
    """
    n = len(t)
    gravity_comp = bool(robot.config.gravity_compensated)
    pos, quat, tau = _forward(robot, q, dq, ddq, gravity=not gravity_comp)
    tick, sp = _hold_index(n, control_rate_hz)
    held = setpoints[sp]
    meta = RunMeta(
        robot=robot.name,
        controller=controller,
        control_rate_hz=float(control_rate_hz),
        log_rate_hz=float(TICK_HZ),
        num_samples=n,
        q_init=q[0].copy(),
        anchor_pos=np.asarray(anchor_pos, dtype=float),
        anchor_quat=np.asarray(anchor_quat, dtype=float),
        kp=np.asarray(kp, dtype=float),
        kd=np.asarray(kd, dtype=float),
        impedance=impedance or ImpedanceLaw(),
        gravity_compensated=gravity_comp,
        excitation={
            **excitation,
            "target_design": True,
            "state_columns": "planned reference (IK / trajectory), not a measurement",
            "tau_columns": "inverse dynamics of the reference" + ("" if gravity_comp else " incl. gravity"),
        },
        summary=summary or {},
    )
    return Run(
        name=name,
        meta=meta,
        t=np.asarray(t, dtype=float) - float(t[0]),
        q=q,
        dq=dq,
        ee_pos=pos,
        ee_quat=quat,
        tau=tau,
        tau_J=tau.copy(),
        q_des=held if controller == "joint_pd" else None,
        x_des=held[:, :3] if controller == "task_impedance" else None,
        quat_des=held[:, 3:7] if controller == "task_impedance" else None,
        tick=tick,
        setpoint_tick=sp,
    )


def task_target_run(
    robot: Robot, design: TaskDesign, jref, name: str, kp: np.ndarray, kd: np.ndarray, **kw
) -> Run:
    """Target run of a task-space design and its joint reference (:class:`~.ik.JointReference`)."""
    sp = np.concatenate([design.position(), design.quat()], axis=1)
    return target_run(
        robot, name, "task_impedance", design.t, jref.q, jref.dq, jref.ddq, sp, kp, kd,
        design.anchor_pos, design.anchor_quat, design.description, **kw,
    )


def write_target(run: Run, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``<out_dir>/<run.name>.csv`` + ``.json`` atomically; returns both paths."""
    out_dir = Path(out_dir)
    return write_run(run, out_dir / f"{run.name}.csv")
