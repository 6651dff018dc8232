"""TAN (Friedman, Geiger & Goldszmidt): a Chow-Liu tree over the features, weighted by I(Xi;Xj|C),
and Zhang's ddr-ChowLiu (paper 004), the same tree weighted by I_D(Xi;Xj|C).

The root is the feature with the largest I(X;C); arcs point away from it; the class is a
parent of every feature.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import Learner
from bnserve.trainer.learners.structure import TIE_DECIMALS, Structure, ranked


def maximum_spanning_tree(weights: np.ndarray, root: int) -> tuple[list[int], list[int], list[float]]:
    """Prim's algorithm on a dense symmetric (n, n) weight matrix, grown from ``root``.

    Returns (order added, parent of each node or -1 for the root, weight of the edge that
    added each node in order, 0 for the root). Ties: the lower child index, then the lower
    parent index. O(n^2).
    """
    n = weights.shape[0]
    w = np.round(weights, TIE_DECIMALS)
    parent = np.full(n, -1, dtype=np.intp)
    best = np.full(n, -np.inf)
    in_tree = np.zeros(n, dtype=bool)
    order: list[int] = []
    gains: list[float] = []
    node = root
    for step in range(n):
        if step:
            out = np.flatnonzero(~in_tree)
            node = int(out[np.argmax(best[out])])  # argmax returns the first, i.e. lowest index
            gains.append(float(weights[parent[node], node]))
        else:
            gains.append(0.0)
        in_tree[node] = True
        order.append(node)
        closer = ~in_tree & ((w[node] > best) | ((w[node] == best) & (node < parent)))
        best[closer] = w[node][closer]
        parent[closer] = node
    return order, [int(p) for p in parent], gains


def tan(data: EncodedData) -> Structure:
    """TAN structure; ``scores``: I(root;C) for the root, then the weight of the edge that added each feature.

    O(n^2 m) for the CMI matrix (one bincount per pair), O(n^2) for the tree.
    """
    return tree_augmented(data, stats.conditional_mutual_information_from_counts)


def tan_ddr(data: EncodedData) -> Structure:
    """ddr-ChowLiu (paper 004, section 5): TAN with edge weights I_D(Xi;Xj|C) (eq. 17, eq. 18-19 for
    more than two classes; ``stats.dependence_derivative_information_from_counts``) instead of
    I(Xi;Xj|C). The paper leaves the root open; it is TAN's. ``scores`` as for ``tan``, the
    edge weights being I_D. O(n^2 (m + v^2 c)) for the weights, O(n^2) for the tree.
    """
    return tree_augmented(data, stats.dependence_derivative_information_from_counts)


def tree_augmented(data: EncodedData, edge_weight: Callable[[np.ndarray], float]) -> Structure:
    """The class over every feature plus a maximum spanning tree whose edge weights are
    ``edge_weight(N(xi, xj, c))``, rooted at the feature with the largest I(X;C)."""
    n = len(data.features)
    if n == 0:
        return Structure.augmented(data, [], [])
    mi = data.statistics.class_mi()
    weights = data.statistics.pair_matrix(edge_weight)
    root = int(ranked(mi, range(n))[0])
    order, parent, gains = maximum_spanning_tree(weights, root)
    gains[0] = float(mi[root])
    return Structure.augmented(data, [(p,) if p >= 0 else () for p in parent], order, gains)


LEARNERS = (
    Learner("tan", tan, "tree-augmented naive Bayes: Chow-Liu tree on I(Xi;Xj|C)"),
    Learner("tan-ddr", tan_ddr, "ddr-ChowLiu (Zhang 2005, paper 004): TAN tree on the dependence weight I_D"),
)
