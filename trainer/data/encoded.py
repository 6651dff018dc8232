"""Coded training data, and the preprocessing learned from it.

Three steps: ``columns.columns_of`` types every column (declared by the file, forced by the user,
or inferred: a column whose values are all numbers is numeric, unless they are all whole
numbers from 0 to ``MAX_CODE``, which read as codes of a nominal column) into ``Columns``; ``prepare`` learns from a set of rows what depends on
the data (cut points of numeric columns, imputed values) and gives ``EncodedData``;
``encode_like`` codes other rows with those learned variables. Cross-validation prepares
each training fold afresh (``EncodedData.split``), so nothing leaks from the test fold.

An empty field is missing (code -1). Labels are taken unchanged (no stripping), as the
server takes them. Rows whose class is missing are dropped and counted. Errors are
``InvalidInput`` naming the file, line and column.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import FEATURE, NUMERIC, REFUSE, UNKNOWN, Variable, settle_unknown
from bnserve.store.model.discretization import interval_codes, interval_labels
from bnserve.store.model.markers import COMMON_MARKERS
from bnserve.store.model.projection import derive_codes, derived_inputs
from bnserve.trainer.cores import ordered_map
from bnserve.trainer.data.columns import Columns, columns_of
from bnserve.trainer.data.fingerprint import fingerprint_of
from bnserve.trainer.data.missing import AVAILABLE_CASE, IMPUTE, STATE
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.data.projections import LDA, derived_names, discriminants
from bnserve.trainer.data.unseen import UnseenValues
from bnserve.trainer.data.view import TrainingView
from bnserve.trainer.data.weights import checked_weights, typing_rules, weight_column, weighted_rows
from bnserve.trainer.io import RawTable, TextColumn, read_table
from bnserve.trainer.io.table import narrowest
from bnserve.trainer.stats import PairStatistics, joint_counts
from bnserve.trainer.stats.counts import counting_threads


@dataclass(frozen=True)
class EncodedData(TrainingView):
    """Coded training data. ``X``: (rows, n_features), -1 = missing, in the ``narrowest``
    integer type for the variables' states (int8 up to 127: a byte per cell); ``y``: int64 (rows,).

    ``variables`` lists the features in file order, then the class (role "class").
    ``columns`` and ``preprocessing``, when set, are where ``X`` came from and how, so a
    subset of rows can learn its own cut points (``split``).
    """

    variables: tuple[Variable, ...]
    X: np.ndarray
    y: np.ndarray
    n_rows_dropped: int = 0
    source: str = ""
    columns: Columns | None = field(default=None, repr=False, compare=False)
    preprocessing: Preprocessing | None = field(default=None, repr=False, compare=False)
    weights: np.ndarray | None = field(default=None, repr=False, compare=False)  # float64 > 0 per row, or None

    def class_totals(self) -> np.ndarray:
        if self.weights is not None:
            return np.bincount(self.y, self.weights, minlength=self.n_classes)
        return np.bincount(self.y, minlength=self.n_classes).astype(np.int64)

    @property
    def weighted(self) -> bool:
        return self.weights is not None

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    def subset(self, rows: np.ndarray) -> EncodedData:
        """The same variables over a selection of rows (index or boolean array)."""
        columns = self.columns.subset(rows) if self.columns is not None else None
        weights = self.weights[rows] if self.weights is not None else None
        return EncodedData(
            self.variables, self.X[rows], self.y[rows], 0, self.source, columns, self.preprocessing, weights
        )

    def split(self, train: np.ndarray, test: np.ndarray) -> tuple[EncodedData, EncodedData]:
        """Training and test rows, with the preprocessing learned again on the training rows
        alone when it learns from data (numeric columns, imputation)."""
        if self.columns is None or self.preprocessing is None or not _learns(self.columns, self.preprocessing):
            return self.subset(train), self.subset(test)
        weights = self.weights[train] if self.weights is not None else None
        fitted = prepare(self.columns.subset(train), self.preprocessing, weights)
        return fitted, encode_like(self.columns.subset(test), fitted.variables)

    @cached_property
    def statistics(self) -> PairStatistics:
        """The pairwise counts the nb/tan/kdb/fkdb learners use, counted once."""
        return PairStatistics.of(self.X, self.y, self.cards, self.n_classes, self.weights)

    @cached_property
    def learnt(self) -> dict[Hashable, Any]:
        """What learners learnt on these rows, by learner and parameters (``fit.learn``): a
        search fits several estimators on the same structures of the same folds."""
        return {}

    def family_counts(self, families: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Available-case N(family) per family of column indices (-1: the class), axes in order.
        Once ``statistics`` are counted (unweighted), a family of the class and at most two
        features is read from them, not counted again: the same integers, without a pass over
        the rows (an AODE's families are every pair of features with the class). Over more than
        ``BLOCK_ROWS`` rows, counted on the cores the fit may use (``counting_threads``), a block at a time."""
        counted = self.__dict__.get("statistics") if self.weights is None else None

        def column(j: int) -> np.ndarray:
            return self.y if j < 0 else self.X[:, j]

        def card(j: int) -> int:
            return self.n_classes if j < 0 else self.cards[j]

        def counts(family: Sequence[int]) -> np.ndarray:
            table = counted.family(family) if counted is not None else None
            if table is None:
                table = joint_counts([column(j) for j in family], [card(j) for j in family], weights=self.weights)
            return table

        with ordered_map(counting_threads(self.n_rows), "counting") as mapped:
            return list(mapped(counts, families))

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        yield self.X, self.y, self.weights

    def fingerprint(self) -> str:
        """sha256 over the variables and the coded rows (``fingerprint``)."""
        return fingerprint_of(self.variables, self.X, self.y, self.weights)


def _learns(columns: Columns, preprocessing: Preprocessing) -> bool:
    return bool(columns.numeric_columns) or preprocessing.missing != AVAILABLE_CASE


def load(
    source: str, class_column: str | None = None, preprocessing: Preprocessing | None = None, fmt: str | None = None
) -> EncodedData:
    """Read ``source``, type its columns, and learn the preprocessing from all its rows
    (weighted by the column ``preprocessing.weight`` names, if any)."""
    preprocessing = preprocessing or Preprocessing()
    table = read_table(source, fmt, preprocessing.delimiter, preprocessing.limits)
    return from_table(table, class_column, preprocessing, consume=True)


def from_table(
    table: RawTable, class_column: str | None, preprocessing: Preprocessing, consume: bool = False
) -> EncodedData:
    """``load`` of a table already read (a file's, or a data frame's): cleaned, typed, coded,
    weighted by the column ``preprocessing.weight`` names, if any. ``consume``: the caller
    hands the table over and never reads it again (``columns_of`` may code over it)."""
    table = preprocessing.cleaned(table)
    if preprocessing.weight is None:
        return prepare(columns_of(table, class_column, preprocessing, consume), preprocessing)
    return prepare_weighted(
        table, class_column, preprocessing, weight_column(table, preprocessing.weight, class_column)
    )


def prepare_weighted(
    table: RawTable, class_column: str | None, preprocessing: Preprocessing, weights: object
) -> EncodedData:
    """``prepare`` of a table read (and ``Preprocessing.cleaned``) whose rows have ``weights``
    (one non-negative number per row, checked here): rows of weight 0 are dropped first, and
    a column ``preprocessing.weight`` names is not a feature. The estimator's ``sample_weight``."""
    checked = checked_weights(weights, table.n_rows, f"{table.source}: sample_weight")
    rules = typing_rules(preprocessing)
    table, kept = weighted_rows(table, checked, class_column)
    return prepare(columns_of(table, class_column, rules), preprocessing, kept)


# ---------------------------------------------------------------- learned preprocessing


def prepare(columns: Columns, preprocessing: Preprocessing, weights: np.ndarray | None = None) -> EncodedData:
    """Learn cut points (and, with impute, modes and means; with state, which features have
    a missing state) from these rows and code them. ``weights``: float64 > 0 per row
    (``weights``), each row counted as its weight in all that is learned.

    ``X`` is ``columns.codes`` itself when nothing is learned (all nominal, available-case),
    so a large nominal file is held once; else a copy, in the ``narrowest`` type for the
    learned variables too (more intervals than a nominal column has states; a missing state)."""
    impute = preprocessing.missing == IMPUTE
    X = (
        columns.codes
        if preprocessing.missing == AVAILABLE_CASE and not columns.numeric_columns
        else columns.codes.copy(order="K")
    )
    variables: list[Variable] = []
    for j, (name, states) in enumerate(zip(columns.names, columns.states)):
        if states is None:
            values = columns.values(j)
            if impute and np.isnan(values).any() and not np.isnan(values).all():
                values = np.where(np.isnan(values), _mean(values, weights), values)
            cuts = preprocessing.method(name).cuts(values, columns.y, columns.class_variable.cardinality, weights)
            variables.append(Variable(name, interval_labels(cuts), FEATURE, NUMERIC, cuts))
            X = _holding(X, variables[-1].cardinality)
            X[:, j] = interval_codes(cuts, values)
        else:
            variables.append(Variable(name, states, FEATURE))
            if impute:
                column = X[:, j]
                present = column[column >= 0]
                if present.size and present.size < column.size:
                    mass = None if weights is None else weights[column >= 0]
                    column[column < 0] = np.argmax(np.bincount(present, mass, minlength=len(states)))
    if preprocessing.projections == LDA and columns.numeric_columns:
        X = _with_derived(X, variables, columns, preprocessing, weights)
    if preprocessing.missing == STATE:
        X = _holding(X, max((v.cardinality + 1 for v in variables), default=0))
        variables = [_with_missing_state(v, X[:, j]) for j, v in enumerate(variables)]
    variables.append(columns.class_variable)
    return EncodedData(
        tuple(variables), X, columns.y, columns.n_rows_dropped, columns.source, columns, preprocessing, weights
    )


def _with_derived(
    X: np.ndarray, variables: list[Variable], columns: Columns, preprocessing: Preprocessing, weights: np.ndarray | None
) -> np.ndarray:
    """``X`` with a column more per linear discriminant of the numeric columns (``projections``),
    each a derived numeric feature appended to ``variables``, cut by its method as any numeric
    column is; with impute, a row missing every input reads as the centre (0)."""
    numeric = columns.numeric_columns
    names = tuple(columns.names[j] for j in numeric)
    found = discriminants(names, columns.numbers, columns.y, columns.class_variable.cardinality, weights)
    if not found:
        return X
    numbers = _numbers_by_name(columns)
    added = []
    for name, projection in zip(derived_names(len(found), {*columns.names, columns.class_variable.name}), found):
        values = projection.values([numbers[n] for n in projection.inputs])
        if preprocessing.missing == IMPUTE:
            values[np.isnan(values)] = 0.0
        cuts = preprocessing.method(name).cuts(values, columns.y, columns.class_variable.cardinality, weights)
        variables.append(Variable(name, interval_labels(cuts), FEATURE, NUMERIC, cuts, projection=projection))
        added.append(interval_codes(cuts, values))
    X = _holding(X, max(v.cardinality for v in variables))
    return np.asfortranarray(np.column_stack([X, *added]).astype(X.dtype, copy=False))


def _numbers_by_name(columns: Columns) -> dict[str, np.ndarray]:
    """The raw numbers of every numeric column, by name: what a derived feature reads."""
    return {columns.names[j]: columns.numbers[:, k] for k, j in enumerate(columns.numeric_columns)}


def _holding(X: np.ndarray, states: int) -> np.ndarray:
    """``X``, or a copy in a wider type when the ``narrowest`` for codes of ``states`` states is wider."""
    dtype = narrowest(states)
    return X if dtype.itemsize <= X.dtype.itemsize else X.astype(dtype, order="F")


def _mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    """The (weighted) mean of the present values (NaN = missing)."""
    if weights is None:
        return float(np.nanmean(values))
    present = ~np.isnan(values)
    return float(np.average(values[present], weights=weights[present]))


def _with_missing_state(variable: Variable, codes: np.ndarray) -> Variable:
    """The variable with a last state "missing" if the column misses values (coded to it in place)."""
    missing = codes < 0
    if not missing.any():
        return variable
    with_state = variable.with_missing_state()
    codes[missing] = with_state.missing_code
    return with_state


def encode_like(columns: Columns, variables: Sequence[Variable]) -> EncodedData:
    """Code rows with variables learned elsewhere (the same columns): numeric values through
    the learned cut points, missing values left missing. The rows keep their ``columns``, so
    a model cut otherwise (auto's chosen discretisation) can code them again."""
    features = variables[:-1]
    X = _holding(columns.codes.copy(order="K"), max((v.cardinality for v in features), default=0))
    derived = len(features) - X.shape[1]
    if derived:
        X = np.asfortranarray(np.column_stack([X, np.empty((X.shape[0], derived), X.dtype)]))
    for j, variable in enumerate(features[: len(features) - derived]):
        if variable.kind == NUMERIC:
            X[:, j] = interval_codes(variable.cuts, columns.values(j))
        if variable.missing_state:
            X[X[:, j] < 0, j] = variable.missing_code
    if derived:
        derive_codes(features, X, _numbers_by_name(columns))
    return EncodedData(tuple(variables), X, columns.y, columns.n_rows_dropped, columns.source, columns)


def encode_with(
    variables: Sequence[Variable],
    raw_rows: np.ndarray | Sequence[Sequence[str]],
    *,
    source: str = "input",
    lines: np.ndarray | None = None,
) -> np.ndarray:
    """Code raw text against existing variables (``Variable.codes_of``): (rows, len(variables))
    -> the ``narrowest`` integer type for their states, -1 = missing. A value that is not a state (nor, for a numeric variable, a
    number) raises ``InvalidInput`` naming the column and value (and line if given)."""
    cells = np.asarray(raw_rows, dtype=object)
    if cells.size == 0:
        cells = cells.reshape(0, len(variables))
    if cells.ndim != 2 or cells.shape[1] != len(variables):
        raise InvalidInput(f"{source}: expected rows of {len(variables)} values, got an array of shape {cells.shape}")
    names = [v.name for v in variables]  # a derived feature's column is there, and not read
    columns = derived_columns(variables, lambda name: TextColumn.of(cells[:, names.index(name)].tolist()))
    return encode_columns(variables, columns, cells.shape[0], source=source, lines=lines)


def encode_columns(
    variables: Sequence[Variable],
    columns: Sequence[TextColumn | None],
    n_rows: int,
    *,
    source: str = "input",
    lines: np.ndarray | Callable[[], np.ndarray] | None = None,
    unknown: str = REFUSE,
    unseen: UnseenValues | None = None,
) -> np.ndarray:
    """``encode_with`` of columns as read (``lines``: or a function that finds them, asked
    only for an error message). ``unknown``: what a value unseen in training becomes
    (``settle_unknown``: with ``missing``, a nominal one is read as missing and counted in
    ``unseen``); what is left unknown is refused. A refused value that is a common spelling
    of missing (``COMMON_MARKERS``: "NA" for a model trained before "NA" was a default
    marker) suggests ``--na-values``. A derived feature (``Variable.projection``) has no
    column (None in ``columns``; ``derived_columns``): it is computed from its inputs' numbers
    once the others are coded."""
    widest = max((v.cardinality for v in variables), default=0)
    X = np.empty((n_rows, len(variables)), dtype=narrowest(widest), order="F")  # written by column
    for j, (var, column) in enumerate(zip(variables, columns)):
        if column is None:
            continue
        column.coded(var.codes_of, out=X[:, j])
        if not (X[:, j] == UNKNOWN).any():
            continue
        settled = settle_unknown(var, X[:, j], unknown)
        if settled.size and unseen is not None:
            texts = column.index[settled]
            _, first = np.unique(texts, return_index=True)
            unseen.add(var.name, settled.size, column.labels[texts[np.sort(first)]].tolist())
        left = np.flatnonzero(X[:, j] == UNKNOWN)
        if left.size:
            r = int(left[0])
            numbered = lines() if callable(lines) else lines
            where = f"line {numbered[r]}: " if numbered is not None else f"row {r + 1}: "
            known = "a number" if var.kind == NUMERIC else f"known: {', '.join(var.states)}"
            value = column.labels[column.index[r]]
            hint = f"; if {value!r} marks a missing value, name it in --na-values" if value in COMMON_MARKERS else ""
            raise InvalidInput(f"{source}: {where}column {var.name!r}: unknown value {value!r}; {known}{hint}")
    inputs = derived_inputs(variables)
    if inputs:
        numbers = {v.name: c.numbers() for v, c in zip(variables, columns) if v.name in inputs and c is not None}
        derive_codes(variables, X, numbers)
    return X


def derived_columns(variables: Sequence[Variable], column_of: Callable[[str], TextColumn]) -> list[TextColumn | None]:
    """The column of each variable for ``encode_columns`` (``column_of`` its name), None for a
    derived one, which no file or frame carries (a column of its name is not read)."""
    return [None if v.projection is not None else column_of(v.name) for v in variables]


def load_with(
    source: str,
    variables: Sequence[Variable],
    fmt: str | None = None,
    preprocessing: Preprocessing | None = None,
    *,
    unknown: str = REFUSE,
    unseen: UnseenValues | None = None,
) -> EncodedData:
    """Read a file (e.g. a test set) and code it against the training variables (``encode_table``).

    Rows with an empty class are dropped, and so are those whose class was unseen in training
    and read as missing. Its texts are read as ``preprocessing`` reads them (missing markers,
    whitespace). ``unknown`` and ``unseen``: as ``encode_columns``.
    """
    preprocessing = preprocessing or Preprocessing()
    table = preprocessing.cleaned(read_table(source, fmt, preprocessing.delimiter, preprocessing.limits))
    X, y = encode_table(table, variables, unknown=unknown, unseen=unseen)
    assert y is not None  # the class is required here
    keep = y >= 0
    return EncodedData(tuple(variables), X[keep], y[keep], int(np.count_nonzero(~keep)), source)


def encode_table(
    table: RawTable,
    variables: Sequence[Variable],
    *,
    class_optional: bool = False,
    unknown: str = REFUSE,
    unseen: UnseenValues | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The rows of ``table`` coded against trained ``variables`` (the features, then the
    class), matching columns by name; other columns are ignored.

    Returns the features' codes (rows, features) in the ``narrowest`` integer type for their
    states, column-major, -1 = missing, and the class codes,
    int64, -1 where the class is empty; or None for the class when the table has no class
    column and ``class_optional`` (scoring new rows). Every other variable must be a column.
    ``unknown`` and ``unseen``: as ``encode_columns``; a class label unseen in training
    read as missing leaves its row out of any accuracy, as an empty class does.
    """
    features, class_variable = variables[:-1], variables[-1]
    has_class = class_variable.name in table.header or not class_optional
    needed = [v for v in (*features, class_variable) if v.projection is None and (has_class or v is not class_variable)]
    missing_columns = [v.name for v in needed if v.name not in table.header]
    if missing_columns:
        raise InvalidInput(f"{table.source}: line 1: missing column(s) {', '.join(map(repr, missing_columns))}")

    def coded(some: Sequence[Variable]) -> np.ndarray:
        columns = derived_columns(some, lambda name: table.columns[table.header.index(name)])
        return encode_columns(
            some, columns, table.n_rows, source=table.source, lines=lambda: table.lines, unknown=unknown, unseen=unseen
        )

    X = coded(features)
    return X, coded([class_variable])[:, 0].astype(np.int64) if has_class else None
