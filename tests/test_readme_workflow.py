"""The README executes: every command of "The workflow on your arm", taken from README.md itself, runs
in order on the bundled runs with small budgets, and each step finds what the step before it wrote.

The commands are extracted from the file (not retyped here): a README command that stops working fails
this test. What stands in for the user's own files is one table, ``STAND_INS`` (docs/twin.md lists it
too); the budgets are appended per script (``BUDGETS``: only sizes, never a different model). Every path
under ``logs/`` is moved into the test's own folder, and ``<ts>`` is the folder the step-4 fit wrote.
Commands on the real UR10e logs in ``../shared`` run when that folder is there and are reported skipped
when it is not.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "real_runs"
SHARED = ROOT.parent / "shared" / "data" / "ur10e"

#: what stands in for the user's own recordings: README token -> bundled files (the twin of docs/twin.md)
STAND_INS: dict[str, list[str]] = {
    # step 2: every recorded run
    "my_runs/*.csv": sorted(glob.glob(str(RUNS / "*.csv"))),
    # step 3: the joint-space Fourier designs of step 1 -> the twin's joint-space multisine and low chirp
    "my_runs/fourier_*.csv": [str(RUNS / "twin_joint_multisine_fit.csv"), str(RUNS / "twin_chirp_low_fit.csv")],
    # step 4: the two fit runs and the held-out run (a multiband at stiffer gains)
    "my_runs/chirp_low.csv": [str(RUNS / "twin_chirp_low_fit.csv")],
    "my_runs/fourier.csv": [str(RUNS / "twin_joint_multisine_fit.csv")],
    "my_runs/multiband.csv": [str(RUNS / "twin_heldout_multiband.csv")],
    # step 5: another recording (the held-out multiband's repeat: the 50 Hz log needs --state_age_ms, which
    # its sidecar does not state)
    "other.csv": [str(RUNS / "twin_heldout_multiband_repeat.csv")],
}

#: small budgets appended to each script's command (sizes only; the README's own flags are kept)
BUDGETS: dict[str, list[str]] = {
    "gen_fourier_traj.py": ["--max-iter", "10", "--restarts", "1"],
    "identify_rigid_body.py": ["--audit-grid", "2", "--audit-uniform", "100", "--audit-dense", "50", "--seeds", "0",
                               "--no-plots"],
    "sysid_franka_osc.py": ["--max_iter", "2", "--refine_iter", "2", "--num_envs", "8", "--no_plots"],
    "fit.py": ["--max_iter", "2", "--refine_iter", "2", "--num_envs", "8", "--no_plots"],
    "refine_inertials.py": ["--passes", "1", "--max-iter", "2", "--restarts", "0", "--audit-grid", "2",
                            "--audit-uniform", "100", "--audit-dense", "50", "--seeds", "0", "--threads", "2"],
}

#: the fit's two names (scripts/fit.py for every arm, scripts/sysid_franka_osc.py the documented one)
FIT_SCRIPTS = ("fit.py", "sysid_franka_osc.py")

#: flags whose value is where a command writes (not an input that an earlier step must have made)
OUTPUT_FLAGS = {"--out", "--out-dir", "--out_dir", "--log_dir", "--split_out"}


def workflow_commands(readme: str) -> list[str]:
    """The commands of the README's "The workflow on your arm" block: continuations joined, comments dropped."""
    section = readme.split("## The workflow on your arm", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    commands, current = [], ""
    for line in block.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        current += " " + stripped.rstrip("\\").strip() if current else stripped.rstrip("\\").strip()
        if not stripped.endswith("\\"):
            commands.append(re.sub(r"\s+#.*$", "", current).strip())
            current = ""
    return commands


def _make_bag(tmp: Path) -> tuple[Path, Path]:
    """A ROS 2 bag and its mapping file, as tests/test_import_rosbag.py writes them (skip without rosbags)."""
    pytest.importorskip("rosbags")
    sys.path.insert(0, str(Path(__file__).parent))
    from rosbags.rosbag2 import StoragePlugin
    from test_import_rosbag import mapping, write_bag

    bag = tmp / "my_bag"
    write_bag(bag, StoragePlugin.SQLITE3)
    return bag, mapping(tmp)


def substitute(argv: list[str], tmp: Path, fit_dir: Path | None, bag: tuple[Path, Path] | None) -> list[str]:
    """The README's argv with the stand-ins, ``logs/`` moved under ``tmp`` and ``<ts>`` the step-4 fit's folder."""
    out: list[str] = []
    for i, tok in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if tok in STAND_INS:
            out += STAND_INS[tok]
            continue
        if tok == "my_bag/" and bag is not None:
            out.append(str(bag[0]))
            continue
        if tok == "bag_map.yaml" and bag is not None:
            out.append(str(bag[1]))
            continue
        if prev == "--out" and tok == "my_runs/":
            out.append(str(tmp / "imported"))
            continue
        if "<ts>" in tok:
            assert fit_dir is not None, f"{tok}: no fit folder yet (the README names <ts> before a fit ran)"
            tok = tok.replace("logs/sysid/<ts>", str(fit_dir))
        if tok.startswith("logs/"):
            tok = str(tmp / tok)
        out.append(tok)
    return out


def _inputs_exist(argv: list[str], tmp: Path) -> None:
    """Every path under ``tmp/logs`` that a command reads (not one it writes) exists: an earlier step made it."""
    for i, tok in enumerate(argv):
        if tok.startswith(str(tmp / "logs")) and (i == 0 or argv[i - 1] not in OUTPUT_FLAGS):
            assert Path(tok).exists(), f"{tok} is read by this step but no earlier step wrote it"


def test_every_readme_workflow_command_runs_on_the_bundled_runs(tmp_path):
    commands = workflow_commands((ROOT / "README.md").read_text())
    assert len(commands) >= 10, commands
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
    bag = None
    fit_dir: Path | None = None
    ran, skipped, timings = [], [], []
    for cmd in commands:
        argv = shlex.split(cmd)
        assert argv[0] == "python" and argv[1].startswith("scripts/"), f"not a script call: {cmd}"
        script = Path(argv[1]).name
        if any("../shared" in a for a in argv) and not SHARED.is_dir():
            skipped.append(f"{cmd[:80]}... (no ../shared/data/ur10e here)")
            continue
        if "my_bag/" in argv:
            bag = _make_bag(tmp_path)
        args = substitute(argv[2:], tmp_path, fit_dir, bag)
        if "--help" not in args:
            args += BUDGETS.get(script, [])
        if script.startswith("gen_") and "--out" not in args:  # designs go to the test's folder, not the checkout's logs/
            args += ["--out", str(tmp_path / "logs" / "targets")]
        if script in FIT_SCRIPTS and "--eval_params" not in args:
            args += ["--out", str(tmp_path / "logs" / "sysid")]
        _inputs_exist(args, tmp_path)
        before = set((tmp_path / "logs" / "sysid").glob("*"))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / argv[1]), *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=900)
        timings.append((script, time.perf_counter() - t0))
        assert proc.returncode == 0, (f"README command failed (exit {proc.returncode}):\n  {cmd}\nran as:\n  "
                                      f"{shlex.join(args)}\n--- stdout tail\n{proc.stdout[-3000:]}\n"
                                      f"--- stderr tail\n{proc.stderr[-3000:]}")
        ran.append(cmd)
        new = sorted(set((tmp_path / "logs" / "sysid").glob("*")) - before)
        if script in FIT_SCRIPTS and "--replay" not in args and "--eval_params" not in args:
            assert len(new) == 1, f"the fit wrote {len(new)} folders: {new}"
            fit_dir = new[0]
            assert (fit_dir / "sysid_best_params.json").is_file(), sorted(p.name for p in fit_dir.iterdir())
    print("\nREADME workflow: " + ", ".join(f"{s} {t:.0f} s" for s, t in timings)
          + f"; total {sum(t for _, t in timings):.0f} s")
    for s in skipped:
        print(f"skipped: {s}")
    assert fit_dir is not None, "no step-4 fit ran"
    # the chain the design promises: the rigid-body step's inertials reached the fit
    assert (tmp_path / "logs" / "rigid_body" / "nominal_inertials.json").is_file()
