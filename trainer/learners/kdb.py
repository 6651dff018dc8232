"""k-dependence Bayesian classifiers: KDB (Sahami 1996) and flexible KDB (FKDB, paper 001).

Both give every feature the class as a parent and at most k feature parents chosen among
the features added before it, by I(Xi;Xj|C). They differ in the order: KDB fixes it by
I(X;C) first; FKDB builds it greedily from I(X;C) plus the CMI to the chosen parents.
Ties go to the lower column index.
"""

from __future__ import annotations

import numpy as np

from trainer import stats
from trainer.data import EncodedData
from trainer.learners.base import Learner, Param, non_negative_int
from trainer.learners.structure import Structure, ranked


def kdb_structure(mi: np.ndarray, cmi: np.ndarray, k: int) -> tuple[list[int], list[list[int]], list[float]]:
    """Sahami's steps 5.1-5.5 on precomputed I(Xi;C) (n,) and I(Xi;Xj|C) (n, n).

    Returns (order, feature parents per column, I(X;C) of each feature in order). O(n^2 log n).
    """
    n = mi.shape[0]
    order = [int(i) for i in ranked(mi, range(n))]
    parents: list[list[int]] = [[] for _ in range(n)]
    for pos, i in enumerate(order):
        m = min(pos, k)
        parents[i] = [int(j) for j in ranked(cmi[i], order[:pos])[:m]]
    return order, parents, [float(mi[i]) for i in order]


def fkdb_structure(mi: np.ndarray, cmi: np.ndarray, k: int) -> tuple[list[int], list[list[int]], list[float]]:
    """Paper 001, Algorithm 1, on precomputed I(Xi;C) (n,) and I(Xi;Xj|C) (n, n).

    The root maximises I(Xi;C); then each step adds the Xi not in S that maximises
    I(Xi;C) + the sum of its q = min(|S|, k) largest I(Xi;Xj|C) over Xj in S, and those q
    become its parents. Returns (order, feature parents per column, the winning score at
    each step; I(root;C) first). O(n^2 (n + log n)).
    """
    n = mi.shape[0]
    if n == 0:
        return [], [], []
    root = int(ranked(mi, range(n))[0])
    order, scores = [root], [float(mi[root])]
    parents: list[list[int]] = [[] for _ in range(n)]
    chosen = np.zeros(n, dtype=bool)
    chosen[root] = True
    while len(order) < n:
        q = min(len(order), k)
        rest = np.flatnonzero(~chosen)
        in_s = np.flatnonzero(chosen)
        top_q = -np.sort(-cmi[np.ix_(rest, in_s)], axis=1)[:, :q]
        score = np.full(n, -np.inf)
        score[rest] = mi[rest] + top_q.sum(axis=1)
        i = int(ranked(score, rest)[0])
        parents[i] = [int(j) for j in ranked(cmi[i], in_s)[:q]]
        chosen[i] = True
        order.append(i)
        scores.append(float(score[i]))
    return order, parents, scores


def kdb(data: EncodedData, k: int) -> Structure:
    """KDB structure; ``scores`` are I(X;C) in order. O(n^2 m) statistics + O(n^2 log n) search."""
    mi, cmi = _statistics(data)
    order, parents, scores = kdb_structure(mi, cmi, k)
    return Structure.augmented(data, parents, order, scores)


def fkdb(data: EncodedData, k: int) -> Structure:
    """FKDB structure; ``scores`` are the winning sums. O(n^2 m) statistics + O(n^3) search."""
    mi, cmi = _statistics(data)
    order, parents, scores = fkdb_structure(mi, cmi, k)
    return Structure.augmented(data, parents, order, scores)


def _statistics(data: EncodedData) -> tuple[np.ndarray, np.ndarray]:
    mi = stats.class_mutual_information(data.X, data.y, data.cards, data.n_classes)
    cmi = stats.conditional_mutual_information_matrix(data.X, data.y, data.cards, data.n_classes)
    return mi, cmi


K = Param("k", int, 2, "maximum number of feature parents per feature (default 2)", non_negative_int)

LEARNERS = (
    Learner("kdb", kdb, "k-dependence Bayesian classifier (Sahami 1996)", (K,)),
    Learner("fkdb", fkdb, "flexible k-dependence Bayesian classifier (paper 001)", (K,)),
)
