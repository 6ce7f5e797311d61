#!/usr/bin/env python
"""Where a fit's Levenberg-Marquardt iterations go (issue 45): one fit, every iteration logged.

Runs the fit job in this process with ``LMRefiner.start`` / ``LMRefiner.step`` wrapped, and writes one record per LM
iteration: the stage (each refinement started, e.g. the Coulomb fit and the static refit of ``--fit_groups auto``),
the phase, the rollouts, the elapsed time [s], the process's peak RSS so far [GB], the delays closed on evidence,
and per track its delay, loss, activity and stop, effective sample count ``n_eff``, last relative gain, the
Gauss-Newton forecast of its remaining gain on the likelihood-ratio scale (``remaining``, at its last
finite-difference Jacobian; ``fg_lr`` from the Jacobian it holds now), Jacobian age and stencil count.

    python benchmarks/refine_profile.py RUN.csv OUT.json [more fit flags]
    python benchmarks/refine_profile.py --show OUT.json          # one line per iteration
"""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np


def profile(csv: str, out: str, extra: list[str]) -> None:
    """Fit ``csv`` with the fit's defaults (plus ``extra`` flags), logging every LM iteration into ``out``."""
    import tyro

    from isaaclab_sysid.fit import refine as R
    from isaaclab_sysid.jobs.fit_job import FitArgs, main_from_args

    recs: list[dict] = []
    t0 = time.perf_counter()
    stage = {"k": 0}
    orig_start, orig_step = R.LMRefiner.start, R.LMRefiner.step

    def start(self, *a, **k):
        stage["k"] += 1
        return orig_start(self, *a, **k)

    def step(self, state):
        rec = orig_step(self, state)
        b = state.best()
        scale = b.loss / b.n_eff if np.isfinite(getattr(b, "n_eff", np.nan)) and b.loss > 0 else np.nan
        tracks = []
        for t in state.tracks:
            fg = self.forecast_gain(t) / scale if self._holds_normal(t) and np.isfinite(scale) else np.nan
            tracks.append(dict(delay=t.delay, loss=t.loss, active=t.active, stop=t.stop, n_eff=float(t.n_eff),
                               last_gain=float(t.last_gain), remaining=float(getattr(t, "remaining", np.nan)),
                               fg_lr=float(fg), age=t.age, jacobians=t.jacobians))
        recs.append(dict(stage=stage["k"], iteration=rec["iteration"], phase=rec["phase"],
                         rollouts=rec["evaluations"], t=time.perf_counter() - t0,
                         rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                         separated=rec.get("separated", []), tied=rec.get("tied", []), tracks=tracks))
        return rec

    R.LMRefiner.start, R.LMRefiner.step = start, step
    argv = ["--real_csv", csv, "--no_plots", "--quiet", "--log_dir", out + ".d", *extra]
    try:
        main_from_args(tyro.cli(FitArgs, args=argv, use_underscores=True))
    finally:
        with open(out, "w") as f:
            json.dump(dict(records=recs, wall_s=time.perf_counter() - t0,
                           peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6), f)


def show(path: str) -> str:
    """One line per iteration of a profile written by :func:`profile`."""
    d = json.load(open(path))
    lines = [f"wall {d['wall_s']:.1f} s, peak RSS {d['peak_rss_gb']:.2f} GB"]
    for r in d["records"]:
        tr = " | ".join(f"d{t['delay']} {t['loss']:.6e}{'' if t['active'] else ' (' + t['stop'] + ')'} "
                        f"n_eff {t['n_eff']:.0f} rem {t['remaining']:.2g} fg {t['fg_lr']:.2g}" for t in r["tracks"])
        lines.append(f"stage {r['stage']} it {r['iteration']:2d} ph {r['phase']} {r['rollouts']:3d} rollouts "
                     f"{r['t']:6.1f} s {r['rss_gb']:.2f} GB :: {tr}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--show":
        print(show(sys.argv[2]))
    elif len(sys.argv) >= 3:
        profile(sys.argv[1], sys.argv[2], sys.argv[3:])
    else:
        print(__doc__)
        sys.exit(2)
