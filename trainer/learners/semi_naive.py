"""Semi-naive Bayes: BSEJ (Pazzani 1996) and the augmented semi-naive Bayes ASB (paper 003).

A semi-naive Bayes partitions a subset of the features into groups S_1..S_K and models
P(c, x) = P(c) prod_j P(x_Sj | c). A group is published as a clique (its members in
column order, each with the class and the earlier members as parents), which gives
exactly P(x_Sj | c); see ``search.groups`` for the representation and its caveats.

- ``bsej``: backward sequential elimination and joining, a wrapper. Start from the naive
  Bayes over every feature; each step scores, by 5-fold stratified CV accuracy
  (``search.wrapper``), every removal of one feature (from whatever group holds it;
  the rest of the group stays joined, as in bnclassify) and every join of two groups;
  take the best if it strictly improves the accuracy, else stop (paper 003, section 3).
  Ties: removals before joins, removals by column, joins by the groups' positions.
- ``asb``: BSEJ, then Algorithm 1: a maximum-weight forest (Kruskal) over the groups,
  on the pairs whose χ² test of conditional independence given the class (on the joined
  columns) is reliable, N / (r_Si r_Sj r_C) >= 5, and rejects at ``alpha``, weighted by
  I(X_Si; X_Sj | C); each tree rooted at its group with the largest I(X_S; C) (the paper
  picks at random); an arc S_i -> S_j makes every member of S_i a parent of every member
  of S_j, so the group's factor is P(x_Sj | c, x_Si).

Guard (not in the papers): a join whose group would have more joint states times classes
than the training limits' cell limit (``sizing.allows``, ``--max-cpt-cells``) is not a
candidate, so a search on many-valued features cannot allocate a table beyond memory; such
a CPT would hold far more cells than rows anyway.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners import sizing
from bnserve.trainer.learners.base import CROSS_VALIDATES, Learned, Learner
from bnserve.trainer.learners.search.greedy import SearchResult, greedy_search
from bnserve.trainer.learners.search.groups import Group, augmenting_forest, canonical, grouped_parents
from bnserve.trainer.learners.search.wrapper import WRAPPER_FOLDS, CrossValidatedAccuracy
from bnserve.trainer.learners.selective import ALPHA
from bnserve.trainer.learners.structure import Structure

Groups = tuple[Group, ...]


def bsej_search(data: EncodedData) -> SearchResult[Groups]:
    """Pazzani's BSEJ from the naive Bayes over all features; the state is the canonical
    tuple of groups (``search.groups.canonical``). Each step has at most n removals and
    K(K-1)/2 joins; there are at most 2n - 1 steps (each removes a feature or a group),
    each candidate one wrapper score: O(n^3 · 5 (m n + compile)) in the worst case."""
    names = [v.name for v in data.features]
    cards = data.cards
    score = CrossValidatedAccuracy(data)

    def moves(groups: Groups) -> Iterator[tuple[dict[str, Any], Groups]]:
        for g, members in enumerate(groups):  # removals, in column order (groups are canonical)
            for i in members:
                rest = tuple(j for j in members if j != i)
                yield {"op": "remove", "feature": names[i]}, canonical((*groups[:g], rest, *groups[g + 1 :]))
        states = [math.prod(cards[i] for i in members) for members in groups]
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                if not sizing.allows(states[a] * states[b] * data.n_classes):
                    continue
                joined = (*groups[:a], groups[a] + groups[b], *groups[a + 1 : b], *groups[b + 1 :])
                yield (
                    {"op": "join", "groups": [[names[i] for i in groups[a]], [names[i] for i in groups[b]]]},
                    canonical(joined),
                )

    start = canonical((i,) for i in range(len(names)))
    return greedy_search(start, moves, lambda groups: score(grouped_parents(data, groups)))


def bsej(data: EncodedData) -> Learned:
    """BSEJ structure. ``order``: the model's features, group by group; no scores (the
    accepted moves and their CV accuracies are in the metadata's ``search``)."""
    result = bsej_search(data)
    groups = result.state
    structure = Structure(grouped_parents(data, groups), _flat(data, groups, range(len(groups))))
    return Learned.single(structure, data, groups=_names(data, groups), search=_search(result))


def asb(data: EncodedData, alpha: float) -> Learned:
    """BSEJ, then the augmenting forest over its groups. ``order``: groups as the forest
    visits them (each tree's root, then breadth-first), members in column order; no
    scores. The forest costs O(K^2 m + K^2 log K) on top of BSEJ, each test's table having
    at most m / 5 cells."""
    result = bsej_search(data)
    groups = result.state
    forest = augmenting_forest(data, groups, alpha)
    names = _names(data, groups)
    structure = Structure(grouped_parents(data, groups, forest.arcs), _flat(data, groups, forest.order))
    return Learned.single(
        structure,
        data,
        groups=names,
        search=_search(result),
        forest={
            "tested_pairs": forest.tested,
            "significant_pairs": len(forest.edges),
            "arcs": [[names[a], names[b]] for a, b in forest.arcs],
            "weights": [forest.edges[(min(a, b), max(a, b))] for a, b in forest.arcs],
        },
    )


def _names(data: EncodedData, groups: Groups) -> list[list[str]]:
    return [[data.features[i].name for i in members] for members in groups]


def _flat(data: EncodedData, groups: Groups, order: Iterable[int]) -> tuple[str, ...]:
    return tuple(data.features[i].name for g in order for i in groups[g])


def _search(result: SearchResult[Groups]) -> dict[str, Any]:
    return {
        "folds": WRAPPER_FOLDS,
        "accuracy": result.score,
        "evaluated": result.evaluated,
        "moves": list(result.trace),
    }


LEARNERS = (
    Learner(
        "bsej",
        bsej,
        "semi-naive Bayes by backward sequential elimination and joining on 5-fold CV accuracy (Pazzani 1996)",
        unweighted=CROSS_VALIDATES,
    ),
    Learner(
        "asb",
        asb,
        "augmented semi-naive Bayes: BSEJ plus a maximum-weight forest over its groups' "
        "significant I(X_Si;X_Sj|C) (paper 003)",
        (ALPHA,),
        unweighted=CROSS_VALIDATES,
    ),
)
