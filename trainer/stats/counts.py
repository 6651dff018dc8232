"""Counting: contingency tables over rows of integer codes, -1 = missing, available-case
(a count over several variables uses the rows where all of them are present). One
``np.bincount`` over flat codes per table; nothing loops over rows.

``weights``: a float64 weight per row, or None. With weights a count is the sum of its
rows' weights (float64; exact for whole numbers up to 2^53), so whole-number weights give
the counts of each row repeated that many times; without, the counts are int64 as ever."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bnserve.trainer.cores import cores

COMPARED_VALUES = 16  # up to this many values are counted by comparisons, not bincount
# Rows counted per bincount over many rows, so that its int64 copy of the index is 1 MiB, not 8
# bytes a row (a family's CPT counts over a million rows held 10 MB): ``joint_counts`` of a table
# of at most this many cells without weights (sums of weights would round in another order), and
# the pair counts (``pairs``: on 1M rows x 50, 0.63 CPU-s in blocks of 2^15 rows, 0.57 of 2^16,
# 0.53 of 2^17, 0.51 of 2^18; 2026-11-29, AMD EPYC). Over more than one block, the counts of
# rows held in memory go on the cores the fit may use (``counting_threads``).
BLOCK_ROWS = 1 << 17


def counting_threads(rows: int, block_rows: int | None = None) -> int:
    """Threads to count ``rows`` rows held in memory on, ``block_rows`` (``BLOCK_ROWS``) at a
    time: the cores the fit may use (``cores``; numpy's passes let go of the GIL) over more than
    one block, else one (a thread's start and hand-over would cost more than one block shares)."""
    return cores() if rows > (BLOCK_ROWS if block_rows is None else block_rows) else 1


def value_counts(codes: np.ndarray, size: int) -> np.ndarray:
    """The rows of each value 0..``size`` - 1 of ``codes`` (int64; negative codes, missing, not
    counted). Up to ``COMPARED_VALUES`` values, one vectorised comparison and count per value:
    numpy's take about a twentieth of ``bincount``'s scalar loop a row (a million int8 codes:
    0.06 ms a value against 1.4 ms), on the codes in their own narrow type, with no int64
    copy or masked copy of them."""
    if size <= COMPARED_VALUES:
        return np.array([np.count_nonzero(codes == k) for k in range(size)], dtype=np.int64)
    return np.bincount(codes[codes >= 0], minlength=size).astype(np.int64, copy=False)


def joint_counts(
    columns: Sequence[np.ndarray], cards: Sequence[int], complete: bool = False, weights: np.ndarray | None = None
) -> np.ndarray:
    """Contingency table N(v1, ..., vk) with shape ``tuple(cards)``, over rows where all are present.

    One pass per column and one bincount, no mask: code -1 (missing) is shifted to an extra
    state 0 of each axis, which is sliced off, so a row with any missing value only lands
    in the sliced-off cells. ``complete``: the caller knows no column has a missing value;
    the same table is counted without the extra states (a table (4/3)^k times smaller for
    k three-valued columns), which is what makes the many CI tests of CB cheap. The columns
    may be of any integer type (the narrow codes as held): the flat index is built in the
    narrowest type that holds the table's size (``_flat_index``). Without weights, a table
    of at most ``BLOCK_ROWS`` cells over more rows is counted ``BLOCK_ROWS`` rows at a time.
    """
    cols = [np.asarray(c) for c in columns]
    shape = tuple(int(c) for c in cards)
    if not cols:
        raise ValueError("joint_counts needs at least one column")
    ext = shape if complete else tuple(c + 1 for c in shape)
    size, rows = math.prod(ext), cols[0].shape[0]
    if weights is None and rows > BLOCK_ROWS >= size:  # by blocks: the same integers, a block's index held
        table = np.zeros(size, dtype=np.int64)
        for start in range(0, rows, BLOCK_ROWS):
            block = [c[start : start + BLOCK_ROWS] for c in cols]
            table += np.bincount(_flat_index(block, ext, shifted=not complete), minlength=size)
    else:
        table = np.bincount(_flat_index(cols, ext, shifted=not complete), weights, minlength=size)
    return table.reshape(shape) if complete else _sliced(table.reshape(ext))


def _flat_index(cols: Sequence[np.ndarray], ext: Sequence[int], shifted: bool = False) -> np.ndarray:
    """The flat (C-order) index of each row's values in a table of shape ``ext`` (``shifted``:
    at code + 1 on every axis, code -1 at 0), by Horner's rule in place on one array of the
    narrowest signed type that holds the table's size: one temporary of a byte or two per
    row for a family of few states, however many columns it has (no product per column).
    Every partial value lies within ±size, so nothing overflows."""
    size = math.prod(ext)
    index = cols[0].astype(np.promote_types(np.min_scalar_type(-size - 1), np.int8))  # ±size, and each e <= size
    for c, e in zip(cols[1:], ext[1:]):
        index *= e
        np.add(index, c, out=index, casting="unsafe")  # c's values fit: they are below e
    if shifted:
        index += sum(math.prod(ext[i + 1 :]) for i in range(len(ext)))  # the +1 of every axis
    return index


def joint_code(columns: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """int64 flat (C-order) index of each row's values in a table of shape ``cards``; no value may be missing."""
    return _flat_index([np.asarray(c) for c in columns], [int(c) for c in cards]).astype(np.int64, copy=False)


def shifted_codes(
    cols: Sequence[np.ndarray], shape: Sequence[int], dtype: np.dtype | type[np.integer] = np.int64
) -> np.ndarray:
    """Flat index of each row in the table of shape ``card + 1`` per axis, at (code + 1, ...), as
    ``dtype`` (int64, or a type that holds the table's size: no int64 copy of the rows is made)."""
    ext = [int(c) + 1 for c in shape]
    return _flat_index([np.asarray(c) for c in cols], ext, shifted=True).astype(dtype, copy=False)


def _shifted_counts(codes: np.ndarray, shape: Sequence[int], weights: np.ndarray | None = None) -> np.ndarray:
    """Counts of shifted flat indices with the missing state of every axis sliced off, contiguous."""
    ext = tuple(int(c) + 1 for c in shape)
    return _sliced(np.bincount(codes, weights, minlength=math.prod(ext)).reshape(ext))


def _sliced(table: np.ndarray) -> np.ndarray:
    """A table of shifted counts with the missing state of every axis sliced off, contiguous."""
    return np.ascontiguousarray(table[(slice(1, None),) * table.ndim])


TRANSPOSE_ROWS = 4096  # rows per block of ``feature_columns``'s copy: read in order, written to n streams


def feature_columns(X: np.ndarray) -> np.ndarray:
    """``X`` (rows, n) as (n, rows) with each feature's codes contiguous: a view when ``X`` is
    column-major (Fortran order), else one transposed copy, so that per-column passes read
    memory sequentially instead of one cache line per value. The copy goes by blocks of
    rows, which is about twice as fast as numpy's own transposing copy."""
    if X.flags.f_contiguous:
        return X.T
    out = np.empty((X.shape[1], X.shape[0]), dtype=X.dtype)
    for start in range(0, X.shape[0], TRANSPOSE_ROWS):
        out[:, start : start + TRANSPOSE_ROWS] = X[start : start + TRANSPOSE_ROWS].T
    return out


def joint_column(columns: Sequence[np.ndarray], cards: Sequence[int]) -> tuple[np.ndarray, int]:
    """Several columns as one variable (a joined feature): (codes, cardinality); -1 where any is missing."""
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    card = math.prod(int(k) for k in cards)
    present = np.ones(cols[0].shape[0], dtype=bool)
    for c in cols:
        present &= c >= 0
    codes = np.full(cols[0].shape[0], -1, dtype=np.int64)
    if present.any():
        codes[present] = np.ravel_multi_index([c[present] for c in cols], tuple(int(k) for k in cards))
    return codes, card


def occurring_instantiations(columns: Sequence[np.ndarray]) -> tuple[np.ndarray, int]:
    """Codes 0..s-1 of the distinct joint values of ``columns`` that occur, -1 where any is missing.

    s counts only the instantiations present in the data (at most the number of rows),
    so any number of columns can be joined without a product-sized table; codes follow the
    lexicographic order of the values. O(k (m + s·r)) for k columns of m rows and r
    states: each step ranks the codes seen in a table of s·r flags (s ≤ m), no sort.
    """
    if not columns:
        raise ValueError("occurring_instantiations needs the row count: pass at least one column")
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    present = np.ones(cols[0].shape[0], dtype=bool)
    for c in cols:
        present &= c >= 0
    codes = np.full(cols[0].shape[0], -1, dtype=np.int64)
    joined = np.zeros(int(present.sum()), dtype=np.int64)
    distinct = 1
    for c in cols:
        values = c[present]
        card = int(values.max()) + 1 if values.size else 1
        wide = joined * card + values  # < distinct · card
        seen = np.zeros(distinct * card, dtype=bool)
        seen[wide] = True
        rank = np.cumsum(seen) - 1  # the rank of each seen code among those seen: np.unique's inverse
        joined, distinct = rank[wide], int(rank[-1]) + 1 if rank.size else 0
    codes[present] = joined.reshape(-1)
    return codes, (int(joined.max()) + 1 if joined.size else 0)
