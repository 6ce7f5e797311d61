"""The fit's flags: :class:`FitArgs`, one nested, documented dataclass that the CLI parses, and the one step from
flags to a problem (:func:`resolve_problem`).

``scripts/sysid_franka_osc.py`` parses :class:`FitArgs` with tyro (the attribute
docstrings are its ``--help``; the sections' prefixes are omitted, so the flags
stay flat: ``--runs``, ``--num_envs``, ...). Five of its sections are the problem's record
(:class:`~isaaclab_sysid.objective.problem_record.ProblemRecord`: runs, params, loss, replay, cluster;
:attr:`FitArgs.problem`); the other two, the search (:class:`SearchConfig`) and the outputs (:class:`OutputConfig`),
belong to this job. ``config.json`` stores the problem under ``problem`` and the job's two sections under ``job``
(:meth:`FitArgs.job_dict`); ``--resume`` reads both back with :meth:`FitArgs.from_config`, which also reads older fit
folders' ``args`` (nested by section, or flat).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Annotated, Literal

import tyro

from isaaclab_sysid.fit.problem import FitProblem, build_problem
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.problem_record import (
    FIT_GROUPS_DEFAULT,
    ClusterConfig,
    LossConfig,
    ParamsConfig,
    ProblemRecord,
    ReplayConfig,
    Repeat,
    RunsConfig,
    section_values,
    sections_from,
)

__all__ = ["FIT_GROUPS_DEFAULT", "ClusterConfig", "FitArgs", "LossConfig", "OutputConfig", "ParamsConfig",
           "ProblemRecord", "ReplayConfig", "RunsConfig", "SearchConfig", "check_job_flags", "resolve_problem"]


@dataclass
class SearchConfig:
    """The search: CMA-ES, then the Levenberg-Marquardt refinement."""

    num_envs: int = 64
    """CMA-ES population size = simulated envs per run block (candidates per generation)."""
    max_iter: int = 40
    """Number of CMA-ES generations."""
    refine_iter: int = 30
    """Levenberg-Marquardt budget per track and phase on the replay residuals, in finite-difference iterations
    (0 = off): at most this many finite-difference Jacobians (one rollout per continuous parameter each) and this many
    such iterations' rollouts; the --refine_jacobian_reuse steps between them spend one rollout each. A fit that
    converges stops before it; at 10 (the default before) the task-impedance twin never converged and scored 1.7x
    worse on its held-out run (docs/fit.md)."""
    refine_delay_neighbours: int | None = None
    """Delays the refinement re-optimizes beside the best one: d-k..d+k ticks (default: every delay in the bounds)."""
    refine_jacobian_reuse: int = 3
    """Levenberg-Marquardt steps taken from a Broyden-updated Jacobian between two finite-difference Jacobians
    (0 = a finite-difference Jacobian, one rollout per continuous parameter, every iteration). A step from an updated
    Jacobian costs one rollout; every stopping test is taken on a finite-difference one (docs/fit.md)."""
    refine_active_set: bool = True
    """Solve each Levenberg-Marquardt step over the free parameters only: one at its bound whose gradient points out
    of the box is held there (--no_refine_active_set: every parameter takes part and the step is clipped to the
    bounds afterwards, which bends it and crawls along the bounds: the behaviour before; docs/fit.md)."""
    x0: str = "low"
    """CMA-ES start: low (sliding regime: armature 20 %, friction/viscous 5 % of their ranges), center, a
    sysid_best_params.json (or the fit folder holding it), a seed from scripts/seed_fit.py (rigid-body joint terms; groups missing from a file start low),
    or a servo part (export_dr.py --servo_model; docs/servo_arms.md). With low or center, an arm config's servo parts
    (servo_model) seed the groups they hold."""
    sigma: float = 0.25
    """Initial CMA-ES step size in the normalized parameter space (every group scaled to [0, 1] within its bounds)."""
    seed: int = 0
    """Random seed of the optimizer (same seed and runs give the same result)."""
    strategy: Literal["cmaes", "fast"] | None = None
    """Search strategy: fast (the default: the refinement straight from --x0 and the low start with every delay
    profiled; CMA-ES runs only when a short probe around its optimum beats it by --fast_probe_margin)
    or cmaes (CMA-ES generations, then the refinement). Default: fast, or cmaes with --refine_iter 0 (docs/fit.md,
    "Search strategy")."""
    fast_probe_generations: int = 3
    """The fast path's probe: CMA-ES generations around its optimum, run when its residual (above 2x the white noise)
    or disagreeing starts make it suspect; CMA-ES runs only when the probe beats the optimum by --fast_probe_margin
    (0 = no probe: fall back whenever suspect). Costs generations x --fast_probe_popsize rollouts per fit run."""
    fast_probe_popsize: int = 16
    """Candidates per probe generation (--fast_probe_generations)."""
    fast_probe_margin: float = 0.05
    """The fraction by which the probe must lower the fast optimum's loss to send the search to CMA-ES."""
    first_pass_s: float = 12.0
    """Long recordings: when the fit runs total more than 2x this [s], the whole search (--fit_groups auto's choice
    and the delay profile included) first runs on windows of about this many seconds in all, cut from every run and
    each started from the measured state, then a polish refines on the full runs from that answer, in its groups,
    with the delay profile started at its delay (docs/fit.md, "Long recordings"). 0 = off: the search on the full
    runs from the start."""
    first_pass_window_s: float = 3.0
    """The first pass's window length [s] (--first_pass_s): its windows are spread evenly over every run."""


@dataclass
class OutputConfig:
    """Outputs, resume and evaluation-only runs."""

    save_interval: int = 5
    """Write checkpoint_<iter>.json every this many generations (and at the end)."""
    log_dir: Annotated[str, tyro.conf.arg(aliases=("--out",))] = "logs/sysid"
    """Folder under which each fit writes <timestamp>/ with all outputs (--out; --log_dir its older spelling; before
    this release the default was logs/sysid_franka: give --out logs/sysid_franka to keep writing there)."""
    resume: str | None = None
    """Resume the fit in this output folder from its newest checkpoint (its config.json supplies every other option)."""
    eval_params: str | None = None
    """Skip the optimizer: score this sysid_best_params.json or checkpoint_<iter>.json, or the fit folder holding a
    sysid_best_params.json (and the nominal parameters), on the given runs."""
    wandb: bool = False
    """Log progress to Weights & Biases (offline mode unless WANDB_MODE says otherwise)."""
    plots: bool = True
    """Write the report's plots (PNG, and the interactive report.html)."""
    noise_floor_mrad: float | None = None
    """Joint-position noise floor of one run [mrad] for the adequacy verdict (e.g. the RMS between two repeats of a
    run / sqrt(2)); default: --noise_floor_from, else estimated from the residual's high-frequency part (white
    measurement noise only)."""
    noise_floor_from: Annotated[list[tuple[str, str]], Repeat] = field(default_factory=list)
    """Two CSVs recorded as repeats of one excitation (same setpoints, gains and time base; checked), e.g.
    --noise_floor_from run.csv run_repeat.csv (sidecars: the CSV path with .json): the verdict's noise floor is the RMS
    of their q difference / sqrt(2) [mrad], per joint and pooled; repeat the flag to pool several pairs (docs/fit.md)."""
    quiet: bool = False
    """Suppress the per-generation progress line."""
    export: bool = False
    """After the fit, run the rest of the pipeline on its folder: every interval (scripts/compute_intervals.py's
    defaults: intervals.json) and the exports (scripts/export_dr.py's defaults: <fit>/export/sysid_dr.{json,yaml}
    and sysid_dr_isaaclab.py); a stage that refuses exits non-zero with its one-line reason."""


_SECTIONS = {"runs": RunsConfig, "search": SearchConfig, "params": ParamsConfig, "loss": LossConfig,
             "replay": ReplayConfig, "output": OutputConfig, "cluster": ClusterConfig}
#: the sections that are this job's, not the problem's (``config.json``'s ``job``)
JOB_SECTIONS = ("search", "output")


@dataclass
class FitArgs:
    """System identification of joint dynamics by CMA-ES replay (see docs/fit.md)."""

    runs: tyro.conf.OmitArgPrefixes[RunsConfig] = field(default_factory=RunsConfig)
    search: tyro.conf.OmitArgPrefixes[SearchConfig] = field(default_factory=SearchConfig)
    params: tyro.conf.OmitArgPrefixes[ParamsConfig] = field(default_factory=ParamsConfig)
    loss: tyro.conf.OmitArgPrefixes[LossConfig] = field(default_factory=LossConfig)
    replay: tyro.conf.OmitArgPrefixes[ReplayConfig] = field(default_factory=ReplayConfig)
    output: tyro.conf.OmitArgPrefixes[OutputConfig] = field(default_factory=OutputConfig)
    cluster: tyro.conf.OmitArgPrefixes[ClusterConfig] = field(default_factory=ClusterConfig)

    @property
    def problem(self) -> ProblemRecord:
        """The problem these flags state. The record holds this object's own sections, so what the fit resolves into
        it (the EE point, the limits, the state age, the window, a servo's boxes) is in both."""
        return ProblemRecord(self.runs, self.params, self.loss, self.replay, self.cluster)

    @classmethod
    def build(cls, **flat) -> "FitArgs":
        """Arguments from flat flag names (``FitArgs.build(real_csv=[...], num_envs=16)``); unknown names refused."""
        return cls.from_dict(flat, strict=True)

    @classmethod
    def from_dict(cls, d: dict, strict: bool = False) -> "FitArgs":
        """Read :meth:`to_dict`'s nested layout, or the flat layout of older ``config.json`` files.

        Raises:
            TypeError: ``strict`` and a name that no section has.
        """
        flat = section_values(d)
        out, used = sections_from(flat, _SECTIONS)
        unknown = set(flat) - used
        if strict and unknown:
            raise TypeError(f"unknown fit option(s): {', '.join(sorted(unknown))}")
        return cls(**out)

    @classmethod
    def from_config(cls, config: dict) -> "FitArgs":
        """A fit folder's ``config.json`` record (:meth:`RunFolder.read_config
        <isaaclab_sysid.fit.run_folder.RunFolder.read_config>`): its ``problem`` and its ``job``, or an older
        folder's ``args``."""
        if isinstance(config.get("problem"), dict):
            return cls.from_dict({**config["problem"], **(config.get("job") or {})})
        return cls.from_dict(config["args"])

    def to_dict(self) -> dict:
        """Nested by section, JSON-able (tuples as lists)."""
        return {name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(getattr(self, name)).items()}
                for name in _SECTIONS}

    def job_dict(self) -> dict:
        """The job's sections (search, output), JSON-able: ``config.json``'s ``job``."""
        return {name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(getattr(self, name)).items()}
                for name in JOB_SECTIONS}


def check_job_flags(args: FitArgs) -> None:
    """Refuse a search or output flag that cannot work, before any file is read (one line naming the flag); the
    problem's (``--runs`` among them) are checked by :func:`~isaaclab_sysid.fit.problem.check_record`."""
    s = args.search
    if s.num_envs < 2:
        raise FitError("--num_envs must be at least 2")
    if s.max_iter < 1:
        raise FitError("--max_iter must be at least 1")
    if s.refine_delay_neighbours is not None and s.refine_delay_neighbours < 0:
        raise FitError("--refine_delay_neighbours must be >= 0 (ticks on each side of the best delay)")
    if s.refine_iter < 0:
        raise FitError("--refine_iter must be >= 0 (0 turns the refinement off)")
    if not (0 < s.sigma <= 1):
        raise FitError("--sigma must lie in (0, 1] (it is a step in the normalized [0, 1] space)")
    if s.first_pass_s < 0 or not s.first_pass_window_s > 0:
        raise FitError("--first_pass_s must be >= 0 (0 = off) and --first_pass_window_s > 0 [s]")
    if args.output.save_interval < 1:
        raise FitError("--save_interval must be at least 1 (generations)")


def resolve_problem(args: FitArgs, log: Callable[[str], None] = print) -> FitProblem:
    """The flags' problem, built: the job's flags checked, then :func:`~isaaclab_sysid.fit.problem.build_problem` on
    :attr:`FitArgs.problem` (what it resolves from the runs is written into ``args``' sections) with the search's
    start (``--x0``: a torque replay's window is chosen there), population (its memory check) and ``--eval_params``."""
    check_job_flags(args)
    return build_problem(args.problem, log, start=args.search.x0, population=args.search.num_envs,
                         eval_params=args.output.eval_params)
