"""CB (Singh & Valtorta; paper 002, §3): CI tests of rising order orient a graph, whose
order K2 then follows, until the network's accuracy stops rising. The engine of the ``cb``,
``k2-as`` and ``info-as`` learners. CI tests are available-case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.special import chdtri

from bnserve.trainer import stats
from bnserve.trainer.learners.search.k2 import Parents, SearchData, k2_search


@dataclass(frozen=True)
class CBResult:
    """The network CB keeps: its K2 order and parents (variable indices), family scores,
    the CI-test order that produced it, and the accuracy reached at each CI-test order tried."""

    order: list[int]
    parents: Parents
    scores: dict[int, float]
    ci_order: int
    accuracies: list[float]


def cb_search(
    v: SearchData,
    nodes: Sequence[int],
    priority: Sequence[int],
    max_parents: int | None,
    accuracy: Callable[[Parents], float],
    alpha: float = stats.ALPHA,
) -> CBResult:
    """CB over the variables ``nodes`` (the class among them), as paper 002 §3 describes it.

    Start from the complete undirected graph; at CI-test order 0, 1, 2, … remove the edges
    between nodes found independent given that many of their neighbours (``pc_level``),
    orient the graph (``orient``), take a total order consistent with it (``total_order``,
    ties by ``priority``), run K2 on it, and score the network with ``accuracy``. Keep
    raising the order while the accuracy rises; return the last network that raised it.
    Also stop when an order removes no edge (the next network would be the same).
    Paper 002 uses predictive accuracy as the stopping rule (the original CB compares the
    networks' K2 scores).

    Our choice where paper 002 is silent: the orientation treats the class as a root (no
    arc is oriented into it), so with ``priority`` putting the class first, the class
    heads the K2 order and features may take it as a parent. Left to the CI tests, the
    class is a collider of the features it depends on (x → C ← y whenever x ⊥ y), ends
    late in the order, and K2 gives it a few parents only: on splice, Info-AS then fell
    to 91–93 % with a 2–4 % spread over 10 splits against the paper's 95.0 ± 0.5 (and
    K2-AS to 91.1 against 94.9), while with the class as a root every figure of Tables
    2–3 for chess, mushroom and splice is met (see the tests).

    Cost per order: the CI tests (see ``pc_level``), plus one K2 run and one ``accuracy`` call.
    """
    nodes = list(nodes)
    k = len(nodes)
    rank = np.array([list(priority).index(node) for node in nodes])
    roots = [i for i, node in enumerate(nodes) if node == v.class_index]
    raw = [v.raw[i] for i in nodes]
    cards = [v.raw_cards[i] for i in nodes]
    adj = ~np.eye(k, dtype=bool)
    complete = all(int(column.min(initial=0)) >= 0 for column in raw)
    tests = CITests(raw, cards, alpha, complete)
    sepsets: dict[tuple[int, int], tuple[int, ...]] = {}
    best: CBResult | None = None
    accuracies: list[float] = []
    for level in range(max(k - 1, 1)):  # a level needs level + 2 nodes; one run even for a lone class
        removed = pc_level(tests, adj, sepsets, level)
        if level and not removed:
            break
        order = [nodes[i] for i in total_order(orient(adj, sepsets, roots), rank)]
        parents, scores = k2_search(v, order, max_parents)
        accuracies.append(accuracy(parents))
        if best is not None and not accuracies[-1] > accuracies[best.ci_order]:
            break
        best = CBResult(order, parents, scores, level, [])
    assert best is not None
    return CBResult(best.order, best.parents, best.scores, best.ci_order, accuracies)


def pc_level(tests: CITests, adj: np.ndarray, sepsets: dict[tuple[int, int], tuple[int, ...]], level: int) -> bool:
    """Remove (in place) every edge x–y with x ⊥ y | S for some S of ``level`` neighbours
    of x or of y (the neighbours as they were when the level began: order-independent,
    "PC-stable"); record S in ``sepsets[(x, y)]``, x < y. Returns whether an edge went.
    Conditioning sets are tried from x's side, then y's, each in ``combinations`` order;
    ``tests`` answers each (``CITests.independent``). O(edges · C(degree, level) · m).
    """
    snapshot = adj.copy()
    removed = False
    for x, y in zip(*np.nonzero(np.triu(adj, 1))):
        x, y = int(x), int(y)
        tried: set[tuple[int, ...]] = set()
        for a, b in ((x, y), (y, x)):
            others = [int(z) for z in np.flatnonzero(snapshot[a]) if z != b]
            for cond in combinations(others, level):
                if cond in tried:
                    continue
                tried.add(cond)
                if tests.independent(a, b, cond):
                    adj[x, y] = adj[y, x] = False
                    sepsets[(x, y)] = cond
                    removed = True
                    break
            if not adj[x, y]:
                break
    return removed


class CITests:
    """CB's tests of a ⊥ b | S over the columns ``raw`` (cardinalities ``cards``): a reliable
    G-test (at least ``stats.MIN_EXPECTED_PER_CELL`` rows per cell; an unreliable test is
    no evidence and keeps the edge, so a table with more cells than m/5 is not even
    counted) that does not reject at ``alpha``. Available-case.

    ``complete`` (no column has a missing value) allows two shortcuts with the same answers:
    - the tables are counted from kept codes: the pair's while the pair is tested, and
      each conditioning set's (C order) for the level, up to ``COND_CODE_BYTES``;
    - a test whose lower bound already rejects is not counted. By the chain rule,
      I(a;b|S) = I(a;b|S∖z) − I(a;z|S∖z) + I(a;z|b,S∖z) ≥ I(a;b|S∖z) − I(a;z|S∖z) for any
      z in S (and likewise with b for a), exactly, on the empirical distribution of the
      same rows (so complete data only). I(a;b|S∖z) is known from the level below (every
      surviving edge was tested with every such set, or bounded the same way), the
      I(x;z|S∖z) are counted once and kept. A test is skipped only when the bound, less
      ``BOUND_MARGIN`` (far above rounding), exceeds the information at which the test
      rejects; so the edges removed and their separating sets are the plain tests'.
      On connect-4, 87 % of CB's order-2 tests (and 71 % of its order-1 ones) are answered so.
    """

    def __init__(
        self, raw: Sequence[np.ndarray], cards: Sequence[int], alpha: float = stats.ALPHA, complete: bool = False
    ):
        self.raw, self.cards, self.alpha, self.complete = raw, [int(c) for c in cards], alpha, complete
        self.m = raw[0].shape[0]
        self.codes: dict[tuple[int, ...], np.ndarray] = {}  # conditioning set -> its joint code, one level's
        self.code_bytes = 0
        self.pair_of: tuple[int, int] | None = None
        self.pair: dict[int, np.ndarray] = {}  # |S| -> a·|b||S| + b·|S|, for the pair (a, b) at hand
        self.information: dict[tuple[int, int, tuple[int, ...]], float] = {}  # I(a;b|S), a < b, counted
        self.lower: dict[tuple[int, int, tuple[int, ...]], float] = {}  # ≤ I(a;b|S), tests bounded
        self.critical: dict[int, float] = {}  # dof -> the information at which a test rejects
        self.bounded = 0  # tests answered by the bound

    def independent(self, a: int, b: int, cond: tuple[int, ...]) -> bool:
        """Whether a ⊥ b | cond (``cond`` in increasing order)."""
        cond_card = math.prod(self.cards[c] for c in cond)
        if self.m < stats.MIN_EXPECTED_PER_CELL * self.cards[a] * self.cards[b] * cond_card:
            return False
        if not (self.complete and cond):
            test = self._plain_test(a, b, cond)
        elif self._surely_dependent(a, b, cond, (self.cards[a] - 1) * (self.cards[b] - 1) * cond_card):
            return False
        else:
            test = stats.conditional_g_test(self._table(a, b, cond), self.alpha)
        if self.complete and test.n:
            self.information[_key(a, b, cond)] = test.statistic / (2.0 * test.n)
        return test.reliable and not test.rejects_independence

    def _plain_test(self, a: int, b: int, cond: tuple[int, ...]) -> stats.IndependenceTest:
        raw, cards = self.raw, self.cards
        if not cond:
            return stats.independence_test(raw[a], raw[b], cards[a], cards[b], self.alpha)
        given = [raw[c] for c in cond]
        return stats.independence_given_test(
            raw[a], raw[b], given, cards[a], cards[b], [cards[c] for c in cond], self.alpha
        )

    def _surely_dependent(self, a: int, b: int, cond: tuple[int, ...], dof: int) -> bool:
        if dof not in self.critical:
            self.critical[dof] = float(chdtri(dof, self.alpha)) / (2.0 * self.m)
        needed = self.critical[dof] + BOUND_MARGIN
        for z in cond:
            rest = tuple(c for c in cond if c != z)
            known = self._known(a, b, rest)
            if known is None or known <= needed:
                continue
            for x in (a, b):
                bound = known - self._counted(x, z, rest)
                if bound > needed:
                    self.lower[_key(a, b, cond)] = bound  # a test not bounded is counted, its I kept
                    self.bounded += 1
                    return True
        return False

    def _known(self, a: int, b: int, cond: tuple[int, ...]) -> float | None:
        key = _key(a, b, cond)
        return self.information.get(key, self.lower.get(key))

    def _counted(self, a: int, b: int, cond: tuple[int, ...]) -> float:
        """I(a;b|cond), counted once and kept."""
        key = _key(a, b, cond)
        if key not in self.information:
            cards = [self.cards[i] for i in (a, b, *cond)]
            table = stats.joint_counts([self.raw[i] for i in (a, b, *cond)], cards, complete=True)
            self.information[key] = stats.conditional_mutual_information_from_counts(table.reshape(*cards[:2], -1))
        return self.information[key]

    def _table(self, a: int, b: int, cond: tuple[int, ...]) -> np.ndarray:
        """N(a, b, S) as one addition and one bincount; the same counts as ``stats.joint_counts``."""
        cond_card = math.prod(self.cards[c] for c in cond)
        if self.pair_of != (a, b):
            self.pair_of, self.pair = (a, b), {}
        if cond_card not in self.pair:
            pair = np.multiply(self.raw[a], self.cards[b] * cond_card, dtype=np.int64)
            self.pair[cond_card] = pair + np.multiply(self.raw[b], cond_card, dtype=np.int64)
        code = self.codes.get(cond)
        if code is None:
            if self.codes and len(next(iter(self.codes))) != len(cond):  # a new level: drop the last one's
                self.codes, self.code_bytes = {}, 0
            code = stats.joint_code([self.raw[c] for c in cond], [self.cards[c] for c in cond])
            if self.code_bytes + code.nbytes <= COND_CODE_BYTES:
                self.codes[cond] = code
                self.code_bytes += code.nbytes
        cells = self.cards[a] * self.cards[b] * cond_card
        return np.bincount(self.pair[cond_card] + code, minlength=cells).reshape(
            self.cards[a], self.cards[b], cond_card
        )


def _key(a: int, b: int, cond: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
    return (a, b, cond) if a < b else (b, a, cond)


COND_CODE_BYTES = 256 << 20
BOUND_MARGIN = 1e-9  # nats; the information's rounding error is below 1e-13


def orient(
    adj: np.ndarray, sepsets: Mapping[tuple[int, int], tuple[int, ...]], roots: Sequence[int] = ()
) -> np.ndarray:
    """Directed arcs ``d[i, j]`` (i → j) of the undirected graph ``adj``.

    V-structures first: x → z ← y for non-adjacent x, y with a common neighbour z not in
    their separating set, unless z is one of ``roots`` (nodes no arc may enter). An edge
    that v-structures would orient both ways (conflicting evidence, common at low CI-test
    orders where separating sets are small) stays undirected, so no arc depends on the
    order the triples are visited in. Then, to a fixed point, rule 1 (a → b – c, a and c
    non-adjacent: b → c) and rule 2 (a – b with a directed path from a to b: a → b),
    never into a root. Other edges stay undirected. O(k³) per pass, at most k² passes.
    """
    k = adj.shape[0]
    votes = np.zeros((k, k), dtype=bool)
    for z in range(k):
        for x, y in combinations(np.flatnonzero(adj[z]), 2):
            if not adj[x, y] and z not in sepsets.get((int(x), int(y)), ()):
                votes[x, z] = votes[y, z] = True
    votes[:, list(roots)] = False
    d = votes & ~votes.T
    changed = True
    while changed:
        changed = False
        reach = _transitive_closure(d)
        for b, c in zip(*np.nonzero(adj & ~d & ~d.T)):
            if d[b, c] or d[c, b] or c in roots:
                continue
            if np.any(d[:, b] & ~adj[:, c]) or reach[b, c]:
                d[b, c] = True
                changed = True
                reach = _transitive_closure(d)
    return d


def _transitive_closure(d: np.ndarray) -> np.ndarray:
    reach = d.copy()
    for via in range(d.shape[0]):  # Warshall
        reach |= reach[:, [via]] & reach[[via], :]
    return reach


def total_order(d: np.ndarray, rank: np.ndarray) -> list[int]:
    """A total order of the nodes consistent with the arcs ``d`` where they are acyclic:
    repeatedly place, among the unplaced nodes with the fewest unplaced parents (none
    unless conflicting orientations made a cycle), the one of lowest ``rank``. O(k³)."""
    k = d.shape[0]
    placed = np.zeros(k, dtype=bool)
    order: list[int] = []
    for _ in range(k):
        waiting = d[~placed].sum(axis=0)
        free = np.flatnonzero(~placed)
        free = free[waiting[free] == waiting[free].min()]
        node = int(free[np.argmin(rank[free])])
        placed[node] = True
        order.append(node)
    return order
