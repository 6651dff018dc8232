"""The file readers: CSV and TSV from hand-made files, malformed ones included."""

import gzip
import re

import pytest

from store.errors import InvalidInput
from trainer.readers import FORMATS, format_of, read_table


def write(tmp_path, text, name="data.csv", bom=False):
    path = tmp_path / name
    data = ("\ufeff" if bom else "") + text
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
            f.write(data)
    else:
        path.write_text(data, encoding="utf-8", newline="")
    return str(path)


def cells(table):
    return table.cells.tolist()


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
    assert FORMATS == ("csv", "tsv")
    names = ("a.csv", "a.tsv", "a.TAB", "a.tsv.gz", "a", "x.y/a", "builtin:chess")
    expected = ["csv", "tsv", "tsv", "tsv", "csv", "csv", "csv"]
    assert [format_of(n) for n in names] == expected
    path = write(tmp_path, "a;b\n1;2\n", "semi.tsv")
    assert cells(read_table(path, "csv")) == [["1;2"]]  # fmt overrides the extension
    with pytest.raises(InvalidInput, match=r"unknown format 'xlsx'; choose one of csv, tsv"):
        read_table(path, "xlsx")


def test_builtin_is_csv():
    table = read_table("builtin:chess")
    assert table.cells.shape == (3196, 37) and table.header[-1] == "class" and table.declared == ()


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
