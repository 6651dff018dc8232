"""Reading data files into a ``RawTable`` (header, columns of text, "" = missing): CSV/TSV,
ARFF and Parquet, chosen by the file's extension or ``--format``, and the built-in data
sets (``builtin:NAME``). Errors are ``InvalidInput`` naming the file, line and column."""

from __future__ import annotations

from collections.abc import Iterator

from bnserve.store.errors import InvalidInput
from bnserve.trainer.io.arff import read_arff
from bnserve.trainer.io.delimited import delimited_chunks, read_delimited
from bnserve.trainer.io.parquet import read_parquet
from bnserve.trainer.io.sources import FORMATS, format_of
from bnserve.trainer.io.table import Declared, RawTable, TextColumn

__all__ = [
    "FORMATS",
    "Declared",
    "RawTable",
    "TextColumn",
    "chunked_delimiter",
    "delimiter_of",
    "format_of",
    "iter_tables",
    "read_table",
]

DELIMITERS = {"csv": ",", "tsv": "\t"}


def read_table(source: str, fmt: str | None = None) -> RawTable:
    """Parse ``source`` (a path or ``builtin:NAME``) as ``fmt``, by default the one its
    extension names (CSV when none does); ``.gz`` is read transparently."""
    if fmt is None:
        fmt = format_of(source)
    elif fmt not in FORMATS:
        raise InvalidInput(f"{source}: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "arff":
        return read_arff(source)
    if fmt == "parquet":
        return read_parquet(source)
    return read_delimited(source, DELIMITERS[fmt])


def delimiter_of(source: str, fmt: str | None) -> str | None:
    """The field delimiter of a CSV or TSV file (``fmt``, else by its extension); None for the other formats."""
    return DELIMITERS.get(fmt or format_of(source))


def chunked_delimiter(source: str, fmt: str | None) -> str:
    """``delimiter_of`` a file to be read in chunks, which only CSV and TSV can be."""
    delimiter = delimiter_of(source, fmt)
    if delimiter is None:
        raise InvalidInput(f"{source}: reading in chunks takes CSV or TSV files, not {fmt or format_of(source)}")
    return delimiter


def iter_tables(source: str, fmt: str | None, chunk_rows: int) -> Iterator[RawTable]:
    """The file as consecutive ``RawTable``s of at most ``chunk_rows`` data rows each (the
    header repeated on each), for training on a file larger than memory: CSV and TSV only."""
    return delimited_chunks(source, chunked_delimiter(source, fmt), chunk_rows)
