#!/usr/bin/env python
"""What a longer recording costs and buys (issue 45): one excitation at several lengths, and the same total as
several shorter runs.

Each case records the demo twin's hidden truth (``configs/twin/franka_demo.json``: Stribeck friction, delay 2,
4 substeps, the demo's noise) with ``scripts/record_twin.py --waveform chirp --log_1khz`` and fits it with
``scripts/sysid_franka_osc.py`` as a user would, one process per case (so each peak memory is its own), scored on a
held-out multiband at other gains (kp 500/30) against a repeat of it with other noise (the floor). Per case:

* wall time [s], CPU time [s] (steadier than wall on a shared machine), rollouts (candidate x run replays, every stage), simulated seconds (rollouts x run length),
  Levenberg-Marquardt iterations, finite-difference Jacobians, delay tracks closed on evidence (separated) or as a
  tie (tied), peak RSS [GB];
* the delay against the truth, the median and largest relative error of armature, Coulomb friction (with the
  static group: mu_static x dynamic_ratio) and viscous friction against the truth, held-out q RMS / floor;
* each against the reference length's figures measured in the same run (``x ref``).
* a fit long enough for the first pass (``--first_pass_s``, jobs/first_pass.py: the search on windows, then a polish
  on the full runs) also reports its windows, the first pass's LM iterations, CPU and wall time up to the polish, its
  groups and delay, and the polish's iterations, CPU time and loss from its start to its end (a second table);
  ``--fit_args --first_pass_s 0`` measures the direct fit.

    python benchmarks/scaling.py                       # 6, 12, 24, 48 s and 2 x 12, 4 x 12 s; reference 12 s
    python benchmarks/scaling.py --long                # and 96 s (8 x 12 s)
    python benchmarks/scaling.py --groups armature,friction,viscous,delay   # the fixed-group misfit case
    python benchmarks/scaling.py --ci                  # tests/test_scaling.py's size (< 60 s on 2 cores)
    python benchmarks/scaling.py --intervals 12s=FIT_DIR 48s=FIT_DIR ...   # the intervals' widths against the truth

``--intervals`` reads each fit folder's ``intervals.json`` (written by ``scripts/compute_intervals.py --fit_dir``) and
tabulates, per fitted number, the selected method's interval width and whether the twin's truth lies inside it
(the static group's truth: ``mu_static`` = static friction, ``dynamic_ratio`` = Coulomb / static friction), and
each folder's widths against the first one's.

``--groups`` is passed to ``--fit_groups`` (default ``auto``, the fit's default); ``--fit_args`` adds any other
fit flags. The test asserts correctness (delay, errors), never speed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TRUTH = REPO / "configs" / "twin" / "franka_demo.json"


@dataclass(frozen=True)
class Size:
    """One benchmark size: the single-run lengths [s], the split cases (n runs of ``split_s``), the reference."""

    lengths: tuple[float, ...]
    splits: tuple[int, ...]
    split_s: float
    reference: float
    heldout_s: float
    fit_args: tuple[str, ...] = ()
    waveform: str = "chirp"


FULL = Size(lengths=(6.0, 12.0, 24.0, 48.0), splits=(2, 4), split_s=12.0, reference=12.0, heldout_s=6.0)
LONG = Size(lengths=(6.0, 12.0, 24.0, 48.0, 96.0), splits=(2, 4, 8), split_s=12.0, reference=12.0, heldout_s=6.0)
#: the test's size: the right model for the truth (the static group), a small refinement budget, and the
#: multiband (a 2 s chirp barely moves the arm: the delay came out 3 and the numbers 80 % off)
CI = Size(lengths=(2.0, 4.0), splits=(2,), split_s=2.0, reference=2.0, heldout_s=2.0,
          fit_args=("--refine_iter", "8"), waveform="multiband")
CI_GROUPS = "armature,mu_static,dynamic_ratio,viscous,delay"


@dataclass
class Case:
    name: str
    csvs: list[str]
    seconds: float
    stats: dict = field(default_factory=dict)


def record(out: Path, name: str, duration: float, waveform: str = "chirp", seed: int = 0, target_seed: int = 0,
           kp: tuple[float, float] = (200.0, 20.0)) -> str:
    """One twin run (CSV + sidecar) through scripts/record_twin.py; returns the CSV path."""
    cmd = [sys.executable, str(REPO / "scripts" / "record_twin.py"), "--params", str(TRUTH), "--waveform", waveform,
           "--duration", str(duration), "--log_1khz", "--out", str(out), "--name", name, "--seed", str(seed),
           "--target_seed", str(target_seed), "--kp_trans", str(kp[0]), "--kp_rot", str(kp[1])]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return str(out / f"{name}.csv")


# ------------------------------------------------------------------ the worker: one fit, counted
def worker(spec_path: str) -> None:
    """Run one fit in this process with counters on the objective and the refiner; write its stats JSON."""
    spec = json.loads(Path(spec_path).read_text())
    from isaaclab_sysid.fit import refine as refine_mod
    from isaaclab_sysid.objective.replay_objective import ReplayObjective
    from isaaclab_sysid.jobs.fit_job import FitArgs, main_from_args
    import tyro

    count = {"rollouts": 0, "sim_s": 0.0, "iterations": 0, "jacobians": 0, "separated": 0, "tied": 0, "stops": [],
             "tracks": []}
    live: dict[int, int] = {}  # id(track) -> the iterations it took part in (this refinement)

    def counted(fn):
        def wrap(self, X, *a, **k):
            n = len(X) * len(self.runs)
            count["rollouts"] += n
            count["sim_s"] += len(X) * sum(float(r.t[-1] - r.t[0]) for r in self.runs)
            return fn(self, X, *a, **k)
        return wrap

    ReplayObjective.rollouts = counted(ReplayObjective.rollouts)
    ReplayObjective.states = counted(ReplayObjective.states)  # the loss, residuals and stencils (no double count:
    # states() does not call rollouts())
    if not getattr(ReplayObjective, "scores_loss_counted", False):
        orig_loss = ReplayObjective.loss

        def loss(self, X):
            if self.backend.scores_loss:  # states() is not called on this path
                count["rollouts"] += len(X) * len(self.runs)
            return orig_loss(self, X)
        ReplayObjective.loss = loss
    L = refine_mod.LMRefiner
    orig_step, orig_sten, orig_run = L.step, L._stencils, L.run

    def step(self, state):
        for t in state.tracks:
            if t.active:
                live[id(t)] = live.get(id(t), 0) + 1
        rec = orig_step(self, state)
        count["iterations"] += 1
        count["separated"] += len(rec.get("separated", []))
        count["tied"] += len(rec.get("tied", []))
        return rec

    def stencils(self, tracks):
        count["jacobians"] += len(tracks)
        return orig_sten(self, tracks)

    def run(self, state, on_iteration=None):
        out = orig_run(self, state, on_iteration)
        count["stops"].append([[t.delay, t.stop] for t in state.tracks])
        # per track of this refinement: delay, LM iterations it took part in, stop, loss, crawls (fit/refine.py)
        count["tracks"].append([[t.delay, live.pop(id(t), 0), t.stop, t.loss, getattr(t, "crawls", 0)]
                                for t in state.tracks])
        live.clear()
        return out

    L.step, L._stencils, L.run = step, stencils, run
    from isaaclab_sysid.jobs import fit_job
    orig_fp = fit_job.run_first_pass

    def first_pass(args, problem, plan, run_dir, log, search):
        def counted_search(a, p, d, x0, refit):  # the polish is the search in the fit folder itself
            if Path(d) == Path(run_dir):
                ru0 = resource.getrusage(resource.RUSAGE_SELF)
                count["first_pass"] = {"windows": len(plan.windows),
                                       "window_s": float(sum(w.t1_s - w.t0_s for w in plan.windows)),
                                       "iterations": count["iterations"], "rollouts": count["rollouts"],
                                       "sim_s": count["sim_s"], "wall_s": time.perf_counter() - t0,
                                       "cpu_s": ru0.ru_utime + ru0.ru_stime}
            return search(a, p, d, x0, refit)
        return orig_fp(args, problem, plan, run_dir, log, counted_search)

    fit_job.run_first_pass = first_pass
    t0 = time.perf_counter()
    main_from_args(tyro.cli(FitArgs, args=spec["argv"], use_underscores=True))
    count["wall_s"] = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    count["peak_rss_gb"] = ru.ru_maxrss / 1e6
    count["cpu_s"] = ru.ru_utime + ru.ru_stime  # the process's CPU time: steadier than wall on a shared machine
    Path(spec["out"]).write_text(json.dumps(count))


# ------------------------------------------------------------------ scoring against the truth
def truth_errors(best: dict) -> dict:
    """Relative errors of the fitted numbers against the twin's truth, per group, and the delay."""
    truth = json.loads(TRUTH.read_text())
    v = best["best_params_decoded"]
    coulomb = (np.asarray(v["mu_static"]) * np.asarray(v["dynamic_ratio"]) if "mu_static" in v
               else np.asarray(v["friction"]))
    out = {"delay": int(v["motor_delay_steps"]), "delay_true": int(truth["delay"])}
    for g, fitted in (("armature", np.asarray(v["armature"])), ("friction", coulomb), ("viscous", np.asarray(v["viscous"]))):
        rel = np.abs(fitted - np.asarray(truth[g])) / np.abs(np.asarray(truth[g]))
        out[g] = [float(x) for x in rel]
    if "mu_static" in v:
        out["static"] = [float(x) for x in np.abs(np.asarray(v["mu_static"]) - truth["static_friction"])
                         / np.asarray(truth["static_friction"])]
    every = np.concatenate([out[g] for g in ("armature", "friction", "viscous")])
    out["median_rel"] = float(np.median(every))
    out["max_rel"] = float(np.max(every))
    # joint 1 (base yaw) barely moves in a task-space chirp (docs/fit.md): the errors without it too
    rest = np.concatenate([out[g][1:] for g in ("armature", "friction", "viscous")])
    out["max_rel_j2_7"] = float(np.max(rest))
    return out


def run_case(case: Case, heldout: list[str], floor_mrad: float, groups: str, fit_args: tuple[str, ...],
             work: Path) -> dict:
    log_dir = work / f"fit_{case.name}"
    argv = [a for c in case.csvs for a in ("--runs", c)] + ["--heldout", heldout[0], "--fit_groups", groups,
                                                                 "--no_plots", "--quiet", "--out", str(log_dir),
                                                                 *fit_args]
    spec = work / f"spec_{case.name}.json"
    out = work / f"stats_{case.name}.json"
    spec.write_text(json.dumps({"argv": argv, "out": str(out)}))
    env = dict(os.environ)
    r = subprocess.run([sys.executable, __file__, "--worker", str(spec)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"case {case.name} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    stats = json.loads(out.read_text())
    fit_dir = max(p for p in log_dir.iterdir() if p.is_dir())
    best = json.loads((fit_dir / "sysid_best_params.json").read_text())
    ev = json.loads((fit_dir / "eval_result.json").read_text())
    h = ev["runs"][Path(heldout[0]).stem]["fitted"]["q_rms_all_mrad"]
    stats.update(truth_errors(best))
    stats["heldout_q_rms_mrad"] = float(h)
    stats["heldout_over_floor"] = float(h / floor_mrad)
    stats["chosen"] = sorted(k for k in best["best_params_decoded"] if k != "motor_delay_steps")
    fp = fit_dir / "first_pass.json"  # a long fit's first pass (jobs/first_pass.py): what it chose
    if fp.exists() and "first_pass" in stats:
        summary = json.loads(fp.read_text())
        stats["first_pass"].update(delay=summary["first"]["delay"], groups=summary["first"]["groups"],
                                   polish_start_loss=summary["polish"]["start_loss"],
                                   polish_loss=summary["polish"]["loss"])
    return stats


def run(size: Size, groups: str = "auto", fit_args: tuple[str, ...] = (), work: Path | None = None,
        verbose: bool = True) -> dict:
    """Record every case, fit each in its own process, and compare each with the reference length."""
    from isaaclab_sysid.data import read_run
    from isaaclab_sysid.evaluate.metrics import rms_between_runs

    work = Path(tempfile.mkdtemp(prefix="scaling_")) if work is None else work
    twins = work / "twin"
    heldout = [record(twins, "heldout", size.heldout_s, "multiband", seed=11, target_seed=7, kp=(500.0, 30.0)),
               record(twins, "heldout_repeat", size.heldout_s, "multiband", seed=12, target_seed=7, kp=(500.0, 30.0))]
    floor = rms_between_runs(read_run(heldout[0]), read_run(heldout[1]))["q_rms_all_mrad"] / np.sqrt(2.0)
    w = size.waveform
    cases = [Case(f"{L:g}s", [record(twins, f"{w}_{L:g}s", L, w)], L) for L in size.lengths]
    for n in size.splits:  # the same excitation recorded n times, each with its own noise
        csvs = [record(twins, f"{w}_{size.split_s:g}s_{k}", size.split_s, w, seed=k, target_seed=0) for k in range(n)]
        cases.append(Case(f"{n}x{size.split_s:g}s", csvs, n * size.split_s))
    for c in cases:
        t0 = time.perf_counter()
        c.stats = run_case(c, heldout, floor, groups, tuple(size.fit_args) + tuple(fit_args), work)
        if verbose:
            print(f"  {c.name}: {time.perf_counter() - t0:.1f} s", flush=True)
    ref = next(c for c in cases if c.name == f"{size.reference:g}s")
    rows = []
    for c in cases:
        s, r = c.stats, ref.stats
        rows.append({"case": c.name, "seconds": c.seconds, "data_x": c.seconds / ref.seconds, **s,
                     "wall_x": s["wall_s"] / r["wall_s"],
                     "cpu_x": s.get("cpu_s", float("nan")) / r.get("cpu_s", float("nan")), "rollouts_x": s["sim_s"] / max(r["sim_s"], 1e-9),
                     "iterations_x": s["iterations"] / max(r["iterations"], 1),
                     "memory_x": s["peak_rss_gb"] / r["peak_rss_gb"]})
    return {"groups": groups, "waveform": w, "reference": ref.name, "floor_mrad": float(floor), "rows": rows, "work": str(work)}


def report(out: dict) -> str:
    lines = [f"{out.get('waveform', 'chirp')}; groups {out['groups']}; reference {out['reference']}; held-out floor {out['floor_mrad']:.4f} mrad",
             "| case | data x | wall [s] (x ref) | CPU [s] (x ref) | sim s (x ref) | LM iterations (x ref) | Jacobians | delay tracks "
             "separated / tied | peak RSS [GB] (x ref) | delay (true) | median / max rel. error (max j2-7) | held-out / floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in out["rows"]:
        lines.append(
            f"| {r['case']} | {r['data_x']:.1f} | {r['wall_s']:.1f} ({r['wall_x']:.2f}) | "
            f"{r.get('cpu_s', float('nan')):.1f} ({r.get('cpu_x', float('nan')):.2f}) | {r['sim_s']:.0f} "
            f"({r['rollouts_x']:.2f}) | {r['iterations']} ({r['iterations_x']:.2f}) | {r['jacobians']} | "
            f"{r['separated']} / {r.get('tied', 0)} | {r['peak_rss_gb']:.2f} ({r['memory_x']:.2f}) | {r['delay']} ({r['delay_true']}) | "
            f"{100 * r['median_rel']:.1f} % / {100 * r['max_rel']:.0f} % ({100 * r['max_rel_j2_7']:.0f} %) | "
            f"{r['heldout_over_floor']:.2f} |")
    fps = [r for r in out["rows"] if r.get("first_pass")]
    if fps:
        lines += ["", "First pass on windows (jobs/first_pass.py), then the polish on the full runs:",
                  "| case | windows (s) | first pass: LM iterations / CPU s / wall s | its groups, delay | "
                  "polish: LM iterations / CPU s | loss at its start -> polished |", "|---|---|---|---|---|---|"]
        for r in fps:
            f = r["first_pass"]
            lines.append(f"| {r['case']} | {f['windows']} ({f['window_s']:.1f}) | {f['iterations']} / "
                         f"{f['cpu_s']:.0f} / {f['wall_s']:.0f} | {','.join(f.get('groups', []))}, {f.get('delay')} | "
                         f"{r['iterations'] - f['iterations']} / {r['cpu_s'] - f['cpu_s']:.0f} | "
                         f"{f.get('polish_start_loss', float('nan')):.4g} -> {f.get('polish_loss', float('nan')):.4g} |")
    return "\n".join(lines)


def truth_by_label() -> dict[str, float]:
    """The twin's truth per interval label (``group[joint]``), in the fit's parametrization."""
    truth = json.loads(TRUTH.read_text())
    stat, coul = np.asarray(truth["static_friction"]), np.asarray(truth["friction"])
    groups = {"armature": truth["armature"], "friction": truth["friction"], "viscous": truth["viscous"],
              "mu_static": truth["static_friction"], "dynamic_ratio": list(coul / stat)}
    return {f"{g}[panda_joint{j + 1}]": float(v[j]) for g, v in groups.items() for j in range(len(v))}


def interval_report(named: list[tuple[str, str]]) -> str:
    """Per fitted number: each fit folder's selected 95 % interval width, the truth inside (yes/NO), the value."""
    truth = truth_by_label()
    sets = {}
    lines = []
    for name, d in named:
        iv = json.loads((Path(d) / "intervals.json").read_text())
        sets[name] = {i["label"]: i for i in iv["methods"][iv["selected"]]["intervals"]}
        lines.append(f"{name}: {d} ({iv['selected']}, level {iv['level']}, rho {iv['structure'].get('rho', float('nan')):.3g})")
    names = [n for n, _ in named]
    lines += ["| number | truth | " + " | ".join(f"{n}: width (truth inside: value)" for n in names) + " |",
              "|---|---|" + "---|" * len(names)]
    tally = {n: [0, 0, 0] for n in names}  # bounded, truth inside, unbounded
    for lab in sets[names[0]]:
        cells = []
        for n in names:
            i = sets[n].get(lab)
            if i is None:
                cells.append("-")
            elif lab not in truth:  # the delay
                cells.append(f"[{i['lower']:g}, {i['upper']:g}] (value {i['value']:g})")
            elif i["lower"] is None or i["upper"] is None:
                tally[n][2] += 1
                cells.append(f"unbounded (value {i['value']:.4g})")
            else:
                ok = i["lower"] <= truth[lab] <= i["upper"]
                tally[n][0] += 1
                tally[n][1] += ok
                cells.append(f"{i['upper'] - i['lower']:.4g} ({'yes' if ok else 'NO'}: {i['value']:.4g})")
        lines.append(f"| {lab} | {truth.get(lab, 2):.4g} | " + " | ".join(cells) + " |")
    for n in names:
        b, ok, unb = tally[n]
        lines.append(f"{n}: {b} bounded intervals, the truth inside {ok}; {unb} unbounded")
    for n in names[1:]:
        ratio = {lab: (sets[n][lab]["upper"] - sets[n][lab]["lower"]) / (i["upper"] - i["lower"])
                 for lab, i in sets[names[0]].items() if lab in truth and lab in sets[n]
                 and None not in (i["lower"], i["upper"], sets[n][lab]["lower"], sets[n][lab]["upper"])
                 and i["upper"] > i["lower"]}
        wider = ", ".join(f"{lab} x{r:.2f}" for lab, r in sorted(ratio.items(), key=lambda kv: -kv[1]) if r > 1)
        lines.append(f"{n} / {names[0]} widths: median x{np.median(list(ratio.values())):.3f} over {len(ratio)} "
                     f"numbers bounded in both; {sum(r < 1 for r in ratio.values())} narrower; wider: {wider or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ci", action="store_true", help="the test's size (2 and 4 s, 2 x 2 s; the static group)")
    ap.add_argument("--long", action="store_true", help="add 96 s (8 x 12 s)")
    ap.add_argument("--groups", default=None, help="--fit_groups (default auto; --ci: the static group)")
    ap.add_argument("--fit_args", nargs=argparse.REMAINDER, default=[], help="more fit flags, passed on")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--work", default=None, help="work folder (default: a new temporary one)")
    ap.add_argument("--intervals", nargs="+", default=None, metavar="NAME=FIT_DIR",
                    help="tabulate these fit folders' intervals.json against the truth (no fit runs)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.intervals:
        print(interval_report([tuple(x.split("=", 1)) for x in a.intervals]))
        return 0
    if a.worker:
        worker(a.worker)
        return 0
    size = CI if a.ci else LONG if a.long else FULL
    groups = a.groups or (CI_GROUPS if a.ci else "auto")
    work = Path(a.work) if a.work else None
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    out = run(size, groups, tuple(a.fit_args), work)
    print(report(out))
    print(f"total {time.perf_counter() - t0:.0f} s; work folder {out['work']}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
