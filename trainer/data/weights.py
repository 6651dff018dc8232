"""Row weights: a row of weight w counts as w rows (``trainer fit --weight COLUMN``, the
estimator's ``sample_weight``).

Weights are checked where they enter: each a finite non-negative number, not all zero.
Rows of weight 0 are dropped before anything is learned from the rows (typing, states, cut
points), and every count is the sum of its rows' weights (``stats.counts``), so whole-number
weights give the model of the data with each row repeated that many times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model.discretization import number_of
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.io import RawTable


def checked_weights(
    values: object,
    n_rows: int,
    source: str,
    lines: Callable[[], np.ndarray] | None = None,
    all_rows: bool = True,
) -> np.ndarray:
    """``values`` (one number per row) as float64, refused naming the first bad row and value:
    a missing, negative, infinite or non-number weight, or (``all_rows``: these are all the
    rows, not a chunk) all of them zero. ``lines()``: the file line of each row, asked only
    to name a bad one."""
    try:
        weights = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInput(f"{source}: sample weights must be numbers, one per row") from None
    if weights.shape[0] != n_rows:
        raise InvalidInput(f"{source}: {weights.shape[0]} sample weights for {n_rows} rows")
    bad = np.flatnonzero(~(np.isfinite(weights) & (weights >= 0)))
    if bad.size:
        r = int(bad[0])
        where = f"line {lines()[r]}" if lines is not None else f"row {r + 1}"
        value = np.asarray(values, dtype=object).reshape(-1)[r]
        raise InvalidInput(f"{source}: {where}: weight {value!r} is not a finite non-negative number")
    if all_rows and n_rows and not weights.any():
        raise InvalidInput(f"{source}: every weight is 0: no row is left to learn from")
    return weights


def weight_index(source: str, header: tuple[str, ...], column: str, class_column: str | None) -> int:
    """Where the weight column is in ``header``; refused if absent or the class column."""
    if column not in header:
        raise InvalidInput(f"{source}: --weight: no column {column!r}; columns are {', '.join(header)}")
    if column == (class_column or header[-1]):
        raise InvalidInput(f"{source}: --weight: {column!r} is the class column; name a column of row weights")
    return header.index(column)


def weight_column(table: RawTable, column: str, class_column: str | None, all_rows: bool = True) -> np.ndarray:
    """The weights a column of ``table`` holds (its texts read as ``preprocessing`` reads
    them: an empty or missing-marker text is a missing weight, refused). ``all_rows``: as
    ``checked_weights``."""
    texts = table.columns[weight_index(table.source, table.header, column, class_column)]
    numbers = np.array([number_of(t) if t != "" else np.nan for t in texts.labels.tolist()], dtype=np.float64)
    values = numbers[texts.index]
    bad = np.flatnonzero(np.isnan(values))
    if bad.size:
        r = int(bad[0])
        text = texts.labels[texts.index[r]]
        what = "a missing weight" if text == "" else f"weight {text!r} is not a number"
        raise InvalidInput(f"{table.source}: line {table.lines[r]}: column {column!r}: {what}")
    source = f"{table.source}: column {column!r}"
    return checked_weights(values, table.n_rows, source, lambda: table.lines, all_rows)


def positive_rows(table: RawTable, weights: np.ndarray) -> tuple[RawTable, np.ndarray]:
    """The table and weights without the rows of weight 0."""
    keep = weights > 0
    if not keep.all():
        lines = table.line_numbers
        table = RawTable(
            table.source,
            table.header,
            tuple(c.rows(keep) for c in table.columns),
            lines[keep] if isinstance(lines, np.ndarray) else (lambda: table.lines[keep]),
            table.declared,
        )
    return table, weights[keep]


def weighted_rows(table: RawTable, weights: np.ndarray, class_column: str | None) -> tuple[RawTable, np.ndarray]:
    """The table without its rows of weight 0, and the weights of the rows left that have a
    class: those ``columns.columns_of`` keeps, in order (default class: the last column)."""
    table, weights = positive_rows(table, weights)
    class_texts = table.columns[table.header.index(class_column or table.header[-1])]
    has_class = class_texts.coded(lambda labels: [t != "" for t in labels]).astype(bool)
    return table, weights[has_class]


def typing_rules(preprocessing: Preprocessing) -> Preprocessing:
    """``preprocessing`` as the columns are typed: the weight column is not a feature."""
    weight = preprocessing.weight
    return preprocessing if weight is None else replace(preprocessing, ignore=(*preprocessing.ignore, weight))
