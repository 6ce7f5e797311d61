"""The fit pipeline behind ``scripts/sysid_franka_osc.py``: read runs, fit, evaluate, report.

Order of work (so failures are cheap): every run file (fit and held-out) is read
and validated first; a bad file stops everything with the loader's one-line
error before a backend is built. Then the backend, the CMA-ES loop (progress
line, progress.csv, checkpoints), ``sysid_best_params.json``, and finally the
evaluation of the best parameters against the nominal ones on the fit runs and
the held-out runs, with plots and ``report.md``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from isaaclab_sysid.data import RunFormatError, read_run
from isaaclab_sysid.data.run import Run
from isaaclab_sysid.fit.backends import BackendUnavailableError, make_backend
from isaaclab_sysid.fit.checkpoint import latest_state, save_checkpoint
from isaaclab_sysid.fit.loss import LossWeights
from isaaclab_sysid.fit.optimizer import CmaesFit, CmaesSettings, GenerationRecord
from isaaclab_sysid.fit.outputs import new_run_dir, read_config, write_config, write_progress, write_result
from isaaclab_sysid.fit.param_space import GroupSpec, ParamSpace
from isaaclab_sysid.sim.interface import ReplayOptions, UnsupportedParameterError

FIT_GROUPS_DEFAULT = "armature,friction,viscous,delay"


class FitError(Exception):
    """A user-facing failure: printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


#: repeatable list flags (--real_csv a.csv --real_csv b.csv)
Repeat = tyro.conf.UseAppendAction


# Every option of the fit: scripts/sysid_franka_osc.py parses this class with tyro (the
# attribute docstrings are its --help), and config.json stores it.
@dataclass
class FitArgs:
    """System identification of joint dynamics by CMA-ES replay (see docs/fit.md)."""

    real_csv: Annotated[list[str], Repeat] = field(default_factory=list)
    """Recorded run CSV to fit on; repeat the flag for several runs (--real_csv a.csv --real_csv b.csv)."""
    real_sidecar: Annotated[list[str], Repeat] = field(default_factory=list)
    """Sidecar JSON of each --real_csv, paired in order; omitted ones default to the CSV path with .json."""
    heldout_csv: Annotated[list[str], Repeat] = field(default_factory=list)
    """Held-out run CSV (never seen by the optimizer), scored after the fit; repeatable."""
    heldout_sidecar: Annotated[list[str], Repeat] = field(default_factory=list)
    """Sidecar JSON of each --heldout_csv, paired in order (default: CSV path with .json)."""
    traj_weights: str | None = None
    """Comma-separated weight per --real_csv run in the loss, e.g. 1.0,1.5 (dimensionless; default 1 each)."""
    num_envs: int = 64
    """CMA-ES population size = simulated envs per run block (candidates per generation)."""
    max_iter: int = 40
    """Number of CMA-ES generations."""
    refine_iter: int = 10
    """Levenberg-Marquardt iterations after CMA-ES on the replay residuals (0 = off); each costs two batched rollouts (docs/fit.md)."""
    x0: str = "low"
    """CMA-ES start: low (sliding regime: armature 20 %, friction/viscous 5 % of their ranges), center, a
    sysid_best_params.json, or a seed from scripts/seed_fit.py (rigid-body joint terms; groups missing from a file start low)."""
    sigma: float = 0.25
    """Initial CMA-ES step size in the normalized parameter space (every group scaled to [0, 1] within its bounds)."""
    seed: int = 0
    """Random seed of the optimizer (same seed and runs give the same result)."""
    backend: Literal["mujoco", "isaaclab"] = "mujoco"
    """Physics backend: mujoco (CPU, default) or isaaclab (needs the [isaaclab] extra)."""
    device: str = "cpu"
    """Device of the isaaclab backend: cpu or cuda:0 (the mujoco backend always runs on the CPU)."""
    robot: str | None = None
    """Robot config name or path (default: the runs' sidecar 'robot', e.g. franka_panda)."""
    fit_groups: str = FIT_GROUPS_DEFAULT
    """Comma-separated parameter groups to fit: armature, friction, viscous, delay (mu_static, dynamic_ratio: isaaclab only)."""
    armature_bounds: tuple[float, float] = (0.0, 0.5)
    """Bounds of the per-joint armature (reflected rotor inertia) [kg m^2]."""
    friction_bounds: tuple[float, float] = (0.0, 5.0)
    """Bounds of the per-joint Coulomb friction torque [N m]."""
    viscous_bounds: tuple[float, float] = (0.0, 5.0)
    """Bounds of the per-joint viscous friction [N m s/rad]."""
    delay_bounds: tuple[int, int] = (0, 4)
    """Bounds of the actuator delay [ticks of 1 ms], integers."""
    mu_static_bounds: tuple[float, float] = (0.0, 5.0)
    """Bounds of the per-joint static friction (PhysX-style) [N m]."""
    dynamic_ratio_bounds: tuple[float, float] = (0.0, 1.0)
    """Bounds of the per-joint dynamic/static friction ratio [-]."""
    w_q: float = 1.0
    """Loss weight of the joint position MSE [1/rad^2]."""
    w_dq: float = 0.1
    """Loss weight of the joint velocity MSE [1/(rad/s)^2]."""
    w_x: float = 0.01
    """Loss weight of the end-effector position MSE [1/m^2]."""
    warmup_ticks: int = 50
    """Ticks [1 ms] the first setpoint is held before the logged time base starts."""
    torque_clamp: bool = False
    """Clamp the simulated commanded torque to the robot's torque limits [N m]."""
    slew_limit: bool = False
    """Limit the simulated torque rate to the robot's torque_rate_limit [N m/s]."""
    save_interval: int = 5
    """Write checkpoint_<iter>.json every this many generations (and at the end)."""
    log_dir: str = "logs/sysid_franka"
    """Folder under which each fit writes <timestamp>/ with all outputs."""
    resume: str | None = None
    """Resume the fit in this output folder from its newest checkpoint (its config.json supplies every other option)."""
    eval_params: str | None = None
    """Skip the optimizer: score this sysid_best_params.json or checkpoint_<iter>.json (and the nominal parameters) on the given runs."""
    nominal: str | None = None
    """Rigid-body identification output whose link masses/inertias replace the URDF's (file from the least-squares stage)."""
    wandb: bool = False
    """Log progress to Weights & Biases (offline mode unless WANDB_MODE says otherwise)."""
    headless: bool = True
    """Accepted for Isaac Lab habit; the CPU backend never opens a window."""
    plots: bool = True
    """Write the PNG plots of the report."""
    quiet: bool = False
    """Suppress the per-generation progress line."""

    @classmethod
    def from_dict(cls, d: dict) -> "FitArgs":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("armature_bounds", "friction_bounds", "viscous_bounds", "delay_bounds", "mu_static_bounds", "dynamic_ratio_bounds"):
            if k in kw and kw[k] is not None:
                kw[k] = tuple(kw[k])
        return cls(**kw)

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


# ------------------------------------------------------------------ pieces
def read_runs(csvs: Sequence[str], sidecars: Sequence[str], what: str = "--real_csv") -> list[Run]:
    """Read and validate runs; sidecars pair with CSVs in order (missing ones default to ``<csv>.json``)."""
    if len(sidecars) > len(csvs):
        raise FitError(f"{len(sidecars)} sidecars given for {len(csvs)} {what} files (they pair in order)")
    runs = []
    for i, c in enumerate(csvs):
        side = sidecars[i] if i < len(sidecars) else None
        try:
            runs.append(read_run(c, side))
        except RunFormatError as exc:
            raise FitError(str(exc)) from None
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise FitError(f"two {what} runs share a name ({', '.join(names)}); rename one CSV")
    return runs


def parse_traj_weights(text: str | None, n_runs: int) -> np.ndarray:
    if text is None or str(text).strip() == "":
        return np.ones(n_runs)
    try:
        w = np.array([float(v) for v in str(text).split(",")], dtype=float)
    except ValueError:
        raise FitError(f"--traj_weights '{text}': expected comma-separated numbers, e.g. 1.0,1.5") from None
    if w.size != n_runs:
        raise FitError(f"--traj_weights has {w.size} values for {n_runs} --real_csv runs")
    if np.any(~np.isfinite(w)) or np.any(w < 0):
        raise FitError("--traj_weights must be finite and non-negative")
    return w


def build_space(args: FitArgs, n_dof: int, joint_names: Sequence[str] | None = None) -> ParamSpace:
    groups = [g.strip() for g in args.fit_groups.split(",") if g.strip()]
    if not groups:
        raise FitError("--fit_groups is empty")
    specs = []
    for g in groups:
        bounds = getattr(args, f"{g}_bounds", None)
        if bounds is None:
            raise FitError(f"unknown parameter group '{g}' in --fit_groups (armature, friction, viscous, delay, mu_static, dynamic_ratio)")
        try:
            specs.append(GroupSpec(g, float(bounds[0]), float(bounds[1])))
        except ValueError as exc:
            raise FitError(str(exc)) from None
    try:
        return ParamSpace(specs, n_dof, joint_names)
    except ValueError as exc:
        raise FitError(str(exc)) from None


def build_robot(args: FitArgs, runs: Sequence[Run]):
    from isaaclab_sysid.robots import load_robot

    names = {r.meta.robot for r in runs}
    if args.robot is None and len(names) > 1:
        raise FitError(f"runs recorded on different robots: {', '.join(sorted(names))}")
    robot = load_robot(args.robot or next(iter(names)))
    for r in runs:
        if r.n_dof != robot.n_dof:
            raise FitError(f"run {r.name} has {r.n_dof} joints, robot {robot.name} has {robot.n_dof}")
    if args.nominal:
        try:
            from isaaclab_sysid.rigid_body.io import load_nominal  # type: ignore[import-not-found]
        except ImportError:
            raise FitError("--nominal needs isaaclab_sysid.rigid_body.io (rigid-body identification), which is not available yet") from None
        try:
            robot = robot.with_inertials(load_nominal(args.nominal))
        except Exception as exc:  # NominalFileError and friends: one line, no traceback
            raise FitError(f"--nominal {args.nominal}: {exc}") from None
    return robot


def build_backend(args: FitArgs, robot):
    options = ReplayOptions(warmup_ticks=args.warmup_ticks, torque_clamp=args.torque_clamp, slew_limit=args.slew_limit)
    try:
        # the isaaclab backend takes the device and sizes its delay buffer to the delay bounds
        kw = {"device": args.device, "max_delay": max(4, int(max(args.delay_bounds)))} if args.backend == "isaaclab" else {}
        return make_backend(args.backend, robot, options, **kw)
    except BackendUnavailableError as exc:
        raise FitError(str(exc), code=3) from None


def progress_line(rec: GenerationRecord, max_iter: int, run_names: Sequence[str]) -> str:
    contrib = ", ".join(f"{n} {c:.3e}" for n, c in zip(run_names, rec.contrib_best))
    return (
        f"[gen {rec.iteration:3d}/{max_iter}] best {rec.best:.4e}  median {rec.median:.4e}  "
        f"best-so-far {rec.best_ever:.4e} | w*L of best: {contrib} | diverged {rec.n_diverged}/{rec.popsize} "
        f"| sigma {rec.sigma:.3f} | {rec.wall_s:.1f} s"
    )


class _Wandb:
    def __init__(self, enabled: bool, run_dir: Path, config: dict, log: Callable[[str], None]) -> None:
        self.run = None
        if not enabled:
            return
        try:
            import os

            import wandb

            os.environ.setdefault("WANDB_MODE", "offline")
            os.environ.setdefault("WANDB_SILENT", "true")
            self.run = wandb.init(project="isaaclab_sysid", dir=str(run_dir), config=config, mode=os.environ["WANDB_MODE"])
        except Exception as exc:  # optional dependency; never stop a fit for it
            log(f"wandb disabled: {exc}")

    def log(self, row: dict, step: int) -> None:
        if self.run is not None:
            self.run.log(row, step=step)

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()


# ----------------------------------------------------------------- main
def run_fit(args: FitArgs, log: Callable[[str], None] = print) -> Path:
    """Run the whole job (fit + evaluation, or ``--eval_params`` alone); returns the output folder."""
    t_start = time.perf_counter()
    resume_dir: Path | None = None
    if args.resume:
        resume_dir = Path(args.resume)
        if not (resume_dir / "config.json").is_file():
            raise FitError(f"--resume {resume_dir}: no config.json there (not a fit folder)")
        saved = read_config(resume_dir)["args"]
        saved["resume"] = str(resume_dir)
        saved["quiet"] = args.quiet
        args = FitArgs.from_dict(saved)

    if not args.real_csv:
        raise FitError("no runs: give at least one --real_csv FILE")
    runs = read_runs(args.real_csv, args.real_sidecar, "--real_csv")
    heldout = read_runs(args.heldout_csv, args.heldout_sidecar, "--heldout_csv") if args.heldout_csv else []
    clash = {r.name for r in runs} & {r.name for r in heldout}
    if clash:
        raise FitError(f"run(s) {', '.join(sorted(clash))} given both as fit and held-out runs")
    tw = parse_traj_weights(args.traj_weights, len(runs))
    if args.num_envs < 2:
        raise FitError("--num_envs must be at least 2")
    if args.max_iter < 1:
        raise FitError("--max_iter must be at least 1")
    if not (0 < args.sigma <= 1):
        raise FitError("--sigma must lie in (0, 1] (it is a step in the normalized [0, 1] space)")
    robot = build_robot(args, runs + heldout)
    space = build_space(args, robot.n_dof, [f"j{i + 1}" for i in range(robot.n_dof)])
    slow = [r.name for r in runs if not r.is_1khz]
    if "delay" in space.group_names and slow and not args.eval_params:
        log(f"note: {', '.join(slow)} {'is a' if len(slow) == 1 else 'are'} {runs[0].meta.control_rate_hz:g} Hz log(s): "
            "a real arm's 50 Hz rows carry states up to 10 ms stale, which the fitted delay absorbs; "
            "record with 1 kHz logging when the delay matters (docs/fit.md)")
    weights = LossWeights(args.w_q, args.w_dq, args.w_x)
    backend = build_backend(args, robot)
    bad = [g for g in space.group_names if g not in backend.supported_groups]
    if bad:
        raise FitError(f"backend '{args.backend}' cannot represent parameter group(s) {', '.join(bad)} "
                       f"(supported: {', '.join(sorted(backend.supported_groups))})")

    if args.eval_params:
        return _eval_only(args, backend, space, runs + heldout, weights, log)

    settings = CmaesSettings(popsize=args.num_envs, max_iter=args.max_iter, sigma0=args.sigma, seed=args.seed,
                             x0=tuple(start_point(args.x0, space)))
    if resume_dir is not None:
        run_dir = resume_dir
        state, ck = latest_state(run_dir)
        log(f"resuming {run_dir} from {ck.name if ck else 'the start (no checkpoint yet)'}")
    else:
        run_dir = new_run_dir(args.log_dir)
        state = None
        write_config(run_dir, args.to_dict(), {"param_space": space.describe(), "runs": [str(r.source) for r in runs],
                                               "heldout_runs": [str(r.source) for r in heldout]})
    fit = CmaesFit(space, backend, runs, settings, weights, tw, state=state)
    wb = _Wandb(args.wandb, run_dir, args.to_dict(), log)
    log(f"fitting {space.dim} parameters ({', '.join(space.group_names)}) on {len(runs)} run(s) "
        f"[{', '.join(fit.run_names)}] with backend '{args.backend}', population {args.num_envs}, "
        f"{args.max_iter} generations -> {run_dir}")

    def on_gen(rec: GenerationRecord, f: CmaesFit) -> None:
        if not args.quiet:
            log(progress_line(rec, settings.max_iter, f.run_names))
        write_progress(run_dir, f.state.history, f.run_names)
        if rec.iteration % max(1, args.save_interval) == 0 or f.done:
            save_checkpoint(f, run_dir)
        wb.log(rec.to_row(f.run_names), rec.iteration)

    try:
        fit.run(on_gen)
        _refine(fit, args, run_dir, log)
    except UnsupportedParameterError as exc:
        raise FitError(str(exc)) from None
    result = fit.result()
    write_progress(run_dir, fit.state.history, fit.run_names)
    write_result(run_dir, result)
    wb.finish()
    dec = result["best_params_decoded"]
    log(f"best loss {result['best_score']:.6g}; wrote {run_dir / 'sysid_best_params.json'}")
    log("  " + "; ".join(f"{k}: {v if isinstance(v, int) else np.round(v, 4).tolist()}" for k, v in dec.items()))

    # evaluation: fit runs and held-out runs, nominal vs fitted, one backend call
    from isaaclab_sysid.evaluate.heldout import evaluate_params, write_eval_outputs

    all_runs = runs + heldout
    ev = evaluate_params(backend, space, all_runs, dec, weights, source=str(run_dir / "sysid_best_params.json"))
    write_eval_outputs(run_dir, all_runs, ev)
    fit_ev, held_ev = _split_eval(ev, len(runs))
    log(ev.table())
    report = _write_report(run_dir, fit, result, all_runs, ev, fit_ev, held_ev, args.plots, time.perf_counter() - t_start)
    log(f"report: {report}")
    return run_dir


def start_point(spec: str, space: ParamSpace) -> np.ndarray:
    """The CMA-ES start in the normalized space: ``low``, ``center`` or a params JSON file.

    ``low`` (default) starts in the sliding regime: armature at 20 % of its range,
    friction and viscous at 5 %, the delay in the middle. From the centre of the
    default bounds (2.5 N m of Coulomb friction) most joints stick, the loss is
    flat in every direction that does not unstick them, and the search wastes its
    generations there (docs/fit.md).

    A file (a ``sysid_best_params.json``, a checkpoint, or a ``seed_fit.py`` seed) sets
    the groups it holds (clipped to the bounds); groups it lacks keep the ``low`` start.
    """
    if spec == "center":
        return np.full(space.dim, 0.5)
    x = np.full(space.dim, 0.05)
    for g in space.groups:
        sl = space.slice(g.name)
        if g.name == "armature":
            x[sl] = 0.2
        elif g.name in ("delay", "dynamic_ratio"):
            x[sl] = 0.5
    if spec == "low":
        return x
    from isaaclab_sysid.evaluate.heldout import load_params_file
    from isaaclab_sysid.fit.param_space import RESULT_KEYS

    try:
        params = load_params_file(spec)
        from_file = space.normalize(space.decoded_from_json(params))
    except (OSError, ValueError, KeyError) as exc:
        raise FitError(f"--x0 {spec}: expected low, center or a sysid_best_params.json/checkpoint ({exc})") from None
    for g in space.groups:
        if RESULT_KEYS[g.name] in params:
            x[space.slice(g.name)] = from_file[space.slice(g.name)]
    return x


def _refine(fit: CmaesFit, args: FitArgs, run_dir: Path, log: Callable[[str], None]) -> None:
    """Levenberg-Marquardt polish of the CMA-ES best (fit/refine.py); checkpointed every iteration."""
    from isaaclab_sysid.fit.refine import LMRefiner, RefineSettings, refine_line

    if args.refine_iter <= 0:
        return
    refiner = LMRefiner(fit.space, fit.backend, fit.runs, RefineSettings(max_iter=args.refine_iter),
                        fit.weights, fit.traj_weights)
    st = fit.state
    if st.refine is None:
        st.refine = refiner.start(st.best_x, extra_starts=[start_point(args.x0, fit.space)])
        save_checkpoint(fit, run_dir)
    while not st.refine.done:
        rec = refiner.step(st.refine)
        best = st.refine.best()
        fit.adopt(best.x, best.loss, best.contrib)
        if not args.quiet:
            log(refine_line(rec, args.refine_iter))
        save_checkpoint(fit, run_dir)
    best = st.refine.best()
    fit.adopt(best.x, best.loss, best.contrib)


def _split_eval(ev, n_fit: int):
    from isaaclab_sysid.evaluate.heldout import EvalResult

    def part(sl):
        return EvalResult(runs=ev.runs[sl], baseline=ev.baseline[sl], fitted=ev.fitted[sl], params=ev.params,
                          nominal=ev.nominal, source=ev.source, rollouts=ev.rollouts[sl])

    fit_ev = part(slice(0, n_fit))
    held_ev = part(slice(n_fit, None)) if len(ev.runs) > n_fit else None
    return fit_ev, held_ev


def _run_plots(out_dir: Path, runs: Sequence[Run], ev) -> list[Path]:
    from isaaclab_sysid.evaluate.plots import plot_rms_bars, plot_run

    paths = []
    for run, ro in zip(runs, ev.rollouts):
        paths.append(plot_run(run, {"nominal": ro.q[0], "fitted": ro.q[1]}, {"nominal": ro.ee_pos[0], "fitted": ro.ee_pos[1]},
                              out_dir / f"real_vs_sim_{run.name}.png"))
    paths.append(plot_rms_bars(ev, out_dir / "rms_per_joint.png"))
    return paths


def _write_report(run_dir, fit, result, all_runs, ev, fit_ev, held_ev, plots: bool, wall_s: float) -> Path:
    from isaaclab_sysid.evaluate.plots import plot_convergence
    from isaaclab_sysid.evaluate.report import write_report

    pngs: list[Path] = []
    if plots:
        pngs.append(plot_convergence(fit.state.history, fit.run_names, run_dir / "convergence.png"))
        pngs += _run_plots(run_dir, all_runs, ev)
    return write_report(run_dir, result, fit.space.joint_names, fit_ev, held_ev, pngs, wall_s)


def _eval_only(args: FitArgs, backend, space: ParamSpace, runs: list[Run], weights: LossWeights, log) -> Path:
    from isaaclab_sysid.evaluate.heldout import evaluate_params, load_params_file, write_eval_outputs
    from isaaclab_sysid.evaluate.report import eval_report

    try:
        params = load_params_file(args.eval_params)
        ev = evaluate_params(backend, space, runs, params, weights, source=str(args.eval_params))
    except (ValueError, KeyError) as exc:
        raise FitError(f"--eval_params {args.eval_params}: {exc}") from None
    out = new_run_dir(args.log_dir)
    out = out.rename(out.with_name(out.name + "_eval"))
    write_config(out, args.to_dict())
    write_eval_outputs(out, runs, ev)
    log(ev.table(space.joint_names))
    pngs = _run_plots(out, runs, ev) if args.plots else []
    report = eval_report(out, ev, space.joint_names, pngs)
    log(f"wrote {out / 'eval_result.json'} and eval_rollout_<run>.csv; report: {report}")
    return out


def main_from_args(args: FitArgs) -> int:
    """Run and map user errors to one stderr line and an exit status (no traceback)."""
    try:
        run_fit(args)
    except FitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


__all__ = ["FitArgs", "FitError", "main_from_args", "run_fit", "Any"]
