"""The fit result: one typed object from the search to evaluation, intervals, report and export.

:class:`FitResult` is what ``sysid_best_params.json`` (and every checkpoint) holds.
:meth:`FitResult.to_json` writes the documented keys, which keep the Franka
tooling's layout (``best_score``, ``best_params_decoded`` with per-joint lists and
``motor_delay_steps``) so its ``apply_sysid_params.py`` reads our file;
:meth:`FitResult.from_json` reads ours back (and a foreign file that has only
``best_params_decoded``, given the space it was fitted in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from isaaclab_sysid.objective.adequacy_record import Adequacy
from isaaclab_sysid.objective.loss import LossWeights
from isaaclab_sysid.objective.param_space import BoundHit, ParamSpace
from isaaclab_sysid.utils.json_io import read_json



@dataclass(frozen=True)
class SearchDistribution:
    """CMA-ES's final search distribution in the normalized space (covariance sigma^2 C).

    Attributes:
        mean: (D,) mean; sigma: step size; C: (D, D) shape matrix.
    """

    mean: np.ndarray
    sigma: float
    C: np.ndarray

    def covariance(self) -> np.ndarray:
        """(D, D) sigma^2 C, normalized units."""
        return np.asarray(self.C, dtype=float) * float(self.sigma) ** 2

    def to_json(self) -> dict:
        return {"mean": [float(v) for v in self.mean], "sigma": float(self.sigma), "C": np.asarray(self.C).tolist(),
                "note": "normalized space [0,1]^D; covariance of the search distribution = sigma^2 * C"}

    @classmethod
    def from_json(cls, d: Mapping) -> "SearchDistribution":
        return cls(np.asarray(d["mean"], dtype=float), float(d["sigma"]), np.asarray(d["C"], dtype=float))


@dataclass(frozen=True)
class RefineTrackSummary:
    """One refinement track's end: its integer delay [ticks], its loss and its normalized vector (D,)."""

    delay: int | None
    loss: float
    x: np.ndarray


@dataclass(frozen=True)
class RefineSummary:
    """What the Levenberg-Marquardt refinement did: iterations and where each delay track ended."""

    iterations: int
    tracks: list[RefineTrackSummary]

    def best_per_delay(self) -> dict[int, RefineTrackSummary]:
        """The lowest-loss track of each delay (the fit's delay profile, continuous numbers re-optimized)."""
        out: dict[int, RefineTrackSummary] = {}
        for t in self.tracks:
            if t.delay is not None and (t.delay not in out or t.loss < out[t.delay].loss):
                out[t.delay] = t
        return dict(sorted(out.items()))

    def to_json(self) -> dict:
        return {"iterations": self.iterations,
                "tracks": [{"delay": t.delay, "loss": t.loss, "x": [float(v) for v in t.x]} for t in self.tracks],
                "note": "Levenberg-Marquardt on the replay residuals after CMA-ES (docs/fit.md)"}

    @classmethod
    def from_json(cls, d: Mapping) -> "RefineSummary":
        return cls(int(d["iterations"]), [RefineTrackSummary(t["delay"], float(t["loss"]),
                                                             np.asarray(t.get("x", []), dtype=float))
                                          for t in d["tracks"]])


#: Plain names of the replay fit's search stages (the keys of :attr:`StageVerdict.stage`).
STAGE_NAMES = {"cmaes": "CMA-ES", "fast": "fast path (Levenberg-Marquardt from the start)",
               "refine": "Levenberg-Marquardt refinement"}


@dataclass(frozen=True)
class StageVerdict:
    """Whether one search stage converged, and if not why and which flag gives it more room.

    Attributes:
        stage: ``cmaes``, ``fast`` or ``refine`` (:data:`STAGE_NAMES`).
        converged: the stage stopped on a convergence test (not on its budget, not at its start,
            not with every step rejected).
        reason: what ended the stage, in plain words.
        remedy: when not converged, the flag(s) that give it more room (empty when converged).
    """

    stage: str
    converged: bool
    reason: str
    remedy: str = ""

    @property
    def name(self) -> str:
        return STAGE_NAMES.get(self.stage, self.stage)

    @property
    def warning(self) -> str:
        """One line for the console and the report ('' when converged)."""
        if self.converged:
            return ""
        return f"{self.name} did NOT converge: {self.reason}" + (f"; {self.remedy}" if self.remedy else "")

    def line(self) -> str:
        """``<stage>: converged (<reason>)`` or its warning."""
        return self.warning or f"{self.name}: converged ({self.reason})"

    def to_json(self) -> dict:
        return {"stage": self.stage, "converged": self.converged, "reason": self.reason, "remedy": self.remedy}

    @classmethod
    def from_json(cls, d: Mapping) -> "StageVerdict":
        return cls(str(d["stage"]), bool(d["converged"]), str(d.get("reason", "")), str(d.get("remedy", "")))


@dataclass
class FitResult:
    """The best parameters of a fit and what produced them.

    Attributes:
        space: the parameter space (groups, bounds, the robot's joint names).
        best_x: (D,) best normalized vector.
        values: decoded values per group ((N,) floats in ``space.joint_names`` order, or the
            integer delay [ticks]); :meth:`by_joint` keys them by joint name.
        best_score: total loss, sum over runs of w_run L_run.
        run_names: fit runs, in order; weighted_loss: (R,) w_run L_run of the best.
        traj_weights: (R,) per-run loss weights; loss_weights: the MSE term weights.
        best_diverged: the best candidate diverged on at least one run.
        iterations, evaluations, seed, popsize, backend: how the search ran.
        search: CMA-ES's final distribution (None for a result without a search).
        refine: the refinement's summary (None when it did not run).
        convergence: one verdict per search stage that finished, in the order they ran (empty in
            files written before the verdicts existed).
        adequacy: the model-adequacy verdict, once the result has been evaluated.

    The interval report is not part of the result: it is ``intervals.json`` (``intervals.combine.IntervalReport``).
    """

    space: ParamSpace
    best_x: np.ndarray
    values: dict[str, np.ndarray]
    best_score: float
    run_names: list[str]
    weighted_loss: np.ndarray
    traj_weights: np.ndarray
    loss_weights: LossWeights = field(default_factory=LossWeights)
    best_diverged: bool = False
    iterations: int = 0
    evaluations: int = 0
    seed: int = 0
    popsize: int = 0
    backend: str = ""
    search: SearchDistribution | None = None
    refine: RefineSummary | None = None
    convergence: list[StageVerdict] = field(default_factory=list)
    adequacy: Adequacy | None = None

    @classmethod
    def from_search(cls, space: ParamSpace, best_x: np.ndarray, best_score: float, **kw) -> "FitResult":
        """A result whose values are the decoded ``best_x``."""
        x = np.asarray(best_x, dtype=float)
        return cls(space=space, best_x=x, values=space.decode(x), best_score=float(best_score), **kw)

    def in_space(self, space: ParamSpace) -> "FitResult":
        """The same values expressed in ``space`` (same groups, e.g. other bounds); ``best_x`` re-normalized."""
        if set(space.group_names) != set(self.values):
            raise ValueError(f"groups {sorted(self.values)} cannot be expressed in a space of {list(space.group_names)}")
        values = {g: self.values[g] for g in space.group_names}
        return replace(self, space=space, values=values, best_x=space.normalize(values))

    # ------------------------------------------------------------ facts
    @property
    def loss_per_run(self) -> dict[str, float]:
        """Unweighted L_run of the best per fit run (0 where the run's weight is 0)."""
        return {n: float(c / w) if w else 0.0 for n, c, w in zip(self.run_names, self.weighted_loss, self.traj_weights)}

    @property
    def delay(self) -> int | None:
        """The fitted actuator delay [ticks of 1 ms] (None when not fitted)."""
        return int(self.values["delay"]) if "delay" in self.values else None

    def by_joint(self, group: str) -> dict[str, float]:
        """One per-joint group's values keyed by the robot's joint names."""
        return {j: float(v) for j, v in zip(self.space.joint_names, np.asarray(self.values[group]).ravel())}

    def at_bounds(self, tol: float = 0.01) -> list[BoundHit]:
        """Fitted values within 1 % of a search bound (see :meth:`ParamSpace.at_bounds`)."""
        return self.space.at_bounds(self.best_x, tol)

    def decoded_json(self) -> dict:
        """The ``best_params_decoded`` dict (per-joint lists, integer delay)."""
        return self.space.decoded_to_json(self.values)

    def summary_line(self) -> str:
        """One line of every fitted group's values (for the console)."""
        return "; ".join(f"{k}: {v if isinstance(v, int) else np.round(v, 4).tolist()}" for k, v in self.decoded_json().items())

    # ------------------------------------------------------------ files
    def to_json(self) -> dict:
        """The ``sysid_best_params.json`` content (deterministic: no wall times)."""
        return {
            "best_score": self.best_score,
            "best_params": [float(v) for v in self.best_x],
            "best_params_decoded": self.decoded_json(),
            "loss_per_run": self.loss_per_run,
            "weighted_loss_per_run": {n: float(c) for n, c in zip(self.run_names, self.weighted_loss)},
            "traj_weights": [float(w) for w in self.traj_weights],
            "loss_weights": asdict(self.loss_weights),
            "best_diverged": self.best_diverged,
            "iterations": self.iterations,
            "evaluations": self.evaluations,
            "seed": self.seed,
            "popsize": self.popsize,
            "backend": self.backend,
            "param_space": self.space.describe(),
            "at_bounds": [asdict(h) for h in self.at_bounds()],
            "cma": None if self.search is None else self.search.to_json(),
            "refine": None if self.refine is None else self.refine.to_json(),
            "convergence": [v.to_json() for v in self.convergence],
            "adequacy": None if self.adequacy is None else self.adequacy.to_json(),
        }

    @classmethod
    def from_json(cls, d: Mapping, space: ParamSpace | None = None, joint_names: Sequence[str] | None = None) -> "FitResult":
        """A result from a ``sysid_best_params.json`` / checkpoint dict.

        Args:
            space: the space to read ``best_params_decoded`` in when the file records none
                (a foreign file: its groups are those present, bounds from ``space``).
            joint_names: the robot's joint names, for files that record no joint names.

        Raises:
            ValueError: the dict is not a fit result (names what is missing).
        """
        if "best_params_decoded" not in d:
            raise ValueError("no 'best_params_decoded' (expected a sysid_best_params.json or a checkpoint_<iter>.json)")
        dec_json = d["best_params_decoded"]
        if "param_space" in d:
            sp = ParamSpace.from_description(d["param_space"], joint_names or (space.joint_names if space else None))
        elif space is not None:
            sp = space.restricted_to(dec_json)
        else:
            raise ValueError("no 'param_space' recorded: give the space the parameters were fitted in")
        values = sp.decoded_from_json(dec_json)
        best_x = np.asarray(d["best_params"], dtype=float) if "best_params" in d and "param_space" in d else sp.normalize(values)
        names = list(d.get("weighted_loss_per_run", {}))
        tw = np.asarray(d.get("traj_weights", [1.0] * len(names)), dtype=float)
        lw = d.get("loss_weights")
        return cls(
            space=sp, best_x=best_x, values=values, best_score=float(d.get("best_score", np.nan)), run_names=names,
            weighted_loss=np.asarray([d["weighted_loss_per_run"][n] for n in names], dtype=float), traj_weights=tw,
            loss_weights=LossWeights(**lw) if lw else LossWeights(), best_diverged=bool(d.get("best_diverged", False)),
            iterations=int(d.get("iterations", 0)), evaluations=int(d.get("evaluations", 0)), seed=int(d.get("seed", 0)),
            popsize=int(d.get("popsize", 0)), backend=str(d.get("backend", "")),
            search=SearchDistribution.from_json(d["cma"]) if d.get("cma") else None,
            refine=RefineSummary.from_json(d["refine"]) if d.get("refine") else None,
            convergence=[StageVerdict.from_json(v) for v in d.get("convergence") or []],
            adequacy=_adequacy(d.get("adequacy")),
        )

    @property
    def not_converged(self) -> list[StageVerdict]:
        """The verdicts of the stages that did not converge."""
        return [v for v in self.convergence if not v.converged]

    @property
    def unreliable(self) -> dict[str, str]:
        """Label -> why its value must not be trusted as it stands (at a bound; fitted under a misfit)."""
        out = {h.label: f"at its {h.side} bound {h.bound:g}" for h in self.at_bounds()}
        if self.adequacy is not None and self.adequacy.misfit:
            for lab in self.space.labels():
                out[lab] = (out[lab] + "; " if lab in out else "") + "fitted under a misfit (see adequacy)"
        return out

    @classmethod
    def read(cls, path: str | Path, space: ParamSpace | None = None, joint_names: Sequence[str] | None = None) -> "FitResult":
        """Read a ``sysid_best_params.json`` or checkpoint; errors name the file."""
        path = Path(path)
        d = read_json(path, "parameters")
        if not isinstance(d, dict):
            raise ValueError(f"{path}: not a JSON object")
        try:
            return cls.from_json(d, space, joint_names)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None


def _adequacy(d: Mapping | None) -> Adequacy | None:
    return Adequacy.from_json(dict(d)) if d else None
