#!/usr/bin/env python
"""What the CLIE refinement is worth, stage by stage, on the Franka twin (fuller than tests/test_clie.py).

    python benchmarks/clie_worth.py --seeds 3 --duration 8 --json /tmp/clie_worth.json

Per seed s: the twin's hidden inertials are the URDF's perturbed with seed 7 + s (mass x U(0.9, 1.2),
com +- 1 cm, inertia x 1.1; tests/rigid_body_franka_twin.py), three joint_pd Fourier runs are
recorded (noise, Coulomb friction, armature, viscous, 2-tick delay); identify_rigid_body.py fits LS
and SDP on two, refine_inertials.py refines every body and the joint terms on the same two, started
from rb_params.json's joint terms (as seed_fit.py) at the true delay; the third run is held out.

Prints, per stage (URDF, OLS, SDP, CLIE), the held-out inverse-dynamics torque RMSE and the held-out
closed-loop input-error RMSE (mean over joints and seeds), the truth error of the inertial base
parameters (median relative), and the coverage of the CLIE intervals over seeds (fraction of
|estimate - truth| / std below 2 and 3, base parameters and joint terms), with the wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from rigid_body_franka_twin import PARAMS, write_franka_runs  # noqa: E402

from isaaclab_sysid.rigid_body import clie  # noqa: E402
from isaaclab_sysid.rigid_body.cli import IdentifyArgs  # noqa: E402
from isaaclab_sysid.rigid_body.cli import main_from_args as identify_main  # noqa: E402
from isaaclab_sysid.robots.regressor import Regressor  # noqa: E402
from isaaclab_sysid.utils.atomic import atomic_write_json  # noqa: E402


def true_standard(reg: Regressor, truth) -> np.ndarray:  # noqa: ANN001
    """(P,) the twin's true standard vector on ``reg``'s columns."""
    pi = Regressor(truth, reg.options).prior()
    for term, v in (("armature", PARAMS.armature), ("viscous", PARAMS.viscous), ("coulomb", PARAMS.friction)):
        if term in reg.joint_terms:
            pi[reg.term_slice(term)] = v
    return pi


def one_seed(s: int, a: argparse.Namespace, work: Path) -> dict:
    folder = work / f"seed{s}"
    paths, nominal, truth = write_franka_runs(folder, seeds=(3 * s + 1, 3 * s + 2, 3 * s + 3),
                                              duration=a.duration, true_seed=7 + s)
    rb = folder / "rb"
    args = IdentifyArgs(out=rb, runs=tuple(paths[:2]), heldout=(paths[2],), dt=0.01, cutoff_hz=5.0,
                        audit_uniform=2000, audit_dense=1000, audit_grid=3, seeds=(0,), no_plots=True)
    if identify_main(args) != 0:
        raise RuntimeError(f"seed {s}: identification failed")
    out = folder / "clie"
    rargs = clie.RefineArgs(rb_params=rb / "rb_params.json", runs=tuple(paths[:2]), heldout=(paths[2],),
                            delay=PARAMS.delay, out=out, passes=a.passes, max_iter=a.max_iter,
                            audit_uniform=2000, audit_dense=1000, seeds=(0,), ls_weight=a.ls_weight,
                            ls_consistency=not a.no_ls_consistency)
    if clie.main_from_args(rargs) != 0:
        raise RuntimeError(f"seed {s}: CLIE failed")
    body = json.loads((out / "clie.json").read_text())
    start = clie.load_rigid_body(rb / "rb_params.json", nominal)
    names = start.base.names()
    bp = body["base_parameters"]
    idx = [names.index(n) for n in bp["names"]]
    tb = (start.base.K @ true_standard(start.regressor, truth))[idx]
    value, std, sdp, ls, ls_std = (np.array(bp[k]) for k in ("value", "std", "sdp", "ls", "ls_std"))
    rel = {"OLS": np.abs(ls - tb) / np.abs(tb), "SDP": np.abs(sdp - tb) / np.abs(tb),
           "CLIE": np.abs(value - tb) / np.abs(tb)}
    jz = []
    for g, tv in (("armature", PARAMS.armature), ("friction", PARAMS.friction), ("viscous", PARAMS.viscous)):
        jt = body["joint_terms"][g]
        jz += list((np.array(jt["value"]) - tv) / np.array(jt["std"]))
    return {
        "seed": s, "accepted": body["accepted"], "heldout": body["heldout"],
        "base_rel_error_median": {k: float(np.median(v)) for k, v in rel.items()},
        "z_base": ((value - tb) / std).tolist(), "z_base_ls": ((ls - tb) / ls_std).tolist(), "z_joint": jz,
        "std_ratio_clie_ls_median": float(np.median(std / ls_std)), "std_ratio": (std / ls_std).tolist(),
        "ls_check": body["ls_check"], "convergence": body["convergence"], "n_rollouts": body["n_rollouts"],
        "timing_s": body["timing_s"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3, help="twins (hidden inertials and noise per seed)")
    ap.add_argument("--first", type=int, default=0, help="first seed")
    ap.add_argument("--duration", type=float, default=8.0, help="run length [s]")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--max-iter", type=int, default=15)
    ap.add_argument("--ls-weight", type=float, default=1.0, help="refine_inertials.py --ls-weight (1: the LS data as they are)")
    ap.add_argument("--no-ls-consistency", action="store_true",
                    help="refine_inertials.py --no-ls-consistency (the LS covariance taken as it is)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(a.first, a.first + a.seeds):
            rows.append(one_seed(s, a, Path(tmp)))
            lc = rows[-1]["ls_check"]
            print(f"seed {s}: done at {time.perf_counter() - t0:.0f} s; LS term: weight / {lc['scale']:.3g}, "
                  f"final factor {lc['factor']:.3g} (chi2 {lc['chi2']:.4g} on {lc['redundancy']:.3g}); "
                  f"last attempt's gain {rows[-1]['convergence']['last_gain']:.3g} "
                  f"({'converged' if rows[-1]['convergence']['converged'] else 'NOT converged'})", flush=True)
    stages = clie.STAGES
    print(f"\n{a.seeds} twins, {a.duration:g} s runs (2 fit, 1 held out), {time.perf_counter() - t0:.0f} s")
    print("| stage | held-out torque RMSE [N m] | held-out input error RMSE [N m] | base-parameter error (median rel.) |")
    print("|---|---|---|---|")
    summary = {}
    for st in stages:
        tq = np.mean([np.mean(r["heldout"]["torque_rmse"][st]) for r in rows])
        ies = [r["heldout"]["input_error_rmse"][st] for r in rows]
        ie = None if any(v is None for v in ies) else float(np.mean([np.mean(v) for v in ies]))
        be = [r["base_rel_error_median"].get(st) for r in rows]
        bem = None if any(v is None for v in be) else float(np.mean(be))
        summary[st] = {"torque_rmse": float(tq), "input_error_rmse": ie, "base_rel_error": bem}
        print(f"| {st} | {tq:.4f} | {'-' if ie is None else f'{ie:.4f}'} | {'-' if bem is None else f'{bem:.4f}'} |")
    zb = np.abs(np.concatenate([r["z_base"] for r in rows]))
    zl = np.abs(np.concatenate([r["z_base_ls"] for r in rows]))
    zj = np.abs(np.concatenate([r["z_joint"] for r in rows]))
    cov = {"base_2sigma": float(np.mean(zb < 2)), "base_3sigma": float(np.mean(zb < 3)),
           "base_ls_2sigma": float(np.mean(zl < 2)), "joint_2sigma": float(np.mean(zj < 2)),
           "joint_3sigma": float(np.mean(zj < 3)), "n_base": int(zb.size), "n_joint": int(zj.size),
           "std_ratio_clie_ls_median": float(np.median([r["std_ratio_clie_ls_median"] for r in rows])),
           "accepted": int(sum(r["accepted"] for r in rows))}
    print(f"\ncoverage over seeds: base parameters {cov['base_2sigma']:.2f} (2 sigma), {cov['base_3sigma']:.2f} "
          f"(3 sigma) of {cov['n_base']} (LS alone: {cov['base_ls_2sigma']:.2f}); joint terms {cov['joint_2sigma']:.2f} "
          f"/ {cov['joint_3sigma']:.2f} of {cov['n_joint']}; CLIE std / LS std median {cov['std_ratio_clie_ls_median']:.3f}; "
          f"accepted {cov['accepted']}/{len(rows)}")
    ok = [r for r in rows if r["convergence"]["converged"]]
    if ok and len(ok) < len(rows):
        zb_ok = np.abs(np.concatenate([r["z_base"] for r in ok]))
        zj_ok = np.abs(np.concatenate([r["z_joint"] for r in ok]))
        cov["converged_only"] = {"n": len(ok), "base_2sigma": float(np.mean(zb_ok < 2)),
                                 "base_3sigma": float(np.mean(zb_ok < 3)), "joint_2sigma": float(np.mean(zj_ok < 2)),
                                 "joint_3sigma": float(np.mean(zj_ok < 3))}
        c = cov["converged_only"]
        print(f"the {len(ok)} of {len(rows)} refinements that converged: base parameters {c['base_2sigma']:.2f} / "
              f"{c['base_3sigma']:.2f}, joint terms {c['joint_2sigma']:.2f} / {c['joint_3sigma']:.2f} (2 / 3 sigma); "
              f"the others say they did not converge")
    if a.json is not None:
        atomic_write_json(a.json, {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
                                   "stages": summary, "coverage": cov, "per_seed": rows,
                                   "wall_s": time.perf_counter() - t0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
