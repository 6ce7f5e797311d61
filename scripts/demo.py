#!/usr/bin/env python
"""The README's main job on the bundled example runs, CPU default (``make demo``).

1. validates every bundled run (data/real_runs/: a simulated twin of a Franka with
   hidden joint dynamics, 1 kHz logs, see docs/twin.md);
2. fits armature, static and Coulomb friction (the static-friction group with its
   Stribeck velocity: the twin's joints stick), viscous friction and the actuator
   delay on the two fit runs (a joint-space multisine at joint PD and a low
   task-space chirp at kp 200/20) with the MuJoCo backend: CMA-ES, then the
   Levenberg-Marquardt refinement;
3. scores the result on the held-out run (a task-space multiband at stiffer gains,
   kp 500/30) against the nominal parameters, judges the model's adequacy against
   the noise floor the fit measures from two repeats of that run (--noise_floor_from:
   RMS of their q difference / sqrt(2)), and writes the report (report.md and
   report.html);
4. computes an interval for every fitted number and exports the fit to Isaac Lab
   configs (actuator overrides + domain-randomization event terms; PhysX, the
   engine that has a static friction level) and a neutral JSON/YAML file;
5. checks the answer against the twin's hidden truth (configs/twin/franka_demo.json,
   known only because it is a twin) and exits non-zero if any check fails.

Sized to finish in a few minutes on a 2-core laptop; the full-size fit is
``python scripts/sysid_franka_osc.py`` with its defaults (see README).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.export.record import DrRecord
from isaaclab_sysid.jobs.fit_job import FitArgs, FitError, run_fit
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.paths import LOGS_DIR, REAL_RUNS_DIR, REPO_ROOT
from isaaclab_sysid.twin.demo import DEMO_FIT, DEMO_HELDOUT, DEMO_REPEAT, DEMO_RUNS
from isaaclab_sysid.twin.params import load_twin_params
from isaaclab_sysid.utils.cli import run_cli

TRUTH = REPO_ROOT / "configs" / "twin" / "franka_demo.json"
GROUPS = "armature,mu_static,dynamic_ratio,stribeck_velocity,viscous,delay"
#: the issue's bar: held-out q RMS <= 1.5x the RMS between two twins of the held-out run (same truth, other noise)
MAX_FLOOR_RATIO = 1.5


def truth_values() -> dict[str, np.ndarray]:
    """The twin's hidden truth in the fit's groups (static friction model: Fs, Fc / Fs, vs)."""
    p = load_twin_params(TRUTH)
    fs = np.asarray(p.static_friction)
    return {"armature": np.asarray(p.armature), "mu_static": fs, "dynamic_ratio": np.asarray(p.friction) / fs,
            "stribeck_velocity": np.asarray(p.stribeck_velocity), "viscous": np.asarray(p.viscous),
            "delay": np.array([p.delay])}


def check_against_truth(run_dir) -> bool:
    """Print the checks of the demo's answer against the twin's truth; True when all pass.

    The noise floor is the fit's (``adequacy`` in sysid_best_params.json, measured with ``--noise_floor_from``):
    each run's own noise, RMS(q_A - q_B) / sqrt(2); the bar is 1.5x the RMS between the repeats, sqrt(2) x that.
    """
    result = RunFolder(run_dir).read_result()
    a = result.adequacy
    if a is None or a.floor_source != "repeats":
        print(f"  FAIL  the fit did not measure its noise floor from the repeats (floor source: "
              f"{None if a is None else a.floor_source}); --noise_floor_from was not applied")
        return False
    floor_mrad, between_mrad = a.floor_mrad, a.floor_mrad * np.sqrt(2.0)
    export = DrRecord.from_json(json.loads((RunFolder(run_dir).export_dir / "sysid_dr.json").read_text()))
    truth = truth_values()
    outside = []
    for e in result.space.entries():
        v = float(truth[e.group][0 if e.joint is None else result.space.joint_names.index(e.joint)])
        r = export.ranges.get(e.label)
        # a None end is unbounded (SpanRow: not identifiable on that side)
        lo = -np.inf if r is None or r.lower is None else float(r.lower)
        hi = np.inf if r is None or r.upper is None else float(r.upper)
        if r is None or not (lo - 1e-12 <= v <= hi + 1e-12):
            outside.append(f"{e.label} truth {v:.4g} range {None if r is None else [r.lower, r.upper]}")
    hits = [h.label for h in result.at_bounds()]
    unflagged = [h for h in hits if h not in export.meta["unreliable"]]  # export/build.py always writes the section
    ev = json.loads(RunFolder(run_dir).eval_result.read_text())
    held = ev["runs"][DEMO_HELDOUT]["fitted"]["q_rms_all_mrad"]
    checks = [
        (f"delay exact: fitted {result.delay} ticks, truth {int(truth['delay'][0])}", result.delay == int(truth["delay"][0])),
        (f"every true value inside its exported range ({result.space.dim - len(outside)}/{result.space.dim})"
         + ("" if not outside else ": outside " + "; ".join(outside)), not outside),
        (f"no value at a bound unless flagged (at a bound: {hits or 'none'})", not unflagged),
        (f"held-out q RMS {held:.3f} mrad <= {MAX_FLOOR_RATIO} x the RMS between the repeats {between_mrad:.3f} mrad "
         f"(ratio {held / between_mrad:.2f}; {held / floor_mrad:.2f}x the per-run noise floor {floor_mrad:.4f} mrad)",
         held <= MAX_FLOOR_RATIO * between_mrad),
    ]
    print("\nchecks against the twin's hidden truth (configs/twin/franka_demo.json; known only because it is a twin):")
    for text, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    print(f"  (model adequacy: {a.verdict}, fit residual {a.residual_over_floor:.2f}x the noise floor measured from "
          "the repeats)")
    return all(ok for _, ok in checks)


def main() -> int:
    import argparse

    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    runs = {}
    for name, *_ in DEMO_RUNS:
        try:
            run = read_run(REAL_RUNS_DIR / f"{name}.csv")
        except RunFormatError as exc:
            print(f"FAIL {exc}", file=sys.stderr)
            return 2
        runs[name] = run
        print(f"OK {name}: {run.n_samples} rows at {run.meta.log_rate_hz:g} Hz, {run.meta.controller}, {run.duration:.1f} s, "
              f"kp {run.meta.kp[0]:g}/{run.meta.kp[3]:g}")
    args = FitArgs.build(
        real_csv=[str(REAL_RUNS_DIR / f"{n}.csv") for n in DEMO_FIT],
        heldout_csv=[str(REAL_RUNS_DIR / f"{DEMO_HELDOUT}.csv")],
        fit_groups=GROUPS, viscous_bounds=(0.0, 2.0), num_envs=16, max_iter=8, refine_iter=12, refine_delay_neighbours=1, substeps=2,
        slew_limit=True, torque_clamp=True, log_dir=str(LOGS_DIR / "sysid"),
        noise_floor_from=[(str(REAL_RUNS_DIR / f"{DEMO_HELDOUT}.csv"), str(REAL_RUNS_DIR / f"{DEMO_REPEAT}.csv"))],
    )
    try:
        run_dir = run_fit(args)
    except FitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    import export_dr  # scripts/export_dr.py, beside this file

    code = export_dr.main(export_dr.Args(fit_dir=str(run_dir), physics="physx"))
    if code != 0:
        return code
    ok = check_against_truth(run_dir)
    print(f"\ndemo done: report {run_dir / 'report.html'} (and report.md), exported configs in {run_dir / 'export'}")
    return 0 if ok else 1


if __name__ == "__main__":
    run_cli(main)
