#!/usr/bin/env python
"""The README's main job on the bundled example runs, CPU default (``make demo``).

1. validates every bundled run (data/real_runs/, a simulated twin of a Franka
   with hidden joint dynamics, see docs/twin.md);
2. fits armature, Coulomb and viscous friction and the actuator delay on the
   two fit runs (low chirp + multiband at kp 200/20) with the MuJoCo backend:
   CMA-ES, then the Levenberg-Marquardt refinement;
3. scores the result on the held-out run (another multiband at stiffer gains,
   kp 500/30) against the nominal parameters, and writes the report;
4. computes an interval for every fitted number and exports the fit to Isaac Lab
   configs (actuator overrides + domain-randomization event terms) and a
   neutral JSON/YAML file (scripts/export_dr.py).

Sized to finish in a few minutes on a 2-core laptop; the full-size fit is
``python scripts/sysid_franka_osc.py`` with its defaults (see README).
"""

from __future__ import annotations

import sys

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.fit.pipeline import FitArgs, FitError, run_fit
from isaaclab_sysid.paths import LOGS_DIR, REAL_RUNS_DIR

FIT_RUNS = ["twin_chirp_low_fit.csv", "twin_multiband_fit.csv"]
HELDOUT_RUNS = ["twin_heldout_multiband.csv"]


def main() -> int:
    import argparse

    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for name in FIT_RUNS + HELDOUT_RUNS:
        try:
            run = read_run(REAL_RUNS_DIR / name)
        except RunFormatError as exc:
            print(f"FAIL {exc}", file=sys.stderr)
            return 2
        print(f"OK {name}: {run.n_samples} rows, {run.meta.controller}, {run.duration:.1f} s, "
              f"kp {run.meta.kp[0]:g}/{run.meta.kp[3]:g}")
    args = FitArgs.build(
        real_csv=[str(REAL_RUNS_DIR / n) for n in FIT_RUNS],
        heldout_csv=[str(REAL_RUNS_DIR / n) for n in HELDOUT_RUNS],
        num_envs=16,
        max_iter=10,
        refine_iter=4,
        slew_limit=True,
        torque_clamp=True,
        log_dir=str(LOGS_DIR / "sysid_franka"),
    )
    try:
        run_dir = run_fit(args)
    except FitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    import export_dr  # scripts/export_dr.py, beside this file

    code = export_dr.main(export_dr.Args(fit_dir=str(run_dir)))
    print(f"\ndemo done: report {run_dir / 'report.md'}, exported configs in {run_dir / 'export'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
