"""Groups of features as a DAG, and the augmenting forest over them (paper 003): what the
selective and semi-naive learners (STAN, BSEJ, ASB, FSS, FFSS) publish.

- ``grouped_parents(data, groups, arcs)``: the DAG of a semi-naive Bayes augmented by
  arcs between its groups (below).
- ``augmenting_forest(data, groups, alpha)``: paper 003's Algorithm 1, lines 3-13: edges
  between groups of features whose χ² test of conditional independence given the class
  is reliable and rejects, weighted by I(X_Si; X_Sj | C); a maximum-weight forest
  (``spanning``); each tree rooted at its group with the largest I(X_S; C), arcs
  directed away. STAN runs it on single features, ASB on BSEJ's joined groups.

Representation of groups in the DAG (the model contract has no compound nodes). A
group S = (s1, ..., sk), members in ascending column order, is a clique: s_t has the
class and s1..s(t-1) as parents, so the product of its members' CPTs is
P(s1 | c) P(s2 | c, s1) ... P(sk | c, s1..s(k-1)) = P(x_S | c) (paper 003, eq. 1).
An arc S_i -> S_j between groups makes every member of S_i a parent of every member of
S_j (Algorithm 1, lines 14-16): a member of S_j has the parents (class, *S_i, earlier
members of S_j), and the product over S_j is P(x_Sj | c, x_Si). Two caveats, both from
estimating each node's CPT on its own (``bnserve.trainer.learners.parameters``): with
Laplace smoothing the chain of per-member estimates is not the Laplace estimate of the
joint table (it is the same at maximum likelihood), and with missing values each factor
counts the rows where its own family is present.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.search.spanning import maximum_spanning_forest

Group = tuple[int, ...]  # feature column indices, ascending


# ------------------------------------------------------------------ groups as a DAG


def canonical(groups: Iterable[Iterable[int]]) -> tuple[Group, ...]:
    """Non-empty groups with members ascending, ordered by their first member."""
    members = (tuple(sorted(int(i) for i in g)) for g in groups)
    return tuple(sorted(g for g in members if g))


def grouped_parents(
    data: EncodedData, groups: Sequence[Group], arcs: Sequence[tuple[int, int]] = ()
) -> dict[str, tuple[str, ...]]:
    """Parents by name of the class (none) and of every member of ``groups`` (see the
    module docstring): class, then the members of the parent group (``arcs`` holds
    (parent group, child group) index pairs; at most one parent group each), then the
    earlier members of the node's own group. Features in no group are left out. O(n^2)."""
    names = [v.name for v in data.features]
    cls = data.class_variable.name
    above: dict[int, int] = {}
    for parent, child in arcs:
        if child in above or parent == child:
            raise ValueError(f"group {child} cannot take group {parent} as a second or own parent")
        above[child] = parent
    parents: dict[str, tuple[str, ...]] = {cls: ()}
    for g, members in enumerate(groups):
        from_parent = tuple(names[i] for i in groups[above[g]]) if g in above else ()
        for t, i in enumerate(members):
            parents[names[i]] = (cls, *from_parent, *(names[j] for j in members[:t]))
    return parents


# ------------------------------------------------------------------ the augmenting forest


@dataclass(frozen=True)
class Forest:
    """The χ²-filtered maximum-weight forest over groups.

    ``edges``: every pair (i, j), i < j, whose test was reliable and rejected, with its
    weight I(X_Si; X_Sj | C) in nats (the candidates the forest was chosen from);
    ``tested``: pairs tested (the others had too few rows per cell to be reliable, so were
    skipped); ``arcs``: the forest's (parent, child) group pairs; ``order``: groups as
    added (each tree's root, then its groups as the maximum-weight tree grew, trees by
    their roots' rank); ``roots``: one per tree (every group without a parent, isolated
    groups included); ``scores``: I(X_S; C) for a root, else the weight of the edge that
    reached the group.
    """

    edges: dict[tuple[int, int], float]
    tested: int
    arcs: tuple[tuple[int, int], ...]
    order: tuple[int, ...]
    roots: tuple[int, ...]
    scores: tuple[float, ...]


def augmenting_forest(data: EncodedData, groups: Sequence[Group], alpha: float = stats.ALPHA) -> Forest:
    """Paper 003, Algorithm 1, lines 3-13, on the joined columns of ``groups``.

    A pair is tested only if rows / (r_Si · r_Sj · r_C) >= 5 (else the test cannot be
    reliable: independence is assumed, no edge, and no table is built). Roots: the group
    with the largest I(X_S; C) in each tree (the paper picks at random; the likelihood
    does not depend on the root). O(K^2 m) for the tests, O(K^2) for the forest, for K
    groups and m rows; each test's table has at most m / 5 cells.
    """
    k = len(groups)
    joined = [stats.joint_column([data.X[:, i] for i in g], [data.cards[i] for i in g]) for g in groups]
    edges: dict[tuple[int, int], float] = {}
    tested = 0
    max_cells = data.total_weight() / stats.MIN_EXPECTED_PER_CELL
    for i in range(k):
        for j in range(i + 1, k):
            if joined[i][1] * joined[j][1] * data.n_classes > max_cells:
                continue
            tested += 1
            test = stats.conditional_independence_test(
                joined[i][0], joined[j][0], data.y, joined[i][1], joined[j][1], data.n_classes, alpha, data.weights
            )
            if test.rejects_independence:
                edges[(i, j)] = test.statistic / (2.0 * test.n)  # G = 2 N I(X_Si; X_Sj | C)
    weights = np.full((k, k), -np.inf)
    for (i, j), weight in edges.items():
        weights[i, j] = weights[j, i] = weight
    rank = np.array(
        [stats.mutual_information(codes, data.y, card, data.n_classes, data.weights) for codes, card in joined]
    )
    forest = maximum_spanning_forest(weights, rank)
    return Forest(edges, tested, forest.arcs, forest.order, forest.roots, forest.gains)
