#!/usr/bin/env python
"""Interval coverage over noise seeds on a friction-law matrix twin: the process-noise rule against an earlier one.

    python benchmarks/process_noise_coverage.py --law coulomb --controller task_impedance --seeds 1-12 --work W

Each seed records a fresh data set of one matrix cell (benchmarks/friction_laws.py: the law's hidden truth, two
3 s fit runs at the matrix's two gains (``friction_laws.TASK_FIT_GAINS``; joint PD: one) and a held-out run at other
gains, 1 kHz, the first matrix's noise: 0.2 mrad, 2 mrad/s and
0.02 N m of torque noise on every joint), fits it with fixed groups (``--groups``; default the law's own set) and
computes the interval stage twice on the same fit, measured in the same run:

* **propagated** (the product's rule): each joint's torque disturbance at least the common level
  (intervals/process_noise.py, ``Disturbance.propagated``), and the replicates' spread scaled by what
  :data:`~isaaclab_sysid.intervals.process_noise.N_RELINEARIZED` of them, solved again at their one-step estimate,
  show (``relinearized_factor``);
* ``--compare one_step`` (default): the same without the re-linearized replicates (the rule of issue 46's eighth
  pass); ``--compare split``: the per-joint non-negative least-squares split alone, one step (the rule before it);
  ``--compare no_lines``: without the load law's lines to the optimum of its other start (intervals/basins.py,
  ``score_lines``; the rule before issue 46's tenth pass; the law step writes that optimum under ``--groups auto``).

Per rule, and per joint: how many of the numbers with a truth lie inside their 95 % interval, the standard deviation of
z = (truth - value) / (half-width / 1.96) over them (1 for calibrated intervals), and the misses, flagged (the
interval marked unreliable or unbounded) or not. The delay is left out (its interval is a set of ticks).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import friction_laws as fl  # noqa: E402

#: the fixed groups of each law's fit (``--fit_groups``; the law names expand to their groups)
LAW_GROUPS = {"coulomb": "armature,friction,viscous,delay", "stribeck": "armature,stribeck,viscous,delay",
              "sigmoid": "armature,sigmoid,viscous,delay", "load": "armature,load,viscous,delay",
              "dahl": "armature,dahl,viscous,delay"}


def seeds_of(text: str) -> list[int]:
    """``1-6`` or ``1,3,5`` -> the seeds."""
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def record_cell(law: str, controller: str, seed: int, work: Path, seconds: float = 3.0,
                task_fit_gains=fl.TASK_FIT_GAINS) -> tuple[list[str], list[str]]:
    """Write one seed's fit runs and held-out run (CSV) under ``work``: (fit paths, held-out paths).
    ``task_fit_gains``: the task-impedance fit runs' (K [N/m], R [N m/rad]), one per run."""
    from isaaclab_sysid.data import write_run
    from isaaclab_sysid.robots import load_robot
    from isaaclab_sysid.twin.law_twins import record_law_twin

    robot = load_robot("franka_panda")
    if controller == "task_impedance":
        (k1, r1), (k2, r2) = task_fit_gains
        targets = [fl.task(robot, "chirp", seconds, k1, r1, 1), fl.task(robot, "multiband", seconds, k2, r2, 5)]
        held = fl.task(robot, "multiband", seconds, *fl.TASK_HELD_GAINS, 7)
    else:
        targets = [fl.joint(robot, seconds, 40), fl.joint(robot, seconds, 50)]
        held = fl.joint(robot, seconds, 60, kp_scale=1.5)
    tp = fl.twin(law)
    work.mkdir(parents=True, exist_ok=True)
    rec = lambda t, k: record_law_twin(robot, t, tp, controller, 1000.0, 100 * seed + k)  # noqa: E731
    fits = [str(write_run(rec(t, i + 1), work / f"fit_{i}.csv")[0]) for i, t in enumerate(targets)]
    return fits, [str(write_run(rec(held, 3), work / "heldout.csv")[0])]


def score(rows: list[dict]) -> dict:
    """Coverage of ``rows`` (label, truth, value, lower, upper, flagged): inside, the spread of z (``std_z``, about
    the mean ``mean_z``; ``rms_z`` about 0, which a bias raises too; each 1, 0 and 1 for calibrated, unbiased
    intervals; None without a bounded row), misses."""
    z, misses, n = [], [], 0
    for r in rows:
        n += 1
        if r["lower"] is None or r["upper"] is None:
            if not r["flagged"]:
                raise AssertionError(f"{r['label']}: an unbounded interval not flagged")
            misses.append(r)
            continue
        hw = 0.5 * (r["upper"] - r["lower"])
        z.append((r["truth"] - r["value"]) / (hw / 1.96) if hw > 0 else np.inf)
        if not r["lower"] <= r["truth"] <= r["upper"]:
            misses.append(r)
    z = np.asarray(z)
    z = z[np.isfinite(z)]
    return {"compared": n, "inside": n - len(misses), "std_z": float(np.std(z)) if z.size else None,
            "mean_z": float(np.mean(z)) if z.size else None, "rms_z": float(np.sqrt(np.mean(z**2))) if z.size else None,
            "unflagged_misses": sum(not m["flagged"] for m in misses), "flagged_misses": sum(m["flagged"] for m in misses),
            "missed": sorted(m["label"] for m in misses if not m["flagged"])}


#: the rules compared (``--compare``): the product's against one earlier rule, each a compute_all setting
RULES = {"propagated": {}, "split": {"process_noise_floor": False}, "one_step": {"process_noise_relinearized": 0},
         "no_lines": {"other_starts": ()}}


def by_joint(rows: list[dict]) -> dict[str, dict]:
    """Per joint (the label's ``[...]``): inside of compared and the standard deviation of z over its bounded rows."""
    out: dict[str, dict] = {}
    for r in rows:
        j = r["label"].split("[")[-1].rstrip("]")
        d = out.setdefault(j, {"rows": []})
        d["rows"].append(r)
    return {j: {k: v for k, v in score(d["rows"]).items() if k in ("compared", "inside", "std_z", "unflagged_misses")}
            for j, d in out.items()}


def seed_rows(law: str, fit_dir: Path, **settings) -> tuple[list[dict], dict]:
    """One fit's intervals (the interval stage with ``settings``, :data:`RULES`) against the truth, and the
    disturbance."""
    from isaaclab_sysid.export.build import FitContext, other_starts
    from isaaclab_sysid.intervals.combine import compute_all
    from isaaclab_sysid.sim.friction import law_of_groups

    ctx = FitContext.load(fit_dir)
    prob = ctx.problem()
    rep = compute_all(prob.backend, ctx.result, prob.runs, prob.heldout, **{"other_starts": other_starts(ctx), **settings})
    truth = fl.truth_of(law, law_of_groups(ctx.space.group_names).name)  # another law's numbers have no truth
    names = list(ctx.space.joint_names)
    rows = []
    for iv in rep.chosen().intervals:
        if iv.group not in truth or iv.group == "delay":
            continue
        t = float(np.asarray(truth[iv.group])[names.index(iv.joint)])
        rows.append({"label": iv.label, "truth": t, "value": float(iv.value), "lower": iv.lower, "upper": iv.upper,
                     "flagged": iv.lower is None or iv.upper is None or not iv.reliable})
    pn = rep.structure.get("process_noise", {})
    return rows, {"sigma_w_nm": pn.get("sigma_w_nm"), "sigma_common_nm": pn.get("sigma_common_nm"),
                  "relinearized_factor": pn.get("relinearized_factor")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--law", default="coulomb", choices=sorted(LAW_GROUPS), help="the twin's friction law")
    ap.add_argument("--controller", default="task_impedance", choices=("task_impedance", "joint_pd"))
    ap.add_argument("--seeds", default="1-12", help="noise seeds: 1-12 or 1,3,5 (one data set and fit each)")
    ap.add_argument("--groups", default=None, help="--fit_groups of the fits (default: the law's own set)")
    ap.add_argument("--work", required=True, help="folder for the runs and fits (kept)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--compare", default="one_step", choices=("one_step", "split", "no_lines"),
                    help="the earlier rule beside the product's (propagated, re-linearized): one_step (no replicate "
                         "re-linearized, the rule of issue 46's eighth pass), split (the per-joint split alone and "
                         "one step, the rule before it) or no_lines (without the load law's lines to its other "
                         "start, the rule before the tenth pass; with --groups auto)")
    ap.add_argument("--relinearized", type=int, default=None,
                    help="the product rule's re-linearized replicates (default: the interval stage's, N_RELINEARIZED)")
    ap.add_argument("--task-fit-gains", default=None, help="the task-impedance fit runs' K/R per run, e.g. "
                    "200/20,200/20 (default: friction_laws.TASK_FIT_GAINS; the eighth pass's figures are at one gain: "
                    "--task-fit-gains 200/20,200/20 --relinearized 0 --compare split)")
    a = ap.parse_args()
    gains = fl.parse_task_fit_gains(a.task_fit_gains) if a.task_fit_gains else fl.TASK_FIT_GAINS
    if gains is None:
        ap.error(f"--task-fit-gains {a.task_fit_gains}: two runs' K/R, e.g. 200/20,350/25")
    from isaaclab_sysid.jobs.fit_args import FitArgs
    from isaaclab_sysid.jobs.fit_job import run_fit

    groups = a.groups or LAW_GROUPS[a.law]
    product = RULES["propagated"] if a.relinearized is None else {"process_noise_relinearized": a.relinearized}
    rules = {"propagated": product,
             a.compare: {**RULES["split"], **RULES["one_step"]} if a.compare == "split" else RULES[a.compare]}
    rows: dict[str, list[dict]] = {k: [] for k in rules}
    dist = []
    t0 = time.perf_counter()
    for s in seeds_of(a.seeds):
        w = Path(a.work) / f"{a.law}_{a.controller}_s{s}"
        fits, held = record_cell(a.law, a.controller, s, w, task_fit_gains=gains)
        fdir = run_fit(FitArgs.build(real_csv=fits, heldout_csv=held, log_dir=str(w / "logs"), plots=False,
                                     quiet=True, fit_groups=groups), log=lambda _s: None)
        for rule, settings in rules.items():
            r, disturbance = seed_rows(a.law, Path(fdir), **settings)
            rows[rule] += [dict(x, seed=s) for x in r]
            if rule == "propagated":
                d = disturbance
        dist.append({"seed": s, **d})
        print(f"seed {s}: split sigma_w [N m] {np.round(d['sigma_w_nm'], 4).tolist()}, common "
              f"{d['sigma_common_nm']:.4f}", flush=True)
    out = {"law": a.law, "controller": a.controller, "groups": groups, "seeds": seeds_of(a.seeds),
           "task_fit_gains": [list(g) for g in gains], "rules_settings": rules,
           "rules": {k: score(v) for k, v in rows.items()}, "by_joint": {k: by_joint(v) for k, v in rows.items()},
           "disturbance": dist, "wall_s": time.perf_counter() - t0}
    for k, v in out["rules"].items():
        zs = ("no bounded interval" if v["std_z"] is None else
              f"z std {v['std_z']:.2f}, mean {v['mean_z']:+.2f}, rms {v['rms_z']:.2f}")
        print(f"{k:>10s}: {v['inside']} of {v['compared']} inside ({100 * v['inside'] / max(v['compared'], 1):.1f} %), "
              f"{zs}, misses unflagged {v['unflagged_misses']}, flagged {v['flagged_misses']}")
        print("            per joint: " + "; ".join(
            f"{j} {b['inside']}/{b['compared']}" + ("" if b["std_z"] is None else f" z std {b['std_z']:.2f}")
            for j, b in out["by_joint"][k].items()))
    print(f"wall {out['wall_s']:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
