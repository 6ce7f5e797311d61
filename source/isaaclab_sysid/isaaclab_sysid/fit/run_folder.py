"""A fit's output folder, ``<log_dir>/<timestamp>/``: every file name in it, and the typed readers and writers of
the files whose types live at or below the fit.

Every stage and study names a fit's files through :class:`RunFolder` (or the name constants below); none spells a
file name of its own. The stage files whose types live above the fit are written and read by their stage, at the
path this module gives them: ``eval_result.json`` (``evaluate.heldout``), ``report.md`` / ``report.html``
(``evaluate.report`` / ``evaluate.html_report``), ``intervals.json`` (``intervals.combine.read_intervals``),
``fit_groups_auto.json`` / ``friction_law_auto.json`` (``jobs.model_choice`` / ``jobs.law_choice``) and the
``export/`` folder (``export``).

========================  =====================================================================================
file                      what it holds
========================  =====================================================================================
``config.json``           the problem (``ProblemRecord``), the job's search and output options, package
                          versions, git revision, command line
``progress.csv``          one row per CMA-ES generation
``checkpoint_<i>.json``   the best parameters after ``i`` generations and the search state (``--resume``)
``fast_path.json``        the fast path's evidence (why CMA-ES ran or did not)
``sysid_best_params.json``  the fit's answer: ``FitResult``
``fit_groups_auto.json``  ``--fit_groups auto``: the Coulomb / static-friction choice and its evidence
``friction_law_auto.json``  ``--fit_groups auto``: every friction law's score and the choice
``law_<law>/``            ``--fit_groups auto``: a law's refit; the load law's ``other_start.json`` (``FitResult``)
                          is its refit from the start it did not keep, which the interval stage scores as a basin
``eval_result.json``      the fitted and nominal parameters scored per run; ``eval_rollout_<run>.csv`` beside it
``window_scores.json``    a torque replay's window RMS per model and window length
``report.md``, ``report.html``  the report (verdict first)
``intervals.json``        ``scripts/compute_intervals.py``: an interval for every fitted number
``export/``               ``scripts/export_dr.py``: the Isaac Lab, neutral and MJCF exports
========================  =====================================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.objective.problem_record import ProblemRecord
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.utils.atomic import atomic_write_json
from isaaclab_sysid.utils.json_io import jsonable, read_json

CONFIG_FILE = "config.json"
PROGRESS_FILE = "progress.csv"
RESULT_FILE = "sysid_best_params.json"
FAST_PATH_FILE = "fast_path.json"
MODEL_CHOICE_FILE = "fit_groups_auto.json"
LAW_CHOICE_FILE = "friction_law_auto.json"
EVAL_RESULT_FILE = "eval_result.json"
WINDOW_SCORES_FILE = "window_scores.json"
REPORT_FILE = "report.md"
HTML_FILE = "report.html"
INTERVALS_FILE = "intervals.json"
OTHER_START_FILE = "other_start.json"
EXPORT_DIR = "export"
CHECKPOINT_GLOB = "checkpoint_*.json"
CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)\.json$")
#: the suffix of an ``--eval_params`` folder (``<timestamp>_eval``)
EVAL_SUFFIX = "_eval"


def checkpoint_name(iteration: int) -> str:
    """``checkpoint_<iteration>.json`` (``iteration``: CMA-ES generations so far)."""
    return f"checkpoint_{int(iteration)}.json"


def eval_rollout_name(run_name: str) -> str:
    """``eval_rollout_<run>.csv``: the fitted candidate's rollout of one run on the real time base."""
    return f"eval_rollout_{run_name}.csv"


@dataclass(frozen=True)
class RunFolder:
    """One fit's output folder: the path of each of its files, and the typed readers of the fit's own files."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def new(cls, log_root: str | Path, now: datetime | None = None, suffix: str = "") -> "RunFolder":
        """A fresh ``<log_root>/<YYYY-mm-dd_HH-MM-SS><suffix>`` folder (``_1``, ``_2``... keep it unique)."""
        stamp = (now or datetime.now()).strftime("%Y-%m-%d_%H-%M-%S") + suffix
        root = Path(log_root)
        path = root / stamp
        k = 1
        while path.exists():
            path = root / f"{stamp}_{k}"
            k += 1
        path.mkdir(parents=True)
        return cls(path)

    @classmethod
    def of_fit(cls, spec: str | Path, flag: str) -> "RunFolder":
        """The folder a fit wrote, given as ``spec`` on ``flag``; a one-line :class:`FitError` when ``spec`` is not
        a folder holding ``config.json``."""
        folder = cls(Path(spec))
        if not folder.path.is_dir():
            raise FitError(f"{flag} {spec}: not a folder (give the folder a fit wrote, e.g. logs/sysid/<time>)")
        if not folder.config.is_file():
            raise FitError(f"{flag} {spec}: no {CONFIG_FILE} there (not a fit folder)")
        return folder

    # the fit's files
    @property
    def config(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def progress(self) -> Path:
        return self.path / PROGRESS_FILE

    @property
    def result(self) -> Path:
        return self.path / RESULT_FILE

    @property
    def fast_path(self) -> Path:
        return self.path / FAST_PATH_FILE

    def checkpoint(self, iteration: int) -> Path:
        return self.path / checkpoint_name(iteration)

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Every ``checkpoint_<i>.json`` as (i, path), sorted by ``i``."""
        out = []
        for p in self.path.glob(CHECKPOINT_GLOB):
            m = CHECKPOINT_RE.match(p.name)
            if m:
                out.append((int(m.group(1)), p))
        return sorted(out)

    # the stages' files (their types are read and written by their stage)
    @property
    def model_choice(self) -> Path:
        return self.path / MODEL_CHOICE_FILE

    @property
    def law_choice(self) -> Path:
        return self.path / LAW_CHOICE_FILE

    @property
    def eval_result(self) -> Path:
        return self.path / EVAL_RESULT_FILE

    def eval_rollout(self, run_name: str) -> Path:
        return self.path / eval_rollout_name(run_name)

    @property
    def window_scores(self) -> Path:
        return self.path / WINDOW_SCORES_FILE

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def html_report(self) -> Path:
        return self.path / HTML_FILE

    @property
    def intervals(self) -> Path:
        return self.path / INTERVALS_FILE

    @property
    def export_dir(self) -> Path:
        return self.path / EXPORT_DIR

    # typed readers and writers of the fit's own files
    def read_config(self) -> dict:
        """The whole ``config.json`` record: the problem under ``problem`` and the fit job's options under ``job``
        (an older folder: every option under ``args``); versions, git, command."""
        record = read_json(self.config, "fit configuration")
        if not isinstance(record, dict) or not (isinstance(record.get("problem"), dict)
                                                or isinstance(record.get("args"), dict)):
            raise FitError(f"{self.config}: not a fit's config.json (no 'problem' object)")
        return record

    def read_problem(self) -> ProblemRecord:
        """The problem the fit solved, as it resolved it: ``config.json``'s ``problem`` (an older folder: the
        problem's options among its ``args``). The one reader of a fit's problem."""
        config = self.read_config()
        return ProblemRecord.from_dict(config["problem"] if isinstance(config.get("problem"), dict) else config["args"])

    def read_result(self, **kw) -> FitResult:
        """``sysid_best_params.json`` as a :class:`FitResult` (``kw``: ``FitResult.read``'s ``space``,
        ``joint_names``); a one-line :class:`FitError` when the folder has none."""
        if not self.result.is_file():
            raise FitError(f"{self.path}: no {RESULT_FILE} (give the folder a fit wrote, e.g. logs/sysid/<time>)")
        return FitResult.read(self.result, **kw)

    def law_dir(self, law: str) -> Path:
        """``law_<law>/``: the law step's refit of ``law`` (jobs/auto_model.py)."""
        return self.path / f"law_{law}"

    def other_start(self, law: str) -> Path:
        """``law_<law>/other_start.json``: the law's refit from the start the law step did not keep."""
        return self.law_dir(law) / OTHER_START_FILE

    def read_other_start(self, law: str, **kw) -> FitResult | None:
        """:meth:`other_start` as a :class:`FitResult` (None when the law step wrote none)."""
        path = self.other_start(law)
        return FitResult.read(path, **kw) if path.is_file() else None

    def write_other_start(self, law: str, result: FitResult) -> Path:
        """Write :meth:`other_start` atomically; returns its path."""
        path = self.other_start(law)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, jsonable(result.to_json()))
        return path

    def write_result(self, result: FitResult) -> Path:
        """Write ``sysid_best_params.json`` atomically; returns its path."""
        atomic_write_json(self.result, jsonable(result.to_json()))
        return self.result


__all__ = [
    "CHECKPOINT_GLOB", "CHECKPOINT_RE", "CONFIG_FILE", "EVAL_RESULT_FILE", "EVAL_SUFFIX", "EXPORT_DIR",
    "FAST_PATH_FILE", "HTML_FILE", "INTERVALS_FILE", "LAW_CHOICE_FILE", "MODEL_CHOICE_FILE", "OTHER_START_FILE",
    "PROGRESS_FILE",
    "REPORT_FILE", "RESULT_FILE", "RunFolder", "WINDOW_SCORES_FILE", "checkpoint_name", "eval_rollout_name",
]
