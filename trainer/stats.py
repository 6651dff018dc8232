"""Sufficient statistics every learner uses: counts, entropy, MI, CMI, Laplace CPTs, χ² tests.

Columns are integer codes, -1 = missing. Counting is available-case: a count over a set
of variables uses the rows where all of them are present. Information is in nats.
All counting is ``np.bincount`` over flat codes; nothing loops over rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.special import gammaln
from scipy.stats import chi2


def joint_counts(columns: Sequence[np.ndarray], cards: Sequence[int]) -> np.ndarray:
    """Contingency table N(v1, ..., vk) with shape ``tuple(cards)``, over rows where all are present."""
    cols = [np.asarray(c) for c in columns]
    shape = tuple(int(c) for c in cards)
    if not cols:
        raise ValueError("joint_counts needs at least one column")
    present = np.ones(cols[0].shape[0], dtype=bool)
    for c in cols:
        present &= c >= 0
    if not present.all():
        cols = [c[present] for c in cols]
    codes = np.ravel_multi_index([c.astype(np.intp, copy=False) for c in cols], shape)
    return np.bincount(codes, minlength=math.prod(shape)).reshape(shape)


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
    """I(Xi;C) for every feature column of ``X`` (rows, n): shape (n,), in nats."""
    return np.array(
        [mutual_information(X[:, i], y, cards[i], n_classes) for i in range(X.shape[1])], dtype=np.float64
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
    counts = joint_counts(columns, cards).astype(np.float64)
    return (counts + 1.0) / (counts.sum(axis=0, keepdims=True) + cards[0])


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
    """Symmetric (n, n) matrix of ``statistic(N(xi, xj, c))`` over available-case tables, zero diagonal.

    A missing value is counted in an extra state that is sliced off (no mask per pair).
    """
    m, n = X.shape
    ext = [int(c) + 1 for c in cards]
    cols = [np.where(X[:, i] < 0, ext[i] - 1, X[:, i]).astype(np.int64) for i in range(n)]
    ext_c = n_classes + 1
    yc = np.where(y < 0, n_classes, y).astype(np.int64)
    out = np.zeros((n, n), dtype=np.float64)
    for j in range(1, n):
        yj = cols[j] * ext_c + yc
        stride = ext[j] * ext_c
        for i in range(j):
            table = np.bincount(cols[i] * stride + yj, minlength=ext[i] * stride).reshape(ext[i], ext[j], ext_c)
            out[i, j] = out[j, i] = statistic(table[:-1, :-1, :-1])
    return out


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
