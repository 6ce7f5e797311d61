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
    python benchmarks/refine_profile.py --delays FIT_DIR OUT.json 0 1 2   # each delay refined fully, held fixed

``--delays`` asks whether a fit's delay is the optimum of its model or where its delay profile stopped: each given
delay is refined at that delay alone (phase 1 only, ``--max_iter`` finite-difference Jacobians, ``rtol`` 1e-6, no
per-sample or tie stop) from the fit's own track at that delay and from the fit's best point moved there, and the
losses are compared on the likelihood-ratio scale of the per-sample tests, (L(d) - L_min) / (L_min / n_eff)
(fit/refine.py), with the Gauss-Newton forecast of what each could still gain.
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


def delays(fit_dir: str, out: str, ds: list[int], max_iter: int = 40) -> dict:
    """Refine the fit in ``fit_dir`` at each delay of ``ds`` with that delay held fixed (module docstring)."""
    from isaaclab_sysid.export.build import FitContext
    from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings
    from isaaclab_sysid.objective.residuals import effective_samples

    ctx = FitContext.load(fit_dir)
    obj = ctx.problem().objective()
    space = obj.space
    tracks = ctx.result.refine.tracks if ctx.result.refine is not None else []
    best_x = np.asarray(ctx.result.best_x if hasattr(ctx.result, "best_x") else min(tracks, key=lambda t: t.loss).x)
    res: dict = {"fit_dir": fit_dir, "fit_tracks": {int(t.delay): float(t.loss) for t in tracks}, "delays": {}}
    settings = RefineSettings(max_iter=max_iter, rtol=1e-6, delay_neighbours=0, stat_tol=None, separate_level=None,
                              tie_level=None)
    t0 = time.perf_counter()
    for d in ds:
        own = [np.asarray(t.x) for t in tracks if int(t.delay) == d]
        starts = own + [space.with_delay(best_x, d)]
        ref = LMRefiner(obj, settings)
        st = ref.start(starts[0], starts[1:], labels=["own track", "best moved"][:len(starts)] if own else ["best moved"])
        ref.run(st)
        b = st.best()
        R, _ = obj.residuals_chunked(b.x[None, :], 1)
        n_eff = effective_samples(R[0], ref.shapes, len(ref.cont))
        A, g = ref._normal(b) if ref._holds_normal(b) else (None, None)
        fg = ref.forecast_gain(b, (A, g)) if A is not None else float("nan")
        res["delays"][d] = dict(loss=b.loss, n_eff=float(n_eff), iterations=st.iteration, stop=b.stop,
                                start=b.start, forecast=float(fg),
                                tracks=[dict(start=t.start, loss=t.loss, stop=t.stop, accepted=t.accepted)
                                        for t in st.tracks], t=time.perf_counter() - t0)
        print(d, res["delays"][d], flush=True)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
    Lmin = min(v["loss"] for v in res["delays"].values())
    for d, v in res["delays"].items():
        v["lr"] = (v["loss"] - Lmin) / (Lmin / v["n_eff"])
        v["forecast_lr"] = v["forecast"] / (v["loss"] / v["n_eff"])
        print(f"delay {d}: loss {v['loss']:.6e} (fit's track {res['fit_tracks'].get(d, float('nan')):.6e}), "
              f"LR {v['lr']:.1f} on n_eff {v['n_eff']:.0f}, forecast left {v['forecast_lr']:.2g}, "
              f"{v['iterations']} iterations, stop {v['stop']} ({v['start']})")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--delays":
        delays(sys.argv[2], sys.argv[3], [int(a) for a in sys.argv[4:]] or [0, 1, 2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--show":
        print(show(sys.argv[2]))
    elif len(sys.argv) >= 3:
        profile(sys.argv[1], sys.argv[2], sys.argv[3:])
    else:
        print(__doc__)
        sys.exit(2)
