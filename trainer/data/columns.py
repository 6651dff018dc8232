"""Typing the columns of a data file: declared by the file, forced by the user, or inferred
(a column whose values are all numbers is numeric, unless they are whole numbers with at
most ``MAX_INTEGER_CODES`` distinct values, which read as codes of a nominal column). The
nominal columns are coded against their states; numeric ones keep their raw numbers until
cut points are learned (``encoded.prepare``). The class is nominal; rows without a class
are dropped and counted. Errors are ``InvalidInput`` naming the file, line and column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, MISSING, NOMINAL, NUMERIC, UNKNOWN, Variable
from bnserve.store.model.discretization import number_of
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.io import RawTable

MAX_INTEGER_CODES = 10


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

    def subset(self, rows: np.ndarray) -> Columns:
        return replace(self, codes=self.codes[rows], numbers=self.numbers[rows], y=self.y[rows], n_rows_dropped=0)


def columns_of(table: RawTable, class_column: str | None, preprocessing: Preprocessing) -> Columns:
    """Type every column and code the nominal ones (states: the declared domain, else the
    sorted distinct labels). The class is nominal; rows without a class are dropped."""
    src = table.source
    class_index, feature_indices = check_columns(src, table.header, class_column, preprocessing)
    class_column = table.header[class_index]
    if table.cells.shape[0] == 0:
        raise InvalidInput(f"{src}: line 2: the file has a header but no data rows")
    declared = table.declared or (None,) * len(table.header)
    class_states, y = _nominal_codes(class_column, table.cells[:, class_index], declared[class_index])
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
                bad = next(r for r, v in enumerate(column.tolist()) if v != "" and math.isnan(number_of(v)))
                raise InvalidInput(
                    f"{src}: line {lines[bad]}: column {name!r} is numeric, but has the value {column[bad]!r}"
                )
            numbers.append(numeric)
            states.append(None)
            continue
        column_states, column_codes = _nominal_codes(name, column, declared[j])
        if np.any(column_codes == UNKNOWN):
            _unknown_label(RawTable(src, table.header, cells, lines), j, column_codes, column_states)
        if not column_states:
            raise InvalidInput(f"{src}: column {name!r}: every value is empty")
        states.append(column_states)
        codes[:, out] = column_codes
    numbers_array = np.stack(numbers, axis=1) if numbers else np.empty((rows, 0))
    return Columns(
        src,
        tuple(table.header[j] for j in feature_indices),
        tuple(states),
        codes,
        numbers_array,
        Variable(class_column, class_states, CLASS),
        y.astype(np.int64),
        int(np.count_nonzero(~keep)),
    )


def check_columns(
    src: str, header: Sequence[str], class_column: str | None, preprocessing: Preprocessing
) -> tuple[int, list[int]]:
    """The class column's index (default: the last) and the feature columns', after checking
    that every column the flags name exists and the class is not forced numeric or ignored."""
    if class_column is None:
        class_column = header[-1]
    if class_column not in header:
        raise InvalidInput(f"{src}: line 1: no class column {class_column!r}; columns are {', '.join(header)}")
    for flag, names in (
        ("--nominal", preprocessing.nominal),
        ("--numeric", preprocessing.numeric),
        ("--ignore", preprocessing.ignore),
        ("--discretize", preprocessing.per_column),
    ):
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
    if math.isnan(number_of(first)):  # most nominal columns stop here
        return None
    values = np.fromiter(map(number_of, texts), dtype=np.float64, count=column.size)
    if np.isnan(values).sum() != np.count_nonzero(column == ""):
        return None
    return values


def _nominal_codes(name: str, column: np.ndarray, declared) -> tuple[tuple[str, ...], np.ndarray]:
    """States (declared, else sorted distinct non-empty labels) and each cell's code
    (``Variable.codes_of``: UNKNOWN for a label outside a declared domain)."""
    values = column.tolist()
    if declared is not None and declared.kind == NOMINAL and declared.labels is not None:
        states = tuple(declared.labels)
    else:
        states = tuple(sorted(set(values) - {""}))
    return states, Variable(name, states).codes_of(values)


def _unknown_label(table: RawTable, j: int, codes: np.ndarray, states: Sequence[str]) -> None:
    r = int(np.flatnonzero(codes == UNKNOWN)[0])
    raise InvalidInput(
        f"{table.source}: line {table.lines[r]}: column {table.header[j]!r}: value "
        f"{table.cells[r, j]!r} is not in the declared domain {', '.join(states)}"
    )
