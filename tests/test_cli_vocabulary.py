"""One CLI vocabulary (utils/cli.VOCABULARY): every script that reads recorded runs takes ``--runs`` (and
``--heldout`` where it scores held-out runs), every script that writes takes ``--out``, a logged torque is
``--torque_signal``; an older spelling still works and is named once on stderr; a user error reached through the
shared options is one ``error:`` line on stderr and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from isaaclab_sysid.objective.param_space import GROUPS
from isaaclab_sysid.utils.cli import VOCABULARY, vocabulary_argv

REPO = Path(__file__).resolve().parents[1]
MISSING = "/nonexistent/run.csv"
RUNS = sorted(str(p) for p in (REPO / "data" / "real_runs").glob("*.csv"))

#: script -> (the vocabulary flags it takes, an argv that reaches a user error through them; {tmp}: a scratch folder)
TAKES: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "fit.py": (("--runs", "--heldout", "--out", "--torque_signal"), ["--runs", MISSING, "--out", "{tmp}"]),
    "sysid_franka_osc.py": (("--runs", "--heldout", "--out", "--torque_signal"),
                            ["--runs", RUNS[0], "--heldout", MISSING, "--out", "{tmp}"]),
    "identify_rigid_body.py": (("--runs", "--heldout", "--out", "--torque_signal"),
                               ["--runs", MISSING, "--out", "{tmp}"]),
    "refine_inertials.py": (("--runs", "--heldout", "--out"),
                            ["--rb_params", "/nonexistent/rb_params.json", "--runs", MISSING, "--delay", "2",
                             "--out", "{tmp}"]),
    "identify_contact.py": (("--runs", "--out"), ["fit", "--runs", MISSING, "--out", "{tmp}"]),
    "identify_payload.py": (("--runs", "--out", "--torque_signal"), ["fit", "--runs", MISSING, "--out", "{tmp}"]),
    "preflight.py": (("--runs", "--out"), ["--runs", MISSING, "--out", "{tmp}"]),
    "track_friction.py": (("--runs", "--out", "--torque_signal"), ["--runs", MISSING, "--out", "{tmp}"]),
    "validate_runs.py": (("--runs", "--out"), ["--out", "{tmp}"]),  # no run given is the user error
    "import_runs.py": (("--out",), [MISSING, "--format", "table", "--mapping", "/nonexistent/map.yaml", "--out", "{tmp}"]),
    "gen_chirp_traj.py": (("--out",), ["--q_init", "0", "0", "--out", "{tmp}"]),
    "gen_excitation_traj.py": (("--out",), ["--q_init", "0", "0", "--out", "{tmp}"]),
    "gen_fourier_traj.py": (("--out",), ["--q_init", "0", "0", "--out", "{tmp}"]),
    "gen_servo_traj.py": (("--out",), ["--f_min_hz", "0.5", "--f_max_hz", "0.6", "--duration_s", "5", "--fade_s", "1",
                                       "--out", "{tmp}"]),
    "record_twin.py": (("--out",), ["--target_run", MISSING, "--out", "{tmp}"]),
    "record_friction_twin.py": (("--out",), ["--session_s", "-1", "--out", "{tmp}"]),
    "seed_fit.py": (("--out",), ["--rb_params", "/nonexistent/rb_params.json", "--out", "{tmp}/seed.json"]),
    "check_export.py": (("--out",), ["--fit_dir", "/nonexistent/fit", "--out", "{tmp}"]),
    "export_dr.py": (("--out",), ["--fit_dir", "/nonexistent/fit", "--out", "{tmp}"]),
}
#: scripts that take none of the shared options, and why
TAKES_NONE = {
    "compute_intervals.py": "writes intervals.json into the fit folder it reads (--fit_dir), beside the fit's answer",
    "demo.py": "runs the bundled runs with fixed settings",
}


def _run(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / script), *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_every_script_is_listed():
    scripts = {p.name for p in (REPO / "scripts").glob("*.py")}
    assert scripts == set(TAKES) | set(TAKES_NONE)
    assert all(f in VOCABULARY for flags, _ in TAKES.values() for f in flags)


@pytest.mark.parametrize("script", sorted(TAKES))
def test_the_shared_options_reach_a_user_error_in_one_line(script, tmp_path):
    flags, argv = TAKES[script]
    sub = [argv[0]] if script in ("identify_contact.py", "identify_payload.py") else []
    helptext = _run(script, [*sub, "--help"], tmp_path).stdout
    for f in flags:
        assert f in helptext, f"{script} --help does not name {f}"
    proc = _run(script, [a.format(tmp=tmp_path / "out") for a in argv], tmp_path)
    err = proc.stderr.splitlines()
    assert proc.returncode == 2, f"exit {proc.returncode}; stderr: {proc.stderr[-2000:]}"
    assert len(err) == 1 and err[0].startswith("error: "), proc.stderr[-2000:]
    if MISSING in argv and script != "import_runs.py":
        assert MISSING in err[0], err[0]


def test_an_older_spelling_works_and_is_named_once(tmp_path):
    proc = _run("sysid_franka_osc.py", ["--real_csv", MISSING, "--real_csv", MISSING, "--log_dir", str(tmp_path)],
                tmp_path)
    err = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert err[:2] == ["note: --real_csv is spelled --runs now; the old spelling still works",
                       "note: --log_dir is spelled --out now; the old spelling still works"], err
    assert len(err) == 3 and err[2].startswith("error: ") and MISSING in err[2], err


def test_vocabulary_argv_spreads_values_drops_positional_flags_and_keeps_the_rest():
    notes: list[str] = []
    argv = ["--real-csv", "a.csv", "b.csv", "--heldout", "c.csv", "--x0", "-1", "--out=o", "--runs", "d.csv"]
    got = vocabulary_argv(argv, {"--real_csv": "--runs"}, ("--runs", "--heldout"), warn=notes.append)
    assert got == ["--runs", "a.csv", "--runs", "b.csv", "--heldout", "c.csv", "--x0", "-1", "--out=o",
                   "--runs", "d.csv"]
    assert notes == ["note: --real-csv is spelled --runs now; the old spelling still works"]
    assert vocabulary_argv(["--runs", "a", "b", "--out", "x"], {}, positional=("--runs",)) == ["a", "b", "--out", "x"]
    assert vocabulary_argv(["--runs=a", "--strict"], {}, positional=("--runs",)) == ["a", "--strict"]


def test_fit_help_names_every_group():
    helptext = subprocess.run([sys.executable, str(REPO / "scripts" / "fit.py"), "--help"], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "COLUMNS": "400"}).stdout
    missing = [g for g in GROUPS if g not in helptext]
    assert not missing, f"--fit_groups' help does not name {missing}"
