"""The Franka tooling's run format (schema 2): read as recorded, mapped onto Run, replayed and fitted.

The fixtures are written here from the format's public description (literal column names), not
with the package's writer; the twin tests use ``write_franka_run`` and check the round trip.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from isaaclab_sysid.data import RunFormatError, read_run, write_run
from isaaclab_sysid.data.formats.franka_v2 import read_franka_pieces, write_franka_run
from isaaclab_sysid.data.run import ImpedanceLaw
from isaaclab_sysid.jobs.fit_args import FitArgs
from isaaclab_sysid.objective.errors import FitError
from isaaclab_sysid.jobs.fit_job import run_fit
from isaaclab_sysid.jobs.fit_args import resolve_problem
from isaaclab_sysid.objective.result import FitResult
from isaaclab_sysid.robots import load_robot
from isaaclab_sysid.twin.demo import task_target
from isaaclab_sysid.twin.params import TwinNoise, TwinParams
from isaaclab_sysid.twin.recorder import record_twin, true_batch, twin_backend

N = 7
Q0 = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
COLS = (["t_s", "period_ms"] + [f"q{i}" for i in range(1, 8)] + [f"dq{i}" for i in range(1, 8)]
        + ["x_x", "x_y", "x_z", "quat_x", "quat_y", "quat_z", "quat_w"]
        + ["x_des_x", "x_des_y", "x_des_z", "dx_des_x", "dx_des_y", "dx_des_z"]
        + ["quat_des_x", "quat_des_y", "quat_des_z", "quat_des_w"]
        + [f"tau{i}" for i in range(1, 8)] + [f"tau_J{i}" for i in range(1, 8)])
TARGET_COLS = ["target_idx", "head", "seq_effective", "x_des_x", "x_des_y", "x_des_z",
               "quat_des_x", "quat_des_y", "quat_des_z", "quat_des_w"]
FLAGS = dict(orientation_error="quat_vec", coriolis_compensation=True, ee_offset=(0.0, 0.0, 0.0),
             torque_limit=(87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0), torque_rate_limit=(800.0,))


def _sidecar(n: int, ring: dict | None = None, **over) -> dict:
    side = {
        "schema_version": 2, "ring_log": ring, "controller": "python_v4_chirp_excitation", "control_rate_hz": 50,
        "duration_s": n / 50, "num_samples": n, "q_init": Q0, "x_anchor": [0.307, 0.0, 0.59],
        "q_anchor_xyzw": [1.0, 0.0, 0.0, 0.0],
        "args": {"kp_pos": 200.0, "kp_ori": 20.0, "kd_pos": 28.3, "kd_ori": 8.9, "rate": 50, "mode": "chirp",
                 "band": "low", "future_option": [1, 2]},
        "abort": {"code": 0, "name": "NONE", "value": None, "time_s": None},
        "summary": {"max_tau_J_frac": 0.27},
        "host": "fr3-lab", "shm_version": 3, "git": {"sha": "abc"},  # extra keys: ignored
    }
    side.update(over)
    return side


def _rows(n: int, rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    q = np.asarray(Q0) + 0.02 * rng.standard_normal((n, N))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)) + 0.01 * rng.standard_normal((n, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    qd = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    return np.column_stack([t, np.full(n, 20.0), q, rng.standard_normal((n, N)), rng.standard_normal((n, 3)), quat,
                            np.tile([0.3, 0.0, 0.5], (n, 1)), np.zeros((n, 3)), qd,
                            rng.standard_normal((n, N)), rng.standard_normal((n, N))])


def _write_csv(path: Path, cols: list[str], data: np.ndarray) -> None:
    path.write_text(",".join(cols) + "\n" + "\n".join(",".join(repr(float(v)) for v in r) for r in data) + "\n")


def write_50hz(tmp: Path, n: int = 30, **over) -> tuple[Path, Path, np.ndarray]:
    data = _rows(n, np.random.default_rng(0), np.arange(n) / 50)
    csv, side = tmp / "run50.csv", tmp / "run50.json"
    _write_csv(csv, COLS, data)
    side.write_text(json.dumps(_sidecar(n, **over)))
    return csv, side, data


def write_ring(tmp: Path, n: int = 100, seq0: int = 7000, gap: tuple[int, int] | None = None):
    """A ring log: n frames from seq0, targets every 20 ticks (first effective at seq0 + 3), rows before it -1."""
    rng = np.random.default_rng(1)
    seq = np.arange(seq0, seq0 + n)
    if gap is not None:
        seq = seq[(seq < gap[0]) | (seq > gap[1])]
    eff = np.arange(seq0 + 3, seq0 + n, 20)
    k = len(eff)
    x_t = np.column_stack([0.3 + 0.01 * np.arange(k), np.zeros(k), np.full(k, 0.5)])
    qt = np.column_stack([np.ones(k), 0.01 * np.arange(k), np.zeros(k), np.zeros(k)])
    qt /= np.linalg.norm(qt, axis=1, keepdims=True)
    tidx = np.searchsorted(eff, seq, side="right") - 1
    data = _rows(len(seq), rng, (seq - seq0) / 1000.0)
    c = {name: i for i, name in enumerate(COLS)}
    before = np.array([0.3, 0.0, 0.49, 1.0, 0.0, 0.0, 0.0])
    for j, name in enumerate(["x_des_x", "x_des_y", "x_des_z", "quat_des_x", "quat_des_y", "quat_des_z", "quat_des_w"]):
        vals = np.concatenate([x_t, qt], axis=1)[:, j]
        data[:, c[name]] = np.where(tidx >= 0, vals[np.maximum(tidx, 0)], before[j])
    data[:, c["period_ms"]] = 1.0
    data = np.column_stack([data, seq, tidx])
    csv, side = tmp / "ring.csv", tmp / "ring.json"
    _write_csv(csv, COLS + ["seq", "target_idx"], data)
    _write_csv(tmp / "ring_targets.csv", TARGET_COLS,
               np.column_stack([np.arange(k), np.arange(k) % 64, eff, x_t, qt]))
    gaps = [] if gap is None else [list(gap)]
    ring = {"num_frames": len(seq), "seq_first": int(seq[0]), "seq_last": int(seq[-1]), "num_targets": k,
            "gaps": gaps, "dropped_frames": 0 if gap is None else gap[1] - gap[0] + 1, "resets": 0, "poll_hz": 100}
    side.write_text(json.dumps(_sidecar(k, ring=ring)))
    return csv, side, data, eff, np.concatenate([x_t, qt], axis=1)


# --------------------------------------------------------------------- reading
def test_50hz_log_read_as_recorded(tmp_path):
    csv, _, data = write_50hz(tmp_path)
    run = read_run(csv)
    c = {name: i for i, name in enumerate(COLS)}
    assert run.meta.controller == "task_impedance" and run.meta.log_rate_hz == 50 and not run.is_1khz
    np.testing.assert_array_equal(run.q, data[:, c["q1"]:c["q7"] + 1])
    np.testing.assert_array_equal(run.ee_quat, data[:, c["quat_x"]:c["quat_w"] + 1])
    np.testing.assert_array_equal(run.tau_J, data[:, c["tau_J1"]:c["tau_J7"] + 1])
    np.testing.assert_array_equal(run.meta.kp, [200, 200, 200, 20, 20, 20])
    np.testing.assert_array_equal(run.meta.kd, [28.3, 28.3, 28.3, 8.9, 8.9, 8.9])
    np.testing.assert_array_equal(run.sample_ticks(), np.arange(30) * 20)  # row k at tick 20 k
    assert run.meta.impedance is None and "ee_offset" in run.meta.unrecorded
    assert run.meta.excitation == {"kind": "chirp", "controller": "python_v4_chirp_excitation"}
    # not replayable until the law is stated
    from isaaclab_sysid.sim.schedule import schedule_of

    with pytest.raises(ValueError, match="orientation_error"):
        schedule_of(run, N)
    schedule_of(run.with_law(ImpedanceLaw(orientation_error="quat_vec")), N)


def test_ring_log_read_as_recorded(tmp_path):
    csv, _, data, eff, targets = write_ring(tmp_path)
    run = read_run(csv)
    assert run.is_1khz and run.meta.control_rate_hz == 50
    np.testing.assert_array_equal(run.tick, data[:, -2].astype(int))
    ticks, values = run.setpoints()
    # rows before the first target hold the setpoint in force from the log's start; then the schedule
    np.testing.assert_array_equal(ticks, np.concatenate([[0], eff - 7000]))
    np.testing.assert_array_equal(values[1:], targets)
    np.testing.assert_array_equal(values[0], [0.3, 0.0, 0.49, 1.0, 0.0, 0.0, 0.0])


def test_ring_log_gaps_refused_or_split(tmp_path):
    csv, side, *_ = write_ring(tmp_path, n=120, gap=(7050, 7054))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    assert exc.value.file == str(side) and "7050-7054" in str(exc.value) and "split" in str(exc.value)
    pieces = read_franka_pieces(csv, split_at_gaps=True)
    assert [p.name for p in pieces] == ["ring_part1", "ring_part2"]
    assert pieces[0].tick[-1] == 7049 and pieces[1].tick[0] == 7055
    np.testing.assert_array_equal(pieces[1].meta.q_init, pieces[1].q[0])
    # the second piece starts inside a setpoint taken before it: moved to its start
    assert pieces[1].setpoints()[0][0] == 0


def test_abort_refused_then_admitted_truncated(tmp_path):
    csv, side, data = write_50hz(tmp_path, abort={"code": 3, "name": "TRACKING_ERROR", "value": 0.11, "time_s": 0.3})
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    msg = str(exc.value)
    assert exc.value.column == "abort.code" and "TRACKING_ERROR" in msg and "0.3 s" in msg and "--admit_aborted" in msg
    run = read_run(csv, admit_abort=True)
    assert run.n_samples == 15 and run.t[-1] < 0.3  # rows before the abort time
    assert run.meta.summary["abort_truncated"]["rows"] == 30


def test_tau_J_nan_column_is_allowed(tmp_path):
    csv, side, data = write_50hz(tmp_path)
    c = COLS.index("tau_J1")
    data[:, c:c + 7] = np.nan
    _write_csv(csv, COLS, data)
    run = read_run(csv)
    assert np.isnan(run.tau_J).all() and "tau_J" in run.meta.summary


# ----------------------------------------------------------------- bad input
def _err(fn, file, row, column, match):
    with pytest.raises(RunFormatError) as exc:
        fn()
    e = exc.value
    assert (e.file, e.row, e.column) == (str(file), row, column), str(e)
    assert match in str(e) and "\n" not in str(e)


def _edit(side: Path, fn) -> None:
    raw = json.loads(side.read_text())
    fn(raw)
    side.write_text(json.dumps(raw))


def test_bad_50hz_logs(tmp_path):
    csv, side, data = write_50hz(tmp_path)
    _write_csv(csv, COLS[:-1] + ["tau_J8"], data)
    _err(lambda: read_run(csv), csv, 1, "tau_J7", "missing column")
    _write_csv(csv, COLS + ["extra"], np.column_stack([data, data[:, 0]]))
    _err(lambda: read_run(csv), csv, 1, "extra", "unexpected column")
    bad = data.copy()
    bad[4, COLS.index("dq3")] = np.inf
    _write_csv(csv, COLS, bad)
    _err(lambda: read_run(csv), csv, 6, "dq3", "non-finite")
    bad = data.copy()
    bad[7, 0] = bad[6, 0]
    _write_csv(csv, COLS, bad)
    _err(lambda: read_run(csv), csv, 9, "t_s", "duplicated time stamp")
    bad = data.copy()
    bad[3, COLS.index("quat_w")] = 3.0
    _write_csv(csv, COLS, bad)
    _err(lambda: read_run(csv), csv, 5, "quat_w", "non-unit quaternion")
    bad = data.copy()
    bad[2, COLS.index("q4")] = 40.0
    _write_csv(csv, COLS, bad)
    _err(lambda: read_run(csv), csv, 4, "q4", "outside joint limits")
    _write_csv(csv, COLS, data)
    csv.write_text(csv.read_text()[:-40])  # truncated last line
    n_fields = len(csv.read_text().split("\n")[30].split(","))
    _err(lambda: read_run(csv), csv, 31, COLS[n_fields], "truncated last line")
    _write_csv(csv, COLS, data)
    _edit(side, lambda r: r.update(num_samples=31))
    _err(lambda: read_run(csv), csv, 32, "t_s", "num_samples=31")
    _edit(side, lambda r: r.update(num_samples=30, control_rate_hz=30))
    _err(lambda: read_run(csv), side, None, "control_rate_hz", "must divide 1000")
    _edit(side, lambda r: (r.update(control_rate_hz=50), r["args"].update(kp_ori=0)))
    _err(lambda: read_run(csv), side, None, "args.kp_ori", "positive")
    _edit(side, lambda r: (r["args"].update(kp_ori=20), r.update(q_anchor_xyzw=[1, 1, 0, 0])))
    _err(lambda: read_run(csv), side, None, "q_anchor_xyzw", "unit quaternion")
    _edit(side, lambda r: r.update(q_anchor_xyzw=[1, 0, 0, 0], schema_version=3))
    _err(lambda: read_run(csv), side, None, "schema_version", "supported: 1, 2")


def test_bad_ring_logs(tmp_path):
    csv, side, data, eff, targets = write_ring(tmp_path)
    tg = tmp_path / "ring_targets.csv"
    cols = COLS + ["seq", "target_idx"]
    bad = data.copy()
    bad[10, -2] = bad[9, -2]
    bad[10, 0] = bad[9, 0]
    _write_csv(csv, cols, bad)
    _err(lambda: read_run(csv), csv, 12, "seq", "does not follow")
    bad = data.copy()
    bad[40, cols.index("x_des_y")] += 0.01
    _write_csv(csv, cols, bad)
    _err(lambda: read_run(csv), csv, 42, "x_des_y", "differs from target")
    bad = data.copy()
    bad[50, -1] = 99
    _write_csv(csv, cols, bad)
    _err(lambda: read_run(csv), csv, 52, "target_idx", "not a row of ring_targets.csv")
    _write_csv(csv, cols, data)
    _edit(side, lambda r: r["ring_log"].update(num_frames=99))
    _err(lambda: read_run(csv), csv, 101, "seq", "num_frames=99")
    _edit(side, lambda r: r["ring_log"].update(num_frames=100, gaps=[[7010, 7011]]))
    _err(lambda: read_run(csv), csv, 2, "seq", "differ from the sidecar's ring_log.gaps")
    _edit(side, lambda r: r["ring_log"].update(gaps=[]))
    lines = tg.read_text().split("\n")
    lines[3] = lines[3].replace(lines[3].split(",")[-1], "2.0")
    tg.write_text("\n".join(lines))
    _err(lambda: read_run(csv), tg, 4, "quat_des_w", "non-unit quaternion")
    tg.unlink()
    _err(lambda: read_run(csv), tg, None, "-", "not found")


# --------------------------------------------------------------- the twin
@pytest.fixture(scope="module")
def robot():
    return load_robot("franka_panda")


def _params(delay=2):
    return TwinParams(robot="franka_panda", armature=np.array([0.3, 0.25, 0.2, 0.15, 0.07, 0.06, 0.03]),
                      friction=np.array([0.6, 0.5, 0.45, 0.4, 0.2, 0.18, 0.1]),
                      viscous=np.array([0.4, 0.35, 0.3, 0.25, 0.1, 0.08, 0.05]), delay=delay,
                      friction_model="coulomb", substeps=1, noise=TwinNoise())


LAW = ImpedanceLaw(orientation_error="quat_vec", coriolis_compensation=True)


@pytest.fixture(scope="module")
def twin(robot):
    target = task_target(robot, "multiband", 1.5, 200.0, 20.0, seed=5, name="twin_v2", law=LAW)
    return record_twin(robot, target, _params(), seed=0, log_rate_hz=1000.0)


@pytest.mark.parametrize("ring", [True, False])
def test_twin_in_schema2_replays_the_twin(robot, twin, tmp_path, ring):
    run = twin
    if not ring:  # the 50 Hz log of the same twin: every 20th row
        import dataclasses

        rows = np.arange(0, twin.n_samples, 20)
        take = lambda a: None if a is None else a[rows]  # noqa: E731
        meta = dataclasses.replace(twin.meta, log_rate_hz=50.0, num_samples=len(rows))
        run = dataclasses.replace(twin, meta=meta, **{f: take(getattr(twin, f)) for f in
                                  ("t", "q", "dq", "ee_pos", "ee_quat", "tau", "tau_J", "x_des", "quat_des")},
                                  tick=None, setpoint_tick=None)
    write_franka_run(run, tmp_path / "twin_v2.csv", extra={"operator": "test"})
    back = read_run(tmp_path / "twin_v2.csv")
    assert back.is_1khz == ring
    for f in ("q", "dq", "ee_pos", "ee_quat", "tau", "tau_J"):
        np.testing.assert_array_equal(getattr(back, f), getattr(run, f))
    for a, b in zip(back.setpoints(), run.setpoints()):
        np.testing.assert_array_equal(a, b)
    out = twin_backend(robot, _params()).rollout(true_batch(_params()), [back.with_law(LAW)])[0]
    np.testing.assert_allclose(out.q[0], run.q, atol=1e-12, rtol=0)


def _fit(csv: Path, log_dir: Path, **flags) -> FitResult:
    args = FitArgs.build(real_csv=[str(csv)], num_envs=4, max_iter=2, refine_iter=0, plots=False, quiet=True,
                         log_dir=str(log_dir), **flags)
    out = run_fit(args, log=lambda s: None)
    return FitResult.read(out / "sysid_best_params.json"), json.loads((out / "config.json").read_text())


def test_same_twin_in_schema1_and_schema2_gives_the_same_fit(twin, tmp_path):
    write_run(twin, tmp_path / "s1" / "twin.csv")
    write_franka_run(twin, tmp_path / "s2" / "twin.csv")
    with pytest.raises(FitError) as exc:
        resolve_problem(FitArgs.build(real_csv=[str(tmp_path / "s2" / "twin.csv")]), log=lambda s: None)
    msg = str(exc.value)
    for flag in ("--orientation_error", "--coriolis_compensation", "--ee_offset", "--torque_limit", "--torque_rate_limit"):
        assert flag in msg
    r1, c1 = _fit(tmp_path / "s1" / "twin.csv", tmp_path / "logs1", **FLAGS)
    r2, c2 = _fit(tmp_path / "s2" / "twin.csv", tmp_path / "logs2", **FLAGS)
    np.testing.assert_array_equal(r1.best_x, r2.best_x)
    assert r1.best_score == r2.best_score
    # config.json states the EE point and the limits used
    assert c2["problem"]["replay"]["ee_offset"] == [0.0, 0.0, 0.0]
    assert c2["problem"]["replay"]["torque_rate_limit"] == [800.0] * 7 and c2["problem"]["replay"]["slew_limit"] is True


def test_ee_point_of_the_real_controller_matters_and_is_recorded(robot, tmp_path):
    """The new user's case: the twin's controller acts at the TCP (hand + 0.1034 m)."""
    tcp = robot.with_real_controller(ee_offset=(0.0, 0.0, 0.1034))
    target = task_target(tcp, "multiband", 2.0, 200.0, 20.0, seed=2, name="tcp", law=LAW)
    run = record_twin(tcp, target, _params(), seed=0, log_rate_hz=1000.0)
    write_franka_run(run, tmp_path / "tcp.csv")
    back = read_run(tmp_path / "tcp.csv").with_law(LAW)
    rms = {}
    for name, rb in (("hand", robot), ("tcp", tcp)):
        out = twin_backend(rb, _params()).rollout(true_batch(_params()), [back])[0]
        rms[name] = float(np.sqrt(np.mean((out.q[0] - run.q) ** 2)))
    assert rms["tcp"] < 1e-9 and rms["hand"] > 1e-3, rms
    args = FitArgs.build(real_csv=[str(tmp_path / "tcp.csv")], **{**FLAGS, "ee_offset": (0.0, 0.0, 0.1034)})
    lines: list[str] = []
    problem = resolve_problem(args, log=lines.append)
    assert problem.robot.config.ee_offset == (0.0, 0.0, 0.1034)
    assert any("EE frame: panda_hand + [0, 0, 0.1034] m (--ee_offset)" in s for s in lines)
    assert args.to_dict()["replay"]["ee_offset"] == [0.0, 0.0, 0.1034]


def test_result_file_keeps_the_tooling_keys(twin, tmp_path):
    """apply_sysid_params.py of the Franka tooling reads best_score and best_params_decoded (per-joint lists,
    motor_delay_steps): the keys of the tooling's replay."""
    write_franka_run(twin, tmp_path / "twin.csv")
    args = FitArgs.build(real_csv=[str(tmp_path / "twin.csv")], num_envs=4, max_iter=1, refine_iter=0, plots=False,
                         quiet=True, log_dir=str(tmp_path / "logs"), **FLAGS)
    out = run_fit(args, log=lambda s: None)
    raw = json.loads((out / "sysid_best_params.json").read_text())
    assert isinstance(raw["best_score"], float)
    dec = raw["best_params_decoded"]
    for key in ("armature", "friction", "viscous"):
        assert isinstance(dec[key], list) and len(dec[key]) == N and all(isinstance(v, float) for v in dec[key])
    assert isinstance(dec["motor_delay_steps"], int) and 0 <= dec["motor_delay_steps"] <= 4


def test_validate_runs_reports_schema2_and_writes_split_pieces(tmp_path, capsys):
    from conftest import load_script

    vr = load_script("validate_runs")
    csv50, *_ = write_50hz(tmp_path)
    ring, *_ = write_ring(tmp_path, n=120, gap=(7050, 7054))
    assert vr.main(vr.Args(files=(csv50, ring))) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"OK {csv50} (30 rows, task_impedance, 50 Hz, schema 2") and "--ee_offset" in out[0]
    assert out[1].startswith("FAIL ") and "ring_log.gaps" in out[1]
    assert vr.main(vr.Args(files=(ring,), split_at_gaps=True, split_out=tmp_path / "pieces")) == 0
    piece = read_run(tmp_path / "pieces" / "ring_part2.csv")
    assert piece.meta.impedance is None and "torque_limit" in piece.meta.unrecorded and piece.tick[0] == 7055


def test_preflight_reads_a_schema2_run_with_the_stated_law(twin, tmp_path, capsys):
    """The excitation pre-flight reads the tooling's logs directly: refused naming the flags, then run with them."""
    from conftest import load_script

    write_franka_run(twin, tmp_path / "twin.csv")
    pf = load_script("preflight")
    args = dict(run=tmp_path / "twin.csv", out_dir=tmp_path, identifiability=False, replay=True)
    assert pf.main(pf.Args(**args)) == 2
    err = capsys.readouterr().err
    assert "--orientation_error" in err and "--ee_offset" in err and len(err.strip().splitlines()) == 1
    assert pf.main(pf.Args(**args, **FLAGS)) == 0
    assert (tmp_path / "twin_preflight.json").is_file()
