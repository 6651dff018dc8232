"""The file readers: CSV, TSV, ARFF and Parquet from hand-made files, malformed ones included."""

import csv
import datetime as dt
import gzip
import io
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput
from bnserve.store.model import NOMINAL, NUMERIC
from bnserve.trainer.data import load
from bnserve.trainer.io import FORMATS, Declared, format_of, read_table
from tests.data_helpers import write


def cells(table):
    return table.texts().tolist()


def fails(path, *pieces, fmt=None):
    """read_table raises InvalidInput naming the file and every piece (in that order)."""
    pattern = ".*".join(map(re.escape, (path, *pieces)))
    with pytest.raises(InvalidInput, match=pattern):
        read_table(path, fmt)


# ---------------------------------------------------------------- CSV and TSV

CSV = 'colour,"size, in cm",label\nred,"big, very",yes\n\nblue,,no\n"dark green",small,""\n'
CSV_CELLS = [["red", "big, very", "yes"], ["blue", "", "no"], ["dark green", "small", ""]]


@pytest.mark.parametrize("name", ["data.csv", "data.csv.gz", "data.txt", "DATA.CSV"])
@pytest.mark.parametrize("bom", [False, True])
def test_csv(tmp_path, name, bom):
    table = read_table(write(tmp_path, CSV, name, bom))
    assert table.header == ("colour", "size, in cm", "label")
    assert cells(table) == CSV_CELLS
    assert table.lines.tolist() == [2, 4, 5]  # the blank line is skipped, not numbered away
    assert table.declared == ()


@pytest.mark.parametrize("name, fmt", [("d.tsv", None), ("d.tab", None), ("d.tsv.gz", None), ("d.txt", "tsv")])
@pytest.mark.parametrize("bom", [False, True])
def test_tsv(tmp_path, name, fmt, bom):
    text = 'colour\tsize, in cm\tlabel\nred\t"big\tvery"\tyes\n\nblue\t\tno\n'
    table = read_table(write(tmp_path, text, name, bom), fmt)
    assert table.header == ("colour", "size, in cm", "label")
    assert cells(table) == [["red", "big\tvery", "yes"], ["blue", "", "no"]]
    assert table.lines.tolist() == [2, 4]
    assert table.declared == ()


def test_format_comes_from_the_extension_or_fmt(tmp_path):
    assert FORMATS == ("csv", "tsv", "arff", "parquet")
    names = ("a.csv", "a.tsv", "a.TAB", "a.arff.gz", "a.parquet", "a.pq", "a", "x.y/a", "builtin:chess")
    expected = ["csv", "tsv", "tsv", "arff", "parquet", "parquet", "csv", "csv", "csv"]
    assert [format_of(n) for n in names] == expected
    path = write(tmp_path, "a;b\n1;2\n", "semi.tsv")
    assert cells(read_table(path, "csv")) == [["1;2"]]  # fmt overrides the extension
    with pytest.raises(InvalidInput, match=r"unknown format 'xlsx'; choose one of csv, tsv, arff, parquet"):
        read_table(path, "xlsx")


def test_builtin_is_csv():
    table = read_table("builtin:chess")
    assert table.texts().shape == (3196, 37) and table.header[-1] == "class" and table.declared == ()


@pytest.mark.parametrize(
    "name, text, pieces",
    [
        ("a.tsv", "a\tb\tc\n1\t2\tx\n1\t2\n", ["line 3", "row has 2 fields, the header has 3"]),
        ("a.tsv", "a\tb\ta\n1\t2\t3\n", ["line 1", "duplicate column name 'a' (columns 1 and 3)"]),
        ("a.tsv", "", ["line 1", "empty"]),
        ("a.csv", "a,b\n1,2\n1,2,3\n", ["line 3", "3 fields"]),
    ],
)
def test_malformed_delimited(tmp_path, name, text, pieces):
    fails(write(tmp_path, text, name), *pieces)


# ------------------------------------------- pyarrow's CSV parser against Python's csv


def both_readers(path, delimiter=","):
    """(header, texts, lines) from read_delimited (pyarrow, falling back to csv) and from
    Python's csv alone, or the InvalidInput message each raised."""
    from bnserve.trainer.io.delimited import _csv_chunks, read_delimited

    results = []
    for read in (lambda: read_delimited(path, delimiter), lambda: next(_csv_chunks(path, delimiter, None))):
        try:
            table = read()
            results.append((table.header, table.texts().tolist(), table.lines.tolist()))
        except InvalidInput as exc:
            results.append(str(exc))
    return results


def read_by_pyarrow(path, delimiter=","):
    """Whether pyarrow read the file (read_delimited's lines are then found lazily)."""
    from bnserve.trainer.io.delimited import read_delimited

    return callable(read_delimited(path, delimiter).line_numbers)


TRICKY = [
    'a,b\n1,"x\ny"\n2,"q""r"\n',  # a quoted newline, a doubled quote
    'a,b\n"ab"cd,2\nx"y,3\n',  # quotes inside and after a field
    "a,b\r\n1,2\r\n\r\n3,4",  # CRLF, a blank line, no newline at the end
    "a,b\n 1 , 2 \n,\n",  # spaces kept, empty fields
    "a,b\n1,2\n   \n",  # a line of spaces: a row of one field
    "a,b\n1,2\n3\n",  # ragged
    'a,b\n"1,2\n',  # an unterminated quote
    "a,b\n1,\x00\n",  # a NUL (read as a character since Python 3.11)
    "a,b\n",  # a header alone
    "a,a\n1,2\n",  # a repeated name
    "",  # empty
    "\n\na,b\n1,2\n",  # blank lines before the header
    "é,ü\nñ,日本\n",
]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz"])
def test_pyarrow_and_csv_read_the_same_texts_or_refuse_alike(tmp_path, text, name):
    path = write(tmp_path, text, name, bom=name.endswith("gz"))
    arrow, reference = both_readers(path)
    assert arrow == reference
    if not isinstance(reference, str):  # a file csv reads is pyarrow's to read
        assert read_by_pyarrow(path)


def both_in_chunks(path, chunk_rows, delimiter=","):
    """iter_tables's chunks (pyarrow's streaming reader, csv reading on where it stops) and
    Python's csv alone, as lists of (texts, lines), or the InvalidInput message raised."""
    from bnserve.trainer.io.delimited import _csv_chunks, delimited_chunks

    results = []
    for chunks in (delimited_chunks, _csv_chunks):
        try:
            tables = list(chunks(path, delimiter, chunk_rows))
            results.append([(t.header, t.texts().tolist(), t.lines.tolist()) for t in tables])
        except InvalidInput as exc:
            results.append(str(exc))
    return results


@pytest.mark.parametrize("chunk_rows", [1, 2, 5, 1000])
@pytest.mark.parametrize("text", TRICKY)
def test_chunks_from_pyarrow_are_csvs_chunks(tmp_path, monkeypatch, text, chunk_rows):
    from bnserve.trainer.io import delimited

    monkeypatch.setattr(delimited, "BLOCK_BYTES", 8)  # a block per row or two: chunks cut across blocks
    arrow, reference = both_in_chunks(write(tmp_path, text), chunk_rows)
    assert arrow == reference


@pytest.mark.parametrize("bad", ["1,2,3", "1"])
def test_a_bad_row_after_good_chunks_is_found_by_csv_at_its_line(tmp_path, monkeypatch, bad):
    """pyarrow stops after yielding chunks; csv reads on from the row reached and raises,
    naming the line, as csv alone does."""
    from bnserve.trainer.io import delimited

    monkeypatch.setattr(delimited, "BLOCK_BYTES", 1024)  # many blocks: the bad row is met late
    monkeypatch.setattr(delimited, "PIECE_BYTES", 1024)  # many pieces, likewise
    path = write(tmp_path, "a,b\n" + "x,y\n" * 3000 + bad + "\n" + "x,y\n" * 10)
    first = next(delimited.delimited_chunks(path, ",", 500))
    assert callable(first.line_numbers)  # read by pyarrow
    arrow, reference = both_in_chunks(path, 500)
    assert arrow == reference and "line 3002" in arrow


UNQUOTED = [t for t in TRICKY if '"' not in t] + ["a,b\n" + "".join(f"{i % 7},{'xyz'[i % 3]}\n" for i in range(300))]


@pytest.mark.parametrize("piece_bytes", [1, 5, 64])
@pytest.mark.parametrize("text", UNQUOTED)
def test_a_file_parsed_in_pieces_on_every_core_reads_as_csv_does(tmp_path, monkeypatch, text, piece_bytes):
    """A local file without quotes is parsed in byte pieces on a pool of threads, one per
    core: the same texts in the same order, whole and in chunks, as Python's csv, or refused
    alike."""
    from bnserve.trainer.io import delimited

    cut = delimited.byte_pieces
    pieces = []
    monkeypatch.setattr(delimited, "PIECE_BYTES", piece_bytes)
    monkeypatch.setattr(delimited, "byte_pieces", lambda source: pieces.append(cut(source)) or pieces[-1])
    path = write(tmp_path, text)
    arrow, whole = both_readers(path)
    assert arrow == whole
    for chunk_rows in (1, 7, 1000):
        arrow, reference = both_in_chunks(path, chunk_rows)
        assert arrow == reference
    if not isinstance(whole, str) and len(whole[1]) > 1 and len(text) > 4 * piece_bytes:  # pyarrow's, in pieces
        assert pieces[0] is not None and len(pieces[0]) > 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.text(alphabet="ab,\n\r \t", max_size=60), piece_bytes=st.integers(1, 12))
def test_random_files_read_in_pieces_as_csv_does(tmp_path, body, piece_bytes):
    from bnserve.trainer.io import delimited

    delimited_pieces = delimited.PIECE_BYTES
    delimited.PIECE_BYTES = piece_bytes
    try:
        path = write(tmp_path, "h1,h2\n" + body)
        arrow, reference = both_readers(path)
        assert arrow == reference
        arrow, reference = both_in_chunks(path, 3)
        assert arrow == reference
    finally:
        delimited.PIECE_BYTES = delimited_pieces


def test_every_shared_data_set_reads_the_same_in_chunks():
    from tests.data_helpers import shared_datasets

    for name in ("adult-train", "hepatitis", "splice"):
        path = str(shared_datasets() / f"{name}.csv")
        arrow, reference = both_in_chunks(path, 997)
        assert arrow == reference, name


def test_a_binary_file_is_refused_as_before(tmp_path):
    path = tmp_path / "b.csv"
    path.write_bytes(bytes(range(256)) * 4)
    arrow, reference = both_readers(str(path))
    assert arrow == reference and isinstance(arrow, str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.text(alphabet='ab,"\n\r \t', max_size=40))
def test_pyarrow_never_reads_other_texts_than_csv(tmp_path, body):
    """Random CSV and TSV from the characters that matter to a parser: either both read the
    same texts (and lines), or pyarrow refuses and csv decides, as read_table does."""
    path = write(tmp_path, "h1,h2\n" + body)
    arrow, reference = both_readers(path)
    assert arrow == reference
    path = write(tmp_path, "h1\th2\n" + body, "t.tsv")
    arrow, reference = both_readers(path, "\t")
    assert arrow == reference


def test_every_shared_data_set_reads_the_same_with_both_parsers():
    from tests.data_helpers import shared_datasets

    for path in sorted(shared_datasets().glob("*.csv")):
        arrow, reference = both_readers(str(path))
        assert arrow == reference, path.name
        assert read_by_pyarrow(str(path)), path.name


# ---------------------------------------------------------------- ARFF

ARFF = r"""% The iris, abridged, and some odd values.
% Comment lines and blank lines go anywhere.

@RELATION 'iris, abridged'

@attribute 'petal width' NUMERIC
@Attribute "size, in cm" real
@attribute count INTEGER
@attribute colour {red, 'dark green', "blue, \"navy\""}
% the note is free text
@attribute note string
@attribute class {yes,no}

@DATA
5.1, 1.4, 3, 'dark green', 'a note, with a comma', yes
% a comment among the rows

?,?,?,?,?,?
4.5,2.5e1,-2,"blue, \"navy\"",'it\'s', no,{0.5}
{0 1.5, 3 'dark green', 4 'x y'}
{1 2, 5 no}, {3}
{ } {2}
"""

ARFF_CELLS = [
    ["5.1", "1.4", "3", "dark green", "a note, with a comma", "yes"],
    ["", "", "", "", "", ""],
    ["4.5", "2.5e1", "-2", 'blue, "navy"', "it's", "no"],
    ["1.5", "0", "0", "dark green", "x y", "yes"],  # omitted: 0 for numeric, the first label for nominal
    ["0", "2", "0", "red", "", "no"],  # an omitted string is missing
    ["0", "0", "0", "red", "", "yes"],
]


def arff(tmp_path, body, name="data.arff", header="@attribute a numeric\n@attribute b {x,y}\n@attribute c string\n"):
    return write(tmp_path, f"@relation r\n{header}@data\n{body}", name)


@pytest.mark.parametrize("name", ["data.arff", "data.arff.gz", "DATA.ARFF"])
@pytest.mark.parametrize("bom", [False, True])
def test_arff(tmp_path, name, bom):
    table = read_table(write(tmp_path, ARFF, name, bom))
    assert table.header == ("petal width", "size, in cm", "count", "colour", "note", "class")
    assert table.declared == (
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NOMINAL, ("red", "dark green", 'blue, "navy"')),
        Declared(NOMINAL, None),
        Declared(NOMINAL, ("yes", "no")),
    )
    assert cells(table) == ARFF_CELLS
    assert table.lines.tolist() == [15, 18, 19, 20, 21, 22]


def test_arff_by_fmt_and_crlf(tmp_path):
    path = write(tmp_path, "@relation r\r\n@attribute a {x,y}\r\n@data\r\nx\r\n\r\ny\r\n", "data.txt")
    table = read_table(path, "arff")
    assert cells(table) == [["x"], ["y"]] and table.lines.tolist() == [4, 6]


def test_arff_dates(tmp_path):
    header = (
        "@attribute when date\n"
        "@attribute day DATE 'yyyy-MM-dd'\n"
        '@attribute stamp date "dd/MM/yyyy HH:mm:ss.SSS"\n'
        "@attribute x {a,b}\n"
    )
    body = (
        "1970-01-02T00:00:00, 2020-01-01, '01/01/1970 00:00:01.250', a\n"
        "?, ?, ?, b\n"
        "{3 b}\n"  # omitted dates are 0: the epoch
        "{0 2000-03-01T12:30:15, 1 1969-12-31}\n"
    )
    table = read_table(arff(tmp_path, body, header=header))
    assert table.declared == (Declared(NUMERIC),) * 3 + (Declared(NOMINAL, ("a", "b")),)
    assert cells(table) == [
        ["86400", "1577836800", "1.25", "a"],
        ["", "", "", "b"],
        ["0", "0", "0", "b"],
        [str(int(dt.datetime(2000, 3, 1, 12, 30, 15, tzinfo=dt.UTC).timestamp())), "-86400", "0", "a"],
    ]


def test_arff_and_csv_give_the_same_cells(tmp_path):
    out = io.StringIO()
    csv.writer(out).writerows([["petal width", "size, in cm", "count", "colour", "note", "class"], *ARFF_CELLS])
    from_csv = read_table(write(tmp_path, out.getvalue(), "same.csv"))
    from_arff = read_table(write(tmp_path, ARFF, "same.arff"))
    assert from_csv.header == from_arff.header
    assert cells(from_csv) == cells(from_arff) == ARFF_CELLS


def test_arff_through_data_load(tmp_path):
    data = load(write(tmp_path, ARFF, "data.arff"))
    assert data.class_variable.name == "class" and data.n_rows == 5 and data.n_rows_dropped == 1


@pytest.mark.parametrize(
    "text, pieces",
    [
        ("", ["line 1", "the file is empty"]),
        ("% only a comment\n\n", ["line 2", "no @data"]),
        ("@relation r\n@attribute a numeric\n1\n", ["line 3", "unexpected '1' before @data"]),
        ("@relation r\n@attribute a numeric\n", ["line 2", "no @data"]),
        ("@relation r\n@data\n1\n", ["line 2", "@data before any @attribute"]),
        ("@relation r\n@attribute a numeric\n@data 1\n", ["line 3", "the lines after @data"]),
        (
            "@relation r\n@attribute a numeric\n@data\n1\n@attribute 'b c' numeric\n",
            ["line 5", "@attribute 'b c' after @data"],
        ),
        (
            "@relation r\n@attribute a numeric\n@attribute b numbers\n@data\n",
            ["line 3", "attribute 'b'", "unknown type 'numbers'"],
        ),
        ("@relation r\n@attribute a numeric\n@attribute b\n@data\n", ["line 3", "attribute 'b'", "no type"]),
        (
            "@relation r\n@attribute bag relational\n@attribute x numeric\n@end bag\n@data\n",
            ["line 2", "attribute 'bag'", "relational"],
        ),
        (
            "@relation r\n@attribute a numeric\n@attribute 'a' {x}\n@data\n",
            ["line 3", "duplicate column name 'a' (columns 1 and 2)"],
        ),
        ("@relation r\n@attribute a {x,y,x}\n@data\n", ["line 2", "attribute 'a'", "repeats 'x'"]),
        ("@relation r\n@attribute a {x,y\n@data\n", ["line 2", "attribute 'a'", "no closing"]),
        ("@relation r\n@attribute 'a b numeric\n@data\n", ["line 2", "unterminated quote"]),
        (
            "@relation r\n@attribute d date 'yyyy-MM-dd zzz'\n@data\n",
            ["line 2", "attribute 'd'", "'zzz' is not supported"],
        ),
    ],
)
def test_malformed_arff_headers(tmp_path, text, pieces):
    fails(write(tmp_path, text, "bad.arff"), *pieces)


@pytest.mark.parametrize(
    "body, pieces",
    [
        ("1,x,s\n1,x\n", ["line 7", "row has 2 values, the header has 3"]),
        ("1,x,s\n\n1,x,s,t\n", ["line 8", "row has 4 values"]),
        ("{0 1, 3 x}\n", ["line 6", "sparse index 3 is out of range", "0 to 2"]),
        ("{0 1, 0 2}\n", ["line 6", "column 'a'", "sparse index 0 repeated"]),
        ("{0 1 1 x}\n", ["line 6", "column 'a'", "value '1 1 x' is not a number"]),
        ("{0 1, 1 x\n", ["line 6", "sparse row has no closing '}'"]),
        ("{0 1, 1 x y}\n", ["line 6", "column 'b'", "value 'x y' is not one of the declared labels"]),
        ("{0 1, x}\n", ["line 6", "sparse entry 2", "cannot parse 'x}'"]),
        ("{0 1, 1 x} 7 {1}\n", ["line 6", "the end of the sparse row", "cannot parse '} 7 {1}'"]),
        ("1,x,s,t,'u\n", ["line 6", "value 5", "unterminated quote"]),
        ("1,x,s\n2,z,s\n", ["line 7", "column 'b'", "value 'z' is not one of the declared labels {x, y}"]),
        ("{1 'x '}\n", ["line 6", "column 'b'", "value 'x '"]),
        ("1,x,s\n1e3,y,s\none,y,s\n", ["line 8", "column 'a'", "value 'one' is not a number"]),
        ("1,x,'s\n", ["line 6", "column 'c'", "unterminated quote"]),
        ('1,"x,s\n', ["line 6", "column 'b'", "unterminated quote"]),
        ("{2 's}\n", ["line 6", "column 'c'", "unterminated quote"]),
        ("1,x,'s't\n", ["line 6", "column 'c'", "cannot parse"]),
    ],
)
def test_malformed_arff_rows(tmp_path, body, pieces):
    fails(arff(tmp_path, body, "bad.arff"), *pieces)


def test_malformed_arff_date(tmp_path):
    header = "@attribute x numeric\n@attribute 'the day' date 'yyyy-MM-dd'\n"
    path = arff(tmp_path, "1,2020-01-01\n2,2020-13-01\n", header=header)
    fails(path, "line 6", "column 'the day'", "value '2020-13-01'", "'yyyy-MM-dd'")
    default = "@attribute x numeric\n@attribute d date\n"
    fails(arff(tmp_path, "1,2020-01-01 00:00:00\n", header=default), "line 5", "column 'd'", "yyyy-MM-dd'T'HH:mm:ss")


# ---------------------------------------------------------------- Parquet


def parquet(tmp_path, table, name="data.parquet", **kwargs):
    path = tmp_path / name
    pq.write_table(table, path, **kwargs)
    return str(path)


def test_parquet_column_types(tmp_path):
    table = pa.table(
        {
            "int": pa.array([1, None, -3], pa.int64()),
            "small int": pa.array([7, 8, None], pa.int8()),
            "float": pa.array([5.1, None, float("nan")]),
            "float32": pa.array([0.5, 2.0, None], pa.float32()),
            "string": pa.array(["a b", None, "c, d"]),
            "large": pa.array(["x", "y", None], pa.large_string()),
            "dict": pa.array(["red", None, "blue"]).dictionary_encode(),
            "bool": pa.array([True, None, False]),
            "date": pa.array([dt.date(1970, 1, 2), None, dt.date(1969, 12, 31)]),
            "ts": pa.array(
                [dt.datetime(2020, 1, 1, 0, 0, 0, 500000), None, dt.datetime(1970, 1, 1)], pa.timestamp("us")
            ),
            "ts utc": pa.array([1, None, 2], pa.timestamp("ms", "UTC")),
            "ts s": pa.array([1, 2, None], pa.timestamp("s")),
        }
    )
    result = read_table(parquet(tmp_path, table))
    assert result.header == tuple(table.column_names)
    assert result.declared == (
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NOMINAL),
        Declared(NOMINAL),
        Declared(NOMINAL, ("red", "blue")),
        Declared(NOMINAL, ("false", "true")),
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NUMERIC),
        Declared(NUMERIC),
    )
    assert cells(result) == [
        ["1", "7", "5.1", "0.5", "a b", "x", "red", "true", "86400", "1577836800.5", "0.001", "1"],
        ["", "8", "", "2.0", "", "y", "", "", "", "", "", "2"],
        ["-3", "", "", "", "c, d", "", "blue", "false", "-86400", "0", "0.002", ""],
    ]
    assert result.lines.tolist() == [2, 3, 4]


def test_parquet_dictionaries_across_row_groups_and_fmt(tmp_path):
    chunks = [pa.array(["b", "a"]).dictionary_encode(), pa.array(["c", None, "a"]).dictionary_encode()]
    table = pa.table({"label": pa.chunked_array(chunks), "n": [1, 2, 3, 4, 5]})
    path = parquet(tmp_path, table, "data.bin", row_group_size=2)
    result = read_table(path, "parquet")
    labels = result.declared[0].labels
    assert result.declared[0].kind == NOMINAL and sorted(labels) == ["a", "b", "c"]
    assert result.texts()[:, 0].tolist() == ["b", "a", "c", "", "a"]


def test_parquet_gz_and_no_rows(tmp_path):
    source = parquet(tmp_path, pa.table({"a": pa.array([], pa.string()), "b": pa.array([], pa.float64())}))
    gz = tmp_path / "data.parquet.gz"
    gz.write_bytes(gzip.compress(open(source, "rb").read()))
    for path in (source, str(gz)):
        result = read_table(path)
        assert result.header == ("a", "b") and result.texts().shape == (0, 2) and result.lines.size == 0
        assert result.declared == (Declared(NOMINAL), Declared(NUMERIC))


def test_malformed_parquet(tmp_path):
    fails(parquet(tmp_path, pa.table({"ok": [1], "when": pa.array([1], pa.time32("s"))})), "column 'when'", "time32")
    decimal = pa.table({"ok": [1], "n": pa.array([1], pa.decimal128(5, 2))})
    fails(parquet(tmp_path, decimal), "column 'n'", "decimal128(5, 2)")
    # nested and binary columns: refused by name too, not Arrow's traceback from dictionary_encode
    fails(parquet(tmp_path, pa.table({"ok": [1], "tags": pa.array([[1, 2]])})), "column 'tags'", "list<")
    fails(parquet(tmp_path, pa.table({"ok": [1], "point": pa.array([{"x": 1}])})), "column 'point'", "struct<")
    fails(parquet(tmp_path, pa.table({"ok": [1], "blob": pa.array([b"ab"])})), "column 'blob'", "binary")
    fails(parquet(tmp_path, pa.table([pa.array([1]), pa.array([2])], names=["a", "a"])), "duplicate column name 'a'")
    fails(parquet(tmp_path, pa.table({"": [1]})), "column 1 needs a name")
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    fails(str(empty), "line 1", "the file is empty")
    fails(write(tmp_path, "a,b\n1,2\n", "not.parquet"), "not a readable Parquet file")
    fails(str(tmp_path / "missing.parquet"), "cannot open")


@pytest.mark.parametrize("quoted", [False, True])
def test_a_chunk_holds_arrays_of_its_own_rows_not_of_a_million(tmp_path, quoted):
    """Reading in chunks (trainer predict, --chunk-rows), each chunk's positions lie in arrays
    of at most ``chunk_rows`` rows: slabs of a million rows a chunk, mostly unused, left the
    heap fragmented (trainer predict of a 1M-row file peaked at 212 MiB, 172 with this)."""
    from bnserve.trainer.io.delimited import delimited_chunks

    cell = '"x"' if quoted else "x"
    path = write(tmp_path, "a,b\n" + f"{cell},1\n" * 1000)
    for table in delimited_chunks(path, ",", 300):
        for column in table.columns:
            held = column.index.base if column.index.base is not None else column.index
            assert held.size <= 300


@pytest.mark.parametrize("piece_bytes", [64, 1 << 20])
def test_a_piece_that_is_not_utf8_is_refused_by_pyarrow_and_named_by_csv(tmp_path, monkeypatch, piece_bytes):
    """The pieces' cells are not checked for UTF-8 one by one, their few distinct texts are:
    a bad byte deep in the file is still pyarrow's refusal, and csv's error."""
    from bnserve.trainer.io import delimited
    from bnserve.trainer.io.limits import DEFAULT_READ_LIMITS

    monkeypatch.setattr(delimited, "PIECE_BYTES", piece_bytes)
    path = tmp_path / "bad.csv"
    path.write_bytes(b"a,b\n" + b"x,y\n" * 5000 + b"x,\xff\xfe\n" + b"x,y\n" * 10)
    header = delimited.read_header(str(path), ",")
    assert delimited._arrow_table(str(path), ",", header, None, DEFAULT_READ_LIMITS) is None
    arrow, reference = both_readers(str(path))
    assert arrow == reference and "not UTF-8 text" in arrow


def test_the_pieces_are_parsed_on_a_thread_per_core_up_to_four(tmp_path, monkeypatch):
    """Two pieces a thread in flight: on a machine of 64 cores that would be 128 MiB of
    text and its tables held at once; four threads already outrun the columns' builder."""
    import os
    import threading

    from bnserve.trainer.io import delimited

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert delimited._parse_workers() == delimited.PARSE_THREADS == 4
    monkeypatch.setattr(delimited, "PIECE_BYTES", 16)
    seen = set()
    real = delimited.pa_csv.read_csv

    def read_csv(*args, **kwargs):
        seen.add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(delimited.pa_csv, "read_csv", read_csv)
    path = write(tmp_path, "a,b\n" + "x,1\n" * 500)
    assert delimited.read_delimited(path, ",").n_rows == 500
    assert 1 <= len(seen) <= 4 and all(name.startswith("parsing") for name in seen)


@pytest.mark.parametrize(
    "cells",
    [
        ["1", "0", "1", "2"],
        ["", "a", "", "b", "a"],
        ["x"] * 100 + ["", "y"] + ["x"] * 30 + ["z"],  # texts first seen past the cells read in Python
        ["b"] * 100 + ["c", "a", "c"],  # so, every cell one byte
        ["", ""],
        ["ab", "c", ""],  # a longer text: Arrow's dictionary
        ["é", "e"],
    ],
)
def test_a_piece_of_plain_strings_encodes_as_arrows_dictionary(cells):
    """text_piece of a plain string array (the pieces' parse) gives the texts in order of
    first sight and each row's position, as the dictionary-encoded parse did."""
    from bnserve.trainer.io.table import text_piece

    strings = pa.array(cells, pa.string())
    reference = strings.dictionary_encode()
    texts, positions = text_piece(strings, check_utf8=True)
    assert texts == reference.dictionary.to_pylist()
    assert positions.tolist() == reference.indices.to_pylist()
    assert [texts[p] for p in positions] == cells
    texts, positions = text_piece(strings.slice(1), check_utf8=True)  # an array over part of its buffers
    assert [texts[p] for p in positions] == cells[1:]


def test_a_piece_with_a_lone_byte_that_is_not_utf8_is_refused():
    from bnserve.trainer.io.table import text_piece

    strings = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(b"\0\0\0\0\1\0\0\0\2\0\0\0"), pa.py_buffer(b"a\xff")]
    )
    with pytest.raises(pa.ArrowInvalid):
        text_piece(strings, check_utf8=True)
