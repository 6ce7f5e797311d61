"""Torque-driven multiple-shooting replay (``--replay torque``, issue 14) on a twin with hidden truth.

The twin is a Franka under joint PD with hidden armature, Coulomb and viscous friction, with
encoder, velocity and actuator noise; its log carries the torque command, which acts 3 ticks
after it is logged (the hidden delay), with sensor noise on it as a current signal would carry. The fit never
sees the controller: it applies that torque open loop in 0.4 s windows started from the measured
state. The held-out run is another waveform at other gains.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from isaaclab_sysid.data import read_run
from isaaclab_sysid.importers.torque_runs import TorqueRunError, TorqueSource, torque_run
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.jobs.fit_job import run_fit
from isaaclab_sysid.jobs.fit_args import resolve_problem
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.sim.interface import CandidateBatch, ReplayOptions
from isaaclab_sysid.sim.mujoco_backend import MujocoBackend
from isaaclab_sysid.sim.shooting import shooting_windows, torque_per_tick
from isaaclab_sysid.twin.demo import joint_target
from isaaclab_sysid.twin.recorder import dense_run
from isaaclab_sysid.twin.torque_twin import DELAY, OFFSET, TRUTH, lead, torque_logged, write_twin

TORQUE_NOISE = 0.02  # N m, on the logged torque (a good torque sensor)
_lead = lead


@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


def _torque_logged(robot, target, seed, noise=TORQUE_NOISE, offset=None):
    return torque_logged(robot, target, seed, noise, offset)


def _write_twin(robot, d, noise=TORQUE_NOISE, offset=None, fit_s=6.0):
    return (*write_twin(robot, d, noise, offset, fit_s), d)


@pytest.fixture(scope="module")
def twin_files(robot, tmp_path_factory):
    return _write_twin(robot, tmp_path_factory.mktemp("torque_twin"))


def test_windows_and_interpolation():
    st = np.array([0, 10, 20, 30, 40, 50, 61])
    w = shooting_windows(st, 20)
    assert w.tolist() == [[0, 2], [2, 4], [4, 7]]  # the 11-tick tail (>= half a window) stays; starts at samples
    assert shooting_windows(st, 25).tolist() == [[0, 3], [3, 7]]
    assert shooting_windows(st, None).tolist() == [[0, 7]]
    tau = np.stack([st * 1.0, -2.0 * st], axis=1)
    per = torque_per_tick(st, tau)
    assert per.shape == (62, 2) and np.allclose(per[:, 0], np.arange(62)) and np.allclose(per[:, 1], -2 * np.arange(62))


def test_torque_replay_reproduces_the_closed_loop(robot):
    """Replaying the logged command with the true delay and joint terms is the closed loop itself: one window
    gives the PD twin's states within 1e-7 rad (only the first 3 ticks, before the log, differ); 0.2 s windows
    restarted from the true states match to round-off; a wrong delay does not."""
    target = dense_run(joint_target(robot, 2.0, seed=5))
    be = MujocoBackend(robot, ReplayOptions(warmup_ticks=0), n_threads=1)
    joint_terms = dict(armature=TRUTH.armature[None], friction=TRUTH.friction[None], viscous=TRUTH.viscous[None])
    ro = be.rollout(CandidateBatch(**joint_terms, delay=np.array([0])), [target])[0]
    truth_run = dataclasses.replace(target, q=ro.q[0], dq=ro.dq[0], tau=_lead(ro.tau[0], DELAY))
    trun = torque_run(truth_run, TorqueSource("tau", includes_gravity=False))
    batch = CandidateBatch(**joint_terms, delay=np.array([DELAY]))
    for window, tol in ((None, 1e-7), (200, 1e-7)):
        tb = MujocoBackend(robot, ReplayOptions(window_ticks=window), n_threads=2)
        out = tb.rollout(batch, [trun])[0]
        assert not out.diverged[0]
        assert np.max(np.abs(out.q[0] - ro.q[0])) < tol
        if window is not None:  # every window after the first has the torque history it needs: round-off only
            assert np.max(np.abs(out.q[0, 200:] - ro.q[0, 200:])) < 1e-10
        wrong = tb.rollout(CandidateBatch(**joint_terms, delay=np.array([0])), [trun])[0]
        assert np.max(np.abs(wrong.q[0] - ro.q[0])) > 1e-5  # the delay matters: the test can fail


def _args(fit_csv, held_csv, out, **kw):
    base = dict(real_csv=[str(fit_csv)], heldout_csv=[str(held_csv)], replay="torque", torque_signal="tau",
                torque_includes_gravity=False, window_s=0.4, num_envs=16, max_iter=14, refine_iter=6,
                refine_delay_neighbours=1, log_dir=str(out), quiet=True, plots=False, seed=0,
                viscous_bounds=(0.0, 2.0), friction_bounds=(0.0, 2.0), armature_bounds=(0.0, 1.0), delay_bounds=(0, 8))
    base.update(kw)
    return FitArgs.build(**base)


def test_torque_replay_recovers_the_twin(twin_files, tmp_path):
    """0.02 N m on the logged torque: delay exact, the others within about 8 %, the verdict adequate against the
    start-state drift floor, and all 21 truths inside their 95 % intervals. The torque noise drives the replay
    (errors in variables): the intervals carry it (intervals/torque_input_noise.py; the window-cluster sandwich
    alone had 18/21, joint 6's three terms 2-2.7 standard errors off); docs/replay.md."""
    fit_csv, held_csv, _ = twin_files
    run_dir = run_fit(_args(fit_csv, held_csv, tmp_path), log=lambda s: None)
    res = FitResult.read(run_dir / "sysid_best_params.json")
    assert res.adequacy.verdict == "adequate" and res.adequacy.floor_source == "shooting"
    named = ("constant torque bias", "sensor filter", "acts later", "torque's white noise")  # evaluate/torque_residual.py
    assert not any(w in m for m in res.adequacy.messages for w in named), res.adequacy.messages
    v = res.values
    assert int(v["delay"]) == DELAY  # exactly
    arm_err = np.abs(np.asarray(v["armature"]) - TRUTH.armature) / TRUTH.armature
    vis_err = np.abs(np.asarray(v["viscous"]) - TRUTH.viscous) / TRUTH.viscous
    fr_err = np.abs(np.asarray(v["friction"]) - TRUTH.friction) / TRUTH.friction
    print(f"\ntorque-replay twin: armature err {np.round(100 * arm_err, 1)} %, viscous {np.round(100 * vis_err, 1)} %, "
          f"Coulomb {np.round(100 * fr_err, 1)} %")
    assert np.median(arm_err) < 0.05 and np.median(vis_err) < 0.15 and np.median(fr_err) < 0.15
    # intervals (the export's): every truth inside its 95 % interval, none of zero width
    from isaaclab_sysid.export.build import FitContext, intervals_for

    ctx = FitContext.load(run_dir)
    rep = intervals_for(ctx, log=lambda s: None)
    truth = {"armature": TRUTH.armature, "friction": TRUTH.friction, "viscous": TRUTH.viscous}
    joints = list(ctx.space.joint_names)
    inside, total = 0, 0
    for iv in rep.chosen().intervals:
        if iv.group in truth:
            t = truth[iv.group][joints.index(iv.joint)]
            lo = -np.inf if iv.lower is None else iv.lower
            hi = np.inf if iv.upper is None else iv.upper
            total += 1
            inside += int(lo <= t <= hi)
            assert hi > lo
    print(f"  truths inside their 95 % intervals: {inside}/{total}")
    assert total == 21 and inside == 21
    ev = json.loads((run_dir / "eval_result.json").read_text())
    held = ev["runs"]["heldout_multisine"]["fitted"]
    print(f"  held-out (other gains and waveform) window q RMS {held['q_rms_all_mrad']:.3f} mrad against a drift "
          f"floor of {res.adequacy.floor_mrad:.3f} mrad")
    assert held["q_rms_all_mrad"] < 2.0 * res.adequacy.floor_mrad
    # --eval_params scores the result window by window on another run, without fitting
    out = run_fit(_args(held_csv, held_csv, tmp_path / "eval", heldout_csv=[],
                        eval_params=str(run_dir / "sysid_best_params.json")), log=lambda s: None)
    again = json.loads((out / "eval_result.json").read_text())["runs"]["heldout_multisine"]["fitted"]
    assert abs(again["q_rms_all_mrad"] - held["q_rms_all_mrad"]) < 1e-9
    # issue 28: every model scored window by window, on every window and on the windows where all stayed finite
    ws = json.loads((run_dir / "window_scores.json").read_text())["comparisons"]
    assert [c["title"] for c in ws] == ["fit runs", "held-out runs"]
    for c in ws:
        nom, fit = c["models"]["nominal"], c["models"]["fitted"]
        assert 0 < nom["common"]["windows"] == fit["common"]["windows"] <= nom["all"]["windows"]
        assert nom["common"]["diverged"] == fit["common"]["diverged"] == 0
        assert fit["common"]["q_pooled_mrad"] < nom["common"]["q_pooled_mrad"]
    assert "Window RMS, held-out runs" in (run_dir / "report.md").read_text()
    given = json.loads((out / "window_scores.json").read_text())["comparisons"][0]["models"]["given"]["all"]
    assert given["windows"] > 0 and np.isfinite(given["q_pooled_mrad"])


def test_bad_inputs_are_refused_before_any_simulation(twin_files, tmp_path, robot):
    fit_csv, held_csv, d = twin_files
    run = read_run(fit_csv)
    no_tau_j = dataclasses.replace(run, tau_J=np.full_like(run.tau_J, np.nan))
    with pytest.raises(TorqueRunError, match=r"column tau_J1: no torque recorded"):
        torque_run(no_tau_j, TorqueSource("tau_J", includes_gravity=True))
    with pytest.raises(TorqueRunError, match=r"--torque_signal current needs --drive_gains"):
        TorqueSource("current", includes_gravity=True)
    cases = [
        (dict(torque_signal=None), r"--replay torque needs --torque_signal"),
        (dict(torque_includes_gravity=None), r"--torque_includes_gravity or --no_torque_includes_gravity"),
        (dict(torque_signal="current"), r"--drive_gains"),
        (dict(window_s=9.0), r"shorter than --window_s 9"),
        (dict(num_envs=4000), r"> --max_batch_mb 4096"),
        (dict(backend="isaaclab"), r"--replay torque runs on --backend mujoco"),
        (dict(torque_clamp=True), r"--torque_clamp"),
        (dict(replay="controller", log_format="ur10e"), r"--log_format ur10e: .* add --replay torque"),
    ]
    for kw, msg in cases:
        with pytest.raises(FitError, match=msg) as exc:
            resolve_problem(_args(fit_csv, held_csv, tmp_path, **kw), log=lambda s: None)
        assert "\n" not in str(exc.value)
    # a run-format file has no motor current
    with pytest.raises(TorqueRunError, match="carry no motor current"):
        torque_run(run, TorqueSource("current", True, tuple([1.0] * 7)))


def test_noisy_torque_is_called_a_misfit(robot, tmp_path):
    """0.1 N m on the logged torque: the residual is over the drift floor (the floor has no torque noise in it) and the
    fit says so (misfit, every interval marked unreliable); the intervals carry the torque noise all the same (it was
    measured from the log and propagated: intervals/torque_input_noise.py), so every truth is inside. The delay holds.
    The window-cluster sandwich alone held 15/21 here: joint 6 three to six standard errors off."""
    fit_csv, held_csv, _ = _write_twin(robot, tmp_path, noise=0.1)
    run_dir = run_fit(_args(fit_csv, held_csv, tmp_path / "out", refine_iter=4), log=lambda s: None)
    res = FitResult.read(run_dir / "sysid_best_params.json")
    assert int(res.values["delay"]) == DELAY
    a = res.adequacy
    print(f"\nnoisy torque (0.1 N m): residual {a.residual_over_floor:.2f}x the drift floor; verdict {a.verdict}")
    assert a.verdict == "misfit" and a.residual_over_floor > 2.5
    assert any("errors in variables" in m for m in a.messages)
    # the verdict names the torque noise as what is missing from the floor, and no model term (evaluate/torque_residual.py)
    assert any("torque's white noise" in m for m in a.messages), a.messages
    assert not any("constant torque bias" in m or "sensor filter" in m or "acts later" in m for m in a.messages)
    from isaaclab_sysid.export.build import FitContext, intervals_for

    ctx = FitContext.load(run_dir)
    rep = intervals_for(ctx, log=lambda s: None)
    assert all(not iv.reliable for iv in rep.chosen().intervals if iv.group != "delay")
    truth = {"armature": TRUTH.armature, "friction": TRUTH.friction, "viscous": TRUTH.viscous}
    joints = list(ctx.space.joint_names)
    inside = [iv.lower <= truth[iv.group][joints.index(iv.joint)] <= iv.upper
              for iv in rep.chosen().intervals if iv.group in truth]
    print(f"  truths inside their 95 % intervals: {sum(inside)}/{len(inside)}")
    assert len(inside) == 21 and all(inside)
    assert any("logged torque's white noise" in w for w in rep.warnings)  # says why they are wider


def test_a_constant_torque_offset_is_recovered_within_its_interval(robot, tmp_path):
    """The logged torque carries a constant per-joint bias (a torque sensor's offset): the group torque_offset
    (the torque that acted is logged - offset) recovers every joint's offset inside its 95 % interval, and the
    replay applies exactly logged - offset (the same states as the unbiased log without the group)."""
    fit_csv, held_csv, _ = _write_twin(robot, tmp_path, offset=OFFSET, fit_s=4.0)
    # the backend: logged - offset is what acts
    run = torque_run(read_run(fit_csv), TorqueSource("tau", includes_gravity=False))
    clean = dataclasses.replace(run, tau=run.tau - OFFSET)
    be = MujocoBackend(robot, ReplayOptions(window_ticks=400), n_threads=2)
    terms = dict(armature=TRUTH.armature[None], friction=TRUTH.friction[None], viscous=TRUTH.viscous[None],
                 delay=np.array([DELAY]))
    a = be.rollout(CandidateBatch(**terms, torque_offset=OFFSET[None]), [run])[0]
    b = be.rollout(CandidateBatch(**terms), [clean])[0]
    assert np.max(np.abs(a.q - b.q)) < 1e-12 and np.max(np.abs(a.tau - b.tau)) < 1e-12
    out = run_fit(_args(fit_csv, held_csv, tmp_path / "out", fit_groups="armature,friction,viscous,delay,torque_offset",
                        torque_offset_bounds=(-1.0, 1.0)), log=lambda s: None)
    res = FitResult.read(out / "sysid_best_params.json")
    assert int(res.values["delay"]) == DELAY
    off = np.asarray(res.values["torque_offset"])
    from isaaclab_sysid.export.build import FitContext, intervals_for

    ctx = FitContext.load(out)
    rep = intervals_for(ctx, log=lambda s: None)
    joints = list(ctx.space.joint_names)
    ivs = [iv for iv in rep.chosen().intervals if iv.group == "torque_offset"]
    print(f"\noffset fitted {np.round(off, 4)} N m, truth {OFFSET}")
    print("  95 % intervals: " + ", ".join(f"[{iv.lower:.3f}, {iv.upper:.3f}]" for iv in ivs))
    assert len(ivs) == 7
    for iv in ivs:
        t = OFFSET[joints.index(iv.joint)]
        assert iv.lower is not None and iv.upper is not None and iv.lower < t < iv.upper, (iv.joint, t, iv)
        assert iv.upper - iv.lower < 0.2  # informative: narrower than the offsets themselves span
    assert not [h for h in res.at_bounds() if h.group == "torque_offset"]


def test_seed_fit_carries_the_ls_offsets_into_the_torque_offset_start(robot, tmp_path):
    """seed_fit.py: the LS offset column (logged = model + offset) seeds torque_offset with its sign; the fit's start
    point takes it when the group is fitted."""
    from isaaclab_sysid.fit.problem import build_space, dropped_groups_line, start_point
    from isaaclab_sysid.rigid_body.fit_seed import build_seed, write_seed
    from isaaclab_sysid.robots.identified import RbParams

    names = robot.joint_names
    std = {f"{j}.{t}": v for j in names for t, v in (("armature", 0.1), ("coulomb", 0.2), ("viscous", 0.3))}
    std.update({f"{j}.offset": float(o) for j, o in zip(names, OFFSET)})
    p = tmp_path / "rb_params.json"
    RbParams.write(p, {"robot": robot.name, "output": {"signal": "tau_J", "unit": "N m"},
                       "base_parameters": {"names": ["a"], "qr": {"n_samples": 10, "seed": 0, "tol": 1e-8}},
                       "reconstruction": {"standard": std}})
    seed = build_seed(p, names)
    assert np.allclose(seed.values["torque_offset"], OFFSET) and "torque_offset" in seed.sources
    path = write_seed(tmp_path / "seed.json", seed)
    args = FitArgs.build(real_csv=["x.csv"], fit_groups="armature,friction,viscous,delay,torque_offset",
                         torque_offset_bounds=(-1.0, 1.0))
    space = build_space(args.problem, names)
    lines: list[str] = []
    x = start_point(str(path), space, log=lines.append)
    assert np.allclose(space.decode(x)["torque_offset"], OFFSET) and not lines
    # without the group the file's offsets are not used, and the fit says so (never dropped silently)
    plain = build_space(FitArgs.build(real_csv=["x.csv"], fit_groups="armature,friction,viscous,delay").problem, names)
    start_point(str(path), plain, log=lines.append)
    assert len(lines) == 1 and "holds torque_offset" in lines[0] and "needs torque_offset in --fit_groups" in lines[0]
    # another friction law's start (seed_fit.py writes the sigmoid's beside Coulomb's) is said to be that law's
    both = dropped_groups_line("seed.json", ["sigmoid_amplitude", "sigmoid_slope", "torque_offset"])
    assert "holds torque_offset, which --fit_groups does not fit" in both and "sigmoid_amplitude, which" not in both
    assert "the sigmoid friction law's start (sigmoid_amplitude, sigmoid_slope)" in both and "\n" not in both
    # an identification without the offset column seeds no offset (the fit starts at zero offset)
    RbParams.write(p, {"robot": robot.name, "output": {"signal": "tau_J", "unit": "N m"},
                       "base_parameters": {"names": ["a"], "qr": {"n_samples": 10, "seed": 0, "tol": 1e-8}},
                       "reconstruction": {"standard": {k: v for k, v in std.items() if not k.endswith(".offset")}}})
    assert "torque_offset" not in build_seed(p, names).values
    with pytest.raises(FitError, match="--replay torque only"):
        resolve_problem(FitArgs.build(real_csv=["x.csv"], fit_groups="armature,torque_offset"), log=lambda s: None)


def test_the_torque_noise_is_measured_from_the_log(robot):
    """objective/torque_noise.py: the white part of a logged torque from its first differences, within 5 % on a smooth
    torque plus 0.02 / 0.05 / 0.1 N m; on the twin's log it measures the sensor noise added on top of the real
    torque's own high-frequency content (the stiff loop's response to its encoder noise)."""
    from isaaclab_sysid.objective.torque_noise import torque_noise, white_noise_std

    t = np.arange(0.0, 8.0, 1e-3)
    smooth = np.stack([5 * np.sin(2 * np.pi * 0.7 * t) + 3 * np.sin(2 * np.pi * 3.1 * t), 30 * np.sin(2 * np.pi * 1.3 * t)], 1)
    rng = np.random.default_rng(3)
    assert np.all(white_noise_std(smooth) < 2e-3)
    for sigma in (0.02, 0.05, 0.1):
        est = white_noise_std(smooth + sigma * rng.standard_normal(smooth.shape))
        assert np.all(np.abs(est / sigma - 1) < 0.05), (sigma, est)
    target = joint_target(robot, 3.0, seed=11)
    quiet, noisy = (_torque_logged(robot, target, seed=1, noise=s) for s in (0.0, 0.1))
    a, b = torque_noise([quiet]), torque_noise([noisy])
    assert np.all(np.abs(np.sqrt(np.maximum(b**2 - a**2, 0)) / 0.1 - 1) < 0.1), (a, b)
