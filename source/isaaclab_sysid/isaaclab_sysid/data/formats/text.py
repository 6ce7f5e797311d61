"""The text under every text format: the encoding as other tools write it, and the CSV's delimiter.

Files exported by other tools are read as they come, not refused with a misleading message:

* **encoding**: UTF-8, with or without a byte-order mark (Excel's "CSV UTF-8" writes one); UTF-16 and UTF-32 with a
  byte-order mark (Excel's "Unicode text", Windows tools), and UTF-16 without one when the NUL bytes say which byte
  order. Anything else (a legacy code page, a binary file) is refused in one line naming the file and the encoding.
  Line ends ``\\r\\n`` and ``\\r`` are read as ``\\n``.
* **delimiter** (:func:`to_comma_csv`): comma, semicolon or tab, whichever the header line uses; a semicolon- or
  tab-separated table may write decimal commas (``0,5``: Excel in a locale whose decimal mark is the comma).
"""

from __future__ import annotations

import codecs
from pathlib import Path

from isaaclab_sysid.data.errors import RunFormatError

#: byte-order marks, longest first (UTF-32-LE's begins with UTF-16-LE's)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)

#: the delimiters a CSV may use, with the name a message gives them
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab"}


def _utf16_without_bom(raw: bytes) -> str | None:
    """``utf-16-le``/``utf-16-be`` when the NUL bytes of ``raw``'s head sit at odd/even offsets only (ASCII text
    in UTF-16 without a byte-order mark); None otherwise."""
    head = raw[:4096]
    if len(head) < 4:
        return None
    even, odd = head[0::2], head[1::2]
    even_nul, odd_nul = even.count(0) / len(even), odd.count(0) / len(odd)
    if odd_nul > 0.3 and even_nul == 0:
        return "utf-16-le"
    if even_nul > 0.3 and odd_nul == 0:
        return "utf-16-be"
    return None


def decode_text(raw: bytes, file: str) -> str:
    """``raw`` as text (encoding as in the module's docstring), ``\\n`` line ends, no byte-order mark.

    Raises:
        RunFormatError: not text in an encoding read here (one line naming the file, the line and the encoding).
    """
    for bom, codec, name in _BOMS:
        if raw.startswith(bom):
            body, label = raw[len(bom):], f"{name} with a byte-order mark"
            break
    else:
        codec = _utf16_without_bom(raw)
        body, label, name = raw, "UTF-16 without a byte-order mark", "UTF-16"
        if codec is None:
            codec, label, name = "utf-8", "UTF-8", "UTF-8"
            if b"\x00" in raw[:4096]:
                raise RunFormatError(file, None, "-", "binary data, not a text file (NUL bytes; an HDF5 or Parquet "
                                     "file under another name?)")
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count("\n".encode(codec)) + 1
        bad = body[exc.start:exc.start + 1]
        hint = (" (a legacy code page such as Windows-1252 or Latin-1?)" if name == "UTF-8" else "")
        raise RunFormatError(file, line, "-", f"not {label} text: byte 0x{bad.hex()} at offset {exc.start}{hint}; "
                             "save the file as UTF-8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text(path: str | Path, what: str = "file") -> str:
    """The decoded text of ``path`` (:func:`decode_text`); a missing file is a one-line error naming ``what``."""
    path = Path(path)
    if not path.is_file():
        raise RunFormatError(str(path), None, "-", f"{what} not found")
    return decode_text(path.read_bytes(), str(path))


def detect_delimiter(header: str) -> str:
    """The delimiter a header line uses: the one of comma, semicolon and tab it holds most of (comma on a tie)."""
    counts = {d: header.count(d) for d in DELIMITERS}
    best = max(counts.values())
    return next(d for d in DELIMITERS if counts[d] == best)


def to_comma_csv(text: str, file: str) -> tuple[str, str]:
    """``text`` (a CSV with a header line) as a comma-separated CSV, and the delimiter it had.

    A comma-separated text comes back as is. A semicolon- or tab-separated one is rewritten field by field, line
    for line (row numbers stay those of the file); a decimal comma in a field (``0,5``) is read as a point.

    Raises:
        RunFormatError: a field of a semicolon- or tab-separated file holds both a comma and a point (``1.234,5``:
            a thousands separator is not read).
    """
    header = text.split("\n", 1)[0]
    delim = detect_delimiter(header)
    if delim == ",":
        return text, delim
    lines = text.split("\n")
    columns = [c.strip() for c in header.split(delim)]
    out = []
    for i, line in enumerate(lines, start=1):
        fields = line.split(delim)
        if i > 1 and "," in line:
            for j, f in enumerate(fields):
                if "," in f and "." in f:
                    col = columns[j] if j < len(columns) else "-"
                    raise RunFormatError(file, i, col, f"{f.strip()!r} holds both a comma and a point (the file is "
                                         f"{DELIMITERS[delim]}-separated: a decimal comma is read, a thousands "
                                         "separator is not)")
            fields = [f.replace(",", ".") for f in fields]
        out.append(",".join(fields))
    return "\n".join(out), delim
