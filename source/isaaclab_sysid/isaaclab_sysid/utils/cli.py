"""The one entry of every script: a user error is one stderr line and exit status 2, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn, TypeVar

from isaaclab_sysid.utils.errors import UserError

T = TypeVar("T")


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


#: The shared vocabulary every script speaks (docs/architecture.md, "One CLI vocabulary"): the runs a stage reads,
#: the held-out runs it scores, the folder it writes and the logged torque it uses.
VOCABULARY: dict[str, str] = {
    "--runs": "the recorded runs (CSV + sidecar, or HDF5) a stage fits or reads",
    "--heldout": "held-out runs: never fitted, scored after",
    "--out": "the folder (or file) a stage writes",
    "--torque_signal": "the logged torque that acted: tau_J (measured), tau (commanded) or current",
}


def vocabulary_argv(argv: Sequence[str], renames: Mapping[str, str], repeated: Sequence[str] = (),
                    positional: Sequence[str] = (), warn: Callable[[str], None] | None = None) -> list[str]:
    """A script's command line in its own parser's spelling, from the shared vocabulary or an old spelling.

    ``renames``: old spelling -> the vocabulary's (e.g. ``{"--real_csv": "--runs"}``); each old spelling used is
    named once on stderr (``note: --real_csv is spelled --runs now; the old spelling still works``) and passed on
    as the vocabulary's. ``repeated``: flags the parser takes once per value (``--runs a --runs b``): several
    values after one of them (``--runs a b``, as the other stages take them) are spread over repeats.
    ``positional``: vocabulary flags whose values are the parser's positional arguments (``validate_runs.py --runs
    a.csv`` is ``validate_runs.py a.csv``): the flag is dropped, its values kept. ``--flag=value`` is kept whole.
    Returns the new argv; nothing else changes.
    """
    say = warn if warn is not None else (lambda m: print(m, file=sys.stderr))
    out: list[str] = []
    told: set[str] = set()
    current: str | None = None  # the repeated flag whose values are being read
    pending = False  # its first value is still to come
    for tok in argv:
        if tok.startswith("--") and tok != "--":
            flag, eq, value = tok.partition("=")
            new = renames.get("--" + flag[2:].replace("-", "_"))
            if new is not None:
                if flag not in told:
                    say(f"note: {flag} is spelled {new} now; the old spelling still works")
                    told.add(flag)
                flag = new
            if flag in positional:
                if eq:
                    out.append(value)
                current, pending = None, False
                continue
            out.append(flag + eq + value)
            current = flag if (flag in repeated and not eq) else None
            pending = current is not None
        elif tok.startswith("-") and not _is_number(tok):
            current, pending = None, False
            out.append(tok)
        else:
            if current is not None and not pending:
                out.append(current)  # another value after a repeated flag: one more repeat
            out.append(tok)
            pending = False
    return out


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def parse(cls: type[T], argv: Sequence[str] | None = None, *, renames: Mapping[str, str] | None = None,
          repeated: Sequence[str] = (), positional: Sequence[str] = ()) -> T:
    """A script's typed arguments: ``argv`` (default ``sys.argv[1:]``) in the shared vocabulary
    (:func:`vocabulary_argv`), then parsed by tyro into ``cls`` with the underscore spelling every script prints."""
    import tyro

    args = vocabulary_argv(sys.argv[1:] if argv is None else list(argv), renames or {}, repeated, positional)
    return tyro.cli(cls, args=args, use_underscores=True)
