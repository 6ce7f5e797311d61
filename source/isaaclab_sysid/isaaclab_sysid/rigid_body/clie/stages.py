"""What each stage (URDF, OLS, SDP, CLIE) is worth on the held-out runs.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isaaclab_sysid.data.run import Run
from isaaclab_sysid.rigid_body.clie.objective import ClieObjective
from isaaclab_sysid.rigid_body.clie.refinement import ClieResult
from isaaclab_sysid.rigid_body.clie.starts import JOINT_GROUPS
from isaaclab_sysid.sim.interface import CandidateBatch


#: The stages scored on the held-out runs, in pipeline order.
STAGES = ("URDF", "OLS", "SDP", "CLIE")


@dataclass
class StageScores:
    """Every stage scored the same way on the held-out runs, per joint, pooled.

    Attributes:
        torque: stage -> (N,) RMSE of the inverse-dynamics prediction of the LS signal [N m]
            (the held-out runs preprocessed as the identification's).
        input_error: stage -> (N,) RMSE of the replayed controller command against the logged one [N m]
            (None: the stage cannot be replayed, see ``notes``).
        q_rms_mrad: stage -> RMS joint-position error of that replay [mrad] (None likewise).
        notes: stage -> what the stage's set is made of.
        runs: the held-out run names.
    """

    torque: dict[str, np.ndarray]
    input_error: dict[str, np.ndarray | None]
    q_rms_mrad: dict[str, float | None]
    notes: dict[str, str]
    runs: list[str]

    def summary(self) -> dict:
        """JSON-ready dict (``clie.json["heldout"]``)."""
        return {"runs": self.runs, "notes": self.notes,
                "torque_rmse": {k: v.tolist() for k, v in self.torque.items()},
                "input_error_rmse": {k: None if v is None else v.tolist() for k, v in self.input_error.items()},
                "q_rms_mrad": self.q_rms_mrad}

    def table(self, joint_names: Sequence[str]) -> str:
        """A Markdown table: one row per stage, mean over joints and per joint."""
        head = "| stage | torque RMSE [N m] (mean) | input error RMSE [N m] (mean) | q RMS [mrad] | per joint input error |"
        lines = [head, "|---|---|---|---|---|"]
        for st in STAGES:
            if st not in self.torque:
                continue
            ie = self.input_error.get(st)
            q = self.q_rms_mrad.get(st)
            lines.append(f"| {st} | {np.mean(self.torque[st]):.4f} | "
                         f"{'-' if ie is None else f'{np.mean(ie):.4f}'} | {'-' if q is None else f'{q:.3f}'} | "
                         f"{'-' if ie is None else ' '.join(f'{x:.4f}' for x in ie)} |")
        return "\n".join(lines)


def score_stages(obj: ClieObjective, result: ClieResult, heldout: Sequence[Run]) -> StageScores | None:
    """URDF, OLS, SDP and CLIE on the held-out runs (None without any): the inverse-dynamics torque
    prediction for all four; the closed-loop replay (joint fit's terms for URDF and SDP, the refined
    ones for CLIE) for every stage whose bodies are physical."""
    if not heldout:
        return None
    from isaaclab_sysid.rigid_body.runs_input import process_run

    reg, start, n = obj.reg, obj.start, obj.n_dof
    pi_urdf = start.pi_sdp.copy()
    pi_urdf[: 10 * n] = reg.prior()[: 10 * n]
    sets = {"URDF": pi_urdf, "OLS": start.pi_ols, "SDP": start.pi_sdp, "CLIE": result.pi}
    notes = {"URDF": "URDF links, the SDP's joint terms (replay: the joint fit's)",
             "OLS": "LS base parameters, zero dependents (not a physical set: not replayed)",
             "SDP": "SDP reconstruction (replay: the joint fit's joint terms)",
             "CLIE": "refined bodies and joint terms" + ("" if result.accepted else f" (NOT accepted: {result.reason})")}
    sq = {k: [] for k in sets}
    for run in heldout:
        p = process_run(run, start.preprocess, start.signal, start.logged_velocity)
        W = reg.matrix(p.q, p.qd, p.qdd)
        meas = p.signals[start.signal]
        for k, pi in sets.items():
            sq[k].append((meas - (W @ pi).reshape(-1, n)) ** 2)
    torque = {k: np.sqrt(np.mean(np.vstack(v), axis=0)) for k, v in sq.items()}
    joint0 = obj.joints.values()
    replay = {"URDF": (pi_urdf, joint0), "OLS": (start.pi_ols, joint0), "SDP": (start.pi_sdp, joint0),
              "CLIE": (result.pi, result.joint)}
    batch = CandidateBatch(**{g: np.array([j[g] for _, j in replay.values()]) for g in JOINT_GROUPS},
                           delay=np.full(len(replay), int(obj.joints.delay)))
    links = np.array([pi[: 10 * n].reshape(n, 10) for pi, _ in replay.values()])
    ros = obj.backend.rollout_links(batch, links, list(heldout), with_command=True)
    e2 = np.zeros((len(replay), n))
    q2 = np.zeros(len(replay))
    count, qcount = 0, 0
    div = np.zeros(len(replay), dtype=bool)
    for ro, run in zip(ros, heldout):
        e = ro.extra["tau_cmd"] - np.asarray(run.tau, dtype=float)[None]
        e2 += np.sum(e ** 2, axis=1)
        q2 += np.sum((ro.q - run.q[None]) ** 2, axis=(1, 2))
        count += e.shape[1]
        qcount += e.shape[1] * n
        div |= np.asarray(ro.diverged, dtype=bool) | ~np.all(np.isfinite(e), axis=(1, 2))
    input_error, q_rms = {}, {}
    for k, name in enumerate(replay):
        input_error[name] = None if div[k] else np.sqrt(e2[k] / count)
        q_rms[name] = None if div[k] else float(1e3 * np.sqrt(q2[k] / qcount))
    return StageScores(torque, input_error, q_rms, notes, [r.name for r in heldout])
