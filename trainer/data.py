"""Type the columns of a data file, learn the preprocessing, and code it into ``Variable``s.

Three steps: ``columns_of`` types every column (declared by the file, forced by the user,
or inferred: a column whose values are all numbers is numeric, unless they are whole
numbers with at most ``MAX_INTEGER_CODES`` distinct values, which read as codes of a
nominal column) into ``Columns``; ``prepare`` learns from a set of rows what depends on
the data (cut points of numeric columns, imputed values) and gives ``EncodedData``;
``encode_like`` codes other rows with those learned variables. Cross-validation prepares
each training fold afresh (``EncodedData.split``), so nothing leaks from the test fold.

An empty field is missing (code -1). Labels are taken unchanged (no stripping), as the
server takes them. Rows whose class is missing are dropped and counted. Errors are
``InvalidInput`` naming the file, line and column.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import repeat
from typing import Mapping, Sequence

import numpy as np

from bnserve.store.model.discretization import interval_codes, interval_labels, number_of
from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, FEATURE, NOMINAL, NUMERIC, Variable
from bnserve.trainer.discretize import Method
from bnserve.trainer.readers import RawTable, read_table
from bnserve.trainer.stats import PairStatistics, joint_counts

MISSING = -1
UNKNOWN = -2  # transient code of a label that is not a state; never leaves this module
MAX_INTEGER_CODES = 10
AVAILABLE_CASE = "available-case"
IMPUTE = "impute"
MISSING_POLICIES = (AVAILABLE_CASE, IMPUTE)


@dataclass(frozen=True)
class Preprocessing:
    """How raw columns become states. ``nominal``/``numeric`` force a column's type,
    ``ignore`` drops columns; ``discretize`` is the method for numeric columns, with
    per-column exceptions in ``per_column``; ``missing`` is available-case (each count uses
    the rows where its variables are present) or impute (modes and means, training only)."""

    nominal: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    discretize: Method = Method()
    per_column: Mapping[str, Method] = field(default_factory=dict)
    missing: str = AVAILABLE_CASE

    def method(self, column: str) -> Method:
        return self.per_column.get(column, self.discretize)

    def describe(self, numeric_columns: Sequence[str]) -> dict:
        """What the model's metadata records about its preprocessing."""
        return {
            "missing": self.missing,
            "discretization": {name: str(self.method(name)) for name in numeric_columns},
            **({"ignored": list(self.ignore)} if self.ignore else {}),
        }


@dataclass(frozen=True)
class Columns:
    """Typed columns before anything is learned from them. Features in file order.

    ``codes``: int32 (rows, n_features), the nominal codes (-1 = missing; a numeric
    column's entries are unused); ``numbers``: float64 (rows, number of numeric columns),
    their raw values in column order (NaN = missing). ``states[j]`` is None for a numeric
    column.
    """

    source: str
    names: tuple[str, ...]
    states: tuple[tuple[str, ...] | None, ...]
    codes: np.ndarray
    numbers: np.ndarray
    class_variable: Variable
    y: np.ndarray
    n_rows_dropped: int = 0

    @property
    def numeric_columns(self) -> list[int]:
        return [j for j, s in enumerate(self.states) if s is None]

    def values(self, j: int) -> np.ndarray:
        """The raw numbers of numeric feature column ``j``."""
        return self.numbers[:, self.numeric_columns.index(j)]

    def complete(self) -> np.ndarray:
        """Boolean mask of the rows with no missing value."""
        nominal = [j for j, s in enumerate(self.states) if s is not None]
        return np.all(self.codes[:, nominal] >= 0, axis=1) & ~np.isnan(self.numbers).any(axis=1)

    def subset(self, rows: np.ndarray) -> "Columns":
        return replace(self, codes=self.codes[rows], numbers=self.numbers[rows], y=self.y[rows], n_rows_dropped=0)


class TrainingView:
    """What every learner reads of its training data, whether it holds the rows
    (``EncodedData``) or only their counts (``trainer.streaming.StreamedData``): the
    variables (features in column order, then the class) and the class column ``y``."""

    variables: tuple[Variable, ...]
    y: np.ndarray

    @property
    def features(self) -> tuple[Variable, ...]:
        return self.variables[:-1]

    @property
    def class_variable(self) -> Variable:
        return self.variables[-1]

    @property
    def cards(self) -> tuple[int, ...]:
        """Cardinality of each feature, in column order."""
        return tuple(v.cardinality for v in self.features)

    @property
    def n_classes(self) -> int:
        return self.class_variable.cardinality

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    def class_counts(self) -> dict[str, int]:
        counts = np.bincount(self.y, minlength=self.n_classes)
        return {s: int(n) for s, n in zip(self.class_variable.states, counts)}


@dataclass(frozen=True)
class EncodedData(TrainingView):
    """Coded training data. ``X``: int32 (rows, n_features), -1 = missing; ``y``: int64 (rows,).

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

    def subset(self, rows: np.ndarray) -> "EncodedData":
        """The same variables over a selection of rows (index or boolean array)."""
        columns = self.columns.subset(rows) if self.columns is not None else None
        return EncodedData(self.variables, self.X[rows], self.y[rows], 0, self.source, columns, self.preprocessing)

    def split(self, train: np.ndarray, test: np.ndarray) -> tuple["EncodedData", "EncodedData"]:
        """Training and test rows, with the preprocessing learned again on the training rows
        alone when it learns from data (numeric columns, imputation)."""
        if self.columns is None or self.preprocessing is None or not _learns(self.columns, self.preprocessing):
            return self.subset(train), self.subset(test)
        fitted = prepare(self.columns.subset(train), self.preprocessing)
        return fitted, encode_like(self.columns.subset(test), fitted.variables)

    @cached_property
    def statistics(self) -> PairStatistics:
        """The pairwise counts the nb/tan/kdb/fkdb learners use, counted once."""
        return PairStatistics.of(self.X, self.y, self.cards, self.n_classes)

    def family_counts(self, families: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Available-case N(family) per family of column indices (-1: the class), axes in order."""
        def column(j: int) -> np.ndarray:
            return self.y if j < 0 else self.X[:, j]

        def card(j: int) -> int:
            return self.n_classes if j < 0 else self.cards[j]

        return [joint_counts([column(j) for j in f], [card(j) for j in f]) for f in families]

    def fingerprint(self) -> str:
        """sha256 over the variables (canonical JSON) and the little-endian code arrays."""
        h = hashlib.sha256()
        h.update(json.dumps([v.to_dict() for v in self.variables], sort_keys=True, separators=(",", ":")).encode())
        for name, arr in (("X", self.X.astype("<i4", copy=False)), ("y", self.y.astype("<i8", copy=False))):
            h.update(f"|{name}|{arr.dtype.str}|{arr.shape}|".encode())
            h.update(np.ascontiguousarray(arr))  # the buffer itself: no copy of the data when it is C-ordered
        return h.hexdigest()


def _learns(columns: Columns, preprocessing: Preprocessing) -> bool:
    return bool(columns.numeric_columns) or preprocessing.missing == IMPUTE


# ---------------------------------------------------------------- typing


def load(source: str, class_column: str | None = None, preprocessing: Preprocessing | None = None,
         fmt: str | None = None) -> EncodedData:
    """Read ``source``, type its columns, and learn the preprocessing from all its rows."""
    preprocessing = preprocessing or Preprocessing()
    return prepare(columns_of(read_table(source, fmt), class_column, preprocessing), preprocessing)


def columns_of(table: RawTable, class_column: str | None, preprocessing: Preprocessing) -> Columns:
    """Type every column and code the nominal ones (states: the declared domain, else the
    sorted distinct labels). The class is nominal; rows without a class are dropped."""
    src = table.source
    class_index, feature_indices = check_columns(src, table.header, class_column, preprocessing)
    class_column = table.header[class_index]
    if table.cells.shape[0] == 0:
        raise InvalidInput(f"{src}: line 2: the file has a header but no data rows")
    declared = table.declared or (None,) * len(table.header)
    class_states, y = _nominal_codes(table.cells[:, class_index], declared[class_index])
    if np.any(y == UNKNOWN):
        _unknown_label(table, class_index, y, class_states)
    keep = y >= 0
    y = y[keep]
    if y.size == 0:
        raise InvalidInput(f"{src}: column {class_column!r}: every row has an empty class")
    if len(class_states) < 2:
        raise InvalidInput(
            f"{src}: column {class_column!r}: the class needs at least two states, found only {class_states!r}"
        )
    cells = table.cells if keep.all() else table.cells[keep]
    lines = table.lines if keep.all() else table.lines[keep]
    rows, n = y.size, len(feature_indices)
    codes = np.full((rows, n), MISSING, dtype=np.int32)
    numbers: list[np.ndarray] = []
    states: list[tuple[str, ...] | None] = []
    for out, j in enumerate(feature_indices):  # loop over columns, not rows
        name, column = table.header[j], cells[:, j]
        numeric = _numbers(column) if name not in preprocessing.nominal else None
        if is_numeric_column(name, declared[j], numeric, preprocessing):
            if numeric is None or np.isnan(numeric[column != ""]).any():
                bad = next(r for r, v in enumerate(column.tolist()) if v != "" and number_or_none(v) is None)
                raise InvalidInput(f"{src}: line {lines[bad]}: column {name!r} is numeric, "
                                   f"but has the value {column[bad]!r}")
            numbers.append(numeric)
            states.append(None)
            continue
        column_states, column_codes = _nominal_codes(column, declared[j])
        if np.any(column_codes == UNKNOWN):
            _unknown_label(RawTable(src, table.header, cells, lines), j, column_codes, column_states)
        if not column_states:
            raise InvalidInput(f"{src}: column {name!r}: every value is empty")
        states.append(column_states)
        codes[:, out] = column_codes
    numbers_array = np.stack(numbers, axis=1) if numbers else np.empty((rows, 0))
    return Columns(src, tuple(table.header[j] for j in feature_indices), tuple(states), codes, numbers_array,
                   Variable(class_column, class_states, CLASS), y.astype(np.int64), int(np.count_nonzero(~keep)))


def check_columns(src: str, header: Sequence[str], class_column: str | None,
                  preprocessing: Preprocessing) -> tuple[int, list[int]]:
    """The class column's index (default: the last) and the feature columns', after checking
    that every column the flags name exists and the class is not forced numeric or ignored."""
    if class_column is None:
        class_column = header[-1]
    if class_column not in header:
        raise InvalidInput(f"{src}: line 1: no class column {class_column!r}; columns are {', '.join(header)}")
    for flag, names in (("--nominal", preprocessing.nominal), ("--numeric", preprocessing.numeric),
                        ("--ignore", preprocessing.ignore), ("--discretize", preprocessing.per_column)):
        unknown = [n for n in names if n not in header]
        if unknown:
            raise InvalidInput(f"{src}: {flag}: no column {unknown[0]!r}; columns are {', '.join(header)}")
        if class_column in names and flag != "--nominal":
            raise InvalidInput(f"{src}: {flag}: {class_column!r} is the class column, which is always nominal")
    both = set(preprocessing.nominal) & set(preprocessing.numeric)
    if both:
        raise InvalidInput(f"{src}: column {sorted(both)[0]!r} is forced both --nominal and --numeric")
    class_index = list(header).index(class_column)
    features = [j for j in range(len(header)) if j != class_index and header[j] not in preprocessing.ignore]
    if not features:
        raise InvalidInput(f"{src}: line 1: the file has only the class column {class_column!r}, no feature")
    return class_index, features


def is_numeric_column(name: str, declared, numbers: np.ndarray | None, preprocessing: Preprocessing) -> bool:
    """The typing rule: forced, else declared, else all numbers and not a few whole-number codes.
    ``numbers``: the column's values (or just its distinct ones) as floats, None if one is not a number."""
    if name in preprocessing.nominal:
        return False
    if name in preprocessing.numeric:
        return True
    if declared is not None:
        return declared.kind == NUMERIC
    if numbers is None:
        return False
    present = numbers[~np.isnan(numbers)]
    if present.size == 0 or not np.all(np.isfinite(present)):
        return False
    whole = np.all(present == np.round(present))
    return not (whole and np.unique(present).size <= MAX_INTEGER_CODES)


def _numbers(column: np.ndarray) -> np.ndarray | None:
    """The column as float64 (NaN for empty), or None when some value is not a number."""
    texts = column.tolist()
    first = next((v for v in texts if v != ""), None)
    if first is None:
        return np.full(column.size, np.nan)
    if number_or_none(first) is None:  # most nominal columns stop here
        return None
    values = np.fromiter(map(number_or_nan, texts), dtype=np.float64, count=column.size)
    if np.isnan(values).sum() != np.count_nonzero(column == ""):
        return None
    return values


def number_or_none(text: str) -> float | None:
    """The number a text cell holds, or None (also for "nan": NaN is no value here)."""
    value = number_of(text)
    return None if math.isnan(value) else value


def number_or_nan(text: str) -> float:
    """The number a numeric cell holds; NaN when it is empty (missing) or not a number."""
    return number_of(text)


def _nominal_codes(column: np.ndarray, declared) -> tuple[tuple[str, ...], np.ndarray]:
    """States (declared, else sorted distinct non-empty labels) and each cell's code."""
    values = column.tolist()
    if declared is not None and declared.kind == NOMINAL and declared.labels is not None:
        states = tuple(declared.labels)
    else:
        states = tuple(sorted(set(values) - {""}))
    return states, label_codes(values, states)


def _unknown_label(table: RawTable, j: int, codes: np.ndarray, states: Sequence[str]) -> None:
    r = int(np.flatnonzero(codes == UNKNOWN)[0])
    raise InvalidInput(f"{table.source}: line {table.lines[r]}: column {table.header[j]!r}: value "
                       f"{table.cells[r, j]!r} is not in the declared domain {', '.join(states)}")


def label_codes(values: list[str], states: Sequence[str]) -> np.ndarray:
    """int32 code of each label: its index in ``states``, -1 for "", UNKNOWN for anything else.

    A dict lookup mapped in C: about 3x faster than ``np.unique`` on string arrays.
    """
    lookup = {s: i for i, s in enumerate(states)}
    lookup[""] = MISSING
    return np.fromiter(map(lookup.get, values, repeat(UNKNOWN)), dtype=np.int32, count=len(values))


# ---------------------------------------------------------------- learned preprocessing


def prepare(columns: Columns, preprocessing: Preprocessing) -> EncodedData:
    """Learn cut points (and, with impute, modes and means) from these rows and code them.

    ``X`` is ``columns.codes`` itself when nothing is learned (all nominal, available-case),
    so a large nominal file is held once; else a copy."""
    impute = preprocessing.missing == IMPUTE
    X = columns.codes.copy() if impute or columns.numeric_columns else columns.codes
    variables: list[Variable] = []
    for j, (name, states) in enumerate(zip(columns.names, columns.states)):
        if states is None:
            values = columns.values(j)
            if impute and np.isnan(values).any() and not np.isnan(values).all():
                values = np.where(np.isnan(values), np.nanmean(values), values)
            cuts = preprocessing.method(name).cuts(values, columns.y, columns.class_variable.cardinality)
            variables.append(Variable(name, interval_labels(cuts), FEATURE, NUMERIC, cuts))
            X[:, j] = interval_codes(cuts, values)
        else:
            variables.append(Variable(name, states, FEATURE))
            if impute:
                column = X[:, j]
                present = column[column >= 0]
                if present.size and present.size < column.size:
                    column[column < 0] = np.argmax(np.bincount(present, minlength=len(states)))
    variables.append(columns.class_variable)
    return EncodedData(tuple(variables), X, columns.y, columns.n_rows_dropped, columns.source, columns, preprocessing)


def encode_like(columns: Columns, variables: Sequence[Variable]) -> EncodedData:
    """Code rows with variables learned elsewhere (the same columns): numeric values through
    the learned cut points, missing values left missing."""
    X = columns.codes.copy()
    for j, variable in enumerate(variables[:-1]):
        if variable.kind == NUMERIC:
            X[:, j] = interval_codes(variable.cuts, columns.values(j))
    return EncodedData(tuple(variables), X, columns.y, columns.n_rows_dropped, columns.source)


def encode_with(
    variables: Sequence[Variable],
    raw_rows: np.ndarray | Sequence[Sequence[str]],
    *,
    source: str = "input",
    lines: np.ndarray | None = None,
) -> np.ndarray:
    """Code raw text against existing variables: (rows, len(variables)) -> int32, -1 = missing.

    A nominal value must be a state; a numeric value a number (or its interval's label).
    Anything else raises ``InvalidInput`` naming the column and value (and line if given).
    """
    cells = np.asarray(raw_rows, dtype=object)
    if cells.size == 0:
        cells = cells.reshape(0, len(variables))
    if cells.ndim != 2 or cells.shape[1] != len(variables):
        raise InvalidInput(f"{source}: expected rows of {len(variables)} values, got an array of shape {cells.shape}")
    X = np.empty(cells.shape, dtype=np.int32)
    for j, var in enumerate(variables):
        values = cells[:, j].tolist()
        X[:, j] = label_codes(values, var.states)
        unknown = np.flatnonzero(X[:, j] == UNKNOWN)
        if unknown.size and var.kind == NUMERIC:
            numbers = np.fromiter((number_or_nan(values[r]) for r in unknown), dtype=np.float64, count=unknown.size)
            X[unknown, j] = np.where(np.isnan(numbers), UNKNOWN, interval_codes(var.cuts, numbers))
            unknown = np.flatnonzero(X[:, j] == UNKNOWN)
        if unknown.size:
            r = int(unknown[0])
            where = f"line {lines[r]}: " if lines is not None else f"row {r + 1}: "
            known = "a number" if var.kind == NUMERIC else f"known: {', '.join(var.states)}"
            raise InvalidInput(f"{source}: {where}column {var.name!r}: unknown value {values[r]!r}; {known}")
    return X


def load_with(source: str, variables: Sequence[Variable], fmt: str | None = None) -> EncodedData:
    """Read a file (e.g. a test set) and code it against the training variables, matching columns by name.

    The file must hold every variable as a column (extra columns are ignored); rows with an
    empty class are dropped.
    """
    table = read_table(source, fmt)
    missing_columns = [v.name for v in variables if v.name not in table.header]
    if missing_columns:
        raise InvalidInput(f"{source}: line 1: missing column(s) {', '.join(map(repr, missing_columns))}")
    columns = [table.header.index(v.name) for v in variables]
    codes = encode_with(variables, table.cells[:, columns], source=source, lines=table.lines)
    y = codes[:, -1].astype(np.int64)
    keep = y >= 0
    return EncodedData(tuple(variables), codes[keep, :-1], y[keep], int(np.count_nonzero(~keep)), source)
