"""``--fit_groups auto``'s friction-law step (jobs/law_choice.py): on a twin whose friction is a law the Coulomb /
static models cannot express (the Gaz sigmoid, the real Panda's published numbers), auto weighs the laws by the BIC
on the fit runs' residual, refits only those whose Gauss-Newton forecast could win, chooses the sigmoid, and says
each candidate's score; the choice is written to friction_law_auto.json and the base fit kept beside it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("isaaclab_sysid.twin.recorder")

from isaaclab_sysid.benchmarking.peers import twin  # noqa: E402
from isaaclab_sysid.data import write_run  # noqa: E402
from isaaclab_sysid.jobs.fit_args import FitArgs  # noqa: E402
from isaaclab_sysid.objective.result import FitResult  # noqa: E402
from isaaclab_sysid.fit.run_folder import LAW_CHOICE_FILE, RESULT_FILE  # noqa: E402
from isaaclab_sysid.jobs.fit_job import run_fit  # noqa: E402
from isaaclab_sysid.objective.param_space import GROUPS, ParamSpace  # noqa: E402
from isaaclab_sysid.jobs.law_choice import ChannelStats, bic_of, law_start, parse_laws  # noqa: E402
from isaaclab_sysid.sim.friction import LAWS, applied_force  # noqa: E402
from isaaclab_sysid.robots import load_robot  # noqa: E402
from isaaclab_sysid.twin.demo import joint_target  # noqa: E402
from isaaclab_sysid.twin.recorder import record_twin  # noqa: E402

GAZ = {"sigmoid_amplitude": np.array([0.546, 0.872, 0.641, 1.279, 0.839, 0.303, 0.565]),
       "sigmoid_slope": np.array([5.12, 9.07, 10.14, 5.59, 8.35, 17.13, 10.34]),
       "sigmoid_offset": np.array([0.040, 0.026, -0.046, 0.036, 0.026, -0.021, 0.004])}
FLAGS = dict(num_envs=8, max_iter=3, refine_iter=8, refine_delay_neighbours=1, plots=False, quiet=True,
             fast_probe_generations=0)


def test_auto_chooses_the_sigmoid_law_on_a_sigmoid_twin(tmp_path):
    robot = load_robot("franka_panda")
    p = replace(twin(), friction_model="sigmoid", friction=np.zeros(7), static_friction=None, stribeck_velocity=None,
                law_params=GAZ)
    csvs = []
    for i, seed in enumerate((40, 50)):
        run = record_twin(robot, joint_target(robot, 1.5, seed, f"fit_{i}"), p, seed=i, log_rate_hz=1000.0)
        csvs.append(str(write_run(run, tmp_path / f"fit_{i}.csv")[0]))
    lines: list[str] = []
    out = run_fit(FitArgs.build(real_csv=csvs, log_dir=str(tmp_path / "logs"), **FLAGS), log=lines.append)
    said = [s for s in lines if s.startswith("--fit_groups auto, friction law")]
    print("\n".join(said))
    choice = json.loads((out / LAW_CHOICE_FILE).read_text())
    assert choice["chosen"] == "sigmoid", choice
    res = FitResult.read(out / RESULT_FILE)
    assert "sigmoid_amplitude" in res.space.group_names and "friction" not in res.space.group_names
    assert said and "BIC" in said[0] and "n_eff" in said[0]
    scores = {s["law"]: s for s in choice["scores"]}
    assert scores["sigmoid"]["refit"] and scores["sigmoid"]["bic"] < scores[choice["base"]]["bic"]
    assert 0 < choice["n_eff"] < choice["n"]  # 1 kHz residuals are not independent
    base = FitResult.read(out / choice["base"] / RESULT_FILE)  # the base answer is kept beside it
    assert res.best_score < base.best_score


def test_bic_and_the_laws_flag():
    stats = ChannelStats({"q": 100, "dq": 0, "x": 0}, {"q": 10.0, "dq": 0.0, "x": 0.0}, {"q": 1.0, "dq": 0.0, "x": 0.0})

    def bic(loss, k):
        return bic_of({"q": loss, "dq": 0.0, "x": 0.0}, stats, k)

    assert bic(1.0, 2) < bic(1.0, 3)  # a number more costs log(n_eff)
    assert bic(0.5, 3) < bic(1.0, 2)  # unless the loss falls enough
    assert parse_laws("none") == [] and parse_laws("sigmoid, dahl") == ["sigmoid", "dahl"]
    with pytest.raises(ValueError, match="unknown"):
        parse_laws("sigmoid,coulomb")


def test_the_sigmoid_starts_at_the_coulomb_fit_s_level():
    """The Gaz sigmoid at offset 0 is a (sigma(s v) - 1/2): at speed it tends to a / 2, so the law's start from a
    Coulomb fit takes twice the Coulomb level as its amplitude (the friction the Coulomb fit found, not half of it)."""
    names = [f"j{i}" for i in range(3)]
    coulomb = ParamSpace.from_bounds({g: GROUPS[g].default_bounds for g in ("armature", "friction", "viscous")}, 3,
                                     names)
    space = ParamSpace.from_bounds({g: GROUPS[g].default_bounds for g in ("armature", "sigmoid_amplitude",
                                    "sigmoid_slope", "sigmoid_offset", "viscous")}, 3, names)
    fc = np.array([0.3, 0.8, 1.5])
    x = coulomb.normalize({"armature": np.full(3, 0.1), "friction": fc, "viscous": np.full(3, 0.2)})
    dec = space.decode(law_start(coulomb, x, space, "sigmoid"))
    p = np.stack([dec["sigmoid_amplitude"], dec["sigmoid_slope"], dec["sigmoid_offset"]], axis=1)
    at_speed = applied_force(LAWS["sigmoid"], p, np.full(3, 2.0), np.zeros(3))
    np.testing.assert_allclose(-at_speed, fc, rtol=1e-6)


def test_an_armature_at_its_bound_names_the_law_that_frees_it():
    from isaaclab_sysid.jobs.law_choice import LawChoice, freed_by

    hits = {"armature[j5]", "armature[j6]"}
    freed = freed_by(hits, {"sigmoid": {"armature[j6]"}, "dahl": set(), "load": hits})
    assert freed == {"armature[j5]": ["dahl", "sigmoid"], "armature[j6]": ["dahl"]}
    kept = LawChoice("coulomb", "coulomb", 10, 5.0, freed=freed).freed_lines()
    assert kept[1] == ("armature[j6] sits at its bound under coulomb; the dahl law frees it (refitted, not chosen on "
                       "the BIC): the bound may stand in for a friction the model lacks")
    chose = LawChoice("coulomb", "dahl", 10, 5.0, freed=freed).freed_lines()
    assert chose[0] == "armature[j5] sat at its bound under coulomb; the dahl law (chosen) frees it"


def test_the_stribeck_candidate_starts_at_the_static_answer_exactly():
    """--auto_laws stribeck: the Stribeck law with its velocity and shape fitted extends the static-friction group
    (the same law at --stribeck_velocity and shape 2). It is a candidate beside a static base (not beside a base that
    already fits both), the base is named ``static``, and its start replays the static answer exactly: both levels as
    fitted, the velocity the base used, shape 2 (from a Coulomb base: both levels at Fc, Coulomb exactly)."""
    from isaaclab_sysid.jobs.law_choice import candidates_for, law_space, model_name
    from isaaclab_sysid.objective.problem_record import ParamsConfig

    static_groups = ["armature", "mu_static", "dynamic_ratio", "viscous", "delay"]
    full = ["armature", "mu_static", "dynamic_ratio", "stribeck_velocity", "stribeck_shape", "viscous", "delay"]
    assert parse_laws("stribeck,load") == ["stribeck", "load"]
    assert model_name(static_groups) == "static" and model_name(full) == "stribeck"
    assert model_name(["armature", "friction"]) == "coulomb"
    assert candidates_for(static_groups, ["stribeck", "load"])[0] == ["stribeck", "load"]
    assert candidates_for(full, ["stribeck", "load"])[0] == ["load"]
    names = [f"j{i}" for i in range(3)]
    bounds = {g: GROUPS[g].default_bounds for g in static_groups}
    base = ParamSpace.from_bounds(bounds, 3, names)
    coulomb = ParamSpace.from_bounds({g: GROUPS[g].default_bounds for g in ("armature", "friction", "viscous", "delay")},
                                     3, names)
    space = law_space(base, "stribeck", ParamsConfig())
    assert [g for g in space.group_names if g in ("stribeck_velocity", "stribeck_shape")] == ["stribeck_velocity",
                                                                                              "stribeck_shape"]
    fs, ratio = np.array([0.4, 0.9, 1.6]), np.array([0.5, 0.7, 0.9])
    xb = base.normalize({"armature": np.full(3, 0.1), "mu_static": fs, "dynamic_ratio": ratio,
                         "viscous": np.full(3, 0.2), "delay": 2})
    xc = coulomb.normalize({"armature": np.full(3, 0.1), "friction": np.full(3, 0.3), "viscous": np.full(3, 0.2),
                            "delay": 2})
    dec = space.decode(law_start(coulomb, xc, space, "stribeck", base=(base, xb), stribeck_velocity=0.07))
    np.testing.assert_allclose(dec["mu_static"], fs, rtol=1e-9)
    np.testing.assert_allclose(dec["dynamic_ratio"], ratio, rtol=1e-9)
    np.testing.assert_allclose(dec["stribeck_velocity"], 0.07, rtol=1e-9)
    np.testing.assert_allclose(dec["stribeck_shape"], 2.0, rtol=1e-9)
    assert int(dec["delay"]) == 2
    dec_c = space.decode(law_start(coulomb, xc, space, "stribeck", base=None))
    np.testing.assert_allclose(dec_c["mu_static"], 0.3, rtol=1e-9)
    np.testing.assert_allclose(dec_c["dynamic_ratio"], 1.0, rtol=1e-9)
