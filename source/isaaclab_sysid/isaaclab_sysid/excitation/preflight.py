"""Pre-flight report of a target run, before any arm moves.

1. Kinematics of the reference: peak EE speed / acceleration (linear, angular)
   and joint-space peaks of the joint reference (IK for task-space designs)
   against the joint position and velocity limits.
2. Predicted joint torques at the run's gains: the impedance (or joint PD)
   loop is replayed with the MuJoCo backend at a nominal candidate. The real
   Franka cancels gravity itself, and its joints carry the commanded torque
   plus gravity: the replay therefore runs gravity-free (the motion is the
   compensated arm's) and g(q) of the replayed posture is added (Pinocchio).
   An arm without compensation is replayed with gravity on, and its applied
   torque is what the joints carry. Each joint's peak is compared with its
   torque limit; the torque step at every 50 Hz setpoint (the controller's
   torque one tick after the new setpoint minus one tick before) is compared
   with the slew limit per tick (torque_rate_limit x 1 ms).
3. cond(W_b) of the base regressor on the joint reference.
4. The identifiability table (identifiability.py).

Every ratio above ``warn_frac`` of its limit becomes a warning, and the report
ends with a verdict (verdict.py): PASS / WARN / FAIL per check and one line
``safe to run: yes|no`` with what to change on a FAIL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pinocchio as pin

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.excitation.conditioning import condition_number
from isaaclab_sysid.excitation.identifiability import NOMINAL, IdentifiabilityTable, identifiability
from isaaclab_sysid.excitation.verdict import FAIL_FRAC, WARN_FRAC, Verdict, build_verdict
from isaaclab_sysid.robots import Robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.timebase import TICK_S


@dataclass
class PreflightReport:
    numbers: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    table: IdentifiabilityTable | None = None
    replay: dict[str, np.ndarray] = field(default_factory=dict)
    verdict: Verdict | None = None

    @property
    def safe(self) -> bool:
        """No check FAILed (``safe to run: yes``)."""
        return self.verdict is None or self.verdict.safe

    def to_dict(self) -> dict:
        out = {"numbers": self.numbers, "warnings": self.warnings}
        if self.table is not None:
            out["identifiability"] = self.table.to_dict()
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_dict()
        return out

    def format(self) -> str:
        n = self.numbers
        lines = [f"pre-flight: {n['run']} ({n['controller']}, {n['duration_s']:.2f} s)"]
        if "ee_speed_m_s" in n:
            lines.append(
                f"  reference EE peaks: speed {n['ee_speed_m_s']:.3f} m/s, acc {n['ee_acc_m_s2']:.2f} m/s^2, "
                f"ang speed {n['ee_ang_speed_rad_s']:.3f} rad/s, ang acc {n['ee_ang_acc_rad_s2']:.2f} rad/s^2"
            )
        fmt = lambda v: " ".join(f"{x:6.2f}" for x in v)  # noqa: E731
        lines.append(f"  joint range used (frac of limits)  {fmt(n['joint_range_frac'])}")
        lines.append(f"  joint speed / v_max (reference)    {fmt(n['joint_speed_frac'])}")
        lines.append(f"  joint acc peak [rad/s^2]           {fmt(n['joint_acc_peak'])}")
        if "tau_peak_nm" in n:
            lines.append(f"  predicted |tau_J| peak [N m]       {fmt(n['tau_peak_nm'])}")
            lines.append(f"  ... / torque limit                 {fmt(n['tau_limit_frac'])}")
            lines.append(f"  torque step per setpoint [N m]     {fmt(n['tau_step_peak_nm'])}")
            lines.append(f"  ... / slew limit per tick          {fmt(n['tau_step_slew_frac'])}")
            lines.append(f"  replayed EE motion (RMS of ref)    {n['tracking_ratio']:.2f}")
        lines.append(f"  cond(W_b) base regressor           {n['regressor_cond']:.4g}  ({n['n_base_params']} base params)")
        if self.table is not None:
            lines += ["  " + ln for ln in self.table.format().splitlines()]
        if self.verdict is not None:
            lines += ["  " + ln for ln in self.verdict.format().splitlines()]
        else:
            lines += [f"  WARNING: {w}" for w in self.warnings] or ["  no warnings"]
        return "\n".join(lines)


def _gravity(robot: Robot, q: np.ndarray) -> np.ndarray:
    model = robot.build_pinocchio(gravity=True)
    data = model.createData()
    return np.stack([pin.computeGeneralizedGravity(model, data, qk) for qk in q])


def preflight(
    robot: Robot,
    run: Run,
    warn_frac: float = WARN_FRAC,
    replay: bool = True,
    ident: bool = True,
    cond_stride: int = 10,
    nominal: dict | None = None,
    ident_groups: tuple[str, ...] = ("armature", "friction", "viscous", "delay"),
    peaks: dict[str, float] | None = None,
    fail_frac: float = FAIL_FRAC,
) -> PreflightReport:
    """Pre-flight numbers and warnings of a target run (see module doc).

    Args:
        peaks: the task-space reference peaks (``TaskDesign.peaks()``), when known.
        cond_stride: rows skipped between regressor samples (10 = every 10 ms).
        warn_frac, fail_frac: a ratio to its limit above these is WARN / FAIL in the verdict.
    """
    from isaaclab_sysid.excitation.conditioning import base_columns

    n = {"run": run.name, "controller": run.meta.controller, "duration_s": run.duration}
    warns: list[str] = []
    if peaks:
        n.update(peaks)
    q, dq = run.q, run.dq
    ddq = np.gradient(dq, run.t, axis=0)
    lo, hi = robot.q_lower, robot.q_upper
    mid = 0.5 * (lo + hi)
    n["joint_range_frac"] = (np.max(np.abs(q - mid), axis=0) / (0.5 * (hi - lo))).tolist()
    n["joint_speed_frac"] = (np.max(np.abs(dq), axis=0) / robot.v_max).tolist()
    n["joint_acc_peak"] = np.max(np.abs(ddq), axis=0).tolist()
    for j in range(robot.n_dof):
        if n["joint_range_frac"][j] > warn_frac:
            warns.append(f"joint {j + 1} uses {n['joint_range_frac'][j]:.0%} of its half-range")
        if n["joint_speed_frac"][j] > warn_frac:
            warns.append(f"joint {j + 1} reference speed is {n['joint_speed_frac'][j]:.0%} of v_max")
    n["regressor_cond"] = condition_number(robot, q, dq, ddq, stride=cond_stride)
    n["n_base_params"] = int(len(base_columns(robot)))
    report = PreflightReport(n, warns)
    replay_error = None
    slew = None
    if replay or ident:
        from isaaclab_sysid.sim.mujoco_backend import MujocoBackend

        comp = bool(run.meta.gravity_compensated)
        backend = MujocoBackend(robot, ReplayOptions(gravity=not comp))
        try:
            if replay:
                nom = dict(NOMINAL)
                nom.update(nominal or {})
                batch = CandidateBatch(
                    armature=np.full((1, robot.n_dof), nom["armature"]),
                    friction=np.full((1, robot.n_dof), nom["friction"]),
                    viscous=np.full((1, robot.n_dof), nom["viscous"]),
                    delay=np.array([int(nom["delay"])]),
                )
                ro = backend.rollout(batch, [run], with_command=True)[0]
                if ro.diverged[0]:
                    replay_error = "the replay diverged at the nominal candidate: the design is unsafe at these gains"
                    warns.append(replay_error)
                q_sim = ro.q[0]
                tau_j = ro.tau[0] + (_gravity(robot, q_sim) if comp else 0.0)
                cmd = ro.extra["tau_cmd"][0]
                sp_ticks, _ = run.setpoints()
                rows = np.searchsorted(run.sample_ticks(), sp_ticks[1:])
                rows = rows[(rows >= 1) & (rows < len(cmd) - 1)]
                steps = np.abs(cmd[rows + 1] - cmd[rows - 1]) if rows.size else np.zeros((1, robot.n_dof))
                slew = np.asarray(robot.config.torque_rate_limit or [np.inf] * robot.n_dof, dtype=float) * TICK_S
                n["tau_peak_nm"] = np.max(np.abs(tau_j), axis=0).tolist()
                n["tau_limit_frac"] = (np.max(np.abs(tau_j), axis=0) / robot.tau_max).tolist()
                n["tau_step_peak_nm"] = np.max(steps, axis=0).tolist()
                n["tau_step_slew_frac"] = (np.max(steps, axis=0) / slew).tolist()
                n["tau_step_over_slew_count"] = int(np.sum(np.any(steps > slew, axis=1)))
                ref = run.ee_pos - run.ee_pos[0]
                sim = ro.ee_pos[0] - ro.ee_pos[0, 0]
                n["tracking_ratio"] = float(np.sqrt(np.mean(sim**2)) / max(np.sqrt(np.mean(ref**2)), 1e-12))
                n["replay_nominal"] = {k: float(v) for k, v in nom.items()}
                n["replay_gravity"] = "gravity-free replay + g(q) (arm compensates)" if comp else "gravity on"
                report.replay = {"t": run.t, "tau_J": tau_j, "q": q_sim, "ee_pos": ro.ee_pos[0]}
                for j in range(robot.n_dof):
                    if n["tau_limit_frac"][j] > warn_frac:
                        warns.append(
                            f"joint {j + 1} predicted torque {n['tau_peak_nm'][j]:.1f} N m is "
                            f"{n['tau_limit_frac'][j]:.0%} of its {robot.tau_max[j]:g} N m limit"
                        )
                    if n["tau_step_slew_frac"][j] > warn_frac:
                        warns.append(
                            f"joint {j + 1} torque step per setpoint {n['tau_step_peak_nm'][j]:.2f} N m is "
                            f"{n['tau_step_slew_frac'][j]:.0%} of the slew limit per tick ({slew[j]:.2f} N m): "
                            "the real controller will ramp it (a delay the sim does not have)"
                        )
            if ident:
                try:
                    report.table = identifiability(backend, [run], robot.n_dof, nominal=nominal, groups=ident_groups)
                except RuntimeError as exc:  # the nominal diverged: the replay check already FAILs
                    warns.append(f"identifiability not computed: {exc}")
                    replay_error = replay_error or str(exc)
        finally:
            backend.close()
    report.verdict = build_verdict(n, report.table, run.meta.excitation, warn_frac, fail_frac, replay_error,
                                   slew_limit=slew, tau_limit=robot.tau_max)
    return report
