"""The torque replay on the real UR10e (issue 14): LS, the replay fit seeded by it, every validation file scored.

CI-sized: the fit uses one identification run (31 s) and a small budget; ``benchmarks/ur10e_torque_replay.py``
runs the full size (docs/replay.md has its table).
"""

from __future__ import annotations

import numpy as np
import pytest

from isaaclab_sysid.jobs.ur10e_torque_study import CI, MODELS, run_study
from isaaclab_sysid.data.formats.ur10e import ur10e_dir
from isaaclab_sysid.robots import load_robot

DATA = ur10e_dir()
pytestmark = pytest.mark.skipif(not (DATA / "validation_data").is_dir(),
                                reason=f"UR10e shared data not found at {DATA} (set ISAACLAB_SYSID_SHARED)")


def test_replay_fit_beats_urdf_everywhere_and_ls_pooled(tmp_path):
    res = run_study(CI, tmp_path, log=lambda s: None)
    print("\n" + res.table(load_robot("ur10e").joint_names))
    assert len(res.valid_files) == 11
    for w, by in res.common.items():  # every model scored on the windows where all three stayed finite
        a, b, c = (by[m] for m in MODELS)
        assert a.scored and b.scored and c.scored and a.windows == b.windows == c.windows > 0, w
        assert np.all(c.q_rms_mrad < a.q_rms_mrad), w  # the fit beats the URDF there too
    for w, by in res.scores.items():
        a, b, c = (by[m] for m in MODELS)
        assert c.scored and b.scored
        # (c) beats the URDF model with zero joint terms on every joint, in q and in qd, wherever the URDF is scored
        if a.scored:
            assert np.all(c.q_rms_mrad < a.q_rms_mrad) and np.all(c.dq_rms_mrad_s < a.dq_rms_mrad_s), w
        # and is no worse than the rigid-body LS model alone on the pooled figures
        assert c.q_pooled_mrad <= b.q_pooled_mrad and c.dq_pooled_mrad_s <= b.dq_pooled_mrad_s, w
    # a longer window drifts further: the scores measure drift, not only noise
    assert res.scores[0.5]["replay fit"].q_pooled_mrad > res.scores[0.2]["replay fit"].q_pooled_mrad
