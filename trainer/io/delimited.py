"""CSV and TSV: a header row, standard quoting, UTF-8 (a BOM is fine), blank lines skipped;
the whole file as one ``RawTable``, or in tables of a few rows at a time (``--chunk-rows``).

A file is parsed by pyarrow straight into dictionary-encoded columns (each distinct text
once, a position per cell in the narrowest integer type: a byte for a column of few values;
no string, no Python object per cell; ``TextColumnBuilder``): a local file without a quote
character, or a part of one read apart (``part_chunks``), in pieces of ``PIECE_BYTES`` on a
pool of threads, one per core (at most four) (``_parsed_pieces``); any other file by the
streaming reader, a block at a time. Python's ``csv`` module is the reference: a file
pyarrow refuses is read again by it, so a malformed file gets the same error (naming its
line) as before; and the rows' line numbers, which only error messages need, are counted by
it when first asked for. Both parsers give the same
texts for every file both accept (``tests/trainer/test_readers.py``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from bnserve.store.errors import InvalidInput
from bnserve.trainer.cores import cores, ordered_map
from bnserve.trainer.io.limits import DEFAULT_READ_LIMITS, ReadLimits
from bnserve.trainer.io.sources import BUILTIN_PREFIX, ByteCounter, is_url, open_binary, open_text
from bnserve.trainer.io.table import (
    RawTable,
    TextColumnBuilder,
    cells_array,
    check_header,
    position_matrix,
    text_piece,
)


def read_delimited(
    source: str, delimiter: str, counted: ByteCounter | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> RawTable:
    """CSV (or TSV with ``delimiter="\\t"``): a header row, standard quoting, blank lines skipped.
    ``counted``: as ``open_binary``'s (pyarrow's reading, the one that reads almost every file)."""
    header = read_header(source, delimiter, limits)
    return _arrow_table(source, delimiter, header, counted, limits) or next(
        _csv_chunks(source, delimiter, None, limits=limits)
    )


def delimited_chunks(
    source: str, delimiter: str, chunk_rows: int, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[RawTable]:
    """CSV or TSV rows in tables of ``chunk_rows`` rows (the last may be shorter; always at
    least one table), from pyarrow's streaming reader; where it stops on something, Python's
    ``csv`` reads on from the row reached (and raises, naming the line, if the file is bad)."""
    header = read_header(source, delimiter, limits)
    sent = 0
    quoted = may_quote(source)
    pieces = None if quoted else byte_pieces(source)
    for table in _arrow_chunks(source, delimiter, header, chunk_rows, quoted=quoted, limits=limits, pieces=pieces):
        if table is None:  # pyarrow refused what follows
            yield from _csv_chunks(source, delimiter, chunk_rows, skip=sent, first=sent == 0, limits=limits)
            return
        sent += table.n_rows
        yield table


def _csv_chunks(
    source: str,
    delimiter: str,
    chunk_rows: int | None,
    skip: int = 0,
    first: bool = True,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Iterator[RawTable]:
    """The rows after the first ``skip``, parsed by Python's ``csv``, in tables of
    ``chunk_rows`` (None: one table); at least one table when ``first``."""
    with _csv_reader(source, delimiter, limits) as reader:
        header = _header(source, reader, limits)
        rows: list[list[str]] = []
        lines: list[int] = []
        sent = not first
        for row in reader:  # the parser is row by row anyway; keep only line numbers here
            if row:  # csv yields [] for a blank line
                if skip:
                    skip -= 1
                    continue
                rows.append(row)
                lines.append(reader.line_num)
                if chunk_rows is not None and len(rows) == chunk_rows:
                    yield _table(source, header, rows, lines)
                    rows, lines, sent = [], [], True
        if rows or not sent:
            yield _table(source, header, rows, lines)


def read_header(source: str, delimiter: str, limits: ReadLimits = DEFAULT_READ_LIMITS) -> list[str]:
    """The header row, checked (names, no repeats, at most ``limits.max_columns``)."""
    with _csv_reader(source, delimiter, limits) as reader:
        return _header(source, reader, limits)


@contextmanager
def _csv_reader(source: str, delimiter: str, limits: ReadLimits) -> Iterator[Any]:
    """Python's ``csv`` reader over the file; its errors as ``InvalidInput`` naming the line."""
    kind = "TSV" if delimiter == "\t" else "CSV"
    text = open_text(source, limits=limits)
    reader = csv.reader(_header_bounded(source, text, limits), delimiter=delimiter)
    try:
        with text:
            yield reader
    except csv.Error as exc:
        raise InvalidInput(f"{source}: line {reader.line_num}: malformed {kind}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text: {exc.reason}") from None
    except (OSError, EOFError) as exc:
        raise InvalidInput(f"{source}: cannot read: {exc}") from None


def _header_bounded(source: str, text: io.TextIOBase, limits: ReadLimits) -> Iterator[str]:
    """The lines of ``text``, the first read no further than a header within ``limits``
    can reach: a longer one is refused before it is split into fields."""
    cap = limits.header_chars
    first = text.readline(-1 if cap is None else cap)
    if cap is not None and len(first) >= cap and not first.endswith(("\n", "\r")):
        raise limits.too_long_header(source)
    if first:
        yield first
        yield from text


def _header(source: str, reader: Any, limits: ReadLimits) -> list[str]:
    header = next(reader, None)
    if header is None:
        raise InvalidInput(f"{source}: line 1: the file is empty")
    if not header:
        raise InvalidInput(f"{source}: line 1: the header line is blank")
    limits.check_columns(source, len(header))
    check_header(source, header, row_index=True)
    return header


def _table(source: str, header: list[str], rows: list[list[str]], lines: list[int]) -> RawTable:
    line_numbers = np.asarray(lines, dtype=np.int64)
    cells = cells_array(source, rows, line_numbers, len(header))
    return RawTable.of_cells(source, header, cells, line_numbers)


def _arrow_table(
    source: str, delimiter: str, header: list[str], counted: ByteCounter | None, limits: ReadLimits
) -> RawTable | None:
    """The whole file parsed by pyarrow, every column dictionary-encoded; None where pyarrow
    refuses it or reads another header than ``csv``'s (Python's ``csv`` then decides)."""
    opener = partial(open_binary, source, counted, limits)
    rows = unquoted_rows(source)
    pieces = None if rows is None else byte_pieces(source)
    table = next(
        _arrow_chunks(
            source,
            delimiter,
            header,
            None,
            opener,
            quoted=rows is None,
            limits=limits,
            pieces=pieces,
            counted=counted,
            rows_at_most=rows,
        )
    )
    pa.default_memory_pool().release_unused()  # what the parse freed, back to the system before coding
    return table


def _arrow_chunks(
    source: str,
    delimiter: str,
    header: Sequence[str],
    chunk_rows: int | None,
    opener: Callable[[], IO[bytes] | io.RawIOBase] | None = None,
    whole_file: bool = True,
    quoted: bool = True,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
    pieces: list[tuple[int, int]] | None = None,
    counted: ByteCounter | None = None,
    rows_at_most: int | None = None,
) -> Iterator[RawTable | None]:
    """Tables of ``chunk_rows`` rows (None: one table of every row) from pyarrow's streaming
    reader over ``opener()`` (the file), then a None if it stopped on something before the
    end. Each block is parsed straight into dictionary-encoded columns and added to the
    chunk's ``TextColumnBuilder``s, so no string per cell is held, only a narrow position
    per cell. ``quoted``: the file may hold a quote, so a line end may be inside a field
    (when it holds none, pyarrow splits rows at every line end, faster). Their lines are
    counted by ``csv`` when asked for, if the rows are the ``whole_file``'s. ``pieces``: the
    file's byte ranges (``byte_pieces``), parsed on every core instead (``_parsed_pieces``).
    ``rows_at_most``: with one table of every row, the most rows the file holds: the
    positions are then written into one ``position_matrix`` of that many rows (the table's
    ``positions`` when it holds that many)."""
    header = list(header)
    start = held = 0
    matrix = None if chunk_rows is not None or rows_at_most is None else position_matrix(rows_at_most, len(header))
    builders = [TextColumnBuilder(chunk_rows, None if matrix is None else matrix[:, j]) for j in range(len(header))]
    try:
        with contextlib.ExitStack() as stack:
            if pieces is None:
                raw = stack.enter_context((opener or (lambda: open_binary(source, limits=limits)))())
                batches: Iterator[pa.RecordBatch] = pa_csv.open_csv(
                    raw,
                    read_options=pa_csv.ReadOptions(block_size=BLOCK_BYTES),
                    parse_options=_parse_options(delimiter, quoted),
                    convert_options=_as_text(header),
                )
                names = batches.schema.names  # type: ignore[attr-defined]
                texts: Iterator[list[tuple[list[str], np.ndarray]]] = (
                    [text_piece(column) for column in batch.columns] for batch in batches
                )
            else:
                parsed = stack.enter_context(_parsed_pieces(source, delimiter, header, pieces, counted))
                names, first = next(parsed)  # the first piece's header, as pyarrow read it
                texts = itertools.chain([first], (piece for _, piece in parsed))
            if names != header:
                yield None
                return
            for piece in texts:
                n, done = (piece[0][1].size if piece else 0), 0
                while done < n:
                    take = n - done if chunk_rows is None else min(n - done, chunk_rows - held)
                    for builder, (labels, positions) in zip(builders, piece):
                        builder.add(labels, positions[done : done + take])
                    held += take
                    done += take
                    if held == chunk_rows:
                        table = _built(
                            source, header, builders, held, _lines(source, delimiter, start, whole_file, limits)
                        )
                        start, held = start + held, 0
                        yield table
    except (pa.ArrowException, OSError, EOFError):
        yield None
        return
    if held or not start:
        whole = matrix if matrix is not None and matrix.shape[0] == held else None
        yield _built(source, header, builders, held, _lines(source, delimiter, start, whole_file, limits), whole)


BLOCK_BYTES = 1 << 20  # pyarrow's streaming reader parses the file in blocks of this size
PIECE_BYTES = 1 << 20  # a local file without quotes is parsed in pieces of about this size, on every core


def byte_pieces(source: str, span: tuple[int, int] | None = None) -> list[tuple[int, int]] | None:
    """The whole file (or its byte range ``span``, whole lines) as byte ranges [start, end) of
    about ``PIECE_BYTES``, each ending at a line end (the first of a whole file holds the
    header line), for ``_parsed_pieces``; None unless it is a local file, not gzipped (the
    caller knows it holds no quote, or lets ``_parsed_pieces`` refuse one)."""
    if source.startswith(BUILTIN_PREFIX) or source.endswith(".gz") or is_url(source):
        return None
    piece_bytes = PIECE_BYTES
    try:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size if span is None else span[1]
            cuts = [0 if span is None else span[0]]
            while cuts[-1] + piece_bytes < size:
                f.seek(cuts[-1] + piece_bytes)
                rest = f.readline()  # to the end of the line holding that byte
                if not rest.endswith(b"\n"):
                    break
                cuts.append(f.tell())
            cuts.append(size)
    except OSError:  # not a regular file: read it in order
        return None
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a] or None


PARSE_THREADS = 4  # at most: past a few, this thread's adding the pieces to the columns is the bound


def _parse_workers() -> int:
    """A thread per core this work may use (``cores``: ``trainer fit --jobs 1``, one), at
    most ``PARSE_THREADS`` (two pieces each in flight: a few MiB, on a machine of many cores too)."""
    return min(cores(), PARSE_THREADS)


@contextmanager
def _parsed_pieces(
    source: str,
    delimiter: str,
    header: Sequence[str],
    pieces: Sequence[tuple[int, int]],
    counted: ByteCounter | None = None,
) -> Iterator[Iterator[tuple[list[str], list[tuple[list[str], np.ndarray]]]]]:
    """The file's ``pieces``, in order, each parsed by pyarrow in a thread of a pool of one per
    core (``_parse_workers``; the parse releases the GIL, so it runs on every core while this
    thread adds each piece to its columns; with one core, here, in turn), as the names pyarrow
    read in its header line (the first piece's; the others are given them) and a ``text_piece``
    per column, encoded in the thread too. At most two pieces a thread are in flight, so what is
    held beside the columns stays a few MiB. ``counted``: told each piece's bytes. A piece that
    holds a quote character is an ``OSError``: there a line end may not end a row, so the pieces
    are not cut right (the callers scan a file for quotes first, or read a part of one, whose
    quotes only its own reading sees)."""
    Piece = tuple[list[str], list[tuple[list[str], np.ndarray]]]

    def parse(i: int) -> Piece:
        start, end = pieces[i]
        with open(source, "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        if b'"' in data:
            raise OSError(f"{source}: a quote character in bytes {start}-{end}")
        read = pa_csv.ReadOptions(block_size=max(len(data), 1), use_threads=False)
        if i:
            read.column_names = list(header)
        table = pa_csv.read_csv(  # plain strings, a third of the time of dictionary-encoded ones
            pa.BufferReader(data),
            read_options=read,
            parse_options=_parse_options(delimiter, quoted=False),
            convert_options=_as_text(list(header), check_utf8=False, of=pa.string()),
        ).combine_chunks()
        # UTF-8 is checked on each column's distinct texts: ArrowInvalid where not, and csv names the error
        return table.schema.names, [text_piece(column.chunk(0), check_utf8=True) for column in table.columns]

    def tables(parsed: Iterator[Piece]) -> Iterator[Piece]:
        for (start, end), piece in zip(pieces, parsed):
            yield piece
            if counted is not None:
                counted(end - start)

    with ordered_map(_parse_workers(), "parsing") as mapped:  # one: parsed here, in turn
        yield tables(mapped(parse, range(len(pieces))))


def byte_parts(source: str, n: int, min_bytes: int) -> list[tuple[int, int]] | None:
    """Up to ``n`` byte ranges [start, end) of whole lines after the header line, to be read
    apart (``part_chunks``), each at least about ``min_bytes`` long; None unless there are
    two and the file is a local one, not gzipped. Cut as if it held no quote character:
    a quoted field may hold a line end, which then does not end a row, but each part's
    reading refuses a quote it meets (``PartUnreadable``), so the file is then read in
    order; the scan for one is the parts', in their processes, not this one's."""
    if source.startswith(BUILTIN_PREFIX) or source.endswith(".gz") or n < 2 or is_url(source):
        return None
    try:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = min(n, size // max(min_bytes, 1))
            if n < 2:
                return None
            cuts = [len(f.readline())]
            if not cuts[0] or cuts[0] == size:
                return None
            for i in range(1, n):
                start = max(cuts[-1], i * size // n)
                f.seek(start)
                rest = f.readline()  # to the end of the line holding byte ``start``
                if not rest.endswith(b"\n"):
                    break
                cuts.append(start + len(rest))
            cuts.append(size)
    except OSError:  # not a regular file (a pipe, a directory): read it in order
        return None
    parts = [(a, b) for a, b in itertools.pairwise(cuts) if b > a]
    return parts if len(parts) >= 2 else None


class PartUnreadable(Exception):
    """pyarrow stopped in a part read apart: the caller reads the file in order instead,
    where ``csv`` names the line of what is wrong."""


def part_chunks(
    source: str, delimiter: str, header: Sequence[str], part: tuple[int, int], chunk_rows: int
) -> Iterator[RawTable]:
    """The rows of the byte range ``part`` (from ``byte_parts``) in tables of ``chunk_rows``,
    parsed in pieces as a whole file is (``_parsed_pieces``, after the file's header line,
    a piece of its own). Raises ``PartUnreadable`` where pyarrow stops, or a quote
    character is read."""
    with open(source, "rb") as f:
        header_bytes = len(f.readline())
    pieces = [(0, header_bytes), *(byte_pieces(source, part) or [part])]
    tables = _arrow_chunks(source, delimiter, header, chunk_rows, whole_file=False, quoted=False, pieces=pieces)
    for table in tables:
        if table is None:
            raise PartUnreadable(f"{source}: bytes {part[0]}-{part[1]}")
        yield table


def _parse_options(delimiter: str, quoted: bool = True) -> pa_csv.ParseOptions:
    return pa_csv.ParseOptions(delimiter=delimiter, newlines_in_values=quoted)


def _as_text(header: list[str], check_utf8: bool = True, of: pa.DataType | None = None) -> pa_csv.ConvertOptions:
    """Every column as text ("" a text, not null), dictionary-encoded unless ``of`` names
    another type. ``check_utf8``: False when the caller checks the few distinct texts
    instead of every cell (10% of the parse)."""
    text = of or pa.dictionary(pa.int32(), pa.string())
    return pa_csv.ConvertOptions(
        column_types=dict.fromkeys(header, text), strings_can_be_null=False, check_utf8=check_utf8
    )


QUOTE_SCAN_BYTES = 1 << 30  # a larger file is taken to hold quotes: the scan would read it from disk


def may_quote(source: str) -> bool:
    """Whether the file may hold a quote character: False only for a local, uncompressed file
    of at most ``QUOTE_SCAN_BYTES`` seen to hold none (one pass of ``bytes.find`` over it,
    a few hundredths of a second for 100 MB in the page cache, where it is about to be parsed)."""
    return unquoted_rows(source, count=False) is None


def unquoted_rows(source: str, count: bool = True) -> int | None:
    """For a file ``may_quote`` finds no quote in, the most data rows it can hold (its lines
    after the header: exact unless some are blank) when ``count``, else 0; None for any
    other file. One pass over the file, in blocks already in memory for the quote scan."""
    if source.startswith(BUILTIN_PREFIX) or source.endswith(".gz") or is_url(source):
        return None
    try:
        with open(source, "rb") as f:
            if os.fstat(f.fileno()).st_size > QUOTE_SCAN_BYTES:
                return None
            lines, last = 0, b"\n"
            while block := f.read(1 << 20):
                if b'"' in block:
                    return None
                lines += block.count(b"\n") if count else 0
                last = block[-1:]
    except OSError:
        return None
    return max(lines + (last != b"\n") - 1, 0) if count else 0


def _built(
    source: str,
    header: list[str],
    builders: Sequence[TextColumnBuilder],
    n: int,
    lines: Callable[[int], np.ndarray],
    positions: np.ndarray | None = None,
) -> RawTable:
    """The rows held by ``builders`` as a ``RawTable`` (the builders are emptied); ``lines(n)``:
    the lines of its ``n`` rows; ``positions``: the matrix the builders wrote into."""
    columns = tuple(b.column() for b in builders)
    return RawTable(source, tuple(header), columns, lambda: lines(n), positions=positions)


def _lines(
    source: str, delimiter: str, start: int, whole_file: bool, limits: ReadLimits
) -> Callable[[int], np.ndarray]:
    """The lines of ``n`` data rows from row ``start``, as ``csv`` counts them (a part of a
    file read apart does not know where it starts: its readers never ask)."""
    if not whole_file:

        def unknown(n: int) -> np.ndarray:
            raise RuntimeError(f"{source}: the line numbers of a part read apart are not known")

        return unknown
    return lambda n: _line_numbers(source, delimiter, limits)[start : start + n]


def _line_numbers(source: str, delimiter: str, limits: ReadLimits) -> np.ndarray:
    """The line each data row ends on, as Python's ``csv`` counts them."""
    with _csv_reader(source, delimiter, limits) as reader:
        _header(source, reader, limits)
        return np.fromiter((reader.line_num for row in reader if row), dtype=np.int64)
