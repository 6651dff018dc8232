"""Batch scoring (``trainer predict``): a file's rows, read a chunk at a time, coded against a
model version's variables as the server codes a request (``Variable.codes_of``: "" missing,
a state label, a number for a numeric feature), their class probabilities from the model
compiled as the server compiles it (``compile_model``: the version's table precision;
missing values marginalised exactly), and written a chunk at a time as CSV or Parquet.
A value unseen in training is read as missing and counted, or refused with ``unknown``
"error" (``bnserve.store.model.unseen``, the server's and the estimator's rule too).

What is held is three chunks, whatever the file's size: one being read (on a thread,
``ReadAhead``), the one before it being coded and scored (on another), and the one before
that being written (ARFF, which is not read in chunks, is read whole). An output file is
checked before anything is read (``Output.of``: not the input, not a special file, not a
file one may not write; a symbolic link is written through), written beside its final name
as ``.NAME.part-PID`` and renamed into place at the end, with the mode of the file it
replaces: on an error, Ctrl-C or SIGTERM the partial file is removed and nothing
half-written is under that name.
"""

from __future__ import annotations

import contextvars
import os
import queue
import stat
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from bnserve.store.errors import InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, Model
from bnserve.store.model.markers import PREPROCESSING, recorded_markers
from bnserve.store.predictor import CompiledModel, compile_model
from bnserve.trainer.data.budget import DEFAULT_CHUNK_ROWS
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
    expand,
    format_of,
    is_url,
    iter_tables,
    read_table,
)
from bnserve.trainer.io.parquet import ParquetRows, parquet_rows
from bnserve.trainer.io.table import arrow_numbers, row_texts
from bnserve.trainer.progress import stage

T = TypeVar("T")
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
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    unknown: str = DEFAULT_UNKNOWN,
    tables: ReadAhead[RawTable | ParquetRows] | None = None,
) -> Scored:
    """Score every row of ``source`` and write ``keep`` (columns copied through as text),
    ``PREDICTED`` and one ``probability_column`` per class to ``out`` (.csv or .parquet;
    None: CSV on stdout). ``unknown``: what a value unseen in training becomes
    (``bnserve.store.model.unseen``). Nothing is written before the first chunk is coded,
    so a file refused at its first chunk leaves no header on stdout. ``tables``: the file
    already being read (``read_chunks``: the CLI starts reading while it loads the model;
    ``chunk_rows``, ``fmt`` and ``preprocessing``'s delimiter and limits are then its)."""
    preprocessing = preprocessing or Preprocessing()
    out_fmt = output_format(out)
    if out_fmt is None:
        raise InvalidInput(f"{out}: cannot tell the output format; name a .csv or .parquet file")
    target = None if out is None else Output.of(out, source)
    compiled = compile_model(model)
    names = [*keep, PREDICTED, *map(probability_column, compiled.classes)]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise InvalidInput(f"output column(s) {', '.join(map(repr, clash))} named twice; --keep other columns")
    schema = pa.schema(
        [(name, pa.string()) for name in [*keep, PREDICTED]] + [(name, pa.float64()) for name in names[len(keep) + 1 :]]
    )
    scored = Scored()
    with ExitStack() as output, stage("scoring", unit="rows") as bar:
        if tables is None:
            tables = output.enter_context(
                read_chunks(source, fmt, chunk_rows, preprocessing.delimiter, preprocessing.limits)
            )
        # three threads: the reader parses a chunk while the one before is coded and scored, and
        # the one before that written here (pyarrow's CSV writer, numpy and the parse release the GIL)
        batches = _scored(model, compiled, source, tables, preprocessing, keep, unknown, schema, scored)
        write = None
        for batch in output.enter_context(ReadAhead(batches, "scoring")):
            if write is None:
                write = output.enter_context(_writer(target, out_fmt, schema))
            write(batch)
            bar.update(batch.num_rows)
        if write is None:  # no rows: the header alone
            output.enter_context(_writer(target, out_fmt, schema))
    return scored


def _scored(
    model: Model,
    compiled: CompiledModel,
    source: str,
    tables: Iterator[RawTable | ParquetRows],
    preprocessing: Preprocessing,
    keep: Sequence[str],
    unknown: str,
    schema: pa.Schema,
    scored: Scored,
) -> Iterator[pa.RecordBatch]:
    """Each table of ``source``'s rows coded, scored and counted into ``scored``, as the output's batch.
    A Parquet column of a type that is not read is refused only if it is read here: one the
    model does not use is ignored."""
    missing_codes = np.array([v.missing_code for v in compiled.features], dtype=np.int32)
    used = {v.name for v in model.variables} | set(keep)

    def wanted(name: str) -> bool:
        return (name.strip() if preprocessing.trim else name) in used  # as ``cleaned`` trims the header

    for rows in tables:
        table = preprocessing.cleaned(rows.decoded(wanted) if isinstance(rows, ParquetRows) else rows)
        absent = [name for name in keep if name not in table.header]
        if absent:
            raise InvalidInput(f"{source}: line 1: no column(s) {', '.join(map(repr, absent))} to keep")
        X, y = encode_table(table, model.variables, class_optional=True, unknown=unknown, unseen=scored.unseen)
        proba = compiled.predict_proba(X)
        winners = np.argmax(proba, axis=1)
        _count(scored, X, y, winners, missing_codes)
        kept = [row_texts(table.columns[table.header.index(name)]) for name in keep]
        predicted = row_texts(TextColumn(np.array(compiled.classes, dtype=object), winners))
        columns = [*kept, predicted, *map(arrow_numbers, np.ascontiguousarray(proba.T))]
        yield pa.record_batch(columns, schema=schema)


def _count(scored: Scored, X: np.ndarray, y: np.ndarray | None, winners: np.ndarray, missing: np.ndarray) -> None:
    scored.rows += X.shape[0]
    scored.with_missing += int(np.count_nonzero((X == missing).any(axis=1)))
    if y is not None:
        has_class = y >= 0
        scored.with_class = (scored.with_class or 0) + int(np.count_nonzero(has_class))
        scored.correct += int(np.count_nonzero(winners[has_class] == y[has_class]))


def read_chunks(
    source: str,
    fmt: str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    delimiter: str | None = None,
    limits: ReadLimits = DEFAULT_READ_LIMITS,
) -> ReadAhead[RawTable | ParquetRows]:
    """The file's rows as tables of at most ``chunk_rows`` (CSV, TSV, Parquet; ARFF whole),
    their texts as read (``score_file`` cleans them, and refuses a Parquet column of a type
    that is not read only if it needs it), read from now on, a chunk ahead."""
    return ReadAhead(_tables(source, fmt, chunk_rows, delimiter, limits))


def _tables(
    source: str, fmt: str | None, chunk_rows: int, delimiter: str | None, limits: ReadLimits
) -> Iterator[RawTable | ParquetRows]:
    fmt = fmt or format_of(source)
    if delimiter and delimiter_of(source, fmt) is None:
        raise InvalidInput(f"{source}: a delimiter applies to CSV and TSV files, not {fmt}")
    if fmt == "parquet":
        yield from parquet_rows(source, chunk_rows, limits)
    elif fmt in CHUNKED:
        yield from iter_tables(source, fmt, chunk_rows, delimiter, limits)
    else:
        yield read_table(source, fmt, delimiter, limits)


class ReadAhead(Generic[T]):
    """``items`` in order, produced on a thread (``name``) from the moment this is made: each
    while the one before is used (a chunk parsed while the one before is scored; numpy and
    pyarrow release the GIL), one item ahead at most, so one chunk more is held. An error
    raised producing an item is raised here, in its place. ``close`` (or leaving a ``with``)
    stops it: the thread finishes the item it is on, closes ``items`` and ends."""

    def __init__(self, items: Iterator[T], name: str = "reading") -> None:
        self._handed: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(1)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._produce, items), name=name, daemon=True
        )
        self._thread.start()

    def _hand(self, item: Any, error: BaseException | None = None) -> None:
        while not self._stop.is_set():
            try:
                self._handed.put((item, error), timeout=0.05)
                return
            except queue.Full:
                continue

    def _produce(self, items: Iterator[T]) -> None:
        try:
            for item in items:
                self._hand(item)
                if self._stop.is_set():
                    break
            self._hand(_END)
        except BaseException as exc:  # the consumer's to raise
            self._hand(_END, exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> ReadAhead[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        item, error = self._handed.get()
        if error is not None or item is _END:
            self.close()
            if error is not None:
                raise error
            raise StopIteration
        return item

    def close(self) -> None:
        self._done = True
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_END = object()  # ReadAhead: no more items


@dataclass(frozen=True)
class Output:
    """Where ``--out`` writes: ``path`` (a symbolic link's target: the link stays a link to
    the new file) and the mode to give it (an existing file's; else what a new file gets)."""

    path: str
    mode: int

    @classmethod
    def of(cls, out: str, source: str) -> Output:
        """The checked output of ``out``, before anything is read; InvalidInput for the input
        itself (also through a link), a dangling link, a special file (FIFO, device,
        directory, socket) or a file one may not write (a 0444 file: refused, as ``cp``
        without ``-f`` would; remove it or ``chmod u+w`` it first)."""
        path = os.path.realpath(out)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if os.path.islink(out):
                raise InvalidInput(f"--out {out}: a symbolic link to {path}, which does not exist") from None
            umask = os.umask(0)
            os.umask(umask)
            return cls(path, 0o666 & ~umask)  # as a file opened for writing would be
        except OSError as exc:
            raise InvalidInput(f"--out {out}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"--out {out}: not a regular file ({_kind(st.st_mode)}); name a file")
        if not st.st_mode & stat.S_IWUSR or not os.access(path, os.W_OK):  # the mode bit: root too
            raise InvalidInput(f"--out {out}: the file is read-only; remove it or make it writable first")
        inputs = [] if is_url(source) else [p for p in expand(source) if os.path.exists(p)]
        if any(os.path.samefile(p, path) for p in inputs):
            raise InvalidInput(f"--out {out}: it is the input file {source}; write elsewhere")
        return cls(path, stat.S_IMODE(st.st_mode))

    @property
    def part(self) -> str:
        """The partial file, beside the output: hidden, named by the output and the writing
        process, so a leftover of a killed run is recognisable and the next run by that
        process id overwrites it."""
        directory, name = os.path.split(self.path)
        return os.path.join(directory, f".{name}.part-{os.getpid()}")


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}
    return next((kind for test, kind in kinds.items() if test(mode)), "a device")


@contextmanager
def _writer(out: Output | None, fmt: str, schema: pa.Schema) -> Iterator[Any]:
    """A function that writes one record batch to ``out`` (stdout when None), into its
    partial file, which replaces it only when everything is written and is removed on any
    error or interruption (SIGTERM included: the CLI turns it into an exception)."""
    if out is None:
        sys.stdout.flush()
        with _sink(pa.PythonFile(sys.stdout.buffer, mode="w"), fmt, schema) as write:
            yield write
        return
    part = out.part
    try:
        if os.path.lexists(part):  # a leftover of a killed run that had this process id
            os.unlink(part)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise InvalidInput(f"cannot write {out.path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as file, _sink(file, fmt, schema) as write:
            yield write
        os.chmod(part, out.mode)
        try:
            os.replace(part, out.path)
        except OSError as exc:
            raise InvalidInput(f"cannot write {out.path}: {exc.strerror or exc}") from None
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
