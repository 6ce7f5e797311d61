"""Does ``--fit_groups auto`` pay? The fit job with the Coulomb groups against ``--fit_groups auto`` (issue 26).

The run sets are ``benchmarks/vs_peers.py``'s (isaaclab_sysid/benchmarking/peers.py: the Franka twin with hidden
Stribeck friction, static 1.2x Coulomb by default, noise on every input; two fit runs and a held-out run of another
waveform at other gains, 1 kHz), plus the same twin with Coulomb truth (static = Coulomb) to show what ``auto`` costs
where the data do not ask for static friction. Each contender is the whole fit job (``run_fit``: the default fast
strategy from ``--x0 low``, its evaluation and adequacy verdict) on the runs written as CSV; ``mujoco.sysid`` from the
low start is the peer reference (the [peers] extra; skipped with the reason otherwise). Wall times are measured in the
same run; on a shared machine compare ratios, not seconds.

    python benchmarks/fit_groups_auto.py                       # full size (2.5 s runs; a few minutes on 2 cores)
    python benchmarks/fit_groups_auto.py --quick               # 1.2 s runs, tiny budgets (a smoke test)
    python benchmarks/fit_groups_auto.py --controllers task_impedance --static_over_coulomb 2.0
    python benchmarks/fit_groups_auto.py --contenders Coulomb,Coulomb+rms,auto+rms   # the channel scaling too
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import tyro

from isaaclab_sysid.benchmarking import peers
from isaaclab_sysid.data import write_run
from isaaclab_sysid.fit.run_folder import EVAL_RESULT_FILE
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.fit.run_folder import RESULT_FILE
from isaaclab_sysid.jobs.fit_job import run_fit
from isaaclab_sysid.fit.run_folder import MODEL_CHOICE_FILE as CHOICE_FILE
from isaaclab_sysid.robots import load_robot


@dataclasses.dataclass
class Args:
    """Coulomb groups against --fit_groups auto on the vs_peers twins (module docstring)."""

    quick: bool = False
    """CI size: 1.2 s runs, tiny budgets."""
    controllers: str = "joint_pd,task_impedance"
    """Run sets, comma-separated."""
    static_over_coulomb: tuple[float, ...] = (1.0, peers.STATIC_OVER_COULOMB, 2.0)
    """Twins' static friction over Coulomb friction (1.0: Coulomb truth)."""
    contenders: str = "Coulomb,auto"
    """Fit jobs to run, comma-separated: Coulomb, auto, Coulomb+rms, auto+rms, Coulomb+fdj, auto+fdj, Coulomb+clip,
    auto+clip (+rms: --channel_scale rms; +fdj: --refine_jacobian_reuse 0, a finite-difference Jacobian every LM
    iteration; +clip: --no_refine_active_set, every LM step solved over all parameters and clipped to the bounds)."""
    json_out: str | None = None
    """Also write every figure to this JSON file."""


#: the fit jobs this benchmark knows, by name: their flags beside the defaults
CONTENDERS = {"Coulomb": {}, "auto": {"fit_groups": "auto"}, "Coulomb+rms": {"channel_scale": "rms"},
              "auto+rms": {"fit_groups": "auto", "channel_scale": "rms"},
              "Coulomb+fdj": {"refine_jacobian_reuse": 0}, "auto+fdj": {"fit_groups": "auto", "refine_jacobian_reuse": 0},
              "Coulomb+clip": {"refine_active_set": False}, "auto+clip": {"fit_groups": "auto", "refine_active_set": False}}


def _fit(csvs: list[str], held: str, logs: Path, size: peers.PeerSize, **kw) -> dict:
    t0 = time.perf_counter()
    lines: list[str] = []
    out = run_fit(FitArgs.build(real_csv=csvs, heldout_csv=[held], log_dir=str(logs), num_envs=size.ours_popsize,
                                max_iter=size.ours_generations, refine_iter=size.refine_iter, plots=False, quiet=True,
                                **kw), log=lines.append)
    wall = time.perf_counter() - t0
    res = FitResult.read(out / RESULT_FILE)
    ev = json.loads((out / EVAL_RESULT_FILE).read_text())["runs"]
    held_name = Path(held).stem
    choice = json.loads((out / CHOICE_FILE).read_text()) if (out / CHOICE_FILE).is_file() else None
    return dict(wall_s=wall, loss=float(res.best_score), heldout_mrad=float(ev[held_name]["fitted"]["q_rms_all_mrad"]),
                delay=int(res.delay), groups=",".join(res.space.group_names), verdict=res.adequacy.verdict,
                floor_ratio=float(res.adequacy.residual_over_floor),
                choice=None if choice is None else choice["reason"],
                loss_ratio=None if not choice or choice.get("loss_static") is None
                else choice["loss_static"] / choice["loss_coulomb"])


def main(a: Args) -> int:
    size = peers.QUICK if a.quick else peers.FULL
    unknown = [c for c in a.contenders.split(",") if c.strip() and c.strip() not in CONTENDERS]
    if unknown:
        raise SystemExit(f"--contenders: unknown {', '.join(unknown)} (known: {', '.join(CONTENDERS)})")
    robot = load_robot("franka_panda")
    why = peers.sysid_available()
    rows = []
    for ratio in a.static_over_coulomb:
        for ctrl in [c.strip() for c in a.controllers.split(",") if c.strip()]:
            work = peers.workload(robot, ctrl, size, static_over_coulomb=float(ratio))
            with tempfile.TemporaryDirectory() as d:
                dd = Path(d)
                csvs = [str(write_run(r, dd / f"{r.name}.csv")[0]) for r in work.fit]
                held = str(write_run(work.heldout, dd / "heldout.csv")[0])
                for name in [c.strip() for c in a.contenders.split(",") if c.strip()]:
                    kw = CONTENDERS[name]
                    print(f"[{ctrl}, static {ratio:g}x] {name} ...", file=sys.stderr, flush=True)
                    r = _fit(csvs, held, dd / name, size, **kw)
                    rows.append(dict(controller=ctrl, static_over_coulomb=ratio, contender=name,
                                     floor_mrad=work.floor_mrad, **r))
            if why is None:
                s = peers.Bench(robot, work, size, log=lambda _s: None).sysid("low")
                rows.append(dict(controller=ctrl, static_over_coulomb=ratio, contender="mujoco.sysid (low)",
                                 floor_mrad=work.floor_mrad, wall_s=s.wall_s, loss=None, heldout_mrad=s.heldout_mrad,
                                 delay=s.delay, groups="armature,friction,viscous,delay (Coulomb)", verdict="",
                                 floor_ratio=None, choice=None, loss_ratio=None))
    print(f"\n{size.name} size; mujoco.sysid: {'ran' if why is None else 'skipped: ' + why}\n")
    print("| run set | static / Coulomb | contender | wall [s] | held-out / floor | delay (true 3) | fit residual / "
          "white noise | verdict | groups | auto: refit loss / Coulomb | auto: why |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        fr = "" if r["floor_ratio"] is None else f"{r['floor_ratio']:.2f}"
        lr = "" if r["loss_ratio"] is None else f"{r['loss_ratio']:.3f}"
        print(f"| {r['controller']} | {r['static_over_coulomb']:g} | {r['contender']} | {r['wall_s']:.1f} | "
              f"{r['heldout_mrad'] / r['floor_mrad']:.2f} | {r['delay']:g} | {fr} | {r['verdict']} | {r['groups']} | "
              f"{lr} | {r['choice'] or ''} |")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args, use_underscores=True)))
