"""What the pairwise learners (nb, tan, kdb, fkdb, hc) read: N(xi, c) and N(xi, xj, c) for every
feature and pair, counted several columns per pass, and the matrices of statistics over them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from bnserve.trainer.blas import one_blas_thread
from bnserve.trainer.cores import ordered_map
from bnserve.trainer.stats.counts import (
    BLOCK_ROWS,
    counting_threads,
    feature_columns,
    joint_counts,
    shifted_codes,
)
from bnserve.trainer.stats.information import (
    conditional_mutual_information_from_counts,
    dependence_derivative_information_from_counts,
    mutual_information,
    mutual_information_from_counts,
)


def class_mutual_information(
    X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int, weights: np.ndarray | None = None
) -> np.ndarray:
    """I(Xi;C) for every feature column of ``X`` (rows, n): shape (n,), in nats (as
    ``PairStatistics.class_mi``, without the pairs); ``weights``: each row counts as its weight."""
    cols = feature_columns(X)
    return np.array(
        [mutual_information(cols[i], y, cards[i], n_classes, weights) for i in range(cols.shape[0])],
        dtype=np.float64,
    )


def conditional_mutual_information_matrix(
    X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int
) -> np.ndarray:
    """Symmetric (n, n) matrix of I(Xi;Xj|C), zero diagonal, in nats.

    One bincount per pair over m rows (``_pairwise_class_statistic``): O(n^2 m) time,
    O(m) extra memory; available-case counts.
    """
    return _pairwise_class_statistic(X, y, cards, n_classes, conditional_mutual_information_from_counts)


def dependence_derivative_information_matrix(
    X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int
) -> np.ndarray:
    """Symmetric (n, n) matrix of I_D(Xi;Xj|C) (paper 004), zero diagonal; available-case counts.

    One bincount per pair, as ``conditional_mutual_information_matrix``: O(n^2 (m + v^2 c)).
    """
    return _pairwise_class_statistic(X, y, cards, n_classes, dependence_derivative_information_from_counts)


def _pairwise_class_statistic(
    X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int, statistic: Callable[[np.ndarray], float]
) -> np.ndarray:
    """Symmetric (n, n) matrix of ``statistic(N(xi, xj, c))`` over available-case tables, zero diagonal."""
    return PairStatistics.of(X, y, cards, n_classes).pair_matrix(statistic)


@dataclass
class PairStatistics:
    """What the pairwise learners (nb, tan, kdb, fkdb) need from the rows: N(xi, c) per
    feature (available-case) and N(xi, xj, c) per pair i < j (``pairwise_class_counts``'s
    tables, with each axis's missing state first). Counts add up, so a file read in chunks
    (``add``) gives exactly the tables, and so the figures, of the whole file in memory.

    Pickled (a part's counts, sent back by a ``--jobs`` process or a Dask worker) as one
    array of every table's counts: 1,225 pairs unpickled as as many arrays cost the trainer
    about 6 ms a part and pass; their shapes follow from ``cards``."""

    cards: tuple[int, ...]
    n_classes: int
    class_feature: list[np.ndarray]
    pairs: dict[tuple[int, int], np.ndarray]
    # each statistic's matrix once: auto's candidates on a fold (tan, kdb and fkdb at each k,
    # skdb, eskdb) read the same CMI matrix; forgotten when counts are added
    _matrices: dict[Callable[[np.ndarray], float], np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        tables = [*self.class_feature, *self.pairs.values()]
        return {
            "cards": self.cards,
            "n_classes": self.n_classes,
            "pairs": np.array(list(self.pairs), dtype=np.int64).reshape(-1, 2),
            "counts": np.concatenate([t.ravel() for t in tables]) if tables else np.zeros(0, dtype=np.int64),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """The tables as views of the one array (writable: ``add`` adds into them)."""
        self.cards, self.n_classes = state["cards"], state["n_classes"]
        keys: list[tuple[int, int]] = list(map(tuple, state["pairs"].tolist()))
        shapes: list[tuple[int, ...]] = [(c, self.n_classes) for c in self.cards]
        shapes += [(self.cards[i] + 1, self.cards[j] + 1, self.n_classes + 1) for i, j in keys]
        counts, views, start = state["counts"], [], 0
        for shape in shapes:
            size = math.prod(shape)
            views.append(counts[start : start + size].reshape(shape))
            start += size
        self.class_feature = views[: len(self.cards)]
        self.pairs = dict(zip(keys, views[len(self.cards) :]))
        self._matrices = {}

    @staticmethod
    def of(
        X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int, weights: np.ndarray | None = None
    ) -> PairStatistics:
        """Counted from rows; ``weights`` (float64 per row, or None): weighted counts (``counts``).

        Without weights N(xi, c) is a pair's table summed over the other feature, its missing
        state included: the same integers, without a pass over the rows per feature. Sums of
        weights are counted from the rows, so that their rounding stays that of one bincount."""
        cards = tuple(int(c) for c in cards)
        pairs = {(i, j): table for i, j, table in pairwise_class_counts(X, y, cards, n_classes, weights)}
        if weights is None and pairs:
            n = len(cards)
            tables = [pairs[(i, i + 1)].sum(axis=1) if i + 1 < n else pairs[(i - 1, i)].sum(axis=0) for i in range(n)]
            class_feature = [np.ascontiguousarray(t[1:, 1:]) for t in tables]
        else:
            cols = feature_columns(X)
            class_feature = [
                joint_counts([cols[i], y], [cards[i], n_classes], weights=weights) for i in range(len(cards))
            ]
        return PairStatistics(cards, n_classes, class_feature, pairs)

    @staticmethod
    def empty(cards: Sequence[int], n_classes: int, weighted: bool = False) -> PairStatistics:
        """The statistics of no rows, to ``add`` chunks to (float64 counts when ``weighted``)."""
        cards = tuple(int(c) for c in cards)
        dtype = np.float64 if weighted else np.int64
        return PairStatistics(cards, n_classes, [np.zeros((c, n_classes), dtype=dtype) for c in cards], {})

    def add(self, other: PairStatistics) -> None:
        """Add the counts of other rows, in place (a pair this one has not counted yet is copied)."""
        self._matrices.clear()
        for mine, theirs in zip(self.class_feature, other.class_feature):
            mine += theirs
        for key, table in other.pairs.items():
            if key in self.pairs:
                self.pairs[key] += table
            else:
                self.pairs[key] = table.copy()

    def family(self, family: Sequence[int]) -> np.ndarray | None:
        """The available-case N over ``family`` (feature indices, -1: the class), axes in its
        order, a copy, when it is the class and one or two features; else None."""
        features = [j for j in family if j >= 0]
        if -1 not in family or not 1 <= len(features) <= 2 or len(set(family)) != len(family):
            return None
        if len(features) == 1:
            table, axes = self.class_feature[features[0]], [features[0], -1]
        else:
            pair = (min(features), max(features))
            if pair not in self.pairs:
                return None
            table, axes = self.pairs[pair][1:, 1:, 1:], [*pair, -1]
        return np.transpose(table, [axes.index(j) for j in family]).copy()

    def class_mi(self) -> np.ndarray:
        """I(Xi;C) for every feature, in nats."""
        return np.array([mutual_information_from_counts(t) for t in self.class_feature], dtype=np.float64)

    def pair_matrix(self, statistic: Callable[[np.ndarray], float]) -> np.ndarray:
        """Symmetric (n, n) matrix of ``statistic`` over each pair's available-case N(xi, xj, c)
        (a copy of the one computed first for this statistic)."""
        if statistic not in self._matrices:
            n = len(self.cards)
            out = np.zeros((n, n), dtype=np.float64)
            for (i, j), table in self.pairs.items():
                out[i, j] = out[j, i] = statistic(table[1:, 1:, 1:])
            self._matrices[statistic] = out
        return self._matrices[statistic].copy()

    def cmi_matrix(self) -> np.ndarray:
        """I(Xi;Xj|C), symmetric, zero diagonal, in nats."""
        return self.pair_matrix(conditional_mutual_information_from_counts)


PAIR_TABLE_CELLS = 1 << 16  # cells of one joint table of two feature groups and the class (int64: 512 KiB)


TABLE_ROWS_PER_CELL = 4  # and at most one cell per 4 rows: summing the tables out stays cheaper than counting


# Up to this many rows, and class-wise products of at most this many cells (one-hot columns,
# the features' states each with its missing state, squared, times the classes + 1: 32 MB of
# float64), the pairs are counted as products of one-hot matrices (``_pairs_by_products``):
# faster on every shared set of up to 3,200 rows (promoters 26 -> 3 ms, splice 49 -> 20),
# slower from mushroom's 8,124 (6.0 -> 9.6 ms)
PRODUCT_ROWS, PRODUCT_CELLS = 4096, 1 << 22


def pairwise_class_counts(
    X: np.ndarray,
    y: np.ndarray,
    cards: Sequence[int],
    n_classes: int,
    weights: np.ndarray | None = None,
    block_rows: int = BLOCK_ROWS,
) -> Iterator[tuple[int, int, np.ndarray]]:
    """(i, j, N) for every pair of feature columns i < j: N int64 of shape (card_i + 1, card_j + 1,
    n_classes + 1), N[a + 1, b + 1, c + 1] = N(xi = a, xj = b, c); state 0 of each axis counts
    the rows where that variable is missing, so ``N[1:, 1:, 1:]`` is the available-case table.

    Not one pass over the rows per pair: consecutive columns are joined into groups
    (``_feature_groups``) and one bincount per pair of groups, over the groups' joint codes,
    counts the table of both groups and the class; every pair of columns it holds is summed
    out of it (the pairs inside a group from the group's first table). A table has at most
    T = min(``PAIR_TABLE_CELLS``, rows / ``TABLE_ROWS_PER_CELL``) cells: with v = 4 and a
    million rows, three columns per group and 9 pairs per pass; a column with many states
    stays alone, one pair per pass. O(n^2 (m + T) / g^2) for groups of g columns.

    Memory: a byte (or two) per row and group, each later group's joint code in the
    narrowest type, and one group's code with the class; the tables are counted group by
    group, one at a time, and a group's code is dropped once its tables are counted (not an
    int64 code per group and row). Each table is counted ``block_rows`` rows at a time, so
    the int64 codes of one bincount stay in cache. ``weights``: float64 sums of the rows'
    weights instead of int64 counts (``counts``), block by block. Over more than one block a
    group's tables are counted on ``counting_threads`` (numpy's passes let go of the GIL), each
    table as one thread would: the same tables, in the same order.
    """
    m, n = X.shape
    if n < 2:
        return
    cols = feature_columns(X)
    ext = [int(c) + 1 for c in cards]
    ext_c = n_classes + 1
    if weights is None and m <= PRODUCT_ROWS and ext_c * sum(ext) ** 2 <= PRODUCT_CELLS:
        yield from _pairs_by_products(cols, y, ext, ext_c)
        return
    groups = _feature_groups(ext, ext_c, min(PAIR_TABLE_CELLS, max(m // TABLE_ROWS_PER_CELL, 1)))
    sizes = [math.prod(ext[i] for i in g) for g in groups]

    def with_class(a: int) -> np.ndarray:
        """Group a's code and the class as one code, the class the last (fastest) axis."""
        shape = [cards[i] for i in groups[a]] + [n_classes]
        return shifted_codes([*(cols[i] for i in groups[a]), y], shape, _narrowest(sizes[a] * ext_c))

    def joint(lead: np.ndarray, a: int, b: int) -> np.ndarray:
        """Counts over (group a's columns, group b's columns, class), each axis shifted, from
        ``lead``: ``with_class(a)``; counted on axes (a's, class, b's), returned in that order."""
        code = codes[b]
        assert code is not None
        table = np.zeros(sizes[a] * ext_c * sizes[b], dtype=np.int64 if weights is None else np.float64)
        buffer = np.empty(min(m, block_rows), dtype=np.int64)
        for start in range(0, m, block_rows):
            stop = min(m, start + block_rows)
            chunk = buffer[: stop - start]
            np.multiply(lead[start:stop], sizes[b], out=chunk, dtype=np.int64)
            chunk += code[start:stop]
            part = None if weights is None else weights[start:stop]
            table += np.bincount(chunk, part, minlength=table.size)
        shaped = table.reshape(*(ext[i] for i in groups[a]), ext_c, *(ext[i] for i in groups[b]))
        return np.ascontiguousarray(np.moveaxis(shaped, len(groups[a]), -1))

    def pairs(
        table: np.ndarray, columns: list[int], among: list[tuple[int, int]]
    ) -> Iterator[tuple[int, int, np.ndarray]]:
        """Sum ``table`` (axes: ``columns``, then the class) down to each pair of axes (p, q) in
        ``among``: first to p's axis, its partners' and the class (once per p), then each pair
        from that, so the whole table is read once per p, not once per pair (counts are integers:
        the same; sums of weights may round in another order)."""
        kept: dict[int, list[int]] = {}  # the axes each p's partial sum keeps: p, its partners
        for p, q in among:
            kept[p] = sorted({p, q, *kept.get(p, ())})
        partial = {
            p: table.sum(axis=tuple(a for a in range(len(columns)) if a not in axes)) for p, axes in kept.items()
        }
        for p, q in among:
            axes = tuple(i for i, a in enumerate(kept[p]) if a not in (p, q))
            yield columns[p], columns[q], partial[p].sum(axis=axes)

    def inside(g: list[int], offset: int = 0) -> list[tuple[int, int]]:
        return [(offset + p, offset + q) for q in range(len(g)) for p in range(q)]

    if len(groups) == 1:
        table = np.bincount(with_class(0), weights, minlength=sizes[0] * ext_c)
        yield from pairs(table.reshape(*(ext[i] for i in groups[0]), ext_c), groups[0], inside(groups[0]))
        return
    # per later group: its shifted joint code, one byte a row for a group of up to 256 cells
    codes: list[np.ndarray | None] = [None] + [
        shifted_codes([cols[i] for i in g], [cards[i] for i in g], _narrowest(size))
        for g, size in zip(groups[1:], sizes[1:])
    ]
    last = len(groups) - 1
    with ordered_map(counting_threads(m, block_rows), "counting") as mapped:
        for a in range(last):
            codes[a] = None  # counted against the later groups only: group a's own code is done with
            lead = with_class(a)
            later = range(a + 1, len(groups))
            for b, table in zip(later, mapped(partial(joint, lead, a), later)):
                columns = groups[a] + groups[b]
                among = [(p, len(groups[a]) + q) for p in range(len(groups[a])) for q in range(len(groups[b]))]
                if b == a + 1:  # group a's first table: its inner pairs too
                    among += inside(groups[a])
                if a == 0 and b == last:  # the last group's only table with group 0
                    among += inside(groups[b], len(groups[a]))
                yield from pairs(table, columns, among)


def _pairs_by_products(
    cols: np.ndarray, y: np.ndarray, ext: Sequence[int], ext_c: int
) -> Iterator[tuple[int, int, np.ndarray]]:
    """``pairwise_class_counts`` without weights, on few rows: every pair's table at once, as
    the class-wise products O_c^T O_c of the rows' one-hot codes (each column's missing state
    first), then cut out pair by pair. Counts of 0/1 products are exact in float64, so the
    tables are the bincounts' integers; on a small set the bincounts' cost was per pair, not
    per row (promoters' 1,596 pairs: 26 ms a fold, against 3 here)."""
    m = len(y)
    starts = np.concatenate([[0], np.cumsum(ext)])
    onehot = np.zeros((m, int(starts[-1])))
    onehot[np.arange(m)[:, None], starts[:-1] + cols.T + 1] = 1.0
    classes = np.asarray(y, dtype=np.int64) + 1
    products = np.zeros((ext_c, onehot.shape[1], onehot.shape[1]))
    with one_blas_thread():
        for c in np.unique(classes):
            rows = onehot[classes == c]
            products[c] = rows.T @ rows
    counts = np.moveaxis(products, 0, -1).astype(np.int64)  # (state, state, class)
    n = len(ext)
    for i in range(n - 1):
        block = counts[starts[i] : starts[i + 1]]
        for j in range(i + 1, n):
            yield i, j, np.ascontiguousarray(block[:, starts[j] : starts[j + 1]])


def _feature_groups(ext: Sequence[int], ext_c: int, cells: int) -> list[list[int]]:
    """Consecutive columns joined while the product of their (card + 1) is at most
    sqrt(``cells`` / ext_c), so a table of two groups and the class has at most ``cells``
    cells; a column above the limit is a group of its own."""
    limit = max(1, math.isqrt(cells // ext_c))
    groups: list[list[int]] = []
    size = 0
    for i, e in enumerate(ext):
        if groups and size * e <= limit:
            groups[-1].append(i)
            size *= e
        else:
            groups.append([i])
            size = e
    return groups


def _narrowest(size: int) -> np.dtype:
    """The smallest unsigned integer type that holds the values [0, size)."""
    return np.min_scalar_type(max(size - 1, 0))


def _narrow(codes: np.ndarray, size: int) -> np.ndarray:
    """``codes`` (in [0, size)) in the smallest unsigned integer type that holds them."""
    return codes.astype(_narrowest(size), copy=False)


class ColumnGroups:
    """The feature columns joined into consecutive groups (``_feature_groups``), each as one
    shifted joint code, so that one bincount counts a context against several columns.

    ``counts(context, size)`` gives N(context, x_j) for every column j, each column's
    missing state first: the structure searches count a family's configurations (the
    context, ``size`` values) against every candidate parent this way, a pass over the rows
    per group instead of per column. A group whose table would exceed ``cells`` (or one
    cell per ``TABLE_ROWS_PER_CELL`` rows) is counted column by column. ``weights``: per row,
    the counts are float64 sums of weights.
    """

    def __init__(
        self, X: np.ndarray, cards: Sequence[int], group_cells: int = 1 << 7, weights: np.ndarray | None = None
    ) -> None:
        cols = feature_columns(X)
        self.rows = int(X.shape[0])
        self.weights = weights
        self.ext = [int(c) + 1 for c in cards]
        self.groups = _feature_groups(self.ext, 1, group_cells * group_cells)
        self.sizes = [math.prod(self.ext[i] for i in g) for g in self.groups]
        self.columns = [_narrow(cols[i].astype(np.int64) + 1, e) for i, e in enumerate(self.ext)]
        self.codes = [
            self.columns[g[0]]
            if len(g) == 1
            else shifted_codes([cols[i] for i in g], [self.ext[i] - 1 for i in g], _narrowest(size))
            for g, size in zip(self.groups, self.sizes)
        ]

    def counts(self, context: np.ndarray, size: int, skip: Sequence[int] = ()) -> Iterator[tuple[int, np.ndarray]]:
        """(j, N) for every column j not in ``skip``: N int64 (size, card_j + 1), N[u, s + 1] the rows
        with context u and x_j = s, N[u, 0] those with x_j missing. ``context`` int64 in [0, size)."""
        limit = max(PAIR_TABLE_CELLS, self.rows // TABLE_ROWS_PER_CELL)
        skipped = set(skip)
        for group, code, group_size in zip(self.groups, self.codes, self.sizes):
            wanted = [p for p, j in enumerate(group) if j not in skipped]
            if not wanted:
                continue
            if len(wanted) == 1 or size * group_size > limit:
                for p in wanted:
                    j = group[p]
                    joined = context * self.ext[j] + self.columns[j]
                    yield j, np.bincount(joined, self.weights, minlength=size * self.ext[j]).reshape(size, self.ext[j])
                continue
            table = np.bincount(context * group_size + code, self.weights, minlength=size * group_size)
            table = table.reshape(size, *(self.ext[j] for j in group))
            for p in wanted:
                yield group[p], table.sum(axis=tuple(1 + a for a in range(len(group)) if a != p))
