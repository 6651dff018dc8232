"""A data file as read: its header and every column as text ("" = missing), and the checks
every format shares (header names, ragged rows). Readers only parse; typing, discretisation
and coding happen in ``bnserve.trainer.data``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa

from bnserve.store.errors import InvalidInput
from bnserve.store.model.discretization import number_of
from bnserve.store.model.names import MAX_NAME_LENGTH


@dataclass(frozen=True)
class Declared:
    """A column type the file itself declares: nominal (with its label domain, in
    declared order, when the format gives one) or numeric."""

    kind: str
    labels: tuple[str, ...] | None = None


def read_text(text: str, na_values: frozenset[str] | tuple[str, ...], trim: bool) -> str:
    """A text as the reading rules take it: whitespace around it dropped (``trim``), and a
    missing marker (one of ``na_values``) made missing ("")."""
    text = text.strip() if trim else text
    return "" if text in na_values else text


def narrowest(n: int) -> np.dtype:
    """The narrowest signed integer type for positions or codes below ``n`` (and the
    negative MISSING and UNKNOWN): int8 up to 127 of them, int16 up to 32,767, else int32.
    The one rule for every array of codes or label positions, from the reader to the counts:
    a column of a few states costs a byte per row, not four."""
    return np.dtype(np.int8 if n <= 127 else np.int16 if n <= 32767 else np.int32)


@dataclass(frozen=True, eq=False)
class TextColumn:
    """One column as read, dictionary-encoded: its distinct texts ("" = missing) and, per row,
    the position of the row's text among them. Typing and coding then work on the few
    distinct texts, and one lookup per row (no Python object per cell)."""

    labels: np.ndarray  # object array of distinct str, each used by some row
    index: np.ndarray  # per row, in the ``narrowest`` type for the labels (or wider)

    @classmethod
    def of(cls, texts: Sequence[str]) -> TextColumn:
        """The column of ``texts``, labels in order of first sight."""
        position: dict[str, int] = {}
        index = np.fromiter((position.setdefault(t, len(position)) for t in texts), dtype=np.int32, count=len(texts))
        return cls(_object_array(list(position)), index.astype(narrowest(len(position)), copy=False))

    def texts(self) -> np.ndarray:
        """Every row's text, as an object array."""
        return self.labels[self.index]

    def numbers(self) -> np.ndarray:
        """float64 per row: the number its text stands for (``number_of``), NaN where none
        (missing, a label that is no number): what a derived feature reads of its inputs."""
        per_label = np.fromiter(map(number_of, self.labels.tolist()), dtype=np.float64, count=self.labels.size)
        return per_label[self.index]

    def rows(self, keep: np.ndarray | slice) -> TextColumn:
        """The column of the rows ``keep`` (a mask, positions or a slice), labels no row uses dropped."""
        index = self.index[keep]
        used = np.bincount(index, minlength=self.labels.size) > 0
        if used.all():
            return TextColumn(self.labels, index)
        kept = int(np.count_nonzero(used))
        return TextColumn(self.labels[used], (np.cumsum(used, dtype=narrowest(kept + 1)) - 1)[index])

    def coded(
        self, codes_of: Callable[[list[str]], Sequence[int] | np.ndarray], out: np.ndarray | None = None
    ) -> np.ndarray:
        """Every row's code, ``codes_of`` applied to the distinct texts only (e.g. ``Variable.codes_of``),
        in the ``narrowest`` type for them, or written into ``out`` (a column of a matrix of codes)."""
        return self.lookup(np.asarray(codes_of(self.labels.tolist())), out)

    def lookup(self, per_label: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``per_label[index]`` (integer codes, one per label), in the ``narrowest`` type for
        them or written into ``out``: one gather per row, no temporary beside the result."""
        if out is None:
            top = int(per_label.max()) + 1 if per_label.size else 0
            out = np.empty(self.index.shape, dtype=narrowest(top))
        return np.take(per_label.astype(out.dtype, copy=False), self.index, out=out, mode="wrap")

    def mapped(self, text_of: Callable[[str], str]) -> TextColumn:
        """Each distinct text replaced by ``text_of(text)``; texts that become one are merged."""
        new = [text_of(t) for t in self.labels.tolist()]
        if new == self.labels.tolist():
            return self
        merged = TextColumn.of(new)
        return TextColumn(merged.labels, merged.index[self.index])


@dataclass(frozen=True, eq=False)
class RawTable:
    """A file as read: header and the data as one ``TextColumn`` per column.

    ``lines[r]`` is the file line on which data row ``r`` ends (for error messages; for
    Parquet, the row number + 1, as if there were a header line). A reader that does not
    track lines as it goes passes a function that finds them (asked only for an error message).
    ``declared`` is empty, or per column the type the file declares (None: undeclared).
    ``positions``: when the reader wrote the columns' positions into one (rows, columns)
    column-major matrix, that matrix (a column whose ``index`` is its column of it may be
    coded in place: ``columns_of``'s ``consume``).
    """

    source: str
    header: tuple[str, ...]
    columns: tuple[TextColumn, ...]
    line_numbers: np.ndarray | Callable[[], np.ndarray]
    declared: tuple[Declared | None, ...] = field(default=())
    positions: np.ndarray | None = field(default=None, repr=False)

    def positions_of(self, j: int) -> bool:
        """Whether column ``j``'s positions are column ``j`` of ``positions``."""
        index = self.columns[j].index
        return (
            self.positions is not None
            and index.dtype == self.positions.dtype
            and index.shape == self.positions.shape[:1]
            and index.__array_interface__["data"] == self.positions[:, j].__array_interface__["data"]
            and index.strides == self.positions[:, j].strides
        )

    @property
    def n_rows(self) -> int:
        return int(self.columns[0].index.size) if self.columns else 0

    @cached_property
    def lines(self) -> np.ndarray:
        return self.line_numbers if isinstance(self.line_numbers, np.ndarray) else self.line_numbers()

    def texts(self) -> np.ndarray:
        """Every cell's text, (rows, columns) object array: for tests and small tables."""
        cells = np.empty((self.n_rows, len(self.columns)), dtype=object)
        for j, column in enumerate(self.columns):
            cells[:, j] = column.texts()
        return cells

    def cleaned(self, na_values: frozenset[str], trim: bool) -> RawTable:
        """Whitespace around each text dropped (``trim``), and the texts ``na_values`` made
        missing (""): on the distinct texts of each column, not per cell."""
        if not na_values and not trim:
            return self

        def clean(text: str) -> str:
            return read_text(text, na_values, trim)

        columns = tuple(column.mapped(clean) for column in self.columns)
        header = trimmed_header(self.source, self.header, trim)
        return RawTable(self.source, header, columns, self.line_numbers, self.declared, self.positions)

    @classmethod
    def of_cells(
        cls, source: str, header: Sequence[str], cells: np.ndarray, lines: np.ndarray, declared: tuple = ()
    ) -> RawTable:
        """A table from a (rows, columns) array of texts."""
        columns = tuple(TextColumn.of(cells[:, j].tolist()) for j in range(cells.shape[1]))
        return cls(source, tuple(header), columns, lines, declared)


def dictionary_encoded(column: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """An Arrow column as one dictionary of its distinct values and, per row, the
    position of its value there (-1 for null), in the ``narrowest`` type; a column already
    dictionary-encoded keeps its dictionary (with every chunk's unified)."""
    t = column.type
    if not pa.types.is_dictionary(t):
        column = pa.chunked_array([chunk.dictionary_encode() for chunk in column.chunks], pa.dictionary(pa.int32(), t))
    column = column.unify_dictionaries()
    if not column.num_chunks:
        return pa.array([], column.type.value_type), np.empty(0, dtype=np.int8)
    dictionary = column.chunk(0).dictionary
    index = np.concatenate([_positions(chunk.indices) for chunk in column.chunks], dtype=narrowest(len(dictionary)))
    return dictionary, index


SLAB_ROWS = 1 << 20  # rows per array a ``TextColumnBuilder`` fills: one for a file of a million rows


def position_matrix(rows: int, columns: int) -> np.ndarray:
    """A (rows, columns) int8 matrix, column-major, that a whole file's ``TextColumnBuilder``s
    write their positions into (``into``), so that the codes can be written over them:
    one matrix for the file, not positions and codes beside them."""
    return np.empty((rows, columns), dtype=np.int8, order="F")


class TextColumnBuilder:
    """One column of text read in pieces (dictionary-encoded Arrow arrays: pyarrow's CSV
    reader parses straight to them), as one ``TextColumn``: each piece's few distinct texts
    are numbered in order of first sight over all pieces (as ``TextColumn.of`` and Arrow's
    ``unify_dictionaries`` number them), and its rows written as positions in the
    ``narrowest`` type into arrays of ``rows`` (at most ``SLAB_ROWS``) filled in turn. No
    string per cell is held, no int32 index beside the narrow one, and no small array per
    piece is left behind to fragment the heap."""

    def __init__(self, rows: int | None = None, into: np.ndarray | None = None) -> None:
        """``into``: the first slab, a column of the reader's ``position_matrix`` (the rows it
        holds, then slabs of ``rows``, if the file has more or a column more than 127 texts)."""
        self._position: dict[str, int] = {}
        self._slab_rows = min(rows or SLAB_ROWS, SLAB_ROWS)
        self._slabs: list[np.ndarray] = [] if into is None else [into]
        self._filled = 0  # rows written into the last slab

    def add(self, texts: list[str], positions: np.ndarray) -> None:
        """One piece: its distinct ``texts`` and, per row, the position of its text among them
        (``text_piece``)."""
        ids = [self._position.setdefault(t, len(self._position)) for t in texts]
        lookup = np.array(ids, dtype=narrowest(len(self._position)))
        same = ids == list(range(len(ids)))
        done = 0
        while done < positions.size:
            if not self._slabs or self._filled == self._slabs[-1].size:
                self._slabs.append(np.empty(self._slab_rows, dtype=lookup.dtype))
                self._filled = 0
            elif self._slabs[-1].dtype.itemsize < lookup.dtype.itemsize:  # more texts than it holds
                self._slabs[-1] = self._slabs[-1].astype(lookup.dtype)
            slab = self._slabs[-1]
            n = min(positions.size - done, slab.size - self._filled)
            if same:  # the piece numbers its texts as the column does: a copy, not a gather
                slab[self._filled : self._filled + n] = positions[done : done + n]
            else:
                np.take(lookup, positions[done : done + n], out=slab[self._filled : self._filled + n], mode="wrap")
            done += n
            self._filled += n

    def column(self) -> TextColumn:
        """The column of every piece added, in order (and the builder emptied)."""
        labels = _object_array(list(self._position))
        slabs, self._slabs = self._slabs, []
        if slabs:
            slabs[-1] = slabs[-1][: self._filled]
        dtype = narrowest(labels.size)
        if len(slabs) == 1 and slabs[0].dtype == dtype:
            return TextColumn(labels, slabs[0])
        return TextColumn(labels, np.concatenate(slabs or [np.empty(0, dtype)], dtype=dtype))


def text_piece(column: pa.Array, check_utf8: bool = False) -> tuple[list[str], np.ndarray]:
    """A piece of a column of text parsed by pyarrow (dictionary-encoded, or plain strings of
    checked UTF-8) as a ``TextColumnBuilder`` takes it: its distinct texts in order of first
    sight and, per row, the position of its text among them. A column whose every cell is
    empty or one byte (digits, letters: most coded data) is encoded by a few numpy passes
    over its bytes (``_one_byte_piece``), three times as fast as Arrow's hashing.
    ``check_utf8``: check the distinct texts are UTF-8 (pyarrow.ArrowInvalid where not), for
    a column parsed without checking each cell."""
    if column.null_count:  # the readers parse "" as a text, never as null
        raise ValueError("a column of texts holds a null")
    if not pa.types.is_dictionary(column.type):
        one_byte = _one_byte_piece(column)
        if one_byte is not None:
            return one_byte
        column = column.dictionary_encode()
    if check_utf8:
        column.dictionary.validate(full=True)
    return column.dictionary.to_pylist(), _positions(column.indices)


def _one_byte_piece(column: pa.Array) -> tuple[list[str], np.ndarray] | None:
    """``text_piece`` of a string array whose cells are all empty or one byte; None for any
    other. Each cell's key is its byte (every cell one byte long) or its length * 256 + its
    byte; the keys are numbered in order of first sight (those of the first ``FIRST_SIGHT``
    cells, in Python; any other, by a pass each) and looked up."""
    n = len(column)
    _, offsets_buffer, data = column.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, column.offset * 4)
    lengths = np.diff(offsets)
    if not n or lengths.max() > 1:
        return None
    body = np.frombuffer(data, np.uint8, int(offsets[-1] - offsets[0]), int(offsets[0])) if data else None
    if body is not None and body.size == n:
        keys: np.ndarray = body
    else:
        keys = lengths.astype(np.uint16) << 8
        if body is not None and body.size:
            keys[lengths.astype(bool)] |= body

    def numbered(order: list[int]) -> np.ndarray:  # len(order) for a key not in ``order``
        lookup = np.full(256 if keys is body else 512, len(order), dtype=narrowest(len(order) + 1))
        lookup[order] = np.arange(len(order))
        return np.take(lookup, keys)

    order = list(dict.fromkeys(keys[:FIRST_SIGHT].tolist()))
    positions = numbered(order)
    if positions.max() == len(order):  # keys first seen later in the piece
        later = np.flatnonzero(np.bincount(keys[positions == len(order)])).tolist()
        order += sorted(later, key=lambda k: int(np.argmax(keys == k)))
        positions = numbered(order)
    try:
        texts = [bytes([k & 0xFF]).decode() if keys is body or k >> 8 else "" for k in order]
    except UnicodeDecodeError as exc:  # a byte of a longer character, alone: not UTF-8
        raise pa.ArrowInvalid(f"not UTF-8 text: {exc.reason}") from None
    return texts, positions


FIRST_SIGHT = 64  # cells of a piece read in Python for the order its texts are first seen in


def _positions(indices: pa.Array) -> np.ndarray:
    """A dictionary array's indices as numpy, -1 where null, read from its buffers: pyarrow's
    own ways (``fill_null``'s scalar, ``to_numpy`` with nulls) import pandas, 0.15 s a process."""
    kind = "u" if pa.types.is_unsigned_integer(indices.type) else "i"
    dtype = np.dtype(f"{kind}{indices.type.bit_width // 8}")
    validity, data = indices.buffers()
    values = np.frombuffer(data, dtype, count=len(indices), offset=indices.offset * dtype.itemsize)
    if not indices.null_count:
        return values
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), count=indices.offset + len(indices), bitorder="little")
    return np.where(valid[indices.offset :].astype(bool), values.astype(np.int64), -1)


def arrow_numbers(values: np.ndarray) -> pa.Array:
    """A 1-D numpy array of integers or floats as an Arrow array over its bytes: ``pa.array``
    imports pandas (0.15 s), to tell a pandas object from the rest."""
    values = np.ascontiguousarray(values)
    assert values.ndim == 1 and values.dtype.kind in "iuf", values.dtype
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def row_texts(column: TextColumn) -> pa.Array:
    """Every row's text as an Arrow string array, built from the distinct texts' UTF-8 bytes
    by numpy gathers (no Python object per row; no ``pyarrow.compute``, whose cast from a
    dictionary costs 0.1 s to import)."""
    data = [text.encode() for text in column.labels.tolist()]
    lengths = np.array([len(d) for d in data], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    index = column.index.astype(np.intp, copy=False)
    ends = np.cumsum(lengths[index])
    total = int(ends[-1]) if ends.size else 0
    if total > np.iinfo(np.int32).max:  # past a string array's offsets
        return pa.array(column.texts().tolist(), type=pa.string())
    offsets = np.concatenate([[0], ends]).astype(np.int32)
    at = np.repeat(starts[index] - offsets[:-1], lengths[index]) + np.arange(total)  # each byte's source
    blob = np.frombuffer(b"".join(data), dtype=np.uint8)
    return pa.Array.from_buffers(pa.string(), index.size, [None, pa.py_buffer(offsets), pa.py_buffer(blob[at])])


def _object_array(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def trimmed_header(source: str, header: Sequence[str], trim: bool) -> tuple[str, ...]:
    """The column names, whitespace around each dropped (``trim``), checked again."""
    if not trim:
        return tuple(header)
    names = tuple(name.strip() for name in header)
    if names != tuple(header):
        check_header(source, names, row_index=is_row_index(header, 0))
    return names


def is_row_index(header: Sequence[str], j: int) -> bool:
    """Whether column ``j`` is the row index that pandas' ``to_csv`` and R's ``write.csv``
    write by default: the first column of a delimited file, with no name. It is read, and
    left out of the features (``check_columns``), so a user's export trains as it comes."""
    return j == 0 and len(header) > 1 and header[0] == ""


def check_header(
    source: str, header: Sequence[str], lines: Sequence[int] | None = None, row_index: bool = False
) -> None:
    """Names of 1..MAX_NAME_LENGTH characters, no duplicates; ``lines[i]``: where column i
    is named (default line 1, a header row). ``row_index``: the first column may have no
    name (``is_row_index``)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        line = lines[i - 1] if lines is not None else 1
        if i == 1 and row_index and is_row_index(header, 0):
            continue
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
