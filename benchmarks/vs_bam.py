#!/usr/bin/env python
"""Servos against BAM (issue 42): fit on BAM's XL330 bench logs at kp 100 and 200, score the position on kp 400.

Columns, each scored per held-out log and per trajectory kind (position MAE [mrad], a free-running rollout driven by
the logged setpoints and torque-enable flags): BAM's published XL330 parameters m1..m6 through BAM's own simulator (as
``bam.mae`` scores them, on the logs resampled by ``bam.process`` at 5 ms); BAM's own fit (``python -m bam.fit``,
optuna CMA-ES) on the same fit split at a stated budget of trials; a setpoint follower (position = setpoint); and ours
(``isaaclab_sysid.jobs.servo_bench.fit_bench``, imported only when it runs; ``--no-ours`` leaves it out). Wall time of
each fit. Needs the ``[peers]`` extra (BAM, optuna, cmaes, wandb) and the shared logs (``<shared>/data/bam_xl330``).
See docs/benchmarks.md, "Issue 42: servos against BAM", and isaaclab_sysid/benchmarking/bam_peer.py.

    python benchmarks/vs_bam.py --no-ours                  # BAM's side at the default budget (a few minutes on 2 cores)
    python benchmarks/vs_bam.py                            # with ours
    python benchmarks/vs_bam.py --ci --no-ours             # the test's size (BAM's fit: m3, 30 trials)
    python benchmarks/vs_bam.py --bam_models m3 --bam_trials 4000 --json bam.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from isaaclab_sysid.benchmarking import bam_peer as bp
from isaaclab_sysid.utils.atomic import atomic_write_text

#: BAM fit budget at full size: trials per model (its loss stops moving by ~1000 trials on this split: 25.5 mrad
#: at 1000, 25.48 at 1400 for m3) and the models fitted
FULL_TRIALS, FULL_MODELS = 1000, ("m1", "m3", "m6")
#: the test's size
CI_TRIALS, CI_MODELS = 30, ("m3",)


def run_ours(raw_dir: Path, fit_kp: tuple[int, ...], heldout_kp: tuple[int, ...], out_dir: Path, quick: bool
             ) -> tuple[dict[str, float], float]:
    """Our fit on the fit gains, scored on the held-out gains: per-log position MAE [rad] by file stem, and wall [s].

    Calls ``isaaclab_sysid.jobs.servo_bench.fit_bench(raw_dir, fit_kp, heldout_kp, out_dir, quick)``, which must
    return a mapping of every held-out log's file stem to its position MAE [rad] (a free-running replay).
    """
    from isaaclab_sysid.jobs.servo_bench import fit_bench  # lazy: the benchmark runs BAM's side without it

    t0 = time.perf_counter()
    res = fit_bench(raw_dir, fit_kp, heldout_kp, out_dir, quick)
    wall = time.perf_counter() - t0
    if not isinstance(res, Mapping):
        raise TypeError(f"fit_bench returned {type(res).__name__}; vs_bam.py needs a mapping of held-out log stem "
                        "to position MAE [rad]")
    return {str(k): float(v) for k, v in res.items()}, wall


def _mrad(v: float) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{1000 * v:.1f}"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def tables(columns: Mapping[str, Mapping[str, float]], infos: Sequence[bp.LogInfo], heldout_kp: Sequence[int],
           fit_kp: Sequence[int], ref: str) -> str:
    """The held-out per-log and per-kind tables [mrad], the ratio row against ``ref``, and the all-logs table."""
    names = list(columns)
    held = [i for i in infos if i.kp in heldout_kp]
    rows = [[i.stem, str(i.kp), i.trajectory] + [_mrad(columns[n].get(i.stem, math.nan)) for n in names]
            for i in held]
    means = {n: bp.mean_over(columns[n], [i.stem for i in held]) for n in names}
    rows.append(["mean", "", ""] + [_mrad(means[n]) for n in names])
    if ref in means and math.isfinite(means[ref]) and means[ref] > 0:
        rows.append([f"mean / {ref}", "", ""] + [f"{means[n] / means[ref]:.2f}" for n in names])
    out = [f"Held-out logs (kp {', '.join(map(str, heldout_kp))}): position MAE [mrad]",
           _table(["log", "kp", "trajectory"] + names, rows), ""]
    kinds = {n: bp.by_kind(columns[n], held) for n in names}
    kind_rows = [[k] + [_mrad(kinds[n].get(k, math.nan)) for n in names] for k in bp.by_kind(
        {i.stem: 0.0 for i in held}, held)]
    out += [f"Held-out logs per trajectory kind: position MAE [mrad] (mean over the logs of a kind)",
            _table(["trajectory"] + names, kind_rows), ""]
    every = [n for n in names if all(i.stem in columns[n] for i in infos)]
    fit_stems = [i.stem for i in infos if i.kp in fit_kp]
    out += ["Every log (the columns scored on all of them): position MAE [mrad]",
            _table(["column", f"all {len(infos)} logs", f"fit split (kp {', '.join(map(str, fit_kp))})",
                    f"held-out (kp {', '.join(map(str, heldout_kp))})"],
                   [[n, _mrad(bp.mean_over(columns[n], [i.stem for i in infos])),
                     _mrad(bp.mean_over(columns[n], fit_stems)), _mrad(means[n])] for n in every])]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ci", action="store_true", help=f"the test's size (BAM's fit: {','.join(CI_MODELS)}, "
                                                      f"{CI_TRIALS} trials; ours quick)")
    ap.add_argument("--no-ours", "--no_ours", dest="no_ours", action="store_true",
                    help="leave our fit out (BAM's side and the setpoint follower only)")
    ap.add_argument("--data", type=Path, default=None, help="folder holding raw/*.json (default <shared>/data/bam_xl330)")
    ap.add_argument("--fit_kp", "--fit-kp", default="100,200", help="gains of the fit split")
    ap.add_argument("--heldout_kp", "--heldout-kp", default="400", help="gains of the held-out split")
    ap.add_argument("--bam_models", "--bam-models", default=None,
                    help=f"models BAM's fit runs, comma-separated (default {','.join(FULL_MODELS)}; '' for none)")
    ap.add_argument("--bam_trials", "--bam-trials", type=int, default=None,
                    help=f"bam.fit --trials per model (default {FULL_TRIALS}; --ci {CI_TRIALS})")
    ap.add_argument("--work", type=Path, default=None, help="keep the outputs here (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="also write every figure to this JSON file")
    a = ap.parse_args(argv)

    why = bp.bam_available()
    if why:
        print(why, file=sys.stderr)
        return 2
    data = a.data if a.data is not None else bp.bam_xl330_dir()
    raw = data / "raw"
    if not raw.is_dir():
        print(f"{raw}: no BAM XL330 logs here (pass --data or set ISAACLAB_SYSID_SHARED)", file=sys.stderr)
        return 2
    try:
        fit_kp = tuple(int(k) for k in a.fit_kp.split(",") if k.strip())
        heldout_kp = tuple(int(k) for k in a.heldout_kp.split(",") if k.strip())
    except ValueError:
        print("--fit_kp / --heldout_kp: comma-separated integers", file=sys.stderr)
        return 2
    models = (CI_MODELS if a.ci else FULL_MODELS) if a.bam_models is None else tuple(
        m.strip() for m in a.bam_models.split(",") if m.strip())
    trials = a.bam_trials if a.bam_trials is not None else (CI_TRIALS if a.ci else FULL_TRIALS)
    published = bp.published_params("xl330")
    bad = [m for m in models if m not in published]
    if bad:
        print(f"--bam_models: unknown model(s) {', '.join(bad)} ({', '.join(published)})", file=sys.stderr)
        return 2

    tmp = None
    if a.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="vs_bam_")
        work = Path(tmp.name)
    else:
        work = a.work
        work.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    try:
        t0 = time.perf_counter()
        bp.resample_with_bam(raw, work / "processed")
        wall = {"bam.process (resample 5 ms)": time.perf_counter() - t0}
        infos = bp.log_infos(work / "processed")
        fit_dir, _ = bp.split_by_kp(work / "processed", work / "split", fit_kp, heldout_kp)
        logs = bp.read_logs(work / "processed")

        columns: dict[str, dict[str, float]] = {}
        t0 = time.perf_counter()
        for name, path in published.items():
            columns[f"BAM {name}"] = bp.score_params(path, logs)
        wall["BAM published m1..m6 (score every log)"] = time.perf_counter() - t0
        columns["setpoint"] = bp.setpoint_follower(logs)

        fits = []
        for m in models:
            print(f"bam.fit {m}, {trials} trials on kp {fit_kp} ...", flush=True)
            f = bp.run_bam_fit(fit_dir, m, trials, work / "bam_fit" / f"{m}_{trials}.json")
            fits.append(f)
            columns[f"BAM fit {m}@{trials}"] = bp.score_params(f.params_path, logs)
            wall[f"bam.fit {m} ({trials} trials)"] = f.wall_s
            print(f"  {f.wall_s:.1f} s; fit-split loss {1000 * f.file_loss_rad:.2f} mrad", flush=True)

        ours_note = "left out (--no-ours)"
        if not a.no_ours:
            per_log, w = run_ours(raw, fit_kp, heldout_kp, work / "ours", a.ci)
            held = [i.stem for i in infos if i.kp in heldout_kp]
            missing = [s for s in held if s not in per_log]
            if missing:
                print(f"ours: no MAE for held-out log(s) {', '.join(missing)}", file=sys.stderr)
                return 1
            columns["ours"] = per_log
            wall["ours (fit_bench)"] = w
            ours_note = f"fit_bench quick={a.ci}"
        held_stems = [i.stem for i in infos if i.kp in heldout_kp]
        best_pub = min((n for n in columns if n.startswith("BAM m")),
                       key=lambda n: bp.mean_over(columns[n], held_stems))
        ref = "ours" if "ours" in columns else best_pub

        print()
        print(tables(columns, infos, heldout_kp, fit_kp, ref))
        print()
        fit_rows = [[f"bam.fit {f.model}", str(f.trials), f"{f.wall_s:.1f}", str(f.written_at_trial),
                     _mrad(f.printed_best_rad), _mrad(f.file_loss_rad)] for f in fits]
        print("BAM's fit (optuna CMA-ES, BIPOP restarts, unseeded; one worker): its loss is the position MAE on the "
              "fit split")
        print(_table(["fit", "trials", "wall [s]", "last write at trial", "printed best then [mrad]",
                      "written file's fit loss [mrad]"],
                     fit_rows) if fit_rows else "(no BAM fit run)")
        print()
        print(_table(["step", "wall [s]"], [[k, f"{v:.1f}"] for k, v in wall.items()]))
        print(f"\nours: {ours_note}; reference of the ratio row: {ref}; total wall time "
              f"{time.perf_counter() - t_all:.0f} s")
        if a.json:
            atomic_write_text(Path(a.json), json.dumps({
                "fit_kp": fit_kp, "heldout_kp": heldout_kp, "bam_models": models, "bam_trials": trials,
                "reference": ref, "logs": [i.__dict__ for i in infos], "per_log_rad": columns,
                "heldout_by_kind_rad": {n: bp.by_kind(c, [i for i in infos if i.kp in heldout_kp])
                                        for n, c in columns.items()},
                "heldout_mean_rad": {n: bp.mean_over(c, held_stems) for n, c in columns.items()},
                "bam_fits": [f.to_dict() for f in fits], "wall_s": wall}, indent=1, default=float))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
