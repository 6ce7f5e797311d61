"""The one error type every run reader raises."""

from __future__ import annotations

from isaaclab_sysid.utils.errors import UserError


class RunFormatError(UserError, ValueError):
    """A run file is malformed. ``str(err)`` is one line naming file, row and column (a user error: exit 2).

    Attributes:
        file: the offending file (CSV, sidecar JSON or ``file.h5:/runs/<name>``).
        row: the CSV line number (1 = header), or ``None`` for sidecar/metadata errors.
        column: the column name, or the sidecar key path (e.g. ``gains.kp[2]``).
        reason: what is wrong.
        row_label: what ``row`` counts: ``"row"`` in a CSV; an importer names its source's unit
            in its place (``"topic /joint_states index"``, ``"episode 3 index"``).
    """

    def __init__(self, file: str, row: int | None, column: str, reason: str, row_label: str = "row") -> None:
        self.file = str(file)
        self.row = row
        self.column = column
        self.reason = reason
        self.row_label = row_label
        row_s = f"{row_label} {row}" if row is not None else f"{row_label} -"
        super().__init__(f"{self.file}: {row_s}, column {column}: {reason}")

    def __reduce__(self):  # noqa: ANN204 - pickled by its fields (an error raised in another process arrives whole)
        return type(self), (self.file, self.row, self.column, self.reason, self.row_label)


class RunFormatWarning(UserWarning):
    """A run file is read, but something in it is deprecated or was repaired (one line naming the file and key)."""
