"""Training on a file larger than memory: ``trainer fit --chunk-rows N``.

The file is read in chunks of ``N`` rows, and only counts are kept:

1. each column's distinct labels with their class counts, from which the columns are
   typed and their states or cut points learned by ``columns``' and ``encoded``'s rules, from the
   same value tables it builds in memory;
2. the coded rows' ``PairStatistics`` (N(xi, c), N(xi, xj, c)) summed over the chunks,
   and the data fingerprint;
3. once the structure is learned, the counts of every CPT's family.

Counts add up, so the model equals, bit for bit, the one learned from the whole file in
memory. What is held is the counts, the class column and one chunk. The learners that
need nothing else stream (``Learner.counts_only``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, FEATURE, NUMERIC, Variable
from bnserve.store.model.discretization import interval_labels, number_of
from bnserve.trainer.data.columns import check_columns, is_numeric_column
from bnserve.trainer.data.discretize import merge_value_tables
from bnserve.trainer.data.encoded import TrainingView
from bnserve.trainer.data.fingerprint import RowDigests, combine, fingerprint
from bnserve.trainer.data.preprocessing import IMPUTE, STATE, Preprocessing
from bnserve.trainer.io import TextColumn, iter_tables
from bnserve.trainer.stats import PairStatistics, joint_counts


@dataclass
class _Tally:
    """A column's distinct labels (numbered in order of first sight) and N(label, class),
    classes numbered in order of first sight too."""

    labels: dict[str, int] = field(default_factory=dict)
    counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))

    def add(self, column: TextColumn, y: np.ndarray, n_classes: int) -> None:
        for label in column.labels.tolist():  # labels not seen before, in order of first sight
            self.labels.setdefault(label, len(self.labels))
        codes = column.coded(lambda labels: [self.labels[t] for t in labels]).astype(np.int64)
        grown = np.zeros((len(self.labels), n_classes), dtype=np.int64)
        grown[: self.counts.shape[0], : self.counts.shape[1]] = self.counts
        grown += np.bincount(codes * n_classes + y, minlength=grown.size).reshape(grown.shape)
        self.counts = grown


@dataclass(frozen=True)
class _Reader:
    """The file read again chunk by chunk, coded with the learned variables."""

    source: str
    fmt: str | None
    chunk_rows: int
    columns: tuple[int, ...]  # the file column of each feature
    class_index: int
    variables: tuple[Variable, ...]

    def coded(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(X int32 (rows, n features), y int64) of each chunk's rows that have a class."""
        for table in iter_tables(self.source, self.fmt, self.chunk_rows):
            y = table.columns[self.class_index].coded(self.variables[-1].codes_of).astype(np.int64)
            keep = y >= 0
            X = np.empty((int(np.count_nonzero(keep)), len(self.columns)), dtype=np.int32)
            for out, (j, v) in enumerate(zip(self.columns, self.variables[:-1])):
                X[:, out] = table.columns[j].coded(v.codes_of)[keep]  # the file pass 1 typed: every value is a state
            yield X, y[keep]


@dataclass(frozen=True)
class StreamedData(TrainingView):
    """What the streaming learners see of a file they never hold: its variables, class
    column, pairwise statistics and fingerprint, with ``EncodedData``'s names for them;
    ``family_counts`` reads the file once more."""

    variables: tuple[Variable, ...]
    y: np.ndarray
    statistics: PairStatistics
    digest: str
    n_rows_dropped: int
    source: str
    preprocessing: Preprocessing
    reader: _Reader

    def fingerprint(self) -> str:
        return self.digest

    @property
    def chunk_rows(self) -> int | None:
        return self.reader.chunk_rows

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.reader.coded()

    def family_counts(self, families: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """``EncodedData.family_counts``, summed over one more pass through the file."""
        cards = [[self.n_classes if j < 0 else self.cards[j] for j in f] for f in families]
        totals = [np.zeros(c, dtype=np.int64) for c in cards]
        for X, y in self.reader.coded():
            for total, f, c in zip(totals, families, cards):
                total += joint_counts([y if j < 0 else X[:, j] for j in f], c)
        return totals


def load_streamed(
    source: str, class_column: str | None, preprocessing: Preprocessing, fmt: str | None, chunk_rows: int
) -> StreamedData:
    """Passes 1 and 2 over ``source``: the variables, then the pairwise statistics."""
    if chunk_rows < 1:
        raise InvalidInput(f"--chunk-rows must be positive, got {chunk_rows}")
    if preprocessing.missing == IMPUTE:
        raise InvalidInput("--missing impute needs the rows in memory; --chunk-rows takes available-case or state")
    reader, n_rows, dropped = _learn_variables(source, class_column, preprocessing, fmt, chunk_rows)
    variables = reader.variables
    cards = tuple(v.cardinality for v in variables[:-1])
    n_classes = variables[-1].cardinality
    statistics = PairStatistics(cards, n_classes, [np.zeros((c, n_classes), dtype=np.int64) for c in cards], {})
    digests = RowDigests()
    ys: list[np.ndarray] = []
    for X, y in reader.coded():
        part = PairStatistics.of(X, y, cards, n_classes)
        if not statistics.pairs:
            statistics.pairs.update({key: np.zeros_like(t) for key, t in part.pairs.items()})
        statistics.add(part)
        digests.add(X, y)
        ys.append(y)
    digest = fingerprint(variables, n_rows, combine([digests.finish()]))
    return StreamedData(variables, np.concatenate(ys), statistics, digest, dropped, source, preprocessing, reader)


def _learn_variables(
    source: str, class_column: str | None, preprocessing: Preprocessing, fmt: str | None, chunk_rows: int
) -> tuple[_Reader, int, int]:
    """Pass 1: tally every column, then type it and learn its states or cut points by
    ``columns``' and ``encoded``'s rules. Returns the reader for the next passes, the rows with a class
    and the rows without."""
    header: tuple[str, ...] = ()
    class_labels: dict[str, int] = {}
    tallies: list[_Tally] = []
    columns: list[int] = []
    class_index = -1
    rows = dropped = 0
    for table in iter_tables(source, fmt, chunk_rows):
        if not header:
            header = table.header
            class_index, columns = check_columns(source, header, class_column, preprocessing)
            tallies = [_Tally() for _ in columns]
        classes = table.columns[class_index]
        for label in classes.labels.tolist():  # in order of first sight
            if label != "" and label not in class_labels:
                class_labels[label] = len(class_labels)
        y = classes.coded(lambda labels: [class_labels.get(t, -1) for t in labels]).astype(np.int64)
        keep = y >= 0
        rows += int(np.count_nonzero(keep))
        dropped += int(np.count_nonzero(~keep))
        for tally, j in zip(tallies, columns):
            tally.add(table.columns[j].rows(keep), y[keep], len(class_labels))
    class_name = header[class_index]
    if rows == 0:
        if dropped == 0:
            raise InvalidInput(f"{source}: line 2: the file has a header but no data rows")
        raise InvalidInput(f"{source}: column {class_name!r}: every row has an empty class")
    class_states = tuple(sorted(class_labels))
    if len(class_states) < 2:
        raise InvalidInput(
            f"{source}: column {class_name!r}: the class needs at least two states, found only {class_states!r}"
        )
    by_state = [class_labels[s] for s in class_states]  # class axis: first sight -> state order
    variables = [_variable(source, header[j], tally, by_state, preprocessing) for j, tally in zip(columns, tallies)]
    variables.append(Variable(class_name, class_states, CLASS))
    return _Reader(source, fmt, chunk_rows, tuple(columns), class_index, tuple(variables)), rows, dropped


def _variable(source: str, name: str, tally: _Tally, by_state: list[int], preprocessing: Preprocessing) -> Variable:
    """A column's variable from its tally, as ``columns.columns_of`` and ``encoded.prepare`` make it
    (with ``--missing state``, a last state "missing" where the column has empty values)."""
    variable = _present_variable(source, name, tally, by_state, preprocessing)
    if preprocessing.missing != STATE or "" not in tally.labels:
        return variable
    return variable.with_missing_state()


def _present_variable(
    source: str, name: str, tally: _Tally, by_state: list[int], preprocessing: Preprocessing
) -> Variable:
    labels = [label for label in tally.labels if label != ""]
    parsed = np.array([number_of(label) for label in labels], dtype=np.float64)
    numbers = (parsed if labels else np.array([np.nan])) if not np.isnan(parsed).any() else None
    if not is_numeric_column(name, None, numbers if name not in preprocessing.nominal else None, preprocessing):
        if not labels:
            raise InvalidInput(f"{source}: column {name!r}: every value is empty")
        return Variable(name, tuple(sorted(labels)), FEATURE)
    if numbers is None:
        bad = labels[int(np.flatnonzero(np.isnan(parsed))[0])]
        raise InvalidInput(f"{source}: column {name!r} is numeric, but has the value {bad!r}")
    rows = [tally.labels[label] for label in labels]
    counts = tally.counts[rows][:, by_state] if rows else np.zeros((0, len(by_state)), dtype=np.int64)
    values, table = merge_value_tables([(numbers[: len(rows)], counts)])  # labels "1" and "1.0" are one value
    cuts = preprocessing.method(name).cuts_from_table(values, table)
    return Variable(name, interval_labels(cuts), FEATURE, NUMERIC, cuts)
