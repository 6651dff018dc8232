"""TAN (Friedman, Geiger & Goldszmidt 1997): a Chow-Liu tree over the features, weighted by
I(Xi;Xj|C), and Zhang's ddr-ChowLiu (paper 004), the same tree weighted by I_D(Xi;Xj|C).

The root is the feature with the largest I(X;C); arcs point away from it
(``search.spanning``); the class is a parent of every feature.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners.base import Learner
from bnserve.trainer.learners.search.spanning import maximum_spanning_forest
from bnserve.trainer.learners.structure import Structure


def tan(data: TrainingView) -> Structure:
    """TAN structure; ``scores``: I(root;C) for the root, then the weight of the edge that added each feature.

    O(n^2 m) for the CMI matrix (the pairwise counts), O(n^2) for the tree.
    """
    return tree_augmented(data, stats.conditional_mutual_information_from_counts)


def tan_ddr(data: TrainingView) -> Structure:
    """ddr-ChowLiu (paper 004, section 5): TAN with edge weights I_D(Xi;Xj|C) (eq. 17, eq. 18-19 for
    more than two classes; ``stats.dependence_derivative_information_from_counts``) instead of
    I(Xi;Xj|C). The paper leaves the root open; it is TAN's. ``scores`` as for ``tan``, the
    edge weights being I_D. O(n^2 (m + v^2 c)) for the weights, O(n^2) for the tree.
    """
    return tree_augmented(data, stats.dependence_derivative_information_from_counts)


def tree_augmented(data: TrainingView, edge_weight: Callable[[np.ndarray], float]) -> Structure:
    """The class over every feature plus a maximum spanning tree whose edge weights are
    ``edge_weight(N(xi, xj, c))``, rooted at the feature with the largest I(X;C)."""
    n = len(data.features)
    if n == 0:
        return Structure.augmented(data, [], [])
    tree = maximum_spanning_forest(data.statistics.pair_matrix(edge_weight), data.statistics.class_mi())
    return Structure.augmented(data, [(p,) if p >= 0 else () for p in tree.parent], tree.order, tree.gains)


LEARNERS = (
    Learner("tan", tan, "tree-augmented naive Bayes: Chow-Liu tree on I(Xi;Xj|C)", unweighted=""),
    Learner(
        "tan-ddr",
        tan_ddr,
        "ddr-ChowLiu (Zhang 2005, paper 004): TAN tree on the dependence weight I_D",
        unweighted="",
    ),
)
