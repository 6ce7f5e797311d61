"""One flag convention across the scripts: tyro prints the fit's underscore spelling, accepts the dashed one too,
and no boolean flag reads ``--no-no-*``."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import tyro

from isaaclab_sysid.rigid_body.cli import IdentifyArgs
from isaaclab_sysid.rigid_body.clie.cli import RefineArgs

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def test_every_script_parses_through_the_shared_entry():
    """Every script with flags parses them with ``utils/cli.parse`` (the shared vocabulary, then tyro with the
    underscore spelling) or the fit's ``fit_cli`` (the same), never with a tyro call of its own."""
    own = {p.name: re.findall(r"tyro\.cli\([^)]*\)", p.read_text()) for p in SCRIPTS.glob("*.py")}
    assert not {k: v for k, v in own.items() if v}, own
    shared = [p.name for p in SCRIPTS.glob("*.py") if re.search(r"\bparse\(|\bfit_cli\b", p.read_text())]
    assert len(shared) >= 19, shared


def _help(cls) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        tyro.cli(cls, args=["--help"], use_underscores=True)
    return buf.getvalue()


@pytest.mark.parametrize("cls", [IdentifyArgs, RefineArgs])
def test_help_shows_underscores_and_no_double_negation(cls):
    text = _help(cls)
    assert "--no_plots" in text or cls is RefineArgs
    assert not re.search(r"--no[-_]no[-_]", text)
    assert not re.search(r"--[a-z0-9]+-[a-z0-9]", text), "a dashed flag in the help"


@pytest.mark.parametrize("argv", [["--cutoff-hz", "7", "--no-plots"], ["--cutoff_hz", "7", "--no_plots"]])
def test_both_spellings_parse(argv):
    args = tyro.cli(IdentifyArgs, args=["--runs", "a.csv", *argv], use_underscores=True)
    assert args.cutoff_hz == 7.0 and args.no_plots is True
