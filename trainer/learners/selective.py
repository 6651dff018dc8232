"""Selective classifiers of paper 003's comparison: FSS, FFSS (selective naive Bayes,
Langley & Sage 1994) and STAN (selective TAN, Blanco et al. 2005).

A feature left out is not a node of the model (``Structure.parents`` omits it).

- ``fss``: forward sequential selection, a wrapper: start from the class prior alone
  and add, one at a time, the feature whose naive Bayes has the highest 5-fold
  stratified CV accuracy (``search.wrapper``); stop when no addition strictly improves it.
- ``ffss``: filter forward selection: keep exactly the features whose χ² (G) test of
  independence from the class is reliable (N / cells >= 5) and rejects at ``alpha``; an
  unreliable test counts as independence (paper 003, section 6.1).
- ``stan``: the FFSS features, augmented by a maximum-weight forest (Kruskal) over the
  pairs whose χ² test of conditional independence given the class is reliable and
  rejects (paper 003 uses this test for STAN too), weighted by I(Xi; Xj | C); each tree
  is rooted at its feature with the largest I(X; C) (``search.groups.augmenting_forest``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.base import CROSS_VALIDATES, Learned, Learner, Param, probability
from bnserve.trainer.learners.search.greedy import greedy_search
from bnserve.trainer.learners.search.groups import Group, augmenting_forest, grouped_parents
from bnserve.trainer.learners.search.wrapper import WRAPPER_FOLDS, CrossValidatedAccuracy
from bnserve.trainer.learners.structure import Structure


def fss(data: EncodedData) -> Learned:
    """Forward sequential selection. ``order``: features in the order added; ``scores``: the
    CV accuracy reached by each addition. Candidates are tried in column order, so ties
    go to the lower column. At most n steps of at most n candidates, each one wrapper
    score (5 folds of estimate + predict, O(m·n)): O(n^2 · 5 (m n + compile)).
    """
    n = len(data.features)
    names = [v.name for v in data.features]
    score = CrossValidatedAccuracy(data)

    def add_one(selected: tuple[int, ...]) -> Iterator[tuple[dict[str, Any], tuple[int, ...]]]:
        for i in range(n):
            if i not in selected:
                yield {"op": "add", "feature": names[i]}, (*selected, i)

    nothing: tuple[int, ...] = ()
    result = greedy_search(nothing, add_one, lambda sel: score(_naive(data, sel)))
    order = result.state
    structure = Structure(
        _naive(data, order), tuple(names[i] for i in order), tuple(step["score"] for step in result.trace[1:])
    )
    return Learned.single(
        structure,
        data,
        selected=[names[i] for i in sorted(order)],
        wrapper={
            "folds": WRAPPER_FOLDS,
            "accuracy": result.score,
            "evaluated": result.evaluated,
            "start_accuracy": result.trace[0]["score"],
        },
    )


def ffss(data: EncodedData, alpha: float) -> Learned:
    """Filter selection. ``order``: kept features in column order; ``scores``: their tests'
    p-values. One G-test per feature: O(n (m + r c))."""
    kept, p_values = _filter(data, alpha)
    names = [v.name for v in data.features]
    structure = Structure(_naive(data, kept), tuple(names[i] for i in kept), tuple(p_values))
    return Learned.single(structure, data, selected=[names[i] for i in kept])


def stan(data: EncodedData, alpha: float) -> Learned:
    """Selective TAN. ``order``: the forest's visiting order (each tree's root, then
    breadth-first); ``scores``: I(root; C) for a root, else the I(Xi; Xj | C) of the
    edge that added the feature. O(n m) for the filter, O(n^2 m) for the pairwise
    tests, O(n^2 log n) for Kruskal."""
    kept, _ = _filter(data, alpha)
    names = [v.name for v in data.features]
    groups: list[Group] = [(i,) for i in kept]
    forest = augmenting_forest(data, groups, alpha)
    structure = Structure(
        grouped_parents(data, groups, forest.arcs), tuple(names[kept[g]] for g in forest.order), forest.scores
    )
    return Learned.single(
        structure,
        data,
        selected=[names[i] for i in kept],
        forest={
            "tested_pairs": forest.tested,
            "significant_pairs": len(forest.edges),
            "arcs": [[names[kept[a]], names[kept[b]]] for a, b in forest.arcs],
        },
    )


def _filter(data: EncodedData, alpha: float) -> tuple[tuple[int, ...], list[float]]:
    """Columns whose test of independence from the class is reliable and rejects, with p-values."""
    kept, p_values = [], []
    for i, card in enumerate(data.cards):
        test = stats.independence_test(data.X[:, i], data.y, card, data.n_classes, alpha, data.weights)
        if test.rejects_independence:
            kept.append(i)
            p_values.append(test.p_value)
    return tuple(kept), p_values


def _naive(data: EncodedData, columns: tuple[int, ...]) -> dict[str, tuple[str, ...]]:
    """The naive Bayes over ``columns`` only, as parents by name."""
    return grouped_parents(data, [(i,) for i in sorted(columns)])


ALPHA = Param(
    "alpha",
    float,
    stats.ALPHA,
    f"significance level of the χ² (G) tests of (conditional) independence (default {stats.ALPHA})",
    probability,
)

LEARNERS = (
    Learner(
        "fss",
        fss,
        "selective naive Bayes by forward selection on 5-fold CV accuracy (Langley & Sage 1994)",
        unweighted=CROSS_VALIDATES,
    ),
    Learner(
        "ffss",
        ffss,
        "selective naive Bayes: the features whose χ² test of independence from the class rejects",
        (ALPHA,),
        unweighted="",
    ),
    Learner(
        "stan",
        stan,
        "selective TAN: the FFSS features plus a maximum-weight forest over significant "
        "I(Xi;Xj|C) (Blanco et al. 2005)",
        (ALPHA,),
        unweighted="",
    ),
)
