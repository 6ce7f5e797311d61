"""extension.toml follows Isaac Lab's extension format and feeds setup.py (no Isaac Lab needed)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_extension_toml_has_isaaclab_extension_fields():
    ext = tomllib.loads((ROOT / "extension.toml").read_text())
    pkg = ext["package"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pkg["version"])
    for key in ("title", "description", "author", "license", "category", "readme", "keywords", "maintainer"):
        assert pkg[key] is not None and key in pkg
    assert pkg["category"] == "isaaclab" and "isaaclab" in pkg["keywords"]
    assert (ROOT / pkg["readme"]).is_file()
    assert "isaaclab" in ext["dependencies"]
    mods = ext["python"]["module"]
    assert [m["name"] for m in mods] == ["isaaclab_sysid"]
    assert (ROOT / mods[0]["path"] / "isaaclab_sysid" / "__init__.py").is_file()
    assert isinstance(ext["isaac_lab_settings"]["pip_upgrade_dependencies"], list)


def test_setup_reads_its_metadata_from_extension_toml():
    text = (ROOT / "setup.py").read_text()
    for key in ("version", "description", "author", "license"):
        assert f'EXT["package"]["{key}"]' in text
