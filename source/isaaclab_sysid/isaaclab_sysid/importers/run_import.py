"""One call from a source path to validated runs: dispatch on the format, assemble, (optionally) write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from isaaclab_sysid.data.errors import RunFormatError
from isaaclab_sysid.importers.common import FORMATS, ImportReport, assemble_runs, load_import_spec, write_imported
from isaaclab_sysid.data.run import Run


def import_runs(
    src: str | Path, fmt: str, mapping: str | Path | None, out: str | Path | None = None,
    log: Callable[[str], None] = print, rate_hz: float | None = None,
) -> tuple[list[Run], list[ImportReport]]:
    """Read ``src`` (a table, a bag folder / .db3 / .mcap, a LeRobot dataset folder, or BAM logs) into validated runs.

    Args:
        src: the source; fmt: one of :data:`FORMATS`.
        mapping: the mapping file (YAML); None for ``bam`` (its header states the bench and the gain), needed by the rest.
        out: write the runs there (CSV + sidecar per run, or one ``.h5``), all or nothing; None: only return them.
        log: receives one line per source recording (rows read, dropped and why, rate) and per file written.
        rate_hz: ``bam`` only: the even grid [Hz] (default 200, BAM's 5 ms); the other formats take it from the mapping.
    Raises:
        RunFormatError: bad input, naming file, row (topic / episode index / entry) and column (field).
        ImportDependencyError: the ``[import]`` extra is missing.
    """
    from isaaclab_sysid.robots import load_robot

    if fmt not in FORMATS:
        raise ValueError(f"unknown --format {fmt!r} (expected one of {', '.join(FORMATS)})")
    if fmt == "bam":
        from isaaclab_sysid.importers.bam import DEFAULT_RATE_HZ, import_bam

        if mapping is not None:
            raise RunFormatError(str(mapping), None, "-", "--format bam takes no mapping file: each log's header "
                                 "states the bench (mass, length, motor) and the gain kp")
        return import_bam(src, out, DEFAULT_RATE_HZ if rate_hz is None else rate_hz, log)
    if mapping is None:
        raise RunFormatError(str(src), None, "-", f"--format {fmt} needs --mapping (a YAML file: robot, controller, "
                             "gains and the source's names; docs/data_format.md)")
    if rate_hz is not None:
        raise RunFormatError(str(mapping), None, "rate_hz", f"--rate_hz is for --format bam; --format {fmt} takes "
                             "rate_hz from the mapping file")
    spec = load_import_spec(mapping)
    robot = load_robot(spec.robot)
    src = Path(src)
    if fmt == "table":
        from isaaclab_sysid.importers.table import read_table

        streams, rate = [read_table(src, spec, robot.n_dof)], None
    elif fmt in ("rosbag2", "mcap"):
        from isaaclab_sysid.importers.rosbag import read_bag

        streams, rate = [read_bag(src, spec, robot, fmt)], None
    else:
        from isaaclab_sysid.importers.lerobot import read_lerobot

        streams, rate = read_lerobot(src, spec, robot.n_dof)
    state_age = spec.features.get("state_age_ms") if fmt == "lerobot" else None
    runs: list[Run] = []
    reports: list[ImportReport] = []
    for s in streams:
        got, rep = assemble_runs(s, spec, robot, fmt, rate)
        for r in got:  # the rows' state age as the mapping states it (LeRobot: the bus read before each frame)
            r.meta.state_age_ms = None if state_age is None else int(state_age)
        runs += got
        reports.append(rep)
        log(rep.line())
    if out is not None:
        for p in write_imported(runs, out):
            log(f"wrote {p}")
    return runs, reports
