"""Sufficient statistics every learner uses: counts, entropy, MI, CMI, Laplace CPTs, χ² tests.

Columns are integer codes, -1 = missing. Counting is available-case: a count over a set
of variables uses the rows where all of them are present. Information is in nats.
All counting is ``np.bincount`` over flat codes; nothing loops over rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
from scipy.special import gammaln
from scipy.stats import chi2


def joint_counts(columns: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """Contingency table N(v1, ..., vk) with shape ``tuple(cards)``, over rows where all are present.

    One pass per column and one bincount, no mask: code -1 (missing) is shifted to an extra
    state 0 of each axis, which is sliced off, so a row with any missing value only lands
    in the sliced-off cells.
    """
    cols = [np.asarray(c) for c in columns]
    shape = tuple(int(c) for c in cards)
    if not cols:
        raise ValueError("joint_counts needs at least one column")
    return _shifted_counts(_shifted_codes(cols, shape), shape)


def _shifted_codes(cols: Sequence[np.ndarray], shape: Sequence[int]) -> np.ndarray:
    """int64 flat index of each row in the table of shape ``card + 1`` per axis, at (code + 1, ...)."""
    ext = [int(c) + 1 for c in shape]
    strides = [math.prod(ext[i + 1:]) for i in range(len(ext))]
    codes = np.empty(cols[0].shape[0], dtype=np.int64)
    np.multiply(cols[0], strides[0], out=codes, dtype=np.int64)
    for c, stride in zip(cols[1:], strides[1:]):
        if stride == 1:
            np.add(codes, c, out=codes, dtype=np.int64)
        else:
            codes += np.multiply(c, stride, dtype=np.int64)
    codes += sum(strides)  # the +1 shift of every axis
    return codes


def _shifted_counts(codes: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Counts of ``_shifted_codes`` with the missing state of every axis sliced off, contiguous."""
    ext = tuple(int(c) + 1 for c in shape)
    table = np.bincount(codes, minlength=math.prod(ext)).reshape(ext)
    return np.ascontiguousarray(table[(slice(1, None),) * len(ext)])


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
        out[:, start:start + TRANSPOSE_ROWS] = X[start:start + TRANSPOSE_ROWS].T
    return out


def entropy(counts: np.ndarray) -> float:
    """H of the distribution proportional to ``counts`` (any shape), in nats; 0 for no mass."""
    n = np.asarray(counts, dtype=np.float64).ravel()
    total = n.sum()
    if total <= 0:
        return 0.0
    n = n[n > 0]
    return float(max(0.0, -np.sum(n * np.log(n / total)) / total))


def row_entropies(counts: np.ndarray) -> np.ndarray:
    """H of each row of a 2-D table of counts, in nats (0 for an empty row): one call
    scores every candidate split of a discretiser."""
    n = np.asarray(counts, dtype=np.float64)
    total = n.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(n > 0, n * np.log(n / total), 0.0)
        h = -terms.sum(axis=1) / total[:, 0]
    return np.where(total[:, 0] > 0, np.maximum(h, 0.0), 0.0)


def mutual_information_from_counts(n_ab: np.ndarray) -> float:
    """I(A;B) from a 2-D table of counts N(a, b), in nats."""
    n = np.asarray(n_ab, dtype=np.float64)
    total = n.sum()
    if total <= 0:
        return 0.0
    n_a = n.sum(axis=1, keepdims=True)
    n_b = n.sum(axis=0, keepdims=True)
    nz = n > 0
    ratio = (n * total)[nz] / (n_a * n_b)[nz]
    return float(max(0.0, np.sum(n[nz] * np.log(ratio)) / total))


def conditional_mutual_information_from_counts(n_xyc: np.ndarray) -> float:
    """I(X;Y|C) from a 3-D table of counts N(x, y, c), in nats."""
    n = np.asarray(n_xyc, dtype=np.float64)
    total = n.sum()
    if total <= 0:
        return 0.0
    n_c = n.sum(axis=(0, 1))[None, None, :]
    n_xc = n.sum(axis=1)[:, None, :]
    n_yc = n.sum(axis=0)[None, :, :]
    nz = n > 0
    ratio = (n * n_c)[nz] / (n_xc * n_yc)[nz]
    return float(max(0.0, np.sum(n[nz] * np.log(ratio)) / total))


def mutual_information(x: np.ndarray, c: np.ndarray, card_x: int, card_c: int) -> float:
    """I(X;C) over the rows where both are present, in nats."""
    return mutual_information_from_counts(joint_counts([x, c], [card_x, card_c]))


def conditional_mutual_information(
    x: np.ndarray, y: np.ndarray, c: np.ndarray, card_x: int, card_y: int, card_c: int
) -> float:
    """I(X;Y|C) over the rows where all three are present, in nats."""
    return conditional_mutual_information_from_counts(joint_counts([x, y, c], [card_x, card_y, card_c]))


def class_mutual_information(X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int) -> np.ndarray:
    """I(Xi;C) for every feature column of ``X`` (rows, n): shape (n,), in nats (as
    ``PairStatistics.class_mi``, without the pairs)."""
    cols = feature_columns(X)
    return np.array(
        [mutual_information(cols[i], y, cards[i], n_classes) for i in range(cols.shape[0])], dtype=np.float64
    )


def conditional_mutual_information_matrix(
    X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int
) -> np.ndarray:
    """Symmetric (n, n) matrix of I(Xi;Xj|C), zero diagonal, in nats.

    One bincount per pair over m rows (``_pairwise_class_statistic``): O(n^2 m) time,
    O(m) extra memory; available-case counts.
    """
    return _pairwise_class_statistic(X, y, cards, n_classes, conditional_mutual_information_from_counts)


def laplace_cpt(columns: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """CPT with axes (node, *parents): P(x | pa) = (N(x, pa) + 1) / (N(pa) + |X|).

    ``columns[0]`` is the node, the rest its parents in order; counts are available-case
    over all of them, so N(pa) is the sum of N(x, pa) over x. With no parents this is the
    prior (N(x) + 1) / (M + |X|). Returns float64.
    """
    return laplace_cpt_from_counts(joint_counts(columns, cards))


def laplace_cpt_from_counts(counts: np.ndarray) -> np.ndarray:
    """``laplace_cpt`` from the family's table of counts, axes (node, *parents)."""
    counts = counts.astype(np.float64)
    return (counts + 1.0) / (counts.sum(axis=0, keepdims=True) + counts.shape[0])


# ---------------------------------------------------------------- tests of independence

MIN_EXPECTED_PER_CELL = 5.0  # the χ² approximation is trusted when N / cells >= this
ALPHA = 0.05


@dataclass(frozen=True)
class IndependenceTest:
    """A G-test: 2·N·I ~ χ²(dof) under independence. ``reliable`` applies the rule of at
    least ``MIN_EXPECTED_PER_CELL`` cases per cell on average; an unreliable test never
    rejects (independence is assumed, as in paper 003)."""

    statistic: float
    dof: int
    p_value: float
    n: int
    cells: int
    reliable: bool
    alpha: float

    @property
    def rejects_independence(self) -> bool:
        return self.reliable and self.p_value < self.alpha


def _g_test(information: float, n: int, dof: int, cells: int, alpha: float) -> IndependenceTest:
    statistic = 2.0 * n * information
    p_value = float(chi2.sf(statistic, dof)) if dof > 0 else 1.0
    reliable = n > 0 and n / cells >= MIN_EXPECTED_PER_CELL
    return IndependenceTest(statistic, dof, p_value, n, cells, reliable, alpha)


def independence_test(x: np.ndarray, c: np.ndarray, card_x: int, card_c: int, alpha: float = ALPHA) -> IndependenceTest:
    """Is X independent of C? G-test over the rows where both are present; dof (|X|-1)(|C|-1)."""
    table = joint_counts([x, c], [card_x, card_c])
    return _g_test(mutual_information_from_counts(table), int(table.sum()), (card_x - 1) * (card_c - 1),
                   card_x * card_c, alpha)


def conditional_independence_test(
    x: np.ndarray, y: np.ndarray, c: np.ndarray, card_x: int, card_y: int, card_c: int, alpha: float = ALPHA
) -> IndependenceTest:
    """Is X independent of Y given C? 2·N·I(X;Y|C) ~ χ² with (|X|-1)(|Y|-1)|C| dof (paper 003)."""
    table = joint_counts([x, y, c], [card_x, card_y, card_c])
    return _g_test(conditional_mutual_information_from_counts(table), int(table.sum()),
                   (card_x - 1) * (card_y - 1) * card_c, card_x * card_y * card_c, alpha)


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


# ---------------------------------------------------------------- dependence derivatives (paper 004)


def dependence_derivative_information_from_counts(n_xyc: np.ndarray) -> float:
    """Zhang's I_D(X;Y|C) (paper 004, eq. 17; eq. 18-19 for more than two classes) from N(x, y, c).

    With d_c(x, y) = ln p(x|y,c)/p(x|c) = ln p(x,y|c)/(p(x|c) p(y|c)):
    two classes: sum over (x, y) of p(x, y) (d_+ - d_-)^2 (eq. 17);
    more: sum over (x, y, c) of p(x, y) (d_c - Avg)^2 with Avg the mean of d_c over the
    classes at that (x, y) (eq. 19 read per cell, so that for two classes eq. 18 is half of
    eq. 17). p(x, y) is the observed frequency; p(x, y|c) is Laplace-smoothed per cell,
    (N(x,y,c) + 1) / (N(c) + |X||Y|), and p(x|c), p(y|c) are its marginals, which keeps
    I_D symmetric. A class with no rows is left out; fewer than two classes give 0.
    """
    n = np.asarray(n_xyc, dtype=np.float64)
    total = n.sum()
    n_c = n.sum(axis=(0, 1))
    present = n_c > 0
    if total <= 0 or np.count_nonzero(present) < 2:
        return 0.0
    two_classes = n.shape[2] == 2
    n = n[:, :, present]
    p = (n + 1.0) / (n_c[present] + n.shape[0] * n.shape[1])
    d = np.log(p) - np.log(p.sum(axis=1, keepdims=True)) - np.log(p.sum(axis=0, keepdims=True))
    if two_classes:
        spread = (d[:, :, 0] - d[:, :, 1]) ** 2
    else:
        spread = ((d - d.mean(axis=2, keepdims=True)) ** 2).sum(axis=2)
    return float(np.sum(n.sum(axis=2) * spread) / total)


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
    (``add``) gives exactly the tables, and so the figures, of the whole file in memory."""

    cards: tuple[int, ...]
    n_classes: int
    class_feature: list[np.ndarray]
    pairs: dict[tuple[int, int], np.ndarray]

    @staticmethod
    def of(X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int) -> "PairStatistics":
        cols = feature_columns(X)
        cards = tuple(int(c) for c in cards)
        class_feature = [joint_counts([cols[i], y], [cards[i], n_classes]) for i in range(len(cards))]
        pairs = {(i, j): table for i, j, table in pairwise_class_counts(X, y, cards, n_classes)}
        return PairStatistics(cards, n_classes, class_feature, pairs)

    def add(self, other: "PairStatistics") -> None:
        """Add the counts of other rows, in place."""
        for mine, theirs in zip(self.class_feature, other.class_feature):
            mine += theirs
        for key, table in other.pairs.items():
            self.pairs[key] += table

    def class_mi(self) -> np.ndarray:
        """I(Xi;C) for every feature, in nats."""
        return np.array([mutual_information_from_counts(t) for t in self.class_feature], dtype=np.float64)

    def pair_matrix(self, statistic: Callable[[np.ndarray], float]) -> np.ndarray:
        """Symmetric (n, n) matrix of ``statistic`` over each pair's available-case N(xi, xj, c)."""
        n = len(self.cards)
        out = np.zeros((n, n), dtype=np.float64)
        for (i, j), table in self.pairs.items():
            out[i, j] = out[j, i] = statistic(table[1:, 1:, 1:])
        return out

    def cmi_matrix(self) -> np.ndarray:
        """I(Xi;Xj|C), symmetric, zero diagonal, in nats."""
        return self.pair_matrix(conditional_mutual_information_from_counts)


PAIR_TABLE_CELLS = 1 << 16  # cells of one joint table of two feature groups and the class (int64: 512 KiB)
TABLE_ROWS_PER_CELL = 4  # and at most one cell per 4 rows: summing the tables out stays cheaper than counting
ROW_CHUNK = 1 << 15  # rows counted per bincount: their int64 codes (256 KiB) stay in cache beside the table


def pairwise_class_counts(
    X: np.ndarray, y: np.ndarray, cards: Sequence[int], n_classes: int
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
    stays alone, one pair per pass. The bincounts run over ``ROW_CHUNK`` rows at a time so
    their codes stay in cache. O(n^2 (m + T) / g^2) for groups of g columns.
    """
    m, n = X.shape
    if n < 2:
        return
    cols = feature_columns(X)
    ext = [int(c) + 1 for c in cards]
    ext_c = n_classes + 1
    groups = _feature_groups(ext, ext_c, min(PAIR_TABLE_CELLS, max(m // TABLE_ROWS_PER_CELL, 1)))
    sizes = [math.prod(ext[i] for i in g) for g in groups]
    y1 = np.asarray(y, dtype=np.int64) + 1
    # per group: its shifted joint code, and the same with the class as the last (fastest) axis
    codes = [_narrow(_shifted_codes([cols[i] for i in g], [cards[i] for i in g]), size)
             for g, size in zip(groups, sizes)]
    with_class = [_narrow(code * np.int64(ext_c) + y1, size * ext_c) for code, size in zip(codes, sizes)]
    buffer = np.empty(min(m, ROW_CHUNK), dtype=np.int64)

    def joint(a: int, b: int | None) -> np.ndarray:
        """Counts over (group a's columns, group b's columns, class), each axis shifted; b None: (a's, class)."""
        if b is None:
            shape = (*(ext[i] for i in groups[a]), ext_c)
            return np.bincount(with_class[a], minlength=sizes[a] * ext_c).reshape(shape)
        stride = sizes[b] * ext_c
        table = np.zeros(sizes[a] * stride, dtype=np.int64)
        for start in range(0, m, ROW_CHUNK):
            stop = min(m, start + ROW_CHUNK)
            chunk = buffer[:stop - start]
            np.multiply(codes[a][start:stop], stride, out=chunk, dtype=np.int64)
            chunk += with_class[b][start:stop]
            table += np.bincount(chunk, minlength=table.size)
        return table.reshape(*(ext[i] for i in groups[a]), *(ext[i] for i in groups[b]), ext_c)

    def pairs(table: np.ndarray, columns: list[int], among: list[tuple[int, int]]
              ) -> Iterator[tuple[int, int, np.ndarray]]:
        """Sum ``table`` (axes: ``columns``, then the class) down to each pair of axes (p, q) in ``among``."""
        every = range(len(columns))
        for p, q in among:
            yield columns[p], columns[q], table.sum(axis=tuple(a for a in every if a not in (p, q)))

    def inside(g: list[int], offset: int = 0) -> list[tuple[int, int]]:
        return [(offset + p, offset + q) for q in range(len(g)) for p in range(q)]

    if len(groups) == 1:
        yield from pairs(joint(0, None), groups[0], inside(groups[0]))
        return
    last = len(groups) - 1
    for a in range(last):
        for b in range(a + 1, len(groups)):
            table = joint(a, b)
            columns = groups[a] + groups[b]
            among = [(p, len(groups[a]) + q) for p in range(len(groups[a])) for q in range(len(groups[b]))]
            if b == a + 1:  # group a's first table: its inner pairs too
                among += inside(groups[a])
            if a == 0 and b == last:  # the last group's only table with group 0
                among += inside(groups[b], len(groups[a]))
            yield from pairs(table, columns, among)


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


def _narrow(codes: np.ndarray, size: int) -> np.ndarray:
    """``codes`` (in [0, size)) in the smallest unsigned integer type that holds them."""
    return codes.astype(np.min_scalar_type(max(size - 1, 0)), copy=False)


# ---------------------------------------------------------------- functional dependencies (paper 001)


def functional_dependency_matrix(X: np.ndarray, cards: Sequence[int], min_count: int) -> np.ndarray:
    """(n, n) bool, ``D[a, b]``: Xa functionally determines Xb at support ``min_count`` (paper 001).

    Paper 001 infers the value-level FD xa -> xb when Count(xa) = Count(xa, xb) >= l. Here
    Xa -> Xb holds when that criterion holds for every value xa that occurs (over the rows
    where both are present), i.e. each observed value of Xa occurs at least ``min_count``
    times and always with one and the same value of Xb. Needs at least one such row; the
    diagonal is False. One bincount per pair: O(n^2 (m + v^2)).
    """
    m, n = X.shape
    ext = [int(c) + 1 for c in cards]
    cols = [np.where(X[:, i] < 0, ext[i] - 1, X[:, i]).astype(np.int64) for i in range(n)]
    out = np.zeros((n, n), dtype=bool)
    for j in range(1, n):
        for i in range(j):
            table = np.bincount(cols[i] * ext[j] + cols[j], minlength=ext[i] * ext[j]).reshape(ext[i], ext[j])
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


# ---------------------------------------------------------------- K2 score, Info-AS metrics


def cooper_herskovits_from_counts(counts: np.ndarray) -> float:
    """log of the Cooper–Herskovits (K2) family score from counts N(x, pa), node on axis 0.

    Σ_j [log Γ(r) − log Γ(N_j + r)] + Σ_jk log Γ(N_jk + 1) with r = |X| and j over the
    parent configurations (the other axes, flattened); an unseen configuration adds 0.
    Cooper & Herskovits 1992, eq. (8) with uniform priors. O(cells).
    """
    n = np.asarray(counts, dtype=np.float64)
    r = n.shape[0]
    n = n.reshape(r, -1)
    return float(np.sum(gammaln(r) - gammaln(n.sum(axis=0) + r)) + np.sum(gammaln(n + 1.0)))


def occurring_instantiations(columns: Sequence[np.ndarray]) -> tuple[np.ndarray, int]:
    """Codes 0..s-1 of the distinct joint values of ``columns`` that occur, -1 where any is missing.

    s counts only the instantiations present in the data (at most the number of rows),
    so any number of columns can be joined without a product-sized table; codes follow the
    lexicographic order of the values. O(k m log m) for k columns of m rows.
    """
    if not columns:
        raise ValueError("occurring_instantiations needs the row count: pass at least one column")
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    present = np.ones(cols[0].shape[0], dtype=bool)
    for c in cols:
        present &= c >= 0
    codes = np.full(cols[0].shape[0], -1, dtype=np.int64)
    joined = np.zeros(int(present.sum()), dtype=np.int64)
    for c in cols:
        values = c[present]
        card = int(values.max()) + 1 if values.size else 1
        _, joined = np.unique(joined * card + values, return_inverse=True)  # compact: < rows
    codes[present] = joined.reshape(-1)
    return codes, (int(joined.max()) + 1 if joined.size else 0)


GAIN_FLOOR = 1e-12  # nats; a conditional gain at or below this is rounding noise and counts as 0


def _xlogx(n: np.ndarray) -> float:
    n = n[n > 0]
    return float(np.sum(n * np.log(n)))


def conditional_information_metrics(counts: np.ndarray) -> tuple[float, float, float]:
    """(CIG, CGR, CDC) of an attribute A given a set Δ, from counts N(c, a, l) (paper 002, Defs 4.1–4.3).

    Axis 2 runs over the instantiations l of Δ (only occurring ones need a layer). With
    p_l = N_l / N and the per-layer entropies H_C_l, H_A_l, H_Cell_l (eqs. 3–5):
    CIG = Σ p_l (H_C_l + H_A_l − H_Cell_l) = I(C;A|Δ); CGR = CIG / Σ p_l H_A_l;
    CDC = 1 − d_N = CIG / Σ p_l H_Cell_l; a ratio with a zero denominator is 0 (the
    paper's footnote 3), and CIG ≤ GAIN_FLOOR counts as 0. Nats. O(cells).
    """
    n = np.asarray(counts, dtype=np.float64)
    total = n.sum()
    if total <= 0:
        return 0.0, 0.0, 0.0
    layers = _xlogx(n.sum(axis=(0, 1)))
    h_c = (layers - _xlogx(n.sum(axis=1))) / total  # Σ_l p_l H_C_l
    h_a = (layers - _xlogx(n.sum(axis=0))) / total  # Σ_l p_l H_A_l
    h_cell = (layers - _xlogx(n)) / total  # Σ_l p_l H_Cell_l
    gain = h_c + h_a - h_cell
    if gain <= GAIN_FLOOR:
        return 0.0, 0.0, 0.0
    return gain, (gain / h_a if h_a > 0 else 0.0), (gain / h_cell if h_cell > 0 else 0.0)


# ---------------------------------------------------------------- decomposable family scores


def family_log_likelihood(counts: np.ndarray) -> float:
    """Maximised log-likelihood Σ N(x, u) log(N(x, u) / N(u)) of a family from its counts,
    the child on the last axis and every parent configuration u on the others. Nats."""
    n = np.asarray(counts, dtype=np.float64)
    return _xlogx(n) - _xlogx(n.sum(axis=-1))


def bic_penalty(rows: int, child_states: int, parent_configurations: int) -> float:
    """BIC's (log m / 2) per free parameter: (r - 1) free probabilities per parent configuration."""
    return 0.5 * math.log(max(rows, 1)) * (child_states - 1) * parent_configurations


class ColumnGroups:
    """The feature columns joined into consecutive groups (``_feature_groups``), each as one
    shifted joint code, so that one bincount counts a context against several columns.

    ``counts(context, size)`` gives N(context, x_j) for every column j, each column's
    missing state first: the structure searches count a family's configurations (the
    context, ``size`` values) against every candidate parent this way, a pass over the rows
    per group instead of per column. A group whose table would exceed ``cells`` (or one
    cell per ``TABLE_ROWS_PER_CELL`` rows) is counted column by column.
    """

    def __init__(self, X: np.ndarray, cards: Sequence[int], group_cells: int = 1 << 7) -> None:
        cols = feature_columns(X)
        self.rows = int(X.shape[0])
        self.ext = [int(c) + 1 for c in cards]
        self.groups = _feature_groups(self.ext, 1, group_cells * group_cells)
        self.sizes = [math.prod(self.ext[i] for i in g) for g in self.groups]
        self.columns = [_narrow(cols[i].astype(np.int64) + 1, e) for i, e in enumerate(self.ext)]
        self.codes = [self.columns[g[0]] if len(g) == 1 else
                      _narrow(_shifted_codes([cols[i] for i in g], [self.ext[i] - 1 for i in g]), size)
                      for g, size in zip(self.groups, self.sizes)]

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
                    yield j, np.bincount(joined, minlength=size * self.ext[j]).reshape(size, self.ext[j])
                continue
            table = np.bincount(context * group_size + code, minlength=size * group_size)
            table = table.reshape(size, *(self.ext[j] for j in group))
            for p in wanted:
                yield group[p], table.sum(axis=tuple(1 + a for a in range(len(group)) if a != p))
