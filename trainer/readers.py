"""Read data files into a ``RawTable``: the header and every cell as text, "" = missing.

Readers only parse; typing, discretisation and coding happen in ``trainer.data``. A
format that declares column types (ARFF, Parquet) passes them on in ``RawTable.declared``.
Errors are ``InvalidInput`` naming the file, line and column.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass, field
from importlib import resources
from typing import Sequence

import numpy as np

from store.errors import InvalidInput
from store.model import MAX_NAME_LENGTH

BUILTIN_PREFIX = "builtin:"
BUILTIN_DATASETS = {"chess": "chess.csv.gz"}

NOMINAL = "nominal"
NUMERIC = "numeric"
FORMATS = ("csv", "tsv", "arff", "parquet")


@dataclass(frozen=True)
class Declared:
    """A column type the file itself declares: nominal (with its label domain, in
    declared order, when the format gives one) or numeric."""

    kind: str
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RawTable:
    """A CSV as read: header and the data cells as a (rows, columns) object array of str.

    ``lines[r]`` is the file line on which data row ``r`` ends (for error messages).
    ``declared`` is empty, or per column the type the file declares (None: undeclared).
    """

    source: str
    header: tuple[str, ...]
    cells: np.ndarray
    lines: np.ndarray
    declared: tuple[Declared | None, ...] = field(default=())


def read_table(source: str, fmt: str | None = None) -> RawTable:
    """Parse a CSV file (``.gz`` transparently) or ``builtin:NAME`` into a ``RawTable``."""
    text = _open_text(source)
    try:
        with text:
            reader = csv.reader(text)
            try:
                header = next(reader, None)
                if header is None:
                    raise InvalidInput(f"{source}: line 1: the file is empty")
                if not header:
                    raise InvalidInput(f"{source}: line 1: the header line is blank")
                rows: list[list[str]] = []
                lines: list[int] = []
                for row in reader:  # the parser is row by row anyway; keep only line numbers here
                    if row:  # csv yields [] for a blank line
                        rows.append(row)
                        lines.append(reader.line_num)
            except csv.Error as exc:
                raise InvalidInput(f"{source}: line {reader.line_num}: malformed CSV: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text: {exc.reason}") from None
    except (OSError, EOFError) as exc:
        raise InvalidInput(f"{source}: cannot read: {exc}") from None
    _check_header(source, header)
    line_numbers = np.asarray(lines, dtype=np.int64)
    widths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    bad = np.flatnonzero(widths != len(header))
    if bad.size:
        r = int(bad[0])
        raise InvalidInput(
            f"{source}: line {line_numbers[r]}: row has {widths[r]} fields, the header has {len(header)}"
        )
    cells = np.empty((len(rows), len(header)), dtype=object)
    if rows:
        cells[:] = rows
    return RawTable(source, tuple(header), cells, line_numbers)


def _open_text(source: str) -> io.TextIOBase:
    if source.startswith(BUILTIN_PREFIX):
        name = source[len(BUILTIN_PREFIX):]
        if name not in BUILTIN_DATASETS:
            raise InvalidInput(f"unknown built-in data set {source!r}; known: {', '.join(BUILTIN_DATASETS)}")
        raw = resources.files("trainer.datasets").joinpath(BUILTIN_DATASETS[name]).open("rb")
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8-sig", newline="")
    try:
        if source.endswith(".gz"):
            return gzip.open(source, "rt", encoding="utf-8-sig", newline="")
        return open(source, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InvalidInput(f"{source}: cannot open: {exc.strerror or exc}") from None


def _check_header(source: str, header: Sequence[str]) -> None:
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if not name or len(name) > MAX_NAME_LENGTH:
            raise InvalidInput(f"{source}: line 1: column {i} needs a name of 1 to {MAX_NAME_LENGTH} characters")
        if name in seen:
            raise InvalidInput(f"{source}: line 1: duplicate column name {name!r} (columns {seen[name]} and {i})")
        seen[name] = i
