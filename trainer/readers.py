"""Read data files into a ``RawTable``: the header and every cell as text, "" = missing.

Readers only parse; typing, discretisation and coding happen in ``trainer.data``. A
format that declares column types (ARFF, Parquet) passes them on in ``RawTable.declared``.
Errors are ``InvalidInput`` naming the file, line and column.

This module holds the dispatch, the CSV/TSV reader and the checks every format shares
(header names, ragged rows); ``trainer.arff`` and ``trainer.parquet`` hold the others.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass, field
from importlib import resources
from typing import Iterator, IO, Sequence

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import MAX_NAME_LENGTH

BUILTIN_PREFIX = "builtin:"
BUILTIN_DATASETS = {"chess": "chess.csv.gz"}

NOMINAL = "nominal"
NUMERIC = "numeric"

FORMATS = ("csv", "tsv", "arff", "parquet")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".arff": "arff", ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class Declared:
    """A column type the file itself declares: nominal (with its label domain, in
    declared order, when the format gives one) or numeric."""

    kind: str
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RawTable:
    """A file as read: header and the data cells as a (rows, columns) object array of str.

    ``lines[r]`` is the file line on which data row ``r`` ends (for error messages; for
    Parquet, the row number + 1, as if there were a header line).
    ``declared`` is empty, or per column the type the file declares (None: undeclared).
    """

    source: str
    header: tuple[str, ...]
    cells: np.ndarray
    lines: np.ndarray
    declared: tuple[Declared | None, ...] = field(default=())


def read_table(source: str, fmt: str | None = None) -> RawTable:
    """Parse ``source`` (a path or ``builtin:NAME``) as ``fmt``, by default the one its
    extension names (CSV when none does); ``.gz`` is read transparently."""
    if fmt is None:
        fmt = format_of(source)
    elif fmt not in FORMATS:
        raise InvalidInput(f"{source}: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    # Imported here, not at the top: those modules build on the helpers below.
    if fmt == "arff":
        from bnserve.trainer.arff import read_arff

        return read_arff(source)
    if fmt == "parquet":
        from bnserve.trainer.parquet import read_parquet

        return read_parquet(source)
    return _read_delimited(source, "\t" if fmt == "tsv" else ",")


def format_of(source: str) -> str:
    """The format a file's extension names (``.gz`` looked through), CSV when none does."""
    if source.startswith(BUILTIN_PREFIX):
        source = BUILTIN_DATASETS.get(source[len(BUILTIN_PREFIX):], "")
    name = source.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    dot = name.rfind(".")
    return EXTENSIONS.get(name[dot:], "csv") if dot >= 0 else "csv"


def _read_delimited(source: str, delimiter: str) -> RawTable:
    """CSV (or TSV with ``delimiter="\\t"``): a header row, standard quoting, blank lines skipped."""
    return next(_delimited_chunks(source, delimiter, None))


def iter_tables(source: str, fmt: str | None, chunk_rows: int) -> Iterator[RawTable]:
    """The file as consecutive ``RawTable``s of at most ``chunk_rows`` data rows each (the
    header repeated on each), for training on a file larger than memory: CSV and TSV only."""
    fmt = fmt or format_of(source)
    if fmt not in ("csv", "tsv"):
        raise InvalidInput(f"{source}: reading in chunks takes CSV or TSV files, not {fmt}")
    return _delimited_chunks(source, "\t" if fmt == "tsv" else ",", chunk_rows)


def _delimited_chunks(source: str, delimiter: str, chunk_rows: int | None) -> Iterator[RawTable]:
    """CSV or TSV rows in tables of ``chunk_rows`` (None: one table); always at least one table."""
    kind = "TSV" if delimiter == "\t" else "CSV"
    text = open_text(source)
    try:
        with text:
            reader = csv.reader(text, delimiter=delimiter)
            try:
                header = next(reader, None)
                if header is None:
                    raise InvalidInput(f"{source}: line 1: the file is empty")
                if not header:
                    raise InvalidInput(f"{source}: line 1: the header line is blank")
                check_header(source, header)
                rows: list[list[str]] = []
                lines: list[int] = []
                sent = False
                for row in reader:  # the parser is row by row anyway; keep only line numbers here
                    if row:  # csv yields [] for a blank line
                        rows.append(row)
                        lines.append(reader.line_num)
                        if chunk_rows is not None and len(rows) == chunk_rows:
                            yield _table(source, header, rows, lines)
                            rows, lines, sent = [], [], True
                if rows or not sent:
                    yield _table(source, header, rows, lines)
            except csv.Error as exc:
                raise InvalidInput(f"{source}: line {reader.line_num}: malformed {kind}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text: {exc.reason}") from None
    except (OSError, EOFError) as exc:
        raise InvalidInput(f"{source}: cannot read: {exc}") from None


def _table(source: str, header: list[str], rows: list[list[str]], lines: list[int]) -> RawTable:
    line_numbers = np.asarray(lines, dtype=np.int64)
    return RawTable(source, tuple(header), cells_array(source, rows, line_numbers, len(header)), line_numbers)


# ---------------------------------------------------------------- shared by every format


def open_binary(source: str) -> IO[bytes]:
    """The bytes of a file or a built-in data set, gunzipped when the name ends in ``.gz``."""
    if source.startswith(BUILTIN_PREFIX):
        name = source[len(BUILTIN_PREFIX):]
        if name not in BUILTIN_DATASETS:
            raise InvalidInput(f"unknown built-in data set {source!r}; known: {', '.join(BUILTIN_DATASETS)}")
        raw = resources.files("bnserve.trainer.datasets").joinpath(BUILTIN_DATASETS[name]).open("rb")
        return gzip.GzipFile(fileobj=raw)
    try:
        if source.endswith(".gz"):
            return gzip.open(source, "rb")
        return open(source, "rb")
    except OSError as exc:
        raise InvalidInput(f"{source}: cannot open: {exc.strerror or exc}") from None


def open_text(source: str) -> io.TextIOBase:
    """UTF-8 text (a leading BOM dropped), line endings left to the parser."""
    return io.TextIOWrapper(open_binary(source), encoding="utf-8-sig", newline="")


def check_header(source: str, header: Sequence[str], lines: Sequence[int] | None = None) -> None:
    """Names of 1..MAX_NAME_LENGTH characters, no duplicates; ``lines[i]``: where column i
    is named (default line 1, a header row)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        line = lines[i - 1] if lines is not None else 1
        if not name or len(name) > MAX_NAME_LENGTH:
            raise InvalidInput(f"{source}: line {line}: column {i} needs a name of 1 to {MAX_NAME_LENGTH} characters")
        if name in seen:
            raise InvalidInput(f"{source}: line {line}: duplicate column name {name!r} (columns {seen[name]} and {i})")
        seen[name] = i


def cells_array(source: str, rows: list[list[str]], lines: np.ndarray, width: int, unit: str = "fields") -> np.ndarray:
    """The rows as a (rows, width) object array; a row of another width is an error at its line."""
    widths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    bad = np.flatnonzero(widths != width)
    if bad.size:
        r = int(bad[0])
        raise InvalidInput(f"{source}: line {lines[r]}: row has {widths[r]} {unit}, the header has {width}")
    cells = np.empty((len(rows), width), dtype=object)
    if rows:
        cells[:] = rows
    return cells


def seconds_texts(ticks: np.ndarray, per_second: int) -> np.ndarray:
    """Integer ticks (``per_second`` to the second) since the epoch as text of seconds:
    whole seconds plain ("86400"), others as ``repr(float)`` ("0.25")."""
    ticks = np.asarray(ticks, dtype=np.int64)
    whole = ticks % per_second == 0
    texts = np.empty(ticks.shape, dtype=object)
    texts[whole] = list(map(str, (ticks[whole] // per_second).tolist()))
    texts[~whole] = list(map(repr, (ticks[~whole] / per_second).tolist()))
    return texts
