"""Read Parquet into a ``RawTable`` through pyarrow.

Every column's Arrow type becomes a ``Declared`` one and its values text, column by
column in Arrow and numpy: integers and floats numeric ("3", "5.1"; null and NaN
missing), strings nominal, dictionary-encoded nominal with the dictionary as the
labels, bool nominal ("false", "true"), dates and timestamps numeric seconds since the
Unix epoch. Any other type is refused by name rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bnserve.store.errors import InvalidInput
from bnserve.store.model import NOMINAL, NUMERIC
from bnserve.trainer.io.limits import DEFAULT_READ_LIMITS, ReadLimits
from bnserve.trainer.io.sources import ByteCounter, open_binary
from bnserve.trainer.io.table import Declared, RawTable, TextColumn, check_header, dictionary_encoded, seconds_texts

_TICKS_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def read_parquet(source: str, counted: ByteCounter | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS) -> RawTable:
    """Parse a Parquet file; ``lines`` are row numbers + 1, as if there were a header line.
    ``counted``: as ``open_binary``'s."""
    try:
        with open_binary(source, counted, limits) as raw:  # read whole: the same path for files, .gz and built-ins
            data = raw.read()
    except (OSError, EOFError) as exc:
        raise InvalidInput(f"{source}: cannot read: {exc}") from None
    if not data:
        raise InvalidInput(f"{source}: line 1: the file is empty")
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        limits.check_columns(source, len(parquet.schema_arrow.names))
        table = parquet.read()  # not read_table: it refuses repeated names
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInput(f"{source}: not a readable Parquet file: {exc}") from None
    return arrow_table(source, table)


def arrow_table(source: str, table: pa.Table, start: int = 0, refused: dict[str, str] | None = None) -> RawTable:
    """An Arrow table (a Parquet file's rows from row ``start``, or a data frame in memory)
    as a ``RawTable`` whose columns declare their Arrow types. ``refused``: a column this
    reader refuses (a type it does not read) is left out and its refusal kept there by name,
    for a reader that learns only later which columns it needs (``ParquetRows``)."""
    if table.num_columns == 0:
        raise InvalidInput(f"{source}: line 1: the file has no columns")
    header = tuple(table.column_names)
    check_header(source, header)
    names, read = [], []
    for name, column in zip(header, table.columns):
        try:
            read.append(_column(source, name, column))
        except InvalidInput as exc:
            if refused is None:
                raise
            refused[name] = exc.message
            continue
        names.append(name)
    lines = np.arange(start + 2, start + table.num_rows + 2, dtype=np.int64)
    return RawTable(source, tuple(names), tuple(c for c, _ in read), lines, tuple(kind for _, kind in read))


@dataclass(frozen=True)
class ParquetRows:
    """Rows of a Parquet file decoded as it is read, but for the columns of a type that is
    not read: each is refused only when asked for (``decoded``), so batch scoring, which
    learns the columns it needs once the model is loaded, ignores the others."""

    table: RawTable
    refused: dict[str, str]

    def decoded(self, wanted: Callable[[str], bool] | None = None) -> RawTable:
        """The rows; a refused column that ``wanted`` accepts (None: every one) is refused now."""
        for name, message in self.refused.items():
            if wanted is None or wanted(name):
                raise InvalidInput(message)
        return self.table


def parquet_rows(source: str, chunk_rows: int, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Iterator[ParquetRows]:
    """The file's rows in tables of ``chunk_rows`` (at least one table), read and decoded batch by batch."""
    parquet = _parquet_file(source, limits)
    schema = parquet.schema_arrow

    def rows(table: pa.Table, start: int) -> ParquetRows:
        refused: dict[str, str] = {}
        return ParquetRows(arrow_table(source, table, start, refused), refused)

    start = 0
    try:
        for batch in parquet.iter_batches(batch_size=chunk_rows):
            yield rows(pa.Table.from_batches([batch], schema), start)
            start += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInput(f"{source}: not a readable Parquet file: {exc}") from None
    if start == 0:
        yield rows(schema.empty_table(), 0)


def parquet_chunks(source: str, chunk_rows: int, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Iterator[RawTable]:
    """The file's rows in tables of ``chunk_rows`` (at least one table), read batch by
    batch: each as ``read_parquet`` reads those rows."""
    for rows in parquet_rows(source, chunk_rows, limits):
        yield rows.decoded()


def parquet_header(source: str, limits: ReadLimits = DEFAULT_READ_LIMITS) -> list[str]:
    """The column names, checked as a header is."""
    header = _parquet_file(source, limits).schema_arrow.names
    check_header(source, header)
    return header


def _parquet_file(source: str, limits: ReadLimits) -> pq.ParquetFile:
    """The file opened for reading row groups: seekable (a .gz is read whole first)."""
    try:
        raw = open_binary(source, limits=limits)
        if source.endswith(".gz"):
            with raw:
                raw = pa.BufferReader(raw.read())
        parquet = pq.ParquetFile(raw)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise InvalidInput(f"{source}: not a readable Parquet file: {exc}") from None
    limits.check_columns(source, len(parquet.schema_arrow.names))
    return parquet


def _column(source: str, name: str, column: pa.ChunkedArray) -> tuple[TextColumn, Declared]:
    """One column, dictionary-encoded (as stored, or here), its distinct values made texts
    ("" = missing), and its declared type."""
    values = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_nested(values) or pa.types.is_binary(values) or pa.types.is_large_binary(values):
        _refuse(source, name, column.type)  # before dictionary_encoded: Arrow has no kernel for lists, structs, maps
    dictionary, index = dictionary_encoded(column)
    texts, kind = _texts(source, name, dictionary)
    if pa.types.is_dictionary(column.type):
        kind = Declared(NOMINAL, tuple(texts.tolist()))
    index[index < 0] = len(texts)  # a null: the "" appended below
    labels = TextColumn.of([*texts.tolist(), ""])  # texts may repeat: "" for null and NaN, say
    return TextColumn(labels.labels, labels.index[index]).rows(slice(None)), kind


def _texts(source: str, name: str, column: pa.Array) -> tuple[np.ndarray, Declared]:
    """The values of an Arrow array (no dictionary) as texts ("" = missing) and its declared type."""
    t = column.type
    missing = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t):
        values = column.fill_null(0).to_numpy(zero_copy_only=False)
        texts = np.array(list(map(str, values.tolist())), dtype=object)
        kind = Declared(NUMERIC)
    elif pa.types.is_floating(t):
        values = column.fill_null(0).to_numpy(zero_copy_only=False)
        missing |= np.isnan(values)
        # float64: repr of the Python float; narrower floats: numpy's shortest text for their width
        texts = np.array(
            list(map(repr, values.tolist())) if values.dtype == np.float64 else list(map(str, values)), dtype=object
        )
        kind = Declared(NUMERIC)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        texts = column.fill_null("").to_numpy(zero_copy_only=False).astype(object)
        kind = Declared(NOMINAL)
    elif pa.types.is_boolean(t):
        texts = np.where(column.fill_null(False).to_numpy(zero_copy_only=False), "true", "false").astype(object)
        kind = Declared(NOMINAL, ("false", "true"))
    elif pa.types.is_date32(t):
        days = column.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        texts = seconds_texts(days * 86400, 1)
        kind = Declared(NUMERIC)
    elif pa.types.is_date64(t) or pa.types.is_timestamp(t):
        unit = "ms" if pa.types.is_date64(t) else t.unit
        ticks = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        texts = seconds_texts(ticks, _TICKS_PER_SECOND[unit])
        kind = Declared(NUMERIC)
    else:
        _refuse(source, name, t)
    texts[missing] = ""
    return texts, kind


def _refuse(source: str, name: str, t: pa.DataType) -> NoReturn:
    raise InvalidInput(
        f"{source}: column {name!r}: Arrow type {t} is not read "
        "(integers, floats, strings, dictionaries, bool, dates and timestamps are)"
    )
