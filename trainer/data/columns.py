"""Typing the columns of a data file: declared by the file, forced by the user, or inferred
(``is_numeric_column``): a column whose values are all numbers is numeric, unless they are
whole numbers of which nearly all (``CODE_SHARE`` of the rows) lie from 0 to ``MAX_CODE``:
those read as codes of a nominal column, one state per number (``code_states``: a scale of
1 to 10, levels 0..9, a flag 0/1, a count of few). The rule weighs the bulk of the values,
not the extremes nor how many distinct ones a sample holds, so a column keeps its kind in
every fold of a file: durations 6, 12, … 60 months are numeric with or without a rare 72,
integer-coded levels 0..9 are codes with or without a rare level, or a 12 in fewer than one
row in 1,000 (then one more state), while a scale 0..15 with 0.4% of its values past 10
(letter's) stays numeric. The nominal columns are coded against their states
(``nominal_states``, one rule for files in memory and in chunks); numeric ones keep their
raw numbers until cut points are learned (``encoded.prepare``). The class is nominal; rows
without a class are dropped and counted. Errors are ``InvalidInput`` naming the file, line
and column.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, MISSING, NOMINAL, NUMERIC, UNKNOWN, Variable
from bnserve.store.model.discretization import number_of
from bnserve.store.model.variable import MAX_EXACT_INTEGER, whole_number
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.io import RawTable, TextColumn
from bnserve.trainer.io.table import Declared, is_row_index, narrowest

MAX_CODE = 10  # whole numbers from 0 to this are codes of a nominal column (a 1-10 scale is one)
CODE_SHARE = 0.999  # ... when at least this share of the rows hold such numbers (1 in 1,000 may not)
MAX_CLASS_STATES = 256  # more, and the class column is likely not one (an id, a measurement)


@dataclass(frozen=True)
class Columns:
    """Typed columns before anything is learned from them. Features in file order.

    ``codes``: (rows, n_features), column-major, in the ``narrowest`` integer type for the
    most states of a nominal column (int8 up to 127), the nominal codes (-1 = missing; a
    numeric column's entries are unused); ``numbers``: float64 (rows, number of numeric
    columns), column-major, their raw values in column order (NaN = missing). ``states[j]`` is None for a numeric
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


def columns_of(
    table: RawTable, class_column: str | None, preprocessing: Preprocessing, consume: bool = False
) -> Columns:
    """Type every column and code the nominal ones (states: the declared domain, else the
    distinct labels in ``state_order``). The class is nominal; rows without a class are dropped.
    Column by column, on each column's distinct texts (``TextColumn``), not cell by cell.

    ``consume``: the table is handed over, never to be read again: when its features are
    nominal, every row is kept and their positions lie side by side in the reader's matrix
    (``RawTable.positions``), each column's codes are written over its positions, so the file
    is held once (a million rows of 50 columns: 50 MB, not 100)."""
    src = table.source
    class_index, feature_indices = check_columns(src, table.header, class_column, preprocessing)
    class_column = table.header[class_index]
    if table.n_rows == 0:
        raise InvalidInput(f"{src}: line 2: the file has a header but no data rows")
    declared = table.declared or (None,) * len(table.header)
    class_states, y = _nominal_codes(
        class_column, table.columns[class_index], declared[class_index], None, Preprocessing()
    )
    if np.any(y == UNKNOWN):
        _unknown_label(table, class_index, y, class_states, np.arange(y.size))
    keep = y >= 0
    y = y[keep]
    if y.size == 0:
        raise InvalidInput(f"{src}: column {class_column!r}: every row has an empty class")
    check_class(src, class_column, class_states, preprocessing)
    kept = np.flatnonzero(keep)  # the table's row of each row kept
    rows = y.size
    # Pass 1, on each column's distinct texts: its type, and per text its code or number.
    typed: list[tuple[TextColumn, np.ndarray]] = []  # per feature: its rows, and a code or number per label
    states: list[tuple[str, ...] | None] = []
    for j in feature_indices:
        name = table.header[j]
        column = table.columns[j] if rows == table.n_rows else table.columns[j].rows(kept)
        label_numbers = numbers_of(column.labels) if name not in preprocessing.nominal else None
        present = None if label_numbers is None else label_numbers[column.labels != ""]
        rows_of = np.bincount(column.index, minlength=column.labels.size)[column.labels != ""]
        if is_numeric_column(name, declared[j], present, preprocessing, rows_of):
            if label_numbers is None:
                bad = np.array([t != "" and math.isnan(number_of(t)) for t in column.labels.tolist()])
                r = int(np.flatnonzero(bad[column.index])[0])
                raise InvalidInput(
                    f"{src}: line {table.lines[kept[r]]}: column {name!r} is numeric, "
                    f"but has the value {column.labels[column.index[r]]!r}"
                )
            typed.append((column, label_numbers))
            states.append(None)
            continue
        column_states, label_codes = _label_codes(name, column, declared[j], present, preprocessing)
        if np.any(label_codes == UNKNOWN) and np.any((column_codes := column.lookup(label_codes)) == UNKNOWN):
            _unknown_label(table, j, column_codes, column_states, kept)
        if not column_states:
            raise InvalidInput(f"{src}: column {name!r}: every value is empty")
        typed.append((column, label_codes))
        states.append(column_states)
    # Pass 2, one gather per row and column, straight into the matrices.
    widest = max((len(s) for s in states if s is not None), default=0)
    in_place = consume and None not in states and rows == table.n_rows
    codes = _over_positions(table, feature_indices, narrowest(widest)) if in_place else None
    if codes is None:
        codes = np.full((rows, len(typed)), MISSING, dtype=narrowest(widest), order="F")  # written, and read, by column
    numbers_array = np.empty((rows, states.count(None)), order="F")
    k = 0
    for out, ((column, per_label), kind) in enumerate(zip(typed, states)):
        if kind is None:
            column.lookup(per_label, numbers_array[:, k])
            k += 1
        else:
            column.lookup(per_label, codes[:, out])
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


def _over_positions(table: RawTable, features: Sequence[int], dtype: np.dtype) -> np.ndarray | None:
    """The features' columns of the reader's matrix, as the matrix of their codes to be written
    over their positions (``np.take`` reads the int8 positions as a copy of intp indices,
    so writing over them is safe), when they are its adjacent columns and the codes are of
    its type; else None."""
    positions = table.positions
    if positions is None or positions.dtype != dtype or positions.shape[0] != table.n_rows:
        return None
    first = features[0]
    if list(features) != list(range(first, first + len(features))) or not all(map(table.positions_of, features)):
        return None
    codes = positions[:, first : first + len(features)]
    return codes if codes.flags.f_contiguous else None


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
            why = "it cannot be left out (--class names another)" if flag == "--ignore" else "which is always nominal"
            raise InvalidInput(f"{src}: {flag}: {class_column!r} is the class column, {why}")
    both = set(preprocessing.nominal) & set(preprocessing.numeric)
    if both:
        raise InvalidInput(f"{src}: column {sorted(both)[0]!r} is forced both --nominal and --numeric")
    class_index = list(header).index(class_column)
    features = [
        j
        for j in range(len(header))
        if j != class_index and header[j] not in preprocessing.ignore and not is_row_index(header, j)
    ]
    if not features:
        raise InvalidInput(f"{src}: line 1: the file has only the class column {class_column!r}, no feature")
    return class_index, features


def check_class(src: str, name: str, states: Sequence[str], preprocessing: Preprocessing) -> None:
    """A class column must look like one: two states at least; and, unless --force-class or
    --nominal names it, not a column of numbers (a regression target: one class per value)
    nor one of more than ``MAX_CLASS_STATES`` states (an identifier, a free text)."""
    if len(states) < 2:
        raise InvalidInput(f"{src}: column {name!r}: the class needs at least two states, found only {tuple(states)!r}")
    if preprocessing.force_class or name in preprocessing.nominal:
        return
    force = "; --force-class trains on it as it is"
    numbers = numbers_of(states)
    if is_numeric_column(name, None, numbers, Preprocessing()):  # by its values: a Parquet int 0/1 class is fine
        raise InvalidInput(
            f"{src}: column {name!r} is numeric ({len(states):,} distinct values, e.g. {states[0]!r}), but a "
            f"class is nominal: choose another --class, or bin it into a nominal column first{force}"
        )
    if len(states) > MAX_CLASS_STATES:
        raise InvalidInput(
            f"{src}: column {name!r} has {len(states):,} distinct values, more than {MAX_CLASS_STATES} for a "
            f"class (an identifier? free text?): choose another --class{force}"
        )


def is_numeric_column(
    name: str,
    declared: Declared | None,
    numbers: np.ndarray | None,
    preprocessing: Preprocessing,
    rows: np.ndarray | None = None,
) -> bool:
    """The typing rule: forced, else declared, else all numbers and not codes (whole numbers,
    at least ``CODE_SHARE`` of them from 0 to ``MAX_CODE``). ``inf`` and ``-inf`` are numbers
    (they fall in the first or last interval), but a column of nothing else is nominal: no cut
    point lies between them. ``numbers``: the column's
    distinct values as floats, NaN missing, None if one is not a number; ``rows``: how many
    rows hold each (None: one each)."""
    if name in preprocessing.nominal:
        return False
    if name in preprocessing.numeric:
        return True
    if declared is not None:
        return declared.kind == NUMERIC
    if numbers is None:
        return False
    present = ~np.isnan(numbers)
    values = numbers[present]
    if not np.isfinite(values).any():  # nothing but missing values, inf and -inf
        return False
    if np.any(values != np.round(values)):
        return True
    weights = np.ones(values.size) if rows is None else rows[present]
    in_range = weights[(values >= 0) & (values <= MAX_CODE)].sum()
    return bool(in_range < CODE_SHARE * weights.sum())


def numbers_of(labels: Sequence[str] | np.ndarray) -> np.ndarray | None:
    """A column's distinct texts as float64 (NaN for the empty one), or None when one is not
    a number: what the typing rule reads, of a file in memory and in chunks alike."""
    texts = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)
    values = np.fromiter((number_of(t) if t != "" else math.nan for t in texts), dtype=np.float64, count=len(texts))
    if any(t != "" and math.isnan(v) for t, v in zip(texts, values.tolist())):
        return None
    return values


def _nominal_codes(
    name: str, column: TextColumn, declared: Declared | None, numbers: np.ndarray | None, preprocessing: Preprocessing
) -> tuple[tuple[str, ...], np.ndarray]:
    """``nominal_states`` and each row's code (``_label_codes`` per row)."""
    states, label_codes = _label_codes(name, column, declared, numbers, preprocessing)
    return states, column.lookup(label_codes)


def _label_codes(
    name: str, column: TextColumn, declared: Declared | None, numbers: np.ndarray | None, preprocessing: Preprocessing
) -> tuple[tuple[str, ...], np.ndarray]:
    """``nominal_states`` and each distinct label's code (``Variable.codes_of``: "1.0" is
    code "1"; UNKNOWN for a label outside a declared domain)."""
    states = nominal_states(name, column.labels.tolist(), numbers, declared, preprocessing)
    return states, np.asarray(Variable(name, states).codes_of(column.labels.tolist()))


def nominal_states(
    name: str,
    labels: Sequence[str],
    numbers: np.ndarray | None,
    declared: Declared | None,
    preprocessing: Preprocessing,
) -> tuple[str, ...]:
    """A nominal column's states, in memory and in chunks alike: the declared domain; else,
    neither declared nor forced nominal, whole-number codes (``code_states`` of the distinct
    labels' ``numbers``, None when one is not a number); else the distinct ``labels`` in
    ``state_order``."""
    if declared is not None and declared.kind == NOMINAL and declared.labels is not None:
        return tuple(declared.labels)
    forced = name in preprocessing.nominal
    coded = code_states(numbers) if numbers is not None and declared is None and not forced else None
    return coded or state_order(labels)


def code_states(numbers: np.ndarray) -> tuple[str, ...] | None:
    """The states of a column of whole-number codes: its distinct numbers (NaN: missing) as
    ``whole_number`` reads them, in order ("1.0" and "01" are "1", as when typed numeric);
    None when one is not whole, or past what a float tells apart."""
    present = numbers[~np.isnan(numbers)]
    if not present.size or not np.all(np.abs(present) <= MAX_EXACT_INTEGER) or np.any(present != np.round(present)):
        return None
    return tuple(str(int(v)) for v in np.unique(present))


def state_order(labels: Iterable[str]) -> tuple[str, ...]:
    """The distinct non-empty labels as a nominal column's states: by number when every one
    is a whole number (``whole_number``: 5, 7, 10, 12, not 10, 12, 5, 7), else as text."""
    distinct = sorted(set(labels) - {""})
    numbers = []
    for label in distinct:
        number = whole_number(label)
        if number is None:
            return tuple(distinct)
        numbers.append(number)
    return tuple(s for _, s in sorted(zip(numbers, distinct)))


def _unknown_label(table: RawTable, j: int, codes: np.ndarray, states: Sequence[str], rows: np.ndarray) -> None:
    """``codes`` are of the table's rows ``rows``."""
    r = int(rows[int(np.flatnonzero(codes == UNKNOWN)[0])])
    column = table.columns[j]
    raise InvalidInput(
        f"{table.source}: line {table.lines[r]}: column {table.header[j]!r}: value "
        f"{column.labels[column.index[r]]!r} is not in the declared domain {', '.join(states)}"
    )
