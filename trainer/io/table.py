"""A data file as read: its header and every cell as text ("" = missing), and the checks
every format shares (header names, ragged rows). Readers only parse; typing, discretisation
and coding happen in ``bnserve.trainer.data``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bnserve.store.errors import InvalidInput
from bnserve.store.model import MAX_NAME_LENGTH


@dataclass(frozen=True)
class Declared:
    """A column type the file itself declares: nominal (with its label domain, in
    declared order, when the format gives one) or numeric."""

    kind: str
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RawTable:
    """A file as read: header and the data cells as a (rows, columns) object array of str.

    ``lines[r]`` is the file line on which data row ``r`` ends (for error messages; for
    Parquet, the row number + 1, as if there were a header line).
    ``declared`` is empty, or per column the type the file declares (None: undeclared).
    """

    source: str
    header: tuple[str, ...]
    cells: np.ndarray
    lines: np.ndarray
    declared: tuple[Declared | None, ...] = field(default=())


def check_header(source: str, header: Sequence[str], lines: Sequence[int] | None = None) -> None:
    """Names of 1..MAX_NAME_LENGTH characters, no duplicates; ``lines[i]``: where column i
    is named (default line 1, a header row)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        line = lines[i - 1] if lines is not None else 1
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
