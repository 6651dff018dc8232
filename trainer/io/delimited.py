"""CSV and TSV: a header row, standard quoting, UTF-8 (a BOM is fine), blank lines skipped;
the whole file as one ``RawTable``, or in tables of a few rows at a time (``--chunk-rows``)."""

from __future__ import annotations

import csv
from collections.abc import Iterator

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.trainer.io.sources import open_text
from bnserve.trainer.io.table import RawTable, cells_array, check_header


def read_delimited(source: str, delimiter: str) -> RawTable:
    """CSV (or TSV with ``delimiter="\\t"``): a header row, standard quoting, blank lines skipped."""
    return next(delimited_chunks(source, delimiter, None))


def delimited_chunks(source: str, delimiter: str, chunk_rows: int | None) -> Iterator[RawTable]:
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
