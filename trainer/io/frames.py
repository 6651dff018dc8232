"""Data already in memory — a pandas DataFrame, a 2-D numpy array or a list of rows — as a
``RawTable``, read as the same values written to a CSV file would be.

Each column becomes an Arrow array and then text through the Parquet reader's conversion
(``arrow_table``): numbers as their shortest text, NaN and None missing. A column keeps a
declared type only when it carries a domain (a pandas categorical: its categories; bool:
false, true); every other column is typed by the file rule, so a notebook and ``trainer fit``
on the same data learn the same model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from bnserve.store.errors import InvalidInput
from bnserve.trainer.io.parquet import arrow_table
from bnserve.trainer.io.table import RawTable


def frame_table(
    data: Any, names: Sequence[str], source: str = "X", extra: Mapping[str, pa.Array] | None = None
) -> RawTable:
    """``data`` (a DataFrame, or anything ``np.asarray`` makes 2-D) with column ``names``,
    and the ``extra`` columns after them (e.g. the class)."""
    columns = data_columns(data)
    if len(columns) != len(names):
        raise InvalidInput(f"{source}: {len(columns)} columns, but {len(names)} names")
    table = pa.table({**dict(zip(names, columns)), **(extra or {})})
    raw = arrow_table(source, table)
    return replace(raw, declared=tuple(d if d is not None and d.labels else None for d in raw.declared))


def data_columns(data: Any) -> list[pa.Array]:
    """One Arrow array per column of a DataFrame or 2-D array."""
    if hasattr(data, "columns") and hasattr(data, "iloc"):  # a pandas DataFrame
        return [column_array(data.iloc[:, j]) for j in range(data.shape[1])]
    array = np.asarray(data)
    if array.ndim != 2:
        raise InvalidInput(f"expected 2-D data (rows × columns), got an array of shape {array.shape}")
    return [column_array(array[:, j]) for j in range(array.shape[1])]


def column_array(values: Any) -> pa.Array:
    """One column as Arrow: numbers, bools and categoricals as they are; anything else as
    text (``str`` of each value), None and NaN missing."""
    try:
        array = pa.array(values, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):  # mixed objects: 1, "a", 2.5
        array = None
    if array is not None and (_kept(array.type) or pa.types.is_null(array.type)):
        return array.cast(pa.string()) if pa.types.is_null(array.type) else array
    cells = np.asarray(values, dtype=object).tolist()
    return pa.array([None if _is_missing(v) else str(v) for v in cells], type=pa.string())


def _kept(t: pa.DataType) -> bool:
    """An Arrow type ``arrow_table`` reads as it is. A dictionary (a pandas categorical) is kept
    whatever its categories' type, so it stays nominal with its categories as states: pandas 3
    gives string categories as ``large_string`` and numbers as numbers, which as plain text
    would lose the categories' order and unused ones, and numbers would be typed numeric."""
    if pa.types.is_dictionary(t):
        return _kept(t.value_type)
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    )


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)
