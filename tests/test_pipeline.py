"""One pipeline (jobs/pipeline.py): ``scripts/fit.py --export`` runs the fit, the intervals and the export on the
folder the fit wrote, through the same stage functions ``scripts/compute_intervals.py`` and ``scripts/export_dr.py``
call on a folder; every file lands where :class:`RunFolder` says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from isaaclab_sysid.export.record import DrRecord
from isaaclab_sysid.fit.run_folder import RunFolder
from isaaclab_sysid.intervals.combine import read_intervals
from isaaclab_sysid.jobs.pipeline import IntervalOptions, intervals_stage

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "data" / "real_runs" / "twin_joint_multisine_fit.csv"


def test_fit_export_runs_the_whole_chain_on_one_folder(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fit.py"), "--runs", str(RUN), "--out", str(tmp_path),
                           "--fit_groups", "armature,friction,viscous,delay", "--max_iter", "2", "--refine_iter", "2",
                           "--num_envs", "8", "--no_plots", "--quiet", "--export"],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    folder = RunFolder(path)
    result = folder.read_result()
    rep = read_intervals(folder.intervals)
    assert [iv.label for iv in rep.sets["curvature"].intervals] == result.space.labels()
    import json

    record = DrRecord.from_json(json.loads((folder.export_dir / "sysid_dr.json").read_text()))
    assert set(record.ranges) >= {lab for lab in result.space.labels() if not lab.startswith("delay")}
    assert (folder.export_dir / "sysid_dr_isaaclab.py").is_file()
    assert "--export: intervals of" in proc.stdout and "--export: the exports of" in proc.stdout
    # the intervals stage on the same folder (what scripts/compute_intervals.py calls) gives the same numbers
    again = intervals_stage(IntervalOptions(fit_dir=str(path)), log=lambda s: None)
    assert again.chosen().to_dict() == rep.chosen().to_dict()
