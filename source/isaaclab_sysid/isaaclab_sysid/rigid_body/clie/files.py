"""CLIE's output files (clie.json, nominal_inertials.json, fit_seed.json), written atomically.

Part of CLIE (:mod:`isaaclab_sysid.rigid_body.clie`, its docstring has the method).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from isaaclab_sysid.rigid_body.clie.objective import ClieObjective
from isaaclab_sysid.rigid_body.clie.refinement import ClieResult
from isaaclab_sysid.rigid_body.clie.stages import StageScores
from isaaclab_sysid.rigid_body.clie.starts import JOINT_GROUPS


CLIE_SCHEMA = "isaaclab_sysid.clie/1"


def clie_body(obj: ClieObjective, result: ClieResult, scores: StageScores | None) -> dict:
    """The body of ``clie.json`` (layout in docs/rigid_body.md)."""
    reg = obj.reg
    names = obj.start.base.names()
    links = obj.links(result.z)
    lc = {name: result.z[10 * k: 10 * k + 10].tolist() for k, name in enumerate(result.bodies)}
    inertials = reg.link_inertials(result.pi)
    std_mass = {}
    for k, name in enumerate(result.bodies):
        # m = exp(2 alpha): std(m) = 2 m std(alpha)
        std_mass[name] = float(2.0 * links[obj.body_idx[k], 0] * np.sqrt(max(result.cov_z[10 * k, 10 * k], 0.0)))
    return {
        "schema": CLIE_SCHEMA,
        "robot": reg.robot.name,
        "joint_names": list(reg.robot.joint_names),
        "sources": {"rigid_body": obj.start.source, "joint_start": obj.joints.source,
                    "runs": [r.name for r in obj.runs]},
        "options": asdict(obj.options),
        "accepted": result.accepted,
        "reason": result.reason,
        "bodies": list(result.bodies),
        "delay_ticks": result.delay,
        "sigma_input_error": result.sigma.tolist(),
        "passes": result.passes,
        "ls_check": result.ls_check,
        "convergence": result.convergence,
        "joint_terms": {g: {"value": result.joint[g].tolist(), "std": result.joint_std[g].tolist(),
                            "start": result.joint_start[g].tolist()} for g in JOINT_GROUPS},
        "base_parameters": {
            "names": [names[i] for i in result.subset], "value": result.base.tolist(),
            "std": result.base_std.tolist(), "sdp": result.base_start.tolist(), "ls": result.base_ls.tolist(),
            "ls_std": result.base_ls_std.tolist(), "clean": result.clean.tolist(),
        },
        "refined_bodies": {name: {"mass": float(inertials[name].mass), "mass_std": std_mass[name],
                                  "com": inertials[name].com.tolist(), "inertia": inertials[name].inertia.tolist(),
                                  "log_cholesky": lc[name]} for name in result.bodies},
        "link_min_eig": result.link_min_eig.tolist(),
        "standard_refined": dict(zip(reg.param_names, result.pi.tolist())),
        "standard_accepted": dict(zip(reg.param_names, result.pi_accepted.tolist())),
        "audit": result.audit.summary(),
        "heldout": None if scores is None else scores.summary(),
        "n_rollouts": result.n_rollouts,
        "timing_s": result.timing_s,
    }


def write_clie(out_dir: str | Path, obj: ClieObjective, result: ClieResult,
               scores: StageScores | None) -> dict[str, Path]:
    """Write ``clie.json``, ``nominal_inertials.json`` (the accepted set: ``--nominal`` of the joint fit)
    and ``fit_seed.json`` (the accepted joint terms and the delay: its ``--x0``) atomically."""
    from isaaclab_sysid.arm_model import write_nominal
    from isaaclab_sysid.utils.atomic import atomic_write_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = "CLIE refinement" if result.accepted else f"SDP set (CLIE not accepted: {result.reason})"
    paths = {
        "clie": atomic_write_json(out / "clie.json", clie_body(obj, result, scores)),
        # the one writer: engine-ready links, checked by the readers' own check (arm_model.write_nominal)
        "nominal": write_nominal(out / "nominal_inertials.json", obj.reg.robot, obj.reg.link_inertials(result.pi_accepted),
                                 meta={"source": src, "robot": obj.reg.robot.name, "carries": obj.reg.robot.carries})[0],
    }
    ja = result.joint_accepted
    seed = {"best_params_decoded": {**{g: ja[g].tolist() for g in JOINT_GROUPS}, "motor_delay_steps": result.delay},
            "seed_sources": {"all": src}}
    paths["fit_seed"] = atomic_write_json(out / "fit_seed.json", seed)
    return paths
