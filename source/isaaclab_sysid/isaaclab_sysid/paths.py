"""Well-known locations of the project (repository root, configs, bundled data)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: Repository root when installed in editable/development mode.
REPO_ROOT = PACKAGE_DIR.parents[2]
CONFIGS_DIR = REPO_ROOT / "configs"
ROBOT_CONFIGS_DIR = CONFIGS_DIR / "robots"
REAL_RUNS_DIR = REPO_ROOT / "data" / "real_runs"
LOGS_DIR = REPO_ROOT / "logs"
