"""The one entry of every script: a user error is one stderr line and exit status 2, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from isaaclab_sysid.utils.errors import UserError


def run_cli(main: Callable[[], int | None]) -> NoReturn:
    """Call a script's ``main`` and exit with its status (None: 0).

    A :class:`~isaaclab_sysid.utils.errors.UserError` that reaches here (every reader's and stage's user-facing
    error derives from it) prints ``error: <message>`` on one line of stderr and exits with the error's ``code``
    (2; the Ray backend's cluster errors 4). Anything else is a bug and keeps its traceback.

    Usage, the last line of a script::

        if __name__ == "__main__":
            run_cli(lambda: main(tyro.cli(Args, use_underscores=True)))
    """
    try:
        code = main()
    except UserError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        raise SystemExit(exc.code) from None
    raise SystemExit(0 if code is None else code)


def one_line(message: str) -> str:
    """``message`` on one line: line breaks (a message built from parts) joined with ``; ``."""
    parts = [p.strip() for p in message.splitlines() if p.strip()]
    return "; ".join(parts)
