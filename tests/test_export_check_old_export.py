"""export/check.py refuses an export written before a field it reads existed, in one line naming the file, the
missing fields and the command that regenerates it; nothing is assumed for a missing field (it used to take
PHYSICS_DT = 1 ms, Newton, the exported ranges as the drawn ones and no delay without saying so)."""

from __future__ import annotations

import types

import pytest

from isaaclab_sysid.export.check import CURRENT_FIELDS, EXPORT_FIELDS, CheckError, require_current_export
from isaaclab_sysid.paths import REPO_ROOT

TEMPLATE = REPO_ROOT / "source" / "isaaclab_sysid" / "isaaclab_sysid" / "export" / "templates" / "sysid_dr_isaaclab.py"


def _module(without: tuple[str, ...]) -> types.ModuleType:
    mod = types.ModuleType("fake_export")
    for f in EXPORT_FIELDS + CURRENT_FIELDS:
        if f not in without:
            setattr(mod, f, object())
    return mod


def test_current_export_passes_and_each_missing_field_is_named(tmp_path):
    path = tmp_path / "fit" / "export" / "sysid_dr_isaaclab.py"
    require_current_export(_module(()), path)  # nothing missing: no error
    for field in CURRENT_FIELDS:
        with pytest.raises(CheckError) as exc:
            require_current_export(_module((field,)), path)
        msg = str(exc.value)
        assert "\n" not in msg and msg.startswith(f"{path}: an older export without {field} ")
        assert msg.endswith(f"regenerate it with python scripts/export_dr.py --fit_dir {tmp_path / 'fit'}")
    with pytest.raises(CheckError, match=r"without PHYSICS_DT, SAMPLED_RANGES \(written before these fields existed\)"):
        require_current_export(_module(("PHYSICS_DT", "SAMPLED_RANGES")), path)
    # a module outside <fit_dir>/export/: the command says where the fit folder goes
    with pytest.raises(CheckError, match=r"--fit_dir <the fit folder>$"):
        require_current_export(_module(("PHYSICS_DT",)), tmp_path / "elsewhere.py")


def test_load_export_module_refuses_an_old_export_file(tmp_path):
    """The template (an empty current export) loads; the same file without PHYSICS_DT and SAMPLED_RANGES (as exports
    before those fields were written) is refused at load, before any environment is built."""
    pytest.importorskip("isaaclab")
    from isaaclab_sysid.export.check import load_export_module

    text = TEMPLATE.read_text()
    new = tmp_path / "new" / "export" / "sysid_dr_isaaclab.py"
    new.parent.mkdir(parents=True)
    new.write_text(text)
    mod = load_export_module(new)
    assert all(hasattr(mod, f) for f in CURRENT_FIELDS)
    old_text = "\n".join(line for line in text.splitlines()
                         if not line.startswith(("PHYSICS_DT =", "SAMPLED_RANGES:")))
    assert len(old_text.splitlines()) == len(text.splitlines()) - 2
    old = tmp_path / "old" / "export" / "sysid_dr_isaaclab.py"
    old.parent.mkdir(parents=True)
    old.write_text(old_text)
    with pytest.raises(CheckError) as exc:
        load_export_module(old)
    assert str(exc.value) == (f"{old}: an older export without PHYSICS_DT, SAMPLED_RANGES (written before these fields "
                              "existed); the check assumes nothing for them: regenerate it with python "
                              f"scripts/export_dr.py --fit_dir {tmp_path / 'old'}")
