"""Functional dependencies between features (paper 001's one-to-one rule)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def functional_dependency_matrix(
    X: np.ndarray, cards: Sequence[int], min_count: int, weights: np.ndarray | None = None
) -> np.ndarray:
    """(n, n) bool, ``D[a, b]``: Xa functionally determines Xb at support ``min_count`` (paper 001).

    Paper 001 infers the value-level FD xa -> xb when Count(xa) = Count(xa, xb) >= l. Here
    Xa -> Xb holds when that criterion holds for every value xa that occurs (over the rows
    where both are present), i.e. each observed value of Xa occurs at least ``min_count``
    times and always with one and the same value of Xb. Needs at least one such row; the
    diagonal is False. One bincount per pair: O(n^2 (m + v^2)). ``weights``: per row, a
    count is their sum (a row of weight w is w rows).
    """
    n = X.shape[1]
    ext = [int(c) + 1 for c in cards]
    cols = [np.where(X[:, i] < 0, ext[i] - 1, X[:, i]).astype(np.int64) for i in range(n)]
    out = np.zeros((n, n), dtype=bool)
    for j in range(1, n):
        for i in range(j):
            table = np.bincount(cols[i] * ext[j] + cols[j], weights, minlength=ext[i] * ext[j]).reshape(ext[i], ext[j])
            table = table[:-1, :-1]
            out[i, j] = _determines(table, min_count)
            out[j, i] = _determines(table.T, min_count)
    return out


def _determines(n_ab: np.ndarray, min_count: int) -> bool:
    """Every occurring value a (row of N(a, b)) has N(a) >= min_count and a single b."""
    row_total = n_ab.sum(axis=1)
    seen = row_total > 0
    if not seen.any():
        return False
    rows = n_ab[seen]
    return bool(np.all(row_total[seen] >= min_count) and np.all(np.count_nonzero(rows, axis=1) == 1))
