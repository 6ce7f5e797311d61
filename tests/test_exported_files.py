"""Files as other tools export them are read (a byte-order mark, UTF-16, semicolons, tabs, decimal commas), and what
is not read is refused in one line naming the real cause; numbers in messages print plainly."""

from __future__ import annotations

import codecs
from pathlib import Path

import numpy as np
import pytest
from conftest import make_run
from test_import_table import EFF, POS, mapping, source

from isaaclab_sysid.data import RunFormatError, read_run, write_run
from isaaclab_sysid.data.formats.text import decode_text, to_comma_csv
from isaaclab_sysid.data.table import run_to_table
from isaaclab_sysid.importers import import_runs
from isaaclab_sysid.utils.errors import UserError, plain


def _written(tmp_path: Path, controller: str = "task_impedance") -> tuple[Path, Path, dict[str, np.ndarray]]:
    csv, side = write_run(make_run(controller, 50.0, n=40), tmp_path / "run.csv")
    return csv, side, run_to_table(read_run(csv))


def _same(csv: Path, table: dict[str, np.ndarray]) -> None:
    got = run_to_table(read_run(csv))
    assert list(got) == list(table)
    for c in table:
        np.testing.assert_array_equal(got[c], table[c], err_msg=c)


def _one_line(err: pytest.ExceptionInfo, *parts: str) -> str:
    msg = str(err.value)
    assert "\n" not in msg and "np.float64" not in msg and "Traceback" not in msg
    for p in parts:
        assert p in msg, msg
    return msg


def _rewrite(csv: Path, fn) -> None:
    csv.write_text(fn(csv.read_text()))


# --- encodings ------------------------------------------------------------------------------------------------------

def test_utf8_byte_order_mark_is_read(tmp_path):  # Excel's "CSV UTF-8"; was: missing column t_s
    csv, side, table = _written(tmp_path)
    csv.write_bytes(codecs.BOM_UTF8 + csv.read_bytes())
    side.write_bytes(codecs.BOM_UTF8 + side.read_bytes())  # the sidecar too (json.loads refuses a BOM)
    _same(csv, table)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_are_read(tmp_path, codec):  # was: a raw UnicodeDecodeError traceback
    csv, side, table = _written(tmp_path)
    csv.write_bytes(csv.read_text().encode(codec))  # "utf-16"/"utf-32": with a BOM; -le/-be: without one
    side.write_bytes(side.read_text().encode("utf-16"))
    _same(csv, table)


def test_crlf_line_ends_are_read(tmp_path):
    csv, _, table = _written(tmp_path)
    csv.write_bytes(csv.read_bytes().replace(b"\n", b"\r\n"))
    _same(csv, table)


def test_legacy_code_page_is_refused_in_one_line(tmp_path):
    csv, _, _ = _written(tmp_path)
    text = csv.read_text()
    csv.write_bytes(text.replace("t_s", "t [s]\xb0", 1).encode("cp1252"))  # a degree sign in Windows-1252
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _one_line(exc, str(csv), "row 1", "not UTF-8 text", "0xb0", "save the file as UTF-8")


def test_binary_file_is_refused_in_one_line(tmp_path):
    csv, _, _ = _written(tmp_path)
    csv.write_bytes(b"\x89HDF\r\n\x1a\n\x00\x00\x00\x00\x00\x08\x08\x00\x04\x00\x10\x00" * 8)
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _one_line(exc, str(csv), "binary data, not a text file")


def test_decode_text_names_a_broken_utf16_file():
    raw = codecs.BOM_UTF16_LE + "t_s,q1\n0,1\n".encode("utf-16-le") + b"\x00\xdc"  # a lone low surrogate
    with pytest.raises(RunFormatError) as exc:
        decode_text(raw, "x.csv")
    _one_line(exc, "x.csv", "not UTF-16 with a byte-order mark text")


# --- delimiters -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("delim", [";", "\t"])
def test_semicolon_and_tab_are_read(tmp_path, delim):  # was: wrong joint count: the log has 0 joint columns
    csv, _, table = _written(tmp_path)
    _rewrite(csv, lambda t: t.replace(",", delim))
    _same(csv, table)


@pytest.mark.parametrize("delim", [";", "\t"])
def test_decimal_commas_are_read(tmp_path, delim):  # Excel in a locale whose decimal mark is the comma
    csv, _, table = _written(tmp_path)
    _rewrite(csv, lambda t: t.replace(",", delim).replace(".", ","))
    _same(csv, table)


def test_excel_semicolon_utf8_bom_crlf_decimal_comma(tmp_path):  # all of it at once
    csv, _, table = _written(tmp_path)
    text = csv.read_text().replace(",", ";").replace(".", ",").replace("\n", "\r\n")
    csv.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    _same(csv, table)


def test_quoted_header_names_are_read(tmp_path):
    csv, _, table = _written(tmp_path)
    _rewrite(csv, lambda t: "\n".join([",".join(f'"{c}"' for c in t.split("\n", 1)[0].split(","))]
                                      + t.split("\n")[1:]))
    _same(csv, table)


def test_comma_and_point_in_one_field_is_refused(tmp_path):
    csv, _, _ = _written(tmp_path)
    lines = csv.read_text().replace(",", ";").split("\n")
    fields = lines[3].split(";")
    fields[2] = "1.234,5"
    lines[3] = ";".join(fields)
    csv.write_text("\n".join(lines))
    column = lines[0].split(";")[2]
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _one_line(exc, str(csv), "row 4", f"column {column}", "'1.234,5' holds both a comma and a point",
              "semicolon-separated")


def test_another_delimiter_is_named(tmp_path):
    csv, _, _ = _written(tmp_path)
    _rewrite(csv, lambda t: t.replace(",", "|"))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _one_line(exc, str(csv), "row 1", "the header line is one column", "commas, semicolons, tabs")


def test_to_comma_csv_keeps_a_comma_csv_and_its_row_numbers():
    text = "a,b\n1,2\n"
    assert to_comma_csv(text, "f") == (text, ",")
    assert to_comma_csv("a;b\n1,5;2\n\n3;4\n", "f") == ("a,b\n1.5,2\n\n3,4\n", ";")


# --- numbers print plainly ------------------------------------------------------------------------------------------

def test_shuffled_rows_print_plain_numbers(tmp_path):  # was: time stamp np.float64(2.393) is before ...
    csv, _, table = _written(tmp_path)
    lines = csv.read_text().split("\n")
    lines[5], lines[6] = lines[6], lines[5]
    csv.write_text("\n".join(lines))
    t = table["t_s"]
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _one_line(exc, str(csv), "row 7", "column t_s", f"time stamp {float(t[4])!r} is before the previous {float(t[5])!r}")


def test_duplicated_stamp_prints_a_plain_number(tmp_path):
    csv, _, table = _written(tmp_path)
    lines = csv.read_text().split("\n")
    lines[6] = lines[5]
    csv.write_text("\n".join(lines))
    with pytest.raises(RunFormatError) as exc:
        read_run(csv)
    _one_line(exc, "duplicated time stamp", repr(float(table["t_s"][4])))


def test_plain():
    assert plain(np.float64(2.393)) == "2.393"
    assert plain(np.int64(7)) == "7"
    assert plain(np.float32(0.5)) == "0.5"
    assert plain("x") == "'x'" and plain(2.5) == "2.5"
    assert plain(np.array([1.0, 2.0])) == repr(np.array([1.0, 2.0]))  # arrays as they were


# --- the table importer: the same text reader -----------------------------------------------------------------------

def test_table_import_reads_a_semicolon_utf16_export(tmp_path):
    df = source()
    text = df.to_csv(index=False, sep=";", float_format="%.17g", decimal=",")
    (tmp_path / "log.csv").write_bytes(text.encode("utf-16"))
    runs, _ = import_runs(tmp_path / "log.csv", "table", mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    run = read_run(tmp_path / "out" / "log.csv")
    np.testing.assert_array_equal(run.q, df[POS].to_numpy())
    np.testing.assert_array_equal(run.tau_J, df[EFF].to_numpy())


def test_table_import_shuffled_stamps_print_plain_numbers(tmp_path):
    df = source()
    df.iloc[[10, 11]] = df.iloc[[11, 10]].to_numpy()
    p = tmp_path / "log.csv"
    df.to_csv(p, index=False, float_format="%.17g")
    with pytest.raises(RunFormatError) as exc:
        import_runs(p, "table", mapping(tmp_path), tmp_path / "out", log=lambda s: None)
    _one_line(exc, "is before the previous")


# --- every user-facing error is a UserError, with its old base kept ---------------------------------------------------

def test_user_errors_keep_their_old_base():
    from isaaclab_sysid.cautious import PolicyError
    from isaaclab_sysid.contact.identify import ContactInputError
    from isaaclab_sysid.data.formats.ur10e import UR10eDataError
    from isaaclab_sysid.excitation.ik import IKError
    from isaaclab_sysid.excitation.limits import DesignLimitError
    from isaaclab_sysid.export.build import ExportError
    from isaaclab_sysid.export.check import CheckError
    from isaaclab_sysid.export.mjcf import MjcfError
    from isaaclab_sysid.importers.common import ImportDependencyError
    from isaaclab_sysid.importers.torque_runs import TorqueRunError
    from isaaclab_sysid.intervals.curvature import IntervalError
    from isaaclab_sysid.online.rls import TrackerError
    from isaaclab_sysid.payload.holds import PayloadInputError

    for cls, old in ((RunFormatError, ValueError), (UR10eDataError, ValueError), (TorqueRunError, ValueError),
                     (ImportDependencyError, RuntimeError), (ExportError, Exception), (CheckError, ExportError),
                     (MjcfError, ValueError), (IntervalError, RuntimeError), (TrackerError, ValueError),
                     (PayloadInputError, ValueError), (ContactInputError, ValueError),
                     (DesignLimitError, ValueError), (IKError, RuntimeError), (PolicyError, ValueError)):
        assert issubclass(cls, UserError) and issubclass(cls, old), cls
        err = cls("a b") if cls is not RunFormatError else cls("f.csv", 3, "q1", "bad")
        assert err.code == 2 and "\n" not in str(err)


def test_run_format_error_pickles_whole():
    import pickle

    err = pickle.loads(pickle.dumps(RunFormatError("f.csv", 3, "q1", "bad", row_label="episode 2 index")))
    assert (err.file, err.row, err.column, err.reason, err.row_label) == ("f.csv", 3, "q1", "bad", "episode 2 index")
    assert str(err) == "f.csv: episode 2 index 3, column q1: bad"


def test_contact_files_read_as_excel_writes_them(tmp_path):
    from isaaclab_sysid.contact import read_contact_run, write_contact_run
    from isaaclab_sysid.contact.io import contact_paths
    from isaaclab_sysid.contact.twin import ContactTwin, record_contact_run
    from isaaclab_sysid.robots import load_robot

    cr = record_contact_run(load_robot("franka_panda"), ContactTwin(), "impact", 0.1, 0, above=0.015, depth=0.005,
                            hold_s=0.2)
    path = write_contact_run(cr, tmp_path / "imp.csv")
    csv, side = contact_paths(path)
    text = csv.read_text().replace(",", ";").replace(".", ",").replace("\n", "\r\n")
    csv.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    side.write_bytes(side.read_text().encode("utf-16"))
    np.testing.assert_array_equal(read_contact_run(path).force, cr.force)
