"""Read a nominal CSV and encode it into integer codes against ``Variable``s.

Every column is nominal; an empty field is a missing value (code -1). Labels are taken
unchanged (no stripping), as the server takes them. Rows whose class is missing are
dropped and counted. Errors are ``InvalidInput`` naming the file, line and column.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from itertools import repeat
from typing import Sequence

import numpy as np

from store.errors import InvalidInput
from store.model import CLASS, FEATURE, Variable
from trainer.readers import RawTable, read_table

MISSING = -1
UNKNOWN = -2  # transient code of a label that is not a state; never leaves this module


@dataclass(frozen=True)
class EncodedData:
    """Coded training data. ``X``: int32 (rows, n_features), -1 = missing; ``y``: int64 (rows,).

    ``variables`` lists the features in file order, then the class (role "class").
    """

    variables: tuple[Variable, ...]
    X: np.ndarray
    y: np.ndarray
    n_rows_dropped: int = 0
    source: str = ""

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

    def subset(self, rows: np.ndarray) -> "EncodedData":
        """The same variables over a selection of rows (index or boolean array)."""
        return EncodedData(self.variables, self.X[rows], self.y[rows], 0, self.source)

    def class_counts(self) -> dict[str, int]:
        counts = np.bincount(self.y, minlength=self.n_classes)
        return {s: int(n) for s, n in zip(self.class_variable.states, counts)}

    def fingerprint(self) -> str:
        """sha256 over the variables (canonical JSON) and the little-endian code arrays."""
        h = hashlib.sha256()
        h.update(json.dumps([v.to_dict() for v in self.variables], sort_keys=True, separators=(",", ":")).encode())
        for name, arr in (("X", self.X.astype("<i4")), ("y", self.y.astype("<i8"))):
            h.update(f"|{name}|{arr.dtype.str}|{arr.shape}|".encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()


# ---------------------------------------------------------------- encoding


def load(source: str, class_column: str | None = None) -> EncodedData:
    """Read ``source`` and encode it, learning each variable's states from the data."""
    return encode(read_table(source), class_column)


def encode(table: RawTable, class_column: str | None = None) -> EncodedData:
    """Learn states (sorted distinct labels) and code every cell; the class goes last."""
    src = table.source
    if class_column is None:
        class_column = table.header[-1]
    if class_column not in table.header:
        raise InvalidInput(f"{src}: line 1: no class column {class_column!r}; columns are {', '.join(table.header)}")
    class_index = table.header.index(class_column)
    if len(table.header) < 2:
        raise InvalidInput(f"{src}: line 1: the file has only the class column {class_column!r}, no feature")
    if table.cells.shape[0] == 0:
        raise InvalidInput(f"{src}: line 2: the file has a header but no data rows")
    class_states, y = _learn_codes(table.cells[:, class_index])
    keep = y >= 0
    y = y[keep]
    if y.size == 0:
        raise InvalidInput(f"{src}: column {class_column!r}: every row has an empty class")
    if len(class_states) < 2:
        raise InvalidInput(
            f"{src}: column {class_column!r}: the class needs at least two states, found only {class_states[0]!r}"
        )
    cells = table.cells if keep.all() else table.cells[keep]
    feature_indices = [j for j in range(len(table.header)) if j != class_index]
    variables: list[Variable] = []
    X = np.empty((y.size, len(feature_indices)), dtype=np.int32)
    for out, j in enumerate(feature_indices):  # loop over columns, not rows
        states, codes = _learn_codes(cells[:, j])
        if not states:
            raise InvalidInput(f"{src}: column {table.header[j]!r}: every value is empty")
        variables.append(Variable(table.header[j], states, FEATURE))
        X[:, out] = codes
    variables.append(Variable(class_column, class_states, CLASS))
    return EncodedData(tuple(variables), X, y.astype(np.int64), int(np.count_nonzero(~keep)), src)


def _learn_codes(column: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """Sorted distinct non-empty labels, and each cell's code (-1 for empty)."""
    values = column.tolist()
    states = tuple(sorted(set(values) - {""}))
    return states, _codes(values, states)


def _codes(values: list[str], states: Sequence[str]) -> np.ndarray:
    """int32 code of each label: its index in ``states``, -1 for "", UNKNOWN for anything else.

    A dict lookup mapped in C: about 3x faster than ``np.unique`` on string arrays.
    """
    lookup = {s: i for i, s in enumerate(states)}
    lookup[""] = MISSING
    return np.fromiter(map(lookup.get, values, repeat(UNKNOWN)), dtype=np.int32, count=len(values))


def encode_with(
    variables: Sequence[Variable],
    raw_rows: np.ndarray | Sequence[Sequence[str]],
    *,
    source: str = "input",
    lines: np.ndarray | None = None,
) -> np.ndarray:
    """Code raw labels against existing variables: (rows, len(variables)) labels -> int32, -1 = missing.

    An unknown label raises ``InvalidInput`` naming the column and value (and line if given).
    """
    cells = np.asarray(raw_rows, dtype=object)
    if cells.size == 0:
        cells = cells.reshape(0, len(variables))
    if cells.ndim != 2 or cells.shape[1] != len(variables):
        raise InvalidInput(f"{source}: expected rows of {len(variables)} values, got an array of shape {cells.shape}")
    X = np.empty(cells.shape, dtype=np.int32)
    for j, var in enumerate(variables):
        values = cells[:, j].tolist()
        X[:, j] = _codes(values, var.states)
        unknown = np.flatnonzero(X[:, j] == UNKNOWN)
        if unknown.size:
            r = int(unknown[0])
            where = f"line {lines[r]}: " if lines is not None else f"row {r + 1}: "
            raise InvalidInput(
                f"{source}: {where}column {var.name!r}: unknown value {values[r]!r}; known: {', '.join(var.states)}"
            )
    return X


def load_with(source: str, variables: Sequence[Variable]) -> EncodedData:
    """Read a file (e.g. a test set) and code it against the training variables, matching columns by name.

    The file must hold every variable as a column (extra columns are ignored); rows with an
    empty class are dropped.
    """
    table = read_table(source)
    missing_columns = [v.name for v in variables if v.name not in table.header]
    if missing_columns:
        raise InvalidInput(f"{source}: line 1: missing column(s) {', '.join(map(repr, missing_columns))}")
    columns = [table.header.index(v.name) for v in variables]
    codes = encode_with(variables, table.cells[:, columns], source=source, lines=table.lines)
    y = codes[:, -1].astype(np.int64)
    keep = y >= 0
    return EncodedData(tuple(variables), codes[keep, :-1], y[keep], int(np.count_nonzero(~keep)), source)
