"""``scripts/record_twin.py``: the simulated twin, runs in the real format from known parameters (tests, demo)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

from isaaclab_sysid.data import read_run, write_run
from isaaclab_sysid.paths import REPO_ROOT
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.timebase import TICK_HZ
from isaaclab_sysid.twin.demo import demo_targets, task_target
from isaaclab_sysid.twin.params import TwinNoise, load_twin_params
from isaaclab_sysid.twin.recorder import record_twin


@dataclass
class RecordOptions:
    params: Path = REPO_ROOT / "configs" / "twin" / "franka_demo.json"
    """true-parameter JSON (configs/twin/*.json)"""
    out: Path = REPO_ROOT / "logs" / "twin"
    """output folder (CSV + sidecar JSON per run)"""
    demo: bool = False
    """write the bundled demo runs to data/real_runs/ (twin/demo.py DEMO_RUNS: 1 kHz, and one 50 Hz copy; ignores the
    target and seed options)"""
    target_run: Path | None = None
    """take controller, gains, q_init and setpoints from this run (CSV with sidecar)"""
    waveform: Literal["multiband", "chirp"] = "multiband"
    """generated task-space target, when no --target_run"""
    duration: float = 12.0
    """generated target duration [s]"""
    kp_trans: float = 200.0
    """translational stiffness [N/m] (kd = 2 sqrt(kp))"""
    kp_rot: float = 20.0
    """rotational stiffness [N m/rad]"""
    target_seed: int = 0
    """seed of the generated target's tones"""
    name: str | None = None
    """run name (file stem)"""
    seed: int = 0
    """noise seed: the same seed gives the same twin"""
    log_1khz: bool = False
    """log every controller tick (setpoints stamped) instead of one row per setpoint"""
    no_noise: tyro.conf.FlagCreatePairsOff[bool] = False
    """switch every noise knob off (states fresh, no quantization)"""


def record_main(args: RecordOptions) -> None:
    params = load_twin_params(args.params)
    if args.no_noise:
        params = params.with_noise(TwinNoise())
    robot = load_robot(params.robot)
    if args.demo:
        out = REPO_ROOT / "data" / "real_runs"
        jobs = [(t, seed, rate, t.name) for t, seed, rate in demo_targets(robot)]
    else:
        out = args.out
        if args.target_run is not None:
            targets = [read_run(args.target_run)]
        else:
            targets = [task_target(robot, args.waveform, args.duration, args.kp_trans, args.kp_rot, args.target_seed)]
        rate = float(TICK_HZ) if args.log_1khz else None
        jobs = [(t, args.seed + i, rate, args.name if (args.name and len(targets) == 1) else t.name)
                for i, t in enumerate(targets)]
    for target, seed, rate, name in jobs:
        run = record_twin(robot, target, params, seed=seed, log_rate_hz=rate, name=name)
        csv, side = write_run(run, Path(out) / f"{name}.csv")
        print(f"wrote {csv} ({run.n_samples} rows, {run.duration:.2f} s) and {side.name}")
