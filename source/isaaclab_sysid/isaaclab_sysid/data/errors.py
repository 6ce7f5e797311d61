"""The one error type every run reader raises."""

from __future__ import annotations


class RunFormatError(ValueError):
    """A run file is malformed. ``str(err)`` is one line naming file, row and column.

    Attributes:
        file: the offending file (CSV, sidecar JSON or ``file.h5:/runs/<name>``).
        row: the CSV line number (1 = header), or ``None`` for sidecar/metadata errors.
        column: the column name, or the sidecar key path (e.g. ``gains.kp[2]``).
        reason: what is wrong.
    """

    def __init__(self, file: str, row: int | None, column: str, reason: str) -> None:
        self.file = str(file)
        self.row = row
        self.column = column
        self.reason = reason
        row_s = f"row {row}" if row is not None else "row -"
        super().__init__(f"{self.file}: {row_s}, column {column}: {reason}")
