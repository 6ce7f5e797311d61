"""The package's user-facing error, below every layer that raises one (``objective.errors.FitError`` is this class).

Every error a user can cause (a malformed file, a flag out of range, a missing input) derives from
:class:`UserError`; a script's entry (:func:`isaaclab_sysid.utils.cli.run_cli`) prints it as one line and exits
with its ``code`` (2), never with a traceback. Classes that were ``ValueError`` (or ``RuntimeError``) before keep
that base beside it, so ``except ValueError`` callers still catch them.
"""

from __future__ import annotations

from typing import Any


class UserError(Exception):
    """A user-facing failure: printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def plain(x: Any) -> str:
    """A value as a user message prints it: numpy scalars as the plain number (``2.393``, not
    ``np.float64(2.393)``), anything else as its ``repr`` (strings quoted)."""
    item = getattr(x, "item", None)
    if item is not None and getattr(x, "ndim", None) == 0:
        x = item()
    return repr(x)
