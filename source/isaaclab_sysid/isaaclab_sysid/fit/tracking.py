"""Optional Weights & Biases logging of the fit's progress (``--wandb``; offline unless WANDB_MODE says otherwise)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


class WandbLog:
    """A wandb run, or nothing: a missing or failing wandb never stops a fit (it says why once)."""

    def __init__(self, enabled: bool, run_dir: Path, config: dict, log: Callable[[str], None]) -> None:
        self.run = None
        if not enabled:
            return
        try:
            import wandb

            os.environ.setdefault("WANDB_MODE", "offline")
            os.environ.setdefault("WANDB_SILENT", "true")
            self.run = wandb.init(project="isaaclab_sysid", dir=str(run_dir), config=config, mode=os.environ["WANDB_MODE"])
        except Exception as exc:  # optional dependency (ImportError or its own init errors): say so, go on
            log(f"wandb disabled: {exc}")

    def log(self, row: dict, step: int) -> None:
        if self.run is not None:
            self.run.log(row, step=step)

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
