"""config.json stores the problem (ProblemRecord) and the job's options apart; RunFolder.read_problem is its one
reader and still reads the flags older fit folders stored (issue 44 item 1)."""

from __future__ import annotations

import json

from isaaclab_sysid.fit.outputs import write_config
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.problem_record import ProblemRecord


def _args() -> FitArgs:
    return FitArgs.build(real_csv=["a.csv"], heldout_csv=["b.csv"], num_envs=12, seed=4, window_s=0.25,
                         friction_bounds=(0.0, 2.0), ee_offset=(0.0, 0.0, 0.1034), w_dq=0.2, log_dir="logs/x")


def test_config_json_holds_the_problem_and_the_job_apart(tmp_path):
    args = _args()
    write_config(tmp_path, args.problem.to_dict(), args.job_dict())
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert set(cfg["problem"]) == {"runs", "params", "loss", "replay", "cluster"}
    assert set(cfg["job"]) == {"search", "output"} and "args" not in cfg
    rec = RunFolder(tmp_path).read_problem()
    assert isinstance(rec, ProblemRecord) and rec.to_dict() == args.problem.to_dict()
    assert rec.replay.window_s == 0.25 and rec.params.friction_bounds == (0.0, 2.0)
    assert FitArgs.from_config(RunFolder(tmp_path).read_config()).to_dict() == args.to_dict()  # --resume


def test_older_folders_flags_are_read_as_the_problem(tmp_path):
    """A folder written before the record: every flag under 'args', nested by section or flat."""
    args = _args()
    for layout in (args.to_dict(), {k: v for s in args.to_dict().values() for k, v in s.items()}):
        (tmp_path / "config.json").write_text(json.dumps({"args": layout}))
        folder = RunFolder(tmp_path)
        assert folder.read_problem().to_dict() == args.problem.to_dict()
        assert FitArgs.from_config(folder.read_config()).to_dict() == args.to_dict()
