"""The package's user-facing error, below every layer that raises one (``fit.errors.FitError`` is this class)."""

from __future__ import annotations


class UserError(Exception):
    """A user-facing failure: printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
