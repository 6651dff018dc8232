"""Batch scoring (``trainer predict``): a file's rows, read a chunk at a time, coded against a
model version's variables as the server codes a request (``Variable.codes_of``: "" missing,
a state label, a number for a numeric feature), their class probabilities from the model
compiled as the server compiles it (``compile_model``: the version's table precision;
missing values marginalised exactly), and written a chunk at a time as CSV or Parquet.
A value unseen in training is read as missing and counted, or refused with ``unknown``
"error" (``bnserve.store.model.unseen``, the server's and the estimator's rule too).

What is held is one chunk, whatever the file's size (ARFF, which is not read in chunks,
is read whole). An output file is written beside its final name and renamed into place at
the end: on an error there is nothing half-written under that name.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from bnserve.store.errors import InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, Model
from bnserve.store.model.markers import PREPROCESSING, recorded_markers
from bnserve.store.predictor import compile_model
from bnserve.trainer.data.encoded import encode_table
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.data.unseen import UnseenValues
from bnserve.trainer.io import (
    CHUNKED,
    DEFAULT_READ_LIMITS,
    RawTable,
    ReadLimits,
    TextColumn,
    delimiter_of,
    format_of,
    iter_tables,
    read_table,
)
from bnserve.trainer.progress import stage

PREDICTED = "predicted"  # the column of each row's most probable class
PROBABILITY_PREFIX = "p_"  # then a class label: the column of that class's probability
OUTPUT_FORMATS = ("csv", "parquet")


def probability_column(label: str) -> str:
    return PROBABILITY_PREFIX + label


def output_format(path: str | None) -> str | None:
    """The format an output file's extension names (stdout: CSV); None for any other extension."""
    if path is None:
        return "csv"
    fmt = os.path.splitext(path)[1].lower().lstrip(".")
    return fmt if fmt in OUTPUT_FORMATS else None


def as_trained(
    model: Model,
    na_values: Sequence[str] | None,
    keep_whitespace: bool,
    delimiter: str | None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> Preprocessing:
    """How to read the texts of a file to score: as the model's training data was read (its
    metadata's ``preprocessing``: missing markers, ``recorded_markers``, and whitespace),
    unless told otherwise."""
    recorded = model.metadata.get(PREPROCESSING) or {}
    return Preprocessing(
        na_values=recorded_markers(model.metadata) if na_values is None else tuple(na_values),
        trim=recorded.get("trim_whitespace", True) and not keep_whitespace,
        delimiter=delimiter,
        limits=limits,
    )


@dataclass
class Scored:
    """What scoring a file found: rows scored, those with a missing feature value, and where
    the file has the class column, the rows with a class and how many were predicted right;
    the values unseen in training read as missing (``unseen``)."""

    rows: int = 0
    with_missing: int = 0
    with_class: int | None = None
    correct: int = 0
    unseen: UnseenValues = field(default_factory=UnseenValues)

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.with_class if self.with_class else None


def score_file(
    model: Model,
    source: str,
    out: str | None,
    *,
    keep: Sequence[str] = (),
    fmt: str | None = None,
    preprocessing: Preprocessing | None = None,
    chunk_rows: int = 100_000,
    unknown: str = DEFAULT_UNKNOWN,
) -> Scored:
    """Score every row of ``source`` and write ``keep`` (columns copied through as text),
    ``PREDICTED`` and one ``probability_column`` per class to ``out`` (.csv or .parquet;
    None: CSV on stdout). ``unknown``: what a value unseen in training becomes
    (``bnserve.store.model.unseen``). Nothing is written before the first chunk is coded,
    so a file refused at its first chunk leaves no header on stdout."""
    preprocessing = preprocessing or Preprocessing()
    out_fmt = output_format(out)
    if out_fmt is None:
        raise InvalidInput(f"{out}: cannot tell the output format; name a .csv or .parquet file")
    compiled = compile_model(model)
    names = [*keep, PREDICTED, *map(probability_column, compiled.classes)]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise InvalidInput(f"output column(s) {', '.join(map(repr, clash))} named twice; --keep other columns")
    schema = pa.schema(
        [(name, pa.string()) for name in [*keep, PREDICTED]] + [(name, pa.float64()) for name in names[len(keep) + 1 :]]
    )
    missing_codes = np.array([v.missing_code for v in compiled.features], dtype=np.int32)
    scored = Scored()
    with ExitStack() as output, stage("scoring", unit="rows") as bar:
        write = None
        for table in _tables(source, fmt, preprocessing, chunk_rows):
            absent = [name for name in keep if name not in table.header]
            if absent:
                raise InvalidInput(f"{source}: line 1: no column(s) {', '.join(map(repr, absent))} to keep")
            X, y = encode_table(table, model.variables, class_optional=True, unknown=unknown, unseen=scored.unseen)
            proba = compiled.predict_proba(X)
            winners = np.argmax(proba, axis=1)
            _count(scored, X, y, winners, missing_codes)
            kept = [_strings(table.columns[table.header.index(name)]) for name in keep]
            predicted = _strings(TextColumn(np.array(compiled.classes, dtype=object), winners))
            if write is None:
                write = output.enter_context(_writer(out, out_fmt, schema))
            write(pa.record_batch([*kept, predicted, *np.ascontiguousarray(proba.T)], schema=schema))
            bar.update(table.n_rows)
        if write is None:  # no rows: the header alone
            output.enter_context(_writer(out, out_fmt, schema))
    return scored


def _count(scored: Scored, X: np.ndarray, y: np.ndarray | None, winners: np.ndarray, missing: np.ndarray) -> None:
    scored.rows += X.shape[0]
    scored.with_missing += int(np.count_nonzero((X == missing).any(axis=1)))
    if y is not None:
        has_class = y >= 0
        scored.with_class = (scored.with_class or 0) + int(np.count_nonzero(has_class))
        scored.correct += int(np.count_nonzero(winners[has_class] == y[has_class]))


def _strings(column: TextColumn) -> pa.Array:
    """A column of texts as an Arrow string array, built from its distinct texts."""
    labels = pa.array(column.labels.tolist(), type=pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(column.index, type=pa.int32()), labels).cast(pa.string())


def _tables(source: str, fmt: str | None, preprocessing: Preprocessing, chunk_rows: int) -> Iterator[RawTable]:
    """The file's rows as tables of at most ``chunk_rows`` (CSV, TSV, Parquet; ARFF whole),
    their texts read as ``preprocessing`` says."""
    fmt = fmt or format_of(source)
    if preprocessing.delimiter and delimiter_of(source, fmt) is None:
        raise InvalidInput(f"{source}: a delimiter applies to CSV and TSV files, not {fmt}")
    tables = (
        iter_tables(source, fmt, chunk_rows, preprocessing.delimiter, preprocessing.limits)
        if fmt in CHUNKED
        else iter([read_table(source, fmt, preprocessing.delimiter, preprocessing.limits)])
    )
    for table in tables:
        yield preprocessing.cleaned(table)


@contextmanager
def _writer(out: str | None, fmt: str, schema: pa.Schema) -> Iterator[Any]:
    """A function that writes one record batch to ``out`` (stdout when None), into a
    temporary file beside ``out`` that replaces it only when everything is written."""
    if out is None:
        sys.stdout.flush()
        with _sink(pa.PythonFile(sys.stdout.buffer, mode="w"), fmt, schema) as write:
            yield write
        return
    directory = os.path.dirname(os.path.abspath(out))
    try:
        fd, part = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(out)}.", suffix=".part")
    except OSError as exc:
        raise InvalidInput(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as file, _sink(file, fmt, schema) as write:
            yield write
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(part, 0o666 & ~umask)  # as a file opened for writing would be, not mkstemp's 0600
        try:
            os.replace(part, out)
        except OSError as exc:
            raise InvalidInput(f"cannot write {out}: {exc.strerror or exc}") from None
    except BaseException:
        os.unlink(part)
        raise


@contextmanager
def _sink(file: IO[bytes] | pa.NativeFile, fmt: str, schema: pa.Schema) -> Iterator[Any]:
    writer = (
        pq.ParquetWriter(file, schema)
        if fmt == "parquet"
        else pa_csv.CSVWriter(file, schema, write_options=pa_csv.WriteOptions(quoting_style="needed"))
    )
    try:
        yield writer.write_batch
    finally:
        writer.close()
