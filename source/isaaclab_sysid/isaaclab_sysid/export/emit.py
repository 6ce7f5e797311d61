"""The one source emitter of the generated Isaac Lab modules (export/, payload/, contact/).

A generated module is: a docstring (what it holds, where it came from), then the text
of a template in ``export/templates/`` copied verbatim, except that the block between
its data markers is replaced by the export's numbers, written as Python literals
(``NAME = <literal>``, read back by the tests with ``ast.literal_eval``). The code of
the generated module is therefore the template's code, which is importable (with
Isaac Lab), linted and tested as it is; no code is built by formatting strings.
"""

from __future__ import annotations

import ast
import math
import pprint
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

#: the template's lines that open and close the data block the export replaces
DATA_BEGIN = "# --- data: the export replaces this block with its numbers ---"
DATA_END = "# --- end of data ---"
#: a literal wider than this many characters is broken over lines (pprint)
WIDTH = 110


@dataclass(frozen=True)
class Literal:
    """One data line of a generated module: ``name = value`` after an optional ``#:`` comment.

    Attributes:
        name: the module-level name (upper case by convention).
        value: plain Python data (dict, list, tuple, str, float, int, bool, None); a float that is not
            finite is written as None (the Python literal of ``inf`` does not exist).
        comment: written above it, each of its lines as ``#: <line>`` (None: none).
    """

    name: str
    value: object
    comment: str | None = None

    def source(self) -> str:
        """``[#: comment\\n]NAME = <literal>``."""
        text = f"{self.name} = " + pprint.pformat(plain(self.value), width=WIDTH, sort_dicts=False)
        if self.comment is None:
            return text
        return "".join(f"#: {line}\n" for line in self.comment.splitlines()) + text


def plain(obj: object) -> object:
    """``obj`` with numpy scalars as Python numbers and non-finite floats as None (recursively; tuples stay tuples)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        out = [plain(v) for v in obj]
        return tuple(out) if isinstance(obj, tuple) else out
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if hasattr(obj, "dtype") and hasattr(obj, "item"):  # a numpy scalar
        obj = obj.item()
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    raise TypeError(f"not plain data for a generated module: {type(obj).__name__} {obj!r}")


def template_text(name: str) -> str:
    """The source text of ``export/templates/<name>.py``."""
    return resources.files("isaaclab_sysid.export.templates").joinpath(f"{name}.py").read_text(encoding="utf-8")


def template_body(name: str) -> tuple[str, str]:
    """The template's code before and after its data block, without its own docstring.

    Raises:
        ValueError: the template has no docstring or not exactly one data block.
    """
    text = template_text(name)
    tree = ast.parse(text)
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        raise ValueError(f"template {name}: no module docstring")
    lines = text.splitlines(keepends=True)
    rest = lines[first.end_lineno:]
    marks = [i for i, line in enumerate(rest) if line.rstrip("\n") in (DATA_BEGIN, DATA_END)]
    if len(marks) != 2 or rest[marks[0]].rstrip("\n") != DATA_BEGIN:
        raise ValueError(f"template {name}: needs one block between {DATA_BEGIN!r} and {DATA_END!r}")
    return "".join(rest[:marks[0]]), "".join(rest[marks[1] + 1:])


def module_source(title: str, doc: str, template: str, data: Iterable[Literal]) -> str:
    """A generated module's text: the docstring ``title`` + ``doc``, then ``template``'s code with ``data`` as its data block.

    Args:
        title: the docstring's first line (what generated the file).
        doc: the rest of the docstring (source, policy, units, ...); must not contain three double quotes.
        template: the name of a module of ``export/templates/``.
        data: the literals, in order.
    """
    if '"""' in doc or '"""' in title:
        raise ValueError("a generated module's docstring cannot hold three double quotes")
    head, tail = template_body(template)
    block = "\n".join(lit.source() for lit in data)
    return f'"""{title} Generated file: do not edit.\n\n{doc}\n"""\n{head}{block}\n{tail}'


def policy_literals(name: str, intervals: Sequence, policy, override: Mapping[str, float], ranges: Sequence) -> list[Literal]:
    """The data of a cautious-end export (payload/, contact/): ``POLICY``, ``<name>`` (every number's ends),
    ``OVERRIDE`` and ``RANGES``.

    Args:
        intervals: ``intervals.common.Interval``-like rows (``label``, ``lower``, ``value``, ``upper``).
        policy: a ``cautious.UsePolicy`` (its ``to_dict()`` is written).
        override: label -> the value at the end the policy picked.
        ranges: ``export.ranges.Range``-like rows (``label``, ``lower``, ``upper``).
    """
    return [Literal("POLICY", policy.to_dict()),
            Literal(name, {iv.label: (iv.lower, iv.value, iv.upper) for iv in intervals}, "every number: (lower, value, upper)"),
            Literal("OVERRIDE", dict(override), "the value each number takes under POLICY"),
            Literal("RANGES", {r.label: (r.lower, r.upper) for r in ranges}, "randomization ranges (lower, upper)")]
