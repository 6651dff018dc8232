"""Structure-search engines shared by the selective and semi-naive learners (paper 003).

- ``greedy_search(init, step, score)``: hill climbing over candidate structures, one loop
  for every wrapper learner; ``step`` generates the candidates of a state (FSS adds a
  feature, BSEJ removes one or joins two groups), like bnclassify's
  ``greedy_search(step = fssj_step | bsej_step)``.
- ``augmenting_forest(data, groups, alpha)``: paper 003's Algorithm 1, lines 3-13: edges
  between groups of features whose χ² test of conditional independence given the class
  is reliable and rejects, weighted by I(X_Si; X_Sj | C); a maximum-weight forest by
  Kruskal; each tree rooted at its group with the largest I(X_S; C), arcs directed away.
  STAN runs it on single features, ASB on BSEJ's joined groups.
- ``grouped_parents(data, groups, arcs)``: the DAG of a semi-naive Bayes augmented by
  arcs between its groups (below), which every learner here publishes.

Representation of groups in the DAG (the model contract has no compound nodes). A
group S = (s1, ..., sk), members in ascending column order, is a clique: s_t has the
class and s1..s(t-1) as parents, so the product of its members' CPTs is
P(s1 | c) P(s2 | c, s1) ... P(sk | c, s1..s(k-1)) = P(x_S | c) (paper 003, eq. 1).
An arc S_i -> S_j between groups makes every member of S_i a parent of every member of
S_j (Algorithm 1, lines 14-16): a member of S_j has the parents (class, *S_i, earlier
members of S_j), and the product over S_j is P(x_Sj | c, x_Si). Two caveats, both from
estimating each node's CPT on its own (``trainer.estimate``): with Laplace smoothing
the chain of per-member estimates is not the Laplace estimate of the joint table
(it is the same at maximum likelihood), and with missing values each factor counts
the rows where its own family is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners.structure import TIE_DECIMALS, ranked

State = TypeVar("State")
Group = tuple[int, ...]  # feature column indices, ascending


# ------------------------------------------------------------------ greedy wrapper search


@dataclass(frozen=True)
class SearchResult(Generic[State]):
    """The final state and its score; ``trace``: the start and each accepted move with the
    score it reached (JSON-able); ``evaluated``: candidates scored (memoised ones included)."""

    state: State
    score: float
    trace: tuple[dict[str, Any], ...]
    evaluated: int


def greedy_search(
    init: State,
    step: Callable[[State], Iterable[tuple[Mapping[str, Any], State]]],
    score: Callable[[State], float],
) -> SearchResult[State]:
    """Hill climbing: score every ``(move, candidate)`` that ``step(current)`` yields and
    move to the best one if it scores strictly higher than the current state; stop when
    none does (paper 003: "if no operation improves the accuracy ... the search stops"),
    when there is no candidate, or at a perfect score of 1. Ties go to the candidate
    yielded first, so each step function fixes the tie-break by its generation order.

    O(steps · candidates per step · cost of ``score``).
    """
    current, best = init, score(init)
    trace: list[dict[str, Any]] = [{"op": "start", "score": best}]
    evaluated = 1
    while best < 1.0:
        winner: tuple[float, Mapping[str, Any], State] | None = None
        for move, candidate in step(current):
            value = score(candidate)
            evaluated += 1
            if winner is None or value > winner[0]:
                winner = (value, move, candidate)
        if winner is None or not winner[0] > best:
            break
        best, move, current = winner
        trace.append({**move, "score": best})
    return SearchResult(current, best, tuple(trace), evaluated)


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
    weight I(X_Si; X_Sj | C) in nats (the candidates Kruskal chose from); ``tested``:
    pairs tested (the others had too few rows per cell to be reliable, so were skipped);
    ``arcs``: the forest's (parent, child) group pairs; ``order``: groups as visited (each
    tree's root, then breadth-first, trees by their roots' rank); ``roots``: one per tree
    (every group without a parent, isolated groups included); ``scores``: I(X_S; C) for a
    root, else the weight of the edge that reached the group.
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
    does not depend on the root). O(K^2 m) for the tests, O(K^2 log K) for Kruskal, for
    K groups and m rows; each test's table has at most m / 5 cells.
    """
    k = len(groups)
    joined = [stats.joint_column([data.X[:, i] for i in g], [data.cards[i] for i in g]) for g in groups]
    edges: dict[tuple[int, int], float] = {}
    tested = 0
    max_cells = data.n_rows / stats.MIN_EXPECTED_PER_CELL
    for i in range(k):
        for j in range(i + 1, k):
            if joined[i][1] * joined[j][1] * data.n_classes > max_cells:
                continue
            tested += 1
            test = stats.conditional_independence_test(
                joined[i][0], joined[j][0], data.y, joined[i][1], joined[j][1], data.n_classes, alpha
            )
            if test.rejects_independence:
                edges[(i, j)] = test.statistic / (2.0 * test.n)  # G = 2 N I(X_Si; X_Sj | C)
    chosen = maximum_weight_forest(k, edges)
    rank = np.array([stats.mutual_information(codes, data.y, card, data.n_classes) for codes, card in joined])
    arcs, order, roots, scores = orient_forest(k, chosen, rank, edges)
    return Forest(edges, tested, arcs, order, roots, scores)


def maximum_weight_forest(k: int, edges: Mapping[tuple[int, int], float]) -> list[tuple[int, int]]:
    """Kruskal on nodes 0..k-1: the maximum-weight spanning tree of every connected
    component. Edges by weight descending (rounded to ``TIE_DECIMALS``), ties by (i, j)
    ascending. Returns the chosen (i, j), i < j, in the order chosen. O(E log E)."""
    root = list(range(k))

    def find(a: int) -> int:
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    chosen = []
    for (i, j), _ in sorted(edges.items(), key=lambda e: (-round(e[1], TIE_DECIMALS), e[0])):
        a, b = find(i), find(j)
        if a != b:
            root[max(a, b)] = min(a, b)
            chosen.append((min(i, j), max(i, j)))
    return chosen


def orient_forest(
    k: int, edges: Sequence[tuple[int, int]], rank: np.ndarray, weights: Mapping[tuple[int, int], float]
) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...], tuple[int, ...], tuple[float, ...]]:
    """Root each tree of the forest ``edges`` at its node with the largest ``rank`` (ties:
    lower index) and direct the edges away from it, breadth-first. Returns (arcs as
    (parent, child), visiting order, roots, per visited node: its rank if a root, else the
    weight of the edge that reached it). Trees are taken by their roots' rank. O(k log k + E)."""
    neighbours: list[list[int]] = [[] for _ in range(k)]
    for i, j in edges:
        neighbours[i].append(j)
        neighbours[j].append(i)
    placed = np.zeros(k, dtype=bool)
    arcs: list[tuple[int, int]] = []
    order: list[int] = []
    scores: list[float] = []
    roots: list[int] = []
    for root in ranked(rank, range(k)):  # the first node met of each tree ranks highest in it
        root = int(root)
        if placed[root]:
            continue
        placed[root] = True
        roots.append(root)
        order.append(root)
        scores.append(float(rank[root]))
        queue = [root]
        while queue:  # breadth-first, neighbours by index
            node = queue.pop(0)
            for nb in sorted(neighbours[node]):
                if not placed[nb]:
                    placed[nb] = True
                    arcs.append((node, nb))
                    order.append(nb)
                    scores.append(float(weights[(min(node, nb), max(node, nb))]))
                    queue.append(nb)
    return tuple(arcs), tuple(order), tuple(roots), tuple(scores)
