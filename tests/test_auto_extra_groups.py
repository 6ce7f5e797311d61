"""``--fit_groups auto,GROUP,...``: auto's friction choice with other groups fitted beside it (issue 43: a torque
replay whose sensor carries a bias needs ``torque_offset`` *and* the friction law auto chooses; before, ``auto``
could not be combined with any group).

End to end on the torque-replay twin whose friction is the real Panda's Gaz sigmoid and whose logged torque carries
the per-joint bias :data:`~isaaclab_sysid.twin.torque_twin.OFFSET`: ``auto,torque_offset`` chooses the sigmoid, keeps
``torque_offset`` through the law refit and recovers the bias; a friction group beside ``auto`` is refused in one
line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")

from isaaclab_sysid.fit.problem import check_record  # noqa: E402
from isaaclab_sysid.fit.run_folder import RunFolder  # noqa: E402
from isaaclab_sysid.jobs.fit_args import FitArgs  # noqa: E402
from isaaclab_sysid.jobs.fit_job import run_fit  # noqa: E402
from isaaclab_sysid.objective.errors import FitError  # noqa: E402
from isaaclab_sysid.objective.problem_record import ParamsConfig  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.twin import torque_twin  # noqa: E402

GAZ = {"sigmoid_amplitude": np.array([0.546, 0.872, 0.641, 1.279, 0.839, 0.303, 0.565]),
       "sigmoid_slope": np.array([5.12, 9.07, 10.14, 5.59, 8.35, 17.13, 10.34]),
       "sigmoid_offset": np.array([0.040, 0.026, -0.046, 0.036, 0.026, -0.021, 0.004])}


def test_auto_extras_parse():
    p = ParamsConfig(fit_groups="auto, torque_offset,kp")
    assert p.auto and p.auto_extras() == ["torque_offset", "kp"]
    assert p.groups() == ["armature", "friction", "viscous", "delay", "torque_offset", "kp"]
    plain = ParamsConfig()
    assert plain.auto and plain.auto_extras() == [] and plain.groups() == ["armature", "friction", "viscous", "delay"]
    explicit = ParamsConfig(fit_groups="armature,friction,torque_offset")
    assert not explicit.auto and explicit.auto_extras() == []
    assert ParamsConfig(fit_groups="auto,delay").groups() == ["armature", "friction", "viscous", "delay"]


@pytest.mark.parametrize("extra", ["friction", "mu_static", "sigmoid", "load_friction_motor"])
def test_a_friction_group_beside_auto_is_refused(extra, tmp_path):
    args = FitArgs.build(real_csv=["x.csv"], fit_groups=f"auto,{extra}", log_dir=str(tmp_path))
    with pytest.raises(FitError) as err:
        check_record(args.problem)
    msg = str(err.value)
    assert "\n" not in msg and f"{extra} is friction, which auto chooses" in msg, msg


def test_auto_with_torque_offset_on_a_biased_sigmoid_torque_twin(tmp_path, monkeypatch):
    truth = dataclasses.replace(torque_twin.TRUTH, friction_model="sigmoid", friction=np.zeros(7), law_params=GAZ)
    monkeypatch.setattr(torque_twin, "TRUTH", truth)
    fit_csv, held_csv = torque_twin.write_twin(load_robot("franka_panda"), tmp_path, noise=0.02,
                                               offset=torque_twin.OFFSET, fit_s=4.0)
    args = FitArgs.build(real_csv=[str(fit_csv)], heldout_csv=[str(held_csv)], replay="torque", torque_signal="tau",
                         torque_includes_gravity=False, window_s=0.4, num_envs=16, max_iter=8, refine_iter=6,
                         refine_delay_neighbours=1, log_dir=str(tmp_path / "fit"), quiet=True, plots=False, seed=0,
                         viscous_bounds=(0.0, 2.0), friction_bounds=(0.0, 2.0), armature_bounds=(0.0, 1.0),
                         delay_bounds=(0, 8), torque_offset_bounds=(-1.0, 1.0), fit_groups="auto,torque_offset")
    lines: list[str] = []
    folder = RunFolder(run_fit(args, log=lines.append))
    res = folder.read_result()
    choice = json.loads(folder.law_choice.read_text())
    print("\n" + next(ln for ln in lines if "friction law ->" in ln))
    off = np.asarray(res.values["torque_offset"])
    print(f"  torque_offset {np.round(off, 3)} (truth {torque_twin.OFFSET}); delay {int(res.values['delay'])}")
    assert choice["chosen"] == "sigmoid", choice
    assert "torque_offset" in res.space.group_names and "sigmoid_amplitude" in res.space.group_names
    assert np.max(np.abs(off - torque_twin.OFFSET)) < 0.05, off
    assert int(res.values["delay"]) == torque_twin.DELAY
    assert not res.at_bounds(), res.at_bounds()
    report = folder.report.read_text()
    assert "friction law: `--fit_groups auto, friction law -> sigmoid" in report  # the law step's scores, in report.md
