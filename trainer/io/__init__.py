"""Reading data files into a ``RawTable`` (header, columns of text, "" = missing): CSV/TSV,
ARFF and Parquet, chosen by the file's extension or ``--format``, and the built-in data
sets (``builtin:NAME``). Errors are ``InvalidInput`` naming the file, line and column.

pyarrow is imported when a file is read (the readers, ``table``), not with the package: a
command line needs only ``FORMATS`` and the URL helpers to build its parser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from bnserve import lazy
from bnserve.store.errors import InvalidInput
from bnserve.trainer.io import sources
from bnserve.trainer.io.limits import DEFAULT_READ_LIMITS, ReadLimits
from bnserve.trainer.io.sources import (
    FORMATS,
    expand,
    format_of,
    is_pattern,
    is_url,
    redacted_url,
    redacted_urls,
    source_name,
)
from bnserve.trainer.progress import stage

if TYPE_CHECKING:
    from bnserve.trainer.io.parquet import arrow_table
    from bnserve.trainer.io.table import Declared, RawTable, TextColumn

__getattr__, __dir__ = lazy.exports(
    __name__, {"arrow_table": "parquet", "Declared": "table", "RawTable": "table", "TextColumn": "table"}
)

__all__ = [
    "CHUNKED",
    "DEFAULT_READ_LIMITS",
    "FORMATS",
    "Declared",
    "RawTable",
    "ReadLimits",
    "TextColumn",
    "arrow_table",
    "chunked_format",
    "delimiter_of",
    "expand",
    "field_delimiter",
    "format_of",
    "header_of",
    "is_pattern",
    "is_url",
    "iter_tables",
    "read_table",
    "redacted_url",
    "redacted_urls",
    "source_name",
]

DELIMITERS = {"csv": ",", "tsv": "\t"}


def read_table(
    source: str, fmt: str | None = None, delimiter: str | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> RawTable:
    """Parse ``source`` (a path, a URL or ``builtin:NAME``) as ``fmt``, by default the one its
    extension names (CSV when none does); ``.gz`` is read transparently. ``delimiter``: the
    field separator of a CSV or TSV file, when not its format's; ``limits``: the most columns
    and decompressed bytes read. The bytes read are reported as the stage "reading SOURCE"."""
    from bnserve.trainer.io.arff import read_arff
    from bnserve.trainer.io.delimited import read_delimited
    from bnserve.trainer.io.parquet import read_parquet

    fmt = _format(source, fmt)
    if delimiter and fmt not in DELIMITERS:
        raise InvalidInput(f"{source}: a delimiter applies to CSV and TSV files, not {fmt}")
    with stage(f"reading {sources.redacted_url(source)}", sources.size_of(source), "B") as bar:
        if fmt == "arff":
            return read_arff(source, bar.update, limits)
        if fmt == "parquet":
            return read_parquet(source, bar.update, limits)
        return read_delimited(source, field_delimiter(fmt, delimiter), bar.update, limits)


def field_delimiter(fmt: str, delimiter: str | None) -> str:
    """``delimiter``, or the format's own (CSV ",", TSV tab)."""
    return delimiter or DELIMITERS[fmt]


def _format(source: str, fmt: str | None) -> str:
    if fmt is None:
        return format_of(source)
    if fmt not in FORMATS:
        raise InvalidInput(f"{source}: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def delimiter_of(source: str, fmt: str | None) -> str | None:
    """The field delimiter of a CSV or TSV file (``fmt``, else by its extension); None for the other formats."""
    return DELIMITERS.get(fmt or format_of(source))


CHUNKED = ("csv", "tsv", "parquet")


def chunked_format(source: str, fmt: str | None) -> str:
    """The format of a file to be read in chunks, which CSV, TSV and Parquet can be."""
    fmt = _format(source, fmt)
    if fmt not in CHUNKED:
        raise InvalidInput(f"{source}: reading in chunks takes CSV, TSV or Parquet files, not {fmt}")
    return fmt


def header_of(
    source: str, fmt: str, delimiter: str | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> list[str]:
    """The column names of a file in a ``CHUNKED`` format, checked, without reading its rows."""
    from bnserve.trainer.io.delimited import read_header
    from bnserve.trainer.io.parquet import parquet_header

    if fmt == "parquet":
        return parquet_header(source, limits)
    return read_header(source, field_delimiter(fmt, delimiter), limits)


def iter_tables(
    source: str, fmt: str, chunk_rows: int, delimiter: str | None = None, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> Iterator[RawTable]:
    """The file (in a ``CHUNKED`` format) as consecutive ``RawTable``s of at most
    ``chunk_rows`` data rows each (at least one), for training on a file larger than memory."""
    from bnserve.trainer.io.delimited import delimited_chunks
    from bnserve.trainer.io.parquet import parquet_chunks

    if fmt == "parquet":
        return parquet_chunks(source, chunk_rows, limits)
    return delimited_chunks(source, field_delimiter(fmt, delimiter), chunk_rows, limits)
