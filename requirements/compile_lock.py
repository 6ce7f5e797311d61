"""Write the locked dependency set (requirements/py312.lock) from a pip resolution report.

``make lock`` resolves ``setup.py`` with every extra the suite uses in a throw-away venv
(``pip install --dry-run --ignore-installed --report``: nothing is installed) and runs this file
on the report. The lock pins every package of that resolution (and pip itself), one
``name==version`` a line, sorted; ``make demo``, ``make test`` and CI install through it as a
constraints file (``pip install -c``), so a fresh machine gets the set the suite passed on.

Usage: python requirements/compile_lock.py REPORT.json OUT.lock PIP_VERSION
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from pathlib import Path


def pins(report: dict) -> list[str]:
    """``name==version`` for every package the report installs, except the project itself, sorted."""
    out = {}
    for item in report["install"]:
        meta = item["metadata"]
        name = meta["name"].lower().replace("_", "-")
        if name == "isaaclab-sysid":
            continue
        out[name] = f"{name}=={meta['version']}"
    return [out[k] for k in sorted(out)]


def main(argv: list[str]) -> int:
    """Read the report, write the lock atomically; 0 on success, 2 on a bad call."""
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    report_path, out_path, pip_version = Path(argv[0]), Path(argv[1]), argv[2]
    lines = pins(json.loads(report_path.read_text()))
    header = [
        "# The locked dependency set of isaaclab_sysid: every package `make test` installs, resolved once.",
        "# Written by `make lock` (requirements/compile_lock.py); do not edit by hand.",
        f"# Resolved for CPython {platform.python_version()} on {sys.platform}/{platform.machine()}; "
        "installed as a constraints file (pip install -c), so `make demo` takes the subset it needs.",
        "# `make test-latest` runs the suite on the newest versions setup.py's ranges allow instead.",
        f"pip=={pip_version}",
    ]
    fd, tmp = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(header + lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, out_path)
    print(f"wrote {out_path}: {len(lines)} packages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
