"""Training on a file larger than memory: ``trainer fit --chunk-rows N``.

The file is read in chunks of ``N`` rows, and only counts are kept:

1. each column's distinct labels with their class counts, from which the columns are
   typed and their states or cut points learned by ``columns``' and ``encoded``'s rules, from the
   same value tables it builds in memory;
2. the coded rows' ``PairStatistics`` (N(xi, c), N(xi, xj, c)) summed over the chunks,
   and the data fingerprint;
3. once the structure is learned, the counts of every CPT's family.

Counts add up, so the model equals, bit for bit, the one learned from the whole file in
memory. With a weight column (``Preprocessing.weight``) every count is a float64 sum of
weights, which adds up exactly too (whole numbers up to 2^53); rows of weight 0 are dropped
as each chunk is read. What is held is the counts and one chunk. The learners that
need nothing else stream (``Learner.counts_only``).

The data are read in parts (``Part``): the files a glob pattern names, each local CSV or
TSV cut into byte ranges where it can be (``delimited.byte_parts``). Each pass is mapped
over the parts (``parallel.map_parts``: here, by ``--jobs`` processes, or by the workers
of a Dask cluster) and its counts summed in part order: the tallies merged label by label
(``_Pass1.merge``), the pairwise statistics and family counts added, the fingerprint's
block digests combined. The same counts, so the same model.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, FEATURE, NOMINAL, NUMERIC, Variable
from bnserve.store.model.discretization import interval_labels, number_of
from bnserve.trainer.data import fingerprint as fingerprint_module
from bnserve.trainer.data.columns import (
    check_class,
    check_columns,
    is_numeric_column,
    nominal_states,
    numbers_of,
    state_order,
)
from bnserve.trainer.data.discretize import merge_value_tables
from bnserve.trainer.data.fingerprint import RowDigests, combine, fingerprint, weight_rows, weighted
from bnserve.trainer.data.kept import Chunk, HeldPart, held_part, keeping, kept, new_folder, remove
from bnserve.trainer.data.missing import IMPUTE, STATE
from bnserve.trainer.data.parallel import (
    Held,
    balance,
    cluster_threads,
    hold_parts,
    map_held,
    map_parts,
    settle,
    start_pool,
)
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.data.view import TrainingView
from bnserve.trainer.data.weights import positive_rows, typing_rules, weight_column, weight_index
from bnserve.trainer.io import (
    DELIMITERS,
    Declared,
    RawTable,
    TextColumn,
    chunked_format,
    expand,
    field_delimiter,
    header_of,
    iter_tables,
)
from bnserve.trainer.io.delimited import PartUnreadable, byte_parts, part_chunks
from bnserve.trainer.io.sources import BUILTIN_PREFIX, is_url
from bnserve.trainer.io.table import narrowest, trimmed_header
from bnserve.trainer.progress import stage
from bnserve.trainer.stats import COMPARED_VALUES, PairStatistics, joint_counts, value_counts

T = TypeVar("T")
Rows = np.ndarray | slice  # a chunk's rows to count: a mask, or all of them


def _kept_rows(keep: np.ndarray) -> Rows:
    """The rows of the mask ``keep`` as an index: all of them (a slice: views, no copies) when
    every row is kept, as in most files, where only a row without a class is left out."""
    return slice(None) if keep.all() else keep


@dataclass
class _Tally:
    """A column's distinct labels (numbered in order of first sight) and N(label, class),
    classes numbered in order of first sight too."""

    labels: dict[str, int] = field(default_factory=dict)
    counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # float64 if weighted

    @classmethod
    def of(cls, weighted: bool) -> _Tally:
        return cls(counts=np.zeros((0, 0), dtype=np.float64 if weighted else np.int64))

    def add(self, column: TextColumn, y: np.ndarray, n_classes: int, weights: np.ndarray | None, rows: Rows) -> None:
        """Count the ``rows`` of ``column``, of class ``y`` (those rows'), weighing ``weights``
        (those rows'). Counted by the column's own positions, a byte a row, then moved to this
        tally's labels; a text no row counted here is not a label yet."""
        index = column.index[rows]
        cells = column.labels.size * n_classes
        if weights is None and cells <= COMPARED_VALUES:  # by comparisons, not bincount
            counted = value_counts(index.astype(np.uint8) * n_classes + y.astype(np.uint8), cells)
        else:
            counted = np.bincount(index.astype(np.int64) * n_classes + y, weights, minlength=cells)
        per_label = counted.reshape(column.labels.size, n_classes)
        used = per_label.any(axis=1)  # a kept row weighs more than 0: rows of weight 0 were dropped
        labels = column.labels[used].tolist()
        for label in labels:  # labels not seen before, in order of first sight
            self.labels.setdefault(label, len(self.labels))
        self.grow(n_classes)
        rows = np.array([self.labels[t] for t in labels], dtype=np.int64)
        self.counts[rows] += per_label[used]  # each label once: no two rows of the sum meet

    def merge(self, other: _Tally, classes: np.ndarray, n_classes: int) -> None:
        """Add ``other``'s counts, its class ``c`` being this tally's ``classes[c]``."""
        for label in other.labels:  # in its order of first sight, after this tally's
            self.labels.setdefault(label, len(self.labels))
        self.grow(n_classes)
        rows = np.array([self.labels[label] for label in other.labels], dtype=np.int64)
        np.add.at(self.counts, (rows[:, None], classes[None, : other.counts.shape[1]]), other.counts)

    def grow(self, n_classes: int) -> None:
        """Room in ``counts`` for every label known and ``n_classes`` classes."""
        grown = np.zeros((len(self.labels), n_classes), dtype=self.counts.dtype)
        grown[: self.counts.shape[0], : self.counts.shape[1]] = self.counts
        self.counts = grown


@dataclass
class _Pass1:
    """What pass 1 counts of some rows: the class labels (numbered in order of first sight),
    every feature column's ``_Tally``, the rows with a class and those without."""

    classes: dict[str, int] = field(default_factory=dict)
    tallies: list[_Tally] = field(default_factory=list)
    rows: int = 0
    dropped: int = 0
    declared: list[_Declared] = field(default_factory=list)  # per feature, then the class, when the file declares
    weighted: bool = False  # the tallies sum row weights

    def add(self, table: RawTable, class_index: int, columns: Sequence[int], weights: np.ndarray | None) -> None:
        if table.declared:
            self._declare([_Declared.of(table.declared[j]) for j in [*columns, class_index]], table.source)
        classes = table.columns[class_index]
        for label in classes.labels.tolist():  # in order of first sight
            if label != "" and label not in self.classes:
                self.classes[label] = len(self.classes)
        y = classes.coded(lambda labels: [self.classes.get(t, -1) for t in labels]).astype(np.int64)
        keep = y >= 0
        self.rows += int(np.count_nonzero(keep))
        self.dropped += int(np.count_nonzero(~keep))
        if not self.tallies:
            self.tallies = [_Tally.of(self.weighted) for _ in columns]
        rows = _kept_rows(keep)
        kept = weights[rows] if weights is not None else None
        for tally, j in zip(self.tallies, columns):
            tally.add(table.columns[j], y[rows], len(self.classes), kept, rows)

    def merge(self, other: _Pass1) -> None:
        """Add the counts of the rows after these (the same as counting them all in order)."""
        for label in other.classes:
            self.classes.setdefault(label, len(self.classes))
        classes = np.array([self.classes[label] for label in other.classes], dtype=np.int64)
        if not self.tallies:
            self.tallies = [_Tally.of(self.weighted) for _ in other.tallies]
        for tally, theirs in zip(self.tallies, other.tallies):
            tally.merge(theirs, classes, len(self.classes))
        self.rows += other.rows
        self.dropped += other.dropped
        if other.declared:
            self._declare(other.declared, "a later part")

    def _declare(self, declared: list[_Declared], where: str) -> None:
        if not self.declared:
            self.declared = [_Declared(d.kind, dict(d.labels) if d.labels is not None else None) for d in declared]
            return
        for mine, theirs in zip(self.declared, declared):
            mine.merge(theirs, where)


@dataclass
class _Declared:
    """A column's declared type over the parts: its kind, and a nominal domain as the
    union of the parts' (in order of first sight, as Arrow unifies dictionaries)."""

    kind: str | None
    labels: dict[str, None] | None = None

    @classmethod
    def of(cls, declared: Declared | None) -> _Declared:
        if declared is None:
            return cls(None)
        return cls(declared.kind, None if declared.labels is None else dict.fromkeys(declared.labels))

    def merge(self, other: _Declared, where: str) -> None:
        if other.kind != self.kind:
            raise InvalidInput(f"{where}: a column is declared {other.kind}, not {self.kind} as in the first part")
        if self.labels is not None and other.labels is not None:
            self.labels.update(other.labels)

    def declared(self) -> Declared | None:
        return None if self.kind is None else Declared(self.kind, None if self.labels is None else tuple(self.labels))


@dataclass(frozen=True)
class Part:
    """Some of the rows: a whole file, or the byte range ``[start, end)`` of one."""

    source: str
    byte_range: tuple[int, int] | None = None
    stamp: tuple[int, int] | None = None  # a local file's (size, mtime in ns) when the trainer planned it

    def check(self) -> None:
        """Refuse to count a local file that is not the one the trainer planned: where the part
        is read (a Dask worker: another machine) the path may name another file, or none, and
        its counts would make a model of other data."""
        if self.stamp is None:
            return
        try:
            stat = os.stat(self.source)
        except OSError as exc:
            raise InvalidInput(f"{self.source}: cannot open it on {socket.gethostname()}: {exc.strerror}") from None
        if (stat.st_size, stat.st_mtime_ns) != self.stamp:
            raise InvalidInput(
                f"{self.source}: the file on {socket.gethostname()} is not the one the trainer read "
                f"({stat.st_size} bytes, modified at {stat.st_mtime_ns} ns, not {self.stamp[0]} bytes at {self.stamp[1]} ns)"
            )


def _planned(file: str) -> Part:
    """The whole ``file`` as every process must read it: a local path made absolute (a worker's
    working directory is not the trainer's) and stamped (``Part.check``); a URL as it is."""
    if is_url(file) or file.startswith(BUILTIN_PREFIX):
        return Part(file)
    try:
        stat = os.stat(file)
    except OSError as exc:
        raise InvalidInput(f"{file}: cannot open: {exc.strerror}") from None
    return Part(os.path.abspath(file), None, (stat.st_size, stat.st_mtime_ns))


@dataclass(frozen=True)
class _Reader:
    """The data read chunk by chunk, part by part, coded with the learned variables."""

    source: str  # as the user named it: a file, a URL, a glob pattern
    fmt: str
    chunk_rows: int
    header: tuple[str, ...]
    columns: tuple[int, ...]  # the file column of each feature
    class_index: int
    parts: tuple[Part, ...]
    jobs: int = 1  # local processes counting the parts
    dask: str | None = None  # or the Dask scheduler whose workers count them
    preprocessing: Preprocessing = Preprocessing()  # noqa: RUF009 (frozen): how its texts are read
    variables: tuple[Variable, ...] = ()  # once pass 1 has learned them
    weight: int | None = None  # the file column of the row weights, if any
    kept: str | None = None  # the folder where pass 1 keeps the parts' chunks for the later passes

    def tables(self, part: int | None = None) -> Iterator[tuple[RawTable, np.ndarray | None]]:
        """The chunks of every part (or of ``part``), in order, each with its rows' weights
        (None: unweighted; rows of weight 0 dropped); the rows read reported as the
        stage of the part (in this process: a worker's report to no one)."""
        for p in self.parts if part is None else (self.parts[part],):
            p.check()
            if p.byte_range is not None:
                delimiter = field_delimiter(self.fmt, self.preprocessing.delimiter)
                tables = part_chunks(p.source, delimiter, self.header, p.byte_range, self.chunk_rows)
            else:
                tables = iter_tables(
                    p.source, self.fmt, self.chunk_rows, self.preprocessing.delimiter, self.preprocessing.limits
                )
            with stage(p.source, unit="row") as bar:
                for table in tables:
                    if tuple(table.header) != self.header:
                        raise InvalidInput(
                            f"{p.source}: line 1: the columns are {', '.join(table.header)}, "
                            f"not those of {self.parts[0].source}: {', '.join(self.header)}"
                        )
                    bar.update(table.n_rows)
                    table = self.preprocessing.cleaned(table)
                    if self.weight is None:
                        yield table, None
                        continue
                    if p.byte_range is not None:  # lines unknown: a bad weight sends the file to be read in order
                        table = replace(table, line_numbers=_read_in_order)
                    name, class_name = table.header[self.weight], table.header[self.class_index]
                    yield positive_rows(table, weight_column(table, name, class_name, all_rows=False))

    def map(self, what: str, work: Callable[..., T], *args: Any, held: Held | None = None) -> list[T]:
        """``work(self, part, *args)`` of every part, in part order, where ``jobs`` or ``dask``
        say (given the part's ``held`` chunks last, where a Dask worker holds them); its
        progress reported as the stage "``what`` SOURCE"."""
        return map_parts(
            work,
            self,
            len(self.parts),
            *args,
            jobs=self.jobs,
            dask=self.dask,
            what=f"{what} {self.source}",
            held=held,
        )

    def chunks(self, part: int | None = None) -> Iterator[Chunk]:
        """The chunks of every part (or of ``part``), in order: read back where pass 1 kept
        them (``kept``), else read from the file again; the rows reported either way."""
        for i in range(len(self.parts)) if part is None else (part,):
            chunks = kept(self.kept, self.parts[i])
            if chunks is None:
                yield from (Chunk.of(t, self.class_index, self.columns, w) for t, w in self.tables(i))
                continue
            with stage(self.parts[i].source, unit="row") as bar:  # as ``tables`` reports a reading
                for chunk in chunks:
                    bar.update(chunk.y.index.size)  # the rows kept: a zero weight's row was not
                    yield chunk

    def coded(
        self, part: int | None = None, held: HeldPart | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """(X (rows, n features), y int64, weights float64 or None) of each chunk's rows that
        have a class, in the file (or in its ``part``, or in the ``held`` chunks of a part) in
        order. X is coded as in memory (``encoded``): the ``narrowest`` type for the states,
        column-major, so that each column's counts read it in sequence."""
        dtype = narrowest(max((v.cardinality for v in self.variables[:-1]), default=0))
        for chunk in self.chunks(part) if held is None else held.chunks:
            y = chunk.y.coded(self.variables[-1].codes_of).astype(np.int64)
            rows = _kept_rows(y >= 0)
            y = y[rows]
            X = np.empty((y.size, len(self.columns)), dtype=dtype, order="F")
            for out, (column, v) in enumerate(zip(chunk.features, self.variables[:-1])):
                if isinstance(rows, slice):  # every row kept: each column coded straight into X
                    column.coded(v.codes_of, X[:, out])
                else:
                    X[:, out] = column.coded(v.codes_of)[rows]
            weights = chunk.weights
            yield X, y, weights[rows] if weights is not None else None


def _read_in_order() -> np.ndarray:
    """The lines of a part read apart, asked for to name a bad value: only a reading in order knows them."""
    raise PartUnreadable("a bad value in a part read apart")


@dataclass(frozen=True)
class StreamedData(TrainingView):
    """What the streaming learners see of data they never hold: its variables, class
    counts, pairwise statistics and fingerprint, with ``EncodedData``'s names for them;
    ``family_counts`` reads the data once more."""

    variables: tuple[Variable, ...]
    totals: np.ndarray  # N(c): the rows are not held, not even their classes
    statistics: PairStatistics
    digest: str
    n_rows_dropped: int
    source: str
    preprocessing: Preprocessing
    reader: _Reader
    rows: int  # with a class and a weight above 0 (``class_totals`` sums their weights)
    held: Held | None = field(default=None, compare=False)  # on Dask: each part's chunks, where it was read

    @property
    def n_rows(self) -> int:
        return self.rows

    def fingerprint(self) -> str:
        return self.digest

    def class_totals(self) -> np.ndarray:
        return self.totals

    @property
    def weighted(self) -> bool:
        return self.reader.weight is not None

    @property
    def chunk_rows(self) -> int | None:
        return self.reader.chunk_rows

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        return self.reader.coded()

    def family_counts(self, families: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """``EncodedData.family_counts``, summed over one more pass through the file (its
        parts counted by ``--jobs`` processes)."""
        cards = [[self.n_classes if j < 0 else self.cards[j] for j in f] for f in families]
        totals = [np.zeros(c, dtype=self.totals.dtype) for c in cards]
        for counts in self.reader.map("counting families of", _family_counts, families, cards, held=self.held):
            for total, part in zip(totals, counts):
                total += part
        return totals


def _family_counts(
    reader: _Reader,
    part: int,
    families: Sequence[Sequence[int]],
    cards: Sequence[Sequence[int]],
    held: HeldPart | None = None,
) -> list[np.ndarray]:
    totals = [np.zeros(c, dtype=np.int64 if reader.weight is None else np.float64) for c in cards]
    for X, y, weights in reader.coded(part, held):
        for total, f, c in zip(totals, families, cards):
            total += joint_counts([y if j < 0 else X[:, j] for j in f], c, weights=weights)
    return totals


def load_streamed(
    source: str,
    class_column: str | None,
    preprocessing: Preprocessing,
    fmt: str | None,
    chunk_rows: int,
    jobs: int = 1,
    dask: str | None = None,
) -> StreamedData:
    """Passes 1 and 2 over ``source`` (a file, a URL, or a glob pattern naming files with
    the same columns): the variables, then the pairwise statistics. Its parts are counted
    by ``jobs`` processes, or by the workers of the Dask scheduler at ``dask``, each pass's
    counts summed: the same counts, so the same model."""
    if chunk_rows < 1:
        raise InvalidInput(f"--chunk-rows must be positive, got {chunk_rows}")
    if preprocessing.missing == IMPUTE:
        raise InvalidInput("--missing impute needs the rows in memory; --chunk-rows takes available-case or state")
    if not dask:
        start_pool(jobs)  # while the header and the parts are worked out
    folder = None if dask else new_folder()  # a Dask worker may be on another machine
    try:
        streamed = _streamed(source, class_column, preprocessing, fmt, chunk_rows, jobs, dask, folder)
    except BaseException:
        settle()  # refused before the pool was used: its processes started, then told to end
        if folder is not None:
            remove(folder)
        raise
    if folder is not None:
        weakref.finalize(streamed, remove, folder)  # the kept parts go with the data
    return streamed


def _streamed(
    source: str,
    class_column: str | None,
    preprocessing: Preprocessing,
    fmt: str | None,
    chunk_rows: int,
    jobs: int,
    dask: str | None,
    folder: str | None,
) -> StreamedData:
    reader, part_rows, dropped, held = _learn_variables(
        source, class_column, preprocessing, fmt, chunk_rows, jobs, dask, folder
    )
    variables = reader.variables
    cards = tuple(v.cardinality for v in variables[:-1])
    n_classes = variables[-1].cardinality
    starts = [0, *itertools.accumulate(part_rows)][:-1]
    shared: list[RowDigests] = []
    if held is None:
        counted = reader.map("counting pairs of", _pass2, cards, n_classes, starts)
    else:  # on Dask: the rows of the blocks parts share meet on a worker to be hashed
        what = f"counting pairs of {source}"
        assert reader.dask
        counted, apart = hold_parts(
            _pass2_apart, reader, len(part_rows), cards, n_classes, starts, dask=reader.dask, what=what, held=held
        )
        shared = _shared_blocks(reader.dask, apart, starts, part_rows)
    weighted_rows = reader.weight is not None
    statistics = PairStatistics.empty(cards, n_classes, weighted_rows)
    totals = np.zeros(n_classes, dtype=np.float64 if weighted_rows else np.int64)
    for part, part_totals, _, _ in counted:
        statistics.add(part)
        totals += part_totals
    rows = sum(part_rows)
    digest = fingerprint(variables, rows, combine([*(_widened(d) for _, _, d, _ in counted), *shared]))
    if weighted_rows:
        digest = weighted(digest, rows, combine([w for _, _, _, w in counted if w is not None]))
    return StreamedData(variables, totals, statistics, digest, dropped, source, preprocessing, reader, rows, held)


def _pass2(
    reader: _Reader,
    part: int,
    cards: tuple[int, ...],
    n_classes: int,
    starts: Sequence[int],
    held: HeldPart | None = None,
) -> tuple[PairStatistics, np.ndarray, RowDigests, RowDigests | None]:
    """Pass 2 over the ``part``: pairwise statistics, class counts (sums of weights when the
    rows have them), and block digests of the rows and of their weights."""
    is_weighted = reader.weight is not None
    statistics = PairStatistics.empty(cards, n_classes, is_weighted)
    digests = RowDigests(starts[part])
    weight_digests = RowDigests(starts[part]) if is_weighted else None
    totals = np.zeros(n_classes, dtype=np.float64 if is_weighted else np.int64)
    for X, y, weights in reader.coded(part, held):
        statistics.add(PairStatistics.of(X, y, cards, n_classes, weights))
        digests.add(np.ascontiguousarray(X), y)  # hashed by rows: copied once here, a byte a cell
        totals += np.bincount(y, weights, minlength=n_classes)
        if weight_digests is not None and weights is not None:
            weight_digests.add(weight_rows(weights), y)
    return statistics, totals, _narrowed(digests.finish()), weight_digests.finish() if weight_digests else None


def _pass2_apart(
    reader: _Reader, part: int, cards: tuple[int, ...], n_classes: int, starts: Sequence[int], held: HeldPart | None
) -> tuple[tuple[PairStatistics, np.ndarray, RowDigests, RowDigests | None], dict[int, Any]]:
    """``_pass2`` on a Dask worker: the counts, and apart (held there) the rows of the blocks
    the part shares with others."""
    counted = _pass2(reader, part, cards, n_classes, starts, held)
    shared, counted[2].fragments = counted[2].fragments, {}
    return counted, shared


def _shared_blocks(dask: str, apart: Held, starts: Sequence[int], part_rows: Sequence[int]) -> list[RowDigests]:
    """The digests of the fingerprint's blocks that parts share, each hashed on a worker from
    the rows each part holds of it (``_pass2_apart``): those rows go from worker to worker, in
    a byte a cell, not through the trainer."""
    size = fingerprint_module.BLOCK_ROWS
    parts: dict[int, list[int]] = {}
    for i, (start, n) in enumerate(zip(starts, part_rows)):
        for block in range(start // size, (start + n - 1) // size + 1) if n else ():
            if not (start <= block * size and (block + 1) * size <= start + n):  # not whole in the part
                parts.setdefault(block, []).append(i)
    calls = [(block, [apart.futures[i] for i in sharing]) for block, sharing in sorted(parts.items())]
    return map_held(dask, _block_digests, calls) if calls else []


def _block_digests(block: int, shared: list[dict[int, Any]]) -> RowDigests:
    rows = [_widened(RowDigests(fragments={block: rows[block]})) for rows in shared if block in rows]
    return RowDigests(whole={block: combine(rows)[0]})


def _narrowed(digests: RowDigests) -> RowDigests:
    """``digests`` with the rows of the blocks it shares with other parts (sent back to be
    hashed: a third of the rows, for parts of 100,000 rows) in the narrowest types, codes in
    a byte for a few states, not four (``_widened`` gives them back as ``combine`` hashes them)."""
    digests.fragments = {
        block: (X.astype(narrowest(int(X.max(initial=0)) + 1)), y.astype(narrowest(int(y.max(initial=0)) + 1)))
        for block, (X, y) in digests.fragments.items()
    }
    return digests


def _widened(digests: RowDigests) -> RowDigests:
    digests.fragments = {block: (X.astype("<i4"), y.astype("<i8")) for block, (X, y) in digests.fragments.items()}
    return digests


def _learn_variables(
    source: str,
    class_column: str | None,
    preprocessing: Preprocessing,
    fmt: str | None,
    chunk_rows: int,
    jobs: int,
    dask: str | None,
    folder: str | None = None,
) -> tuple[_Reader, list[int], int, Held | None]:
    """Pass 1: tally every column, then type it and learn its states or cut points by
    ``columns``' and ``encoded``'s rules. Returns the reader for the next passes, the rows
    with a class (per part), the rows without, and on Dask the chunks each worker holds."""
    fmt = chunked_format(source, fmt)
    files = expand(source)
    header = tuple(header_of(files[0], fmt, preprocessing.delimiter, preprocessing.limits))  # as the parts are parsed
    names = trimmed_header(files[0], header, preprocessing.trim)  # as the variables are named
    class_index, columns = check_columns(files[0], names, class_column, typing_rules(preprocessing))
    weight = None if preprocessing.weight is None else weight_index(files[0], names, preprocessing.weight, class_column)
    whole_files = tuple(_planned(f) for f in files)  # the files named here are those every process reads
    parts = _parts(whole_files, fmt, cluster_threads(dask) if dask else jobs) if fmt in DELIMITERS else whole_files
    reader = _Reader(
        source,
        fmt,
        chunk_rows,
        header,
        tuple(columns),
        class_index,
        parts,
        jobs,
        dask,
        preprocessing,
        (),
        weight,
        folder,
    )
    try:
        counted, held = _read(reader)
    except PartUnreadable:  # read each file in order, where csv names what is wrong
        reader = replace(reader, parts=whole_files)
        counted, held = _read(reader)
    total = _Pass1(weighted=weight is not None)
    for part in counted:
        total.merge(part)
    class_name = names[class_index]
    if total.rows == 0 and weight is not None:
        raise InvalidInput(f"{source}: column {names[weight]!r}: no row with a class has a weight above 0")
    if total.rows == 0:
        if total.dropped == 0:
            raise InvalidInput(f"{source}: line 2: the file has a header but no data rows")
        raise InvalidInput(f"{source}: column {class_name!r}: every row has an empty class")
    declared = [d.declared() for d in total.declared] or [None] * (len(columns) + 1)
    class_states = _class_states(total, declared[-1])
    check_class(source, class_name, class_states, preprocessing)
    by_state = [total.classes[s] for s in class_states]  # class axis: first sight -> state order
    variables = [
        _variable(source, names[j], tally, by_state, preprocessing, kind)
        for j, tally, kind in zip(columns, total.tallies, declared)
    ]
    variables.append(Variable(class_name, class_states, CLASS))
    return replace(reader, variables=tuple(variables)), [part.rows for part in counted], total.dropped, held


def _read(reader: _Reader) -> tuple[list[_Pass1], Held | None]:
    """Pass 1 over every part; on Dask, each part's chunks held by the worker that read it."""
    if reader.dask:
        counted, held = hold_parts(
            _pass1_held, reader, len(reader.parts), dask=reader.dask, what=f"reading {reader.source}"
        )
        return counted, balance(reader.dask, held, [part.rows for part in counted])
    return reader.map("reading", _pass1), None


def _class_states(total: _Pass1, declared: Declared | None) -> tuple[str, ...]:
    """The class's states as ``columns_of`` takes them: a declared domain (in its order, a
    state no row has given a column of zero counts), else the labels in ``state_order``."""
    if declared is None or declared.kind != NOMINAL or declared.labels is None:
        return state_order(total.classes)
    for state in declared.labels:
        total.classes.setdefault(state, len(total.classes))
    for tally in total.tallies:
        tally.grow(len(total.classes))
    return declared.labels


def _pass1(reader: _Reader, part: int) -> _Pass1:
    """Pass 1 over the ``part``: its tallies; its chunks kept on disk for the later passes."""
    with keeping(reader.kept, reader.parts[part]) as keep:
        return _tallied(reader, part, keep)


def _pass1_held(reader: _Reader, part: int) -> tuple[_Pass1, HeldPart | None]:
    """Pass 1 over the ``part`` on a Dask worker: its tallies, and its chunks to hold in the
    worker's memory for the later passes (None: past its share, ``kept.held_part``)."""
    chunks: list[Chunk] = []
    counted = _tallied(reader, part, lambda chunk: chunks.append(chunk.narrowed()))
    return counted, held_part(chunks)


def _tallied(reader: _Reader, part: int, keep: Callable[[Chunk], None]) -> _Pass1:
    counted = _Pass1(weighted=reader.weight is not None)
    for table, weights in reader.tables(part):
        counted.add(table, reader.class_index, reader.columns, weights)
        keep(Chunk.of(table, reader.class_index, reader.columns, weights))
    return counted


MIN_PART_BYTES = 8 << 20  # a smaller file is read in order: starting the processes costs more


def _parts(files: tuple[Part, ...], fmt: str, workers: int) -> tuple[Part, ...]:
    """The whole files, each cut into byte ranges where it can be: about ``workers`` parts in all."""
    per_file = math.ceil(workers / len(files))
    parts: list[Part] = []
    for whole in files:
        ranges = byte_parts(whole.source, per_file, MIN_PART_BYTES) if per_file > 1 else None
        parts.extend([replace(whole, byte_range=r) for r in ranges] if ranges else [whole])
    return tuple(parts)


def _variable(
    source: str, name: str, tally: _Tally, by_state: list[int], preprocessing: Preprocessing, declared: Declared | None
) -> Variable:
    """A column's variable from its tally, as ``columns.columns_of`` and ``encoded.prepare`` make it
    (with ``--missing state``, a last state "missing" where the column has empty values)."""
    variable = _present_variable(source, name, tally, by_state, preprocessing, declared)
    if preprocessing.missing != STATE or "" not in tally.labels:
        return variable
    return variable.with_missing_state()


def _present_variable(
    source: str, name: str, tally: _Tally, by_state: list[int], preprocessing: Preprocessing, declared: Declared | None
) -> Variable:
    labels = [label for label in tally.labels if label != ""]
    numbers = numbers_of(labels)
    rows = [tally.labels[label] for label in labels]
    counts = tally.counts[rows][:, by_state] if rows else np.zeros((0, len(by_state)), dtype=np.int64)
    if not is_numeric_column(name, declared, numbers, preprocessing, counts.sum(axis=1) if rows else None):
        states = nominal_states(name, labels, numbers, declared, preprocessing)  # as columns_of takes them
        if not states:
            raise InvalidInput(f"{source}: column {name!r}: every value is empty")
        return Variable(name, states, FEATURE)
    if numbers is None:
        bad = next(label for label in labels if math.isnan(number_of(label)))
        raise InvalidInput(f"{source}: column {name!r} is numeric, but has the value {bad!r}")
    values, table = merge_value_tables([(numbers, counts)])  # labels "1" and "1.0" are one value
    cuts = preprocessing.method(name).cuts_from_table(values, table)
    return Variable(name, interval_labels(cuts), FEATURE, NUMERIC, cuts)
