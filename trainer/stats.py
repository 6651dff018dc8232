"""Sufficient statistics every learner uses: counts, entropy, MI, CMI, Laplace CPTs, χ² tests.

Columns are integer codes, -1 = missing. Counting is available-case: a count over a set
of variables uses the rows where all of them are present. Information is in nats.
All counting is ``np.bincount`` over flat codes; nothing loops over rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
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

    One bincount per pair over m rows: O(n^2 m) time, O(m) extra memory. A missing value
    is counted in an extra state that is sliced off, which gives available-case counts
    without a mask per pair.
    """
    m, n = X.shape
    ext = [int(c) + 1 for c in cards]  # state card = "missing"
    cols = [np.where(X[:, i] < 0, ext[i] - 1, X[:, i]).astype(np.int64) for i in range(n)]
    ext_c = n_classes + 1
    yc = np.where(y < 0, n_classes, y).astype(np.int64)
    out = np.zeros((n, n), dtype=np.float64)
    for j in range(1, n):
        yj = cols[j] * ext_c + yc  # code of (xj, c), reused for every i < j
        stride = ext[j] * ext_c
        for i in range(j):
            codes = cols[i] * stride + yj
            table = np.bincount(codes, minlength=ext[i] * stride).reshape(ext[i], ext[j], ext_c)
            value = conditional_mutual_information_from_counts(table[:-1, :-1, :-1])
            out[i, j] = out[j, i] = value
    return out


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
