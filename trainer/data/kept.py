"""The rows of a file trained in chunks, kept by the first pass on local disk (or, on a Dask
worker, in its memory: ``held_part``), so that the later passes (the pairwise statistics, the
families' counts) read them back rather than parse the file again: parsing and
dictionary-encoding the text is most of a pass.

What is kept of each chunk is what those passes read: the class and feature columns as
read (each column's distinct texts and, per row, the position of its text among them, in
one byte where a chunk's column has at most 256 texts), and the rows' weights. A part is
kept in one file, written by the process that read it and named after the part; it is
there for a later pass only once the whole part is written. A part not kept (a disk that
is full, a Dask worker on another machine) is read from the file again, giving the same
chunks. The files are this fit's own, in a private temporary folder (``$TMPDIR``) removed
when the fit's data are. Each chunk is one ``.npy`` header (``numpy.save``, read back with
pickles refused) and the raw arrays it sizes: no module that reads data deserialises code
(tests/store/test_integrity.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bnserve.trainer.io import RawTable, TextColumn


@dataclass(frozen=True)
class Chunk:
    """Some rows as the later passes read them: the class column, the feature columns (in
    the variables' order) and the rows' weights (None: unweighted)."""

    y: TextColumn
    features: tuple[TextColumn, ...]
    weights: np.ndarray | None

    @classmethod
    def of(cls, table: RawTable, class_index: int, columns: Sequence[int], weights: np.ndarray | None) -> Chunk:
        return cls(table.columns[class_index], tuple(table.columns[j] for j in columns), weights)

    def narrowed(self) -> Chunk:
        """The same rows with each column's positions in the narrowest unsigned type."""
        return Chunk(_narrow(self.y), tuple(_narrow(c) for c in self.features), self.weights)

    @property
    def nbytes(self) -> int:
        """About the memory the chunk takes: its arrays, and 64 bytes a text."""
        columns = (self.y, *self.features)
        held = sum(c.index.nbytes + 64 * c.labels.size for c in columns)
        return held + (self.weights.nbytes if self.weights is not None else 0)


def _narrow(column: TextColumn) -> TextColumn:
    dtype = np.min_scalar_type(max(column.labels.size - 1, 0))
    return TextColumn(column.labels, column.index.astype(dtype, copy=False))


@dataclass(frozen=True, eq=False)
class HeldPart:
    """A part's chunks held in the memory of the Dask worker that read them, where the fit's
    later passes over the part run (``parallel.hold_parts``). Sized for Dask's memory
    accounting by ``__sizeof__``."""

    chunks: tuple[Chunk, ...]

    def __sizeof__(self) -> int:
        return sum(chunk.nbytes for chunk in self.chunks)


HELD_SHARE = 0.25  # of a worker's memory limit, at most, held as parts' chunks


def held_part(chunks: Sequence[Chunk]) -> HeldPart | None:
    """``chunks`` (a part's, read on a Dask worker) to hold in its memory, or None where that
    would take the data the worker holds past ``HELD_SHARE`` of its memory limit (of the
    machine's memory, without one): the later passes then read the part from the file
    again. A quarter, as the passes count beside it and Dask spills to disk from 60 %."""
    from distributed import get_worker
    from distributed.system import MEMORY_LIMIT

    worker = get_worker()
    part = HeldPart(tuple(chunks))
    limit = worker.memory_manager.memory_limit or MEMORY_LIMIT
    return part if worker.state.nbytes + part.__sizeof__() <= HELD_SHARE * limit else None


def new_folder() -> str:
    """A private temporary folder for one fit's kept parts."""
    return tempfile.mkdtemp(prefix="bnserve-chunks-")


def remove(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _path(folder: str, part: Any) -> str:
    """The file of ``part`` (a frozen ``Part``: its source, byte range and stamp name it)."""
    return os.path.join(folder, hashlib.sha256(repr(part).encode()).hexdigest()[:24])


@contextlib.contextmanager
def keeping(folder: str | None, part: Any) -> Iterator[Callable[[Chunk], None]]:
    """A function that keeps each chunk of ``part`` in ``folder`` (None: keeps nothing). The
    part is there to read back only if the block ends without an error; a write that fails
    (a full disk) keeps nothing of the part, and the block goes on."""
    if folder is None:
        yield lambda chunk: None
        return
    path = _path(folder, part)
    partial = f"{path}.{os.getpid()}.partial"
    try:
        out: Any = open(partial, "wb")
    except OSError:
        out = None

    def keep(chunk: Chunk) -> None:
        nonlocal out
        if out is None:
            return
        try:
            _write(chunk.narrowed(), out)
        except OSError:
            out.close()
            out = None
            with contextlib.suppress(OSError):
                os.remove(partial)

    try:
        yield keep
    except BaseException:
        if out is not None:
            out.close()
            with contextlib.suppress(OSError):
                os.remove(partial)
        raise
    if out is not None:
        try:
            out.close()
            os.replace(partial, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(partial)


def kept(folder: str | None, part: Any) -> Iterator[Chunk] | None:
    """The chunks of ``part`` in the order they were kept, or None if it was not kept here."""
    if folder is None:
        return None
    try:
        source = open(_path(folder, part), "rb")
    except OSError:
        return None
    return _chunks(source)


def _chunks(source: Any) -> Iterator[Chunk]:
    with source:
        while source.peek(1):
            yield _read(source)


def _write(chunk: Chunk, out: Any) -> None:
    """One chunk: a header (``np.save``d int64: the columns, whether weighted, the rows, then per
    column its texts, their UTF-8 bytes and its positions' bytes a row), then each column (the
    class first) as its texts' ends, their bytes and the rows' positions, then the weights, if
    any, raw. One header a chunk, not one a column: numpy parses each ``.npy`` header with
    ``ast``, which was most of reading a chunk back (1M x 50 in 10 chunks: 3,080 of them a fit)."""
    columns = (chunk.y, *chunk.features)
    texts = [[label.encode("utf-8", "surrogatepass") for label in column.labels] for column in columns]
    ends = [np.cumsum([len(t) for t in column_texts], dtype=np.int64) for column_texts in texts]
    sizes = [(e.size, int(e[-1]) if e.size else 0, c.index.dtype.itemsize) for e, c in zip(ends, columns)]
    header = [len(columns), chunk.weights is not None, len(chunk.y.index), *(v for size in sizes for v in size)]
    np.save(out, np.array(header, dtype=np.int64), allow_pickle=False)
    for column_ends, column_texts, column in zip(ends, texts, columns):
        out.write(column_ends.tobytes())
        out.write(b"".join(column_texts))
        out.write(column.index.tobytes())
    if chunk.weights is not None:
        out.write(np.asarray(chunk.weights, dtype=np.float64).tobytes())


def _read(source: Any) -> Chunk:
    """The chunk ``_write`` wrote next in ``source``."""
    header = np.load(source, allow_pickle=False).tolist()
    n_columns, weighted, rows = header[:3]
    columns = []
    for texts, n_bytes, itemsize in zip(*[iter(header[3 : 3 + 3 * n_columns])] * 3):
        ends = _array(source, np.dtype(np.int64), texts).tolist()
        data = _array(source, np.dtype(np.uint8), n_bytes).tobytes()
        labels = np.empty(texts, dtype=object)
        labels[:] = [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip([0, *ends[:-1]], ends)]
        columns.append(TextColumn(labels, _array(source, np.dtype(f"u{itemsize}"), rows)))
    weights = _array(source, np.dtype(np.float64), rows) if weighted else None
    return Chunk(columns[0], tuple(columns[1:]), weights)


def _array(source: Any, dtype: np.dtype, count: int) -> np.ndarray:
    """The next ``count`` values of ``dtype`` in ``source``, read into a new array."""
    out = np.empty(count, dtype=dtype)
    if source.readinto(out.data.cast("B")) != out.nbytes:
        raise ValueError("a kept chunk ends early")
    return out
