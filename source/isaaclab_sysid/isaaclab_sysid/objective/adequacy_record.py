"""The model-adequacy record a :class:`~isaaclab_sysid.objective.result.FitResult` carries (read and written with it).

The verdict itself is computed by :func:`isaaclab_sysid.evaluate.adequacy.assess` (docs/fit.md, "Model
adequacy"); this module holds only the typed record, so that the objective layer can read a result file
without importing the evaluation stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field


#: the line a misfit verdict ends with: what a misfit does to the numbers and to more data (issue 45: on a Stribeck
#: twin the Coulomb model's delay went from the true 2 ticks at 12 s to 0 at 48 s, with narrower intervals)
MISFIT_NUMBERS = ("under a misfit every fitted number, the delay included, is the best stand-in the model has for what "
                  "it lacks: more data pin that stand-in, not the truth, and its intervals narrow around it, so a "
                  "longer recording does not make these numbers truer; add what the lines above name, then refit")


@dataclass(frozen=True)
class NoiseFloor:
    """A joint-position noise floor for the adequacy verdict.

    Attributes:
        pooled_mrad: the floor over every joint [mrad] (what the verdict compares the residual with).
        per_joint_mrad: (N,) per-joint floor [mrad], or None (a single given number).
        source: ``given`` (``--noise_floor_mrad``) or ``repeats`` (``--noise_floor_from``).
        method: how it was obtained, in words (for the report and ``sysid_best_params.json``).
        files: the repeat pairs' CSV paths ((A, B) per pair; empty for ``given``).
    """

    pooled_mrad: float
    per_joint_mrad: list[float] | None
    source: str
    method: str
    files: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        d["files"] = [list(p) for p in self.files]
        return d


@dataclass(frozen=True)
class AdequacyLimits:
    """Thresholds of the verdict (dimensionless ratios)."""

    max_heldout_ratio: float = 2.0
    max_floor_ratio: float = 2.0
    max_speed_ratio: float = 2.0
    self_motion_share: float = 0.5


@dataclass
class RunResidualStats:
    """Residual diagnostics of the fitted candidate on one run.

    Attributes:
        name: run name; heldout: the run was held out.
        q_rms_mrad: (N,) per-joint q RMS [mrad]; q_rms_all_mrad: over all joints.
        white_floor_mrad: (N,) white-noise floor estimated from first differences [mrad].
        speed_ratio: (N,) residual RMS in the fastest third of samples over the slowest third.
        self_motion_share: share of the joint-error energy in the EE Jacobian's null space (None: not redundant
            or not task impedance).
        self_motion_joints: joints (1-based) carrying most of the null-space error.
    """

    name: str
    heldout: bool
    q_rms_mrad: list[float]
    q_rms_all_mrad: float
    white_floor_mrad: list[float]
    speed_ratio: list[float]
    self_motion_share: float | None = None
    self_motion_joints: list[int] = field(default_factory=list)


@dataclass
class Adequacy:
    """The model-adequacy verdict of one fit (see module docstring).

    Attributes:
        verdict: ``adequate`` or ``misfit``.
        messages: plain-words findings, worst first.
        heldout_over_fit: held-out q RMS / fit q RMS (None without held-out runs).
        floor_mrad: the noise floor used [mrad]; floor_source: ``repeats`` (measured from repeat runs,
            ``--noise_floor_from``), ``given`` (``--noise_floor_mrad``) or ``estimated`` (white noise of the residual).
        residual_over_floor: fit q RMS / floor.
        runs: per-run diagnostics.
        floor_per_joint_mrad: (N,) the per-joint floor [mrad] (repeats, estimated), None for a given number.
        floor_method: how the floor was obtained, in words; floor_files: the repeat pairs' CSV paths.
        static_friction_test: the omitted static friction's score test (its JSON; None: not run).
    """

    verdict: str
    messages: list[str]
    heldout_over_fit: float | None
    floor_mrad: float
    floor_source: str
    residual_over_floor: float
    runs: list[RunResidualStats]
    limits: AdequacyLimits = field(default_factory=AdequacyLimits)
    floor_per_joint_mrad: list[float] | None = None
    floor_method: str = ""
    floor_files: list[list[str]] = field(default_factory=list)
    static_friction_test: dict | None = None

    @property
    def misfit(self) -> bool:
        return self.verdict == "misfit"

    def with_static_friction_test(self, test) -> "Adequacy":
        """This verdict with the score test for an omitted static friction
        (:mod:`isaaclab_sysid.evaluate.friction_score`; None where it does not apply): misfit when it fires."""
        if test is None:
            return self
        msgs = list(self.messages)
        verdict = self.verdict
        if test.significant:
            msgs = [m for m in msgs if not m.startswith("model adequate")]
            msgs.insert(0, test.message())
            verdict = "misfit"
            if MISFIT_NUMBERS not in msgs:
                msgs.append(MISFIT_NUMBERS)
        return dataclasses.replace(self, verdict=verdict, messages=msgs, static_friction_test=test.to_json())

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Adequacy":
        return cls(verdict=d["verdict"], messages=list(d["messages"]), heldout_over_fit=d.get("heldout_over_fit"),
                   floor_mrad=float(d["floor_mrad"]), floor_source=d["floor_source"],
                   residual_over_floor=float(d["residual_over_floor"]),
                   runs=[RunResidualStats(**r) for r in d.get("runs", [])],
                   limits=AdequacyLimits(**d.get("limits", {})), floor_per_joint_mrad=d.get("floor_per_joint_mrad"),
                   floor_method=d.get("floor_method", ""), floor_files=[list(p) for p in d.get("floor_files", [])],
                   static_friction_test=d.get("static_friction_test"))
