"""BAM (Better Actuator Models, PyPI ``better-actuator-models``, Apache-2.0) as a peer on its own XL330 bench logs.

Everything BAM computes here is computed by BAM's own code (the ``[peers]`` extra), called the way its scripts call it:

* **Resampling**: ``python -m bam.process --raw R --logdir L --dt 0.005`` (a script: it parses ``sys.argv`` at import,
  so it runs as a subprocess). It linearly interpolates every numeric field of the raw entries onto the grid
  ``0, dt, 2 dt, ... < last timestamp`` and thresholds ``torque_enable`` at 0.5; :func:`resample_reference` applies the
  importer's rule (``importers/bam.bam_resample``) in the same layout, used only to check BAM's output against it.
* **Scoring** (as ``bam.mae`` does, whose module imports matplotlib and parses argv): one model per parameter file
  (``bam.model.load_model``), a new ``bam.simulate.Simulator(model)`` per log, ``rollout_log(log,
  simulate_control=True)`` (the firmware's control law is simulated from the simulated state: a free-running
  rollout from the log's first position and speed, driven by the logged setpoints and torque-enable flags), and the
  mean absolute position error over the log's entries [rad]. Logs are read with ``bam.logs.Logs`` (which adds
  ``arm_mass = 0``).
* **Fitting**: ``python -m bam.fit --logdir FIT --actuator xl330 --model M --trials N --output P.json`` (optuna's
  ``CmaEsSampler`` with BIPOP restarts, unseeded: two runs differ). Its loss is the same position MAE, simulated
  control, over the batch of every log in ``--logdir`` rolled out together (``Logs.make_batch``: each log cut to the
  shortest one's length). ``--validation_kp K`` would move the logs at gain K out of the loss and only print their
  score (nothing is selected by it); here the fit folder holds only the fit split, so the held-out logs are never
  seen. ``bam.fit`` prints its best score and writes its best parameters to ``--output`` from its trial callback at
  most every 0.2 s, so the file can miss an improvement found in the last 0.2 s of the run: :class:`BamFit` records
  the trial of the last write, the score printed then, and the written file's loss rescored on the fit batch
  (the same number, a check that the file is what the fit scored).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from isaaclab_sysid.data.formats.ur10e import shared_dir

#: BAM's resampling step [s] (``bam.process --dt``'s default, the step its published parameters were fitted at)
BAM_DT_S = 0.005
#: BAM's published XL330 model variants (``bam/params/xl330/m1..m6.json``): m1 Coulomb + viscous, m2 + Stribeck,
#: m3 load-dependent, m4 + Stribeck, m5 directional load-dependent, m6 + Stribeck and quadratic (``bam.model``)
PUBLISHED_MODELS: tuple[str, ...] = ("m1", "m2", "m3", "m4", "m5", "m6")
#: the four trajectories of BAM's bench logs, in the order of the shared files
TRAJECTORY_KINDS: tuple[str, ...] = ("sin_sin", "lift_and_drop", "up_and_down", "sin_time_square")
#: the package and the PyPI name of BAM
BAM_PIP = "better-actuator-models==1.0.2"


class BamUnavailable(RuntimeError):
    """BAM (or a package its fit needs) is not installed; the message names the extra."""


def bam_available() -> str | None:
    """None when BAM, its simulator and its fit's imports (optuna, cmaes, wandb) are importable, else the reason."""
    missing = []
    for mod in ("bam.simulate", "bam.model", "bam.logs", "optuna", "cmaes", "wandb"):
        try:
            __import__(mod)
        except ImportError as exc:
            missing.append(f"{mod} ({exc})")
    if missing:
        return f"BAM is not importable: {'; '.join(missing)}; install the extra: pip install -e .[peers]"
    return None


def bam_xl330_dir() -> Path:
    """The shared folder of BAM's XL330 bench logs (``<shared>/data/bam_xl330``, may not exist)."""
    return shared_dir() / "data" / "bam_xl330"


@dataclass(frozen=True)
class LogInfo:
    """One bench log's identity: file stem, firmware gain ``kp`` [register units], trajectory kind."""

    stem: str
    kp: int
    trajectory: str


def log_infos(directory: Path) -> list[LogInfo]:
    """The header of every ``*.json`` log in ``directory`` (raw or processed), sorted by file name."""
    out = []
    for p in sorted(Path(directory).glob("*.json")):
        d = json.loads(p.read_text())
        out.append(LogInfo(p.stem, int(d["kp"]), str(d["trajectory"])))
    if not out:
        raise FileNotFoundError(f"{directory}: no *.json logs")
    return out


# ----------------------------------------------------------------------------------------------------- resampling


def resample_with_bam(raw_dir: Path, out_dir: Path, dt_s: float = BAM_DT_S, timeout_s: float = 120.0) -> list[Path]:
    """Resample every raw log of ``raw_dir`` into ``out_dir`` with BAM's own ``python -m bam.process`` at ``dt_s`` [s].

    Returns the written files, sorted. Raises :class:`BamUnavailable` when ``bam`` is not installed and
    ``RuntimeError`` (with BAM's stderr) when the script fails.
    """
    raw_dir, out_dir = Path(raw_dir).resolve(), Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "bam.process", "--raw", str(raw_dir), "--logdir", str(out_dir),
                           "--dt", repr(float(dt_s))], capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        if "No module named bam" in proc.stderr:
            raise BamUnavailable(f"bam.process: BAM is not installed; pip install -e .[peers]")
        raise RuntimeError(f"bam.process failed on {raw_dir}: {proc.stderr.strip()[-2000:]}")
    written = sorted(out_dir / p.name for p in raw_dir.glob("*.json"))
    absent = [p.name for p in written if not p.is_file()]
    if absent:
        raise RuntimeError(f"bam.process wrote no output for {', '.join(absent)}")
    return written


def resample_reference(raw: Mapping, dt_s: float = BAM_DT_S) -> dict:
    """A raw log resampled by the importer's rule (``importers/bam.bam_resample``, what ``import_runs.py --format bam``
    applies), laid out as ``bam.process`` writes it: for checking BAM's output against the product's resampler, not
    used for scoring.

    The grid is ``np.arange(0, last timestamp, dt_s)`` [s]; every other field is linearly interpolated between the
    two raw entries around each instant (extrapolated from entries 0 and 1 before the first timestamp, as
    ``bam.process`` does when a log starts after 0), in ``bam.process``'s order of operations; ``torque_enable`` is the
    interpolated flag > 0.5. Header fields are copied and ``dt`` set to ``dt_s``.
    """
    from isaaclab_sysid.importers.bam import bam_resample

    entries = raw["entries"]
    t = np.array([e["timestamp"] for e in entries], dtype=float)
    out = {k: v for k, v in raw.items() if k != "entries"}
    out["dt"] = dt_s
    cols = {}
    for key in entries[0]:
        if key == "timestamp":
            continue
        grid, cols[key] = bam_resample(t, np.array([float(e[key]) for e in entries]), dt_s)
    cols["torque_enable"] = cols["torque_enable"] > 0.5
    out["entries"] = [{**{k: (bool(c[i]) if k == "torque_enable" else float(c[i])) for k, c in cols.items()},
                       "timestamp": float(grid[i])} for i in range(len(grid))]
    return out


def split_by_kp(processed_dir: Path, out_dir: Path, fit_kp: Sequence[int], heldout_kp: Sequence[int]
                ) -> tuple[Path, Path]:
    """Copy the processed logs into ``out_dir/fit`` (gain in ``fit_kp``) and ``out_dir/heldout`` (in ``heldout_kp``).

    Returns ``(fit_dir, heldout_dir)``; raises ``ValueError`` when either split is empty or a gain is in both.
    """
    both = set(fit_kp) & set(heldout_kp)
    if both:
        raise ValueError(f"kp {sorted(both)} is both a fit and a held-out gain")
    dirs = (Path(out_dir) / "fit", Path(out_dir) / "heldout")
    for d, kps in zip(dirs, (fit_kp, heldout_kp)):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        n = 0
        for info in log_infos(processed_dir):
            if info.kp in kps:
                shutil.copy2(Path(processed_dir) / f"{info.stem}.json", d / f"{info.stem}.json")
                n += 1
        if n == 0:
            raise ValueError(f"{processed_dir}: no log at kp {list(kps)}")
    return dirs


# ------------------------------------------------------------------------------------------------------- scoring


def read_logs(processed_dir: Path) -> list[dict]:
    """The processed logs of ``processed_dir`` as ``bam.logs.Logs`` reads them (``arm_mass`` added), sorted by name.

    Each dict also gets ``stem`` (the file stem).
    """
    from bam.logs import Logs

    logs = sorted(Logs(str(processed_dir)).logs, key=lambda d: d["filename"])
    for d in logs:
        d["stem"] = Path(d["filename"]).stem
    if not logs:
        raise FileNotFoundError(f"{processed_dir}: no processed *.json logs")
    return logs


def published_params(actuator: str = "xl330") -> dict[str, Path]:
    """BAM's published parameter files for ``actuator`` (``bam/params/<actuator>/m*.json``), by model name."""
    import bam

    folder = Path(bam.__file__).resolve().parent / "params" / actuator
    files = {p.stem: p for p in sorted(folder.glob("*.json"))}
    if not files:
        raise FileNotFoundError(f"BAM ships no parameters for {actuator!r} ({folder})")
    return files


def position_mae(positions: Sequence[float] | np.ndarray, log: Mapping) -> float:
    """Mean absolute error [rad] between simulated positions and the log's ``position`` entries (``bam.mae._mae``)."""
    logged = np.array([e["position"] for e in log["entries"]])
    return float(np.mean(np.abs(np.asarray(positions, dtype=float) - logged)))


def score_params(params_path: Path, logs: Sequence[dict]) -> dict[str, float]:
    """Per-log position MAE [rad] of one BAM parameter file, through BAM's simulator exactly as ``bam.mae`` does.

    One model for the file (``load_model``), a new ``Simulator`` per log, ``rollout_log(log,
    simulate_control=True)``. Keyed by file stem.
    """
    from bam import simulate
    from bam.model import load_model

    model = load_model(str(params_path))
    out = {}
    for log in logs:
        positions, _, _ = simulate.Simulator(model).rollout_log(log, simulate_control=True)
        out[log["stem"]] = position_mae(positions, log)
    return out


def setpoint_follower(logs: Sequence[dict]) -> dict[str, float]:
    """Per-log MAE [rad] of a model whose position is its setpoint (``goal_position``) at every instant."""
    out = {}
    for log in logs:
        goal = np.array([e["goal_position"] for e in log["entries"]])
        out[log["stem"]] = position_mae(goal, log)
    return out


def batch_loss(params_path: Path, processed_dir: Path) -> float:
    """``bam.fit``'s loss of a parameter file [rad]: the position MAE of the batched rollout of every log in the folder.

    As ``bam.fit.compute_score(model, Logs(dir).make_batch())``: all logs simulated together, each cut to the
    shortest log's length, the mean over logs and entries.
    """
    from bam import simulate
    from bam.logs import Logs
    from bam.model import load_model

    batch = Logs(str(processed_dir)).make_batch()
    positions, _, _ = simulate.Simulator(load_model(str(params_path))).rollout_log(batch, simulate_control=True)
    logged = np.array([e["position"] for e in batch["entries"]])
    return float(np.mean(np.abs(np.array(positions) - logged)))


# --------------------------------------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class BamFit:
    """One run of ``python -m bam.fit``.

    Attributes:
        model: BAM model variant (``m1`` .. ``m6``).
        trials: the ``--trials`` budget (optuna trials = rollouts of the fit batch).
        wall_s: wall time of the subprocess [s], imports included.
        params_path: the parameter file it wrote (``--output``).
        written_at_trial: the trial (0-based) of its last write of ``--output`` (``trials - 1`` at most).
        printed_best_rad: the "Best score" it printed at that write [rad] (the study's best then).
        file_loss_rad: the written file's loss on the fit batch [rad], rescored with :func:`batch_loss`.
        params: the written parameters.
    """

    model: str
    trials: int
    wall_s: float
    params_path: Path
    written_at_trial: int
    printed_best_rad: float
    file_loss_rad: float
    params: dict

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        d = asdict(self)
        d["params_path"] = str(self.params_path)
        return d


_BEST = re.compile(r"\[Trial (\d+), Best score: ([0-9.eE+-]+)\]")


def run_bam_fit(fit_dir: Path, model: str, trials: int, out_path: Path, actuator: str = "xl330",
                timeout_s: float = 3600.0) -> BamFit:
    """Run BAM's own fit (``python -m bam.fit``, one worker, CMA-ES) on the processed logs of ``fit_dir``.

    ``trials`` is its budget; the subprocess runs in ``out_path``'s folder (where optuna would put a study
    database for several workers) with its stdout kept in ``<out_path>.log``. Returns the :class:`BamFit`.
    """
    out_path = Path(out_path).resolve()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "bam.fit", "--logdir", str(Path(fit_dir).resolve()), "--actuator", actuator,
           "--model", model, "--trials", str(int(trials)), "--workers", "1", "--output", str(out_path)]
    env = {**os.environ, "WANDB_MODE": "disabled", "MPLBACKEND": "Agg"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=out_path.parent, env=env)
    wall = time.perf_counter() - t0
    out_path.with_suffix(".log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        if "No module named" in proc.stderr:
            raise BamUnavailable(f"bam.fit cannot import: {proc.stderr.strip().splitlines()[-1]}; "
                                 "pip install -e .[peers]")
        raise RuntimeError(f"bam.fit {model} failed: {proc.stderr.strip()[-2000:]}")
    params = json.loads(out_path.read_text())
    if not params:
        raise RuntimeError(f"bam.fit {model} wrote no parameters at {trials} trials ({out_path})")
    best = _BEST.findall(proc.stdout)
    return BamFit(model=model, trials=int(trials), wall_s=wall, params_path=out_path,
                  written_at_trial=int(best[-1][0]) if best else -1,
                  printed_best_rad=float(best[-1][1]) if best else float("nan"),
                  file_loss_rad=batch_loss(out_path, Path(fit_dir)), params=params)


# -------------------------------------------------------------------------------------------------------- tables


def by_kind(per_log: Mapping[str, float], infos: Sequence[LogInfo]) -> dict[str, float]:
    """Mean of per-log figures over the logs of each trajectory kind present in ``per_log`` (kinds in BAM's order)."""
    out = {}
    for kind in TRAJECTORY_KINDS + tuple(sorted({i.trajectory for i in infos} - set(TRAJECTORY_KINDS))):
        vals = [per_log[i.stem] for i in infos if i.trajectory == kind and i.stem in per_log]
        if vals:
            out[kind] = float(np.mean(vals))
    return out


def mean_over(per_log: Mapping[str, float], stems: Sequence[str]) -> float:
    """Mean of ``per_log`` over ``stems`` (NaN when a stem is missing)."""
    if any(s not in per_log for s in stems):
        return float("nan")
    return float(np.mean([per_log[s] for s in stems]))
