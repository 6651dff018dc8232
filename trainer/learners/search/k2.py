"""K2 (Cooper & Herskovits 1992): a node's parents chosen greedily among its predecessors in
a variable order by the Cooper–Herskovits score. The engine of the ``k2``, ``cb``, ``k2-as``
and ``info-as`` learners.

K2 runs over the class and the features alike, so the class may get parents and a feature
need not have the class as a parent. Add the predecessor that raises the family score
most, while it raises it (by more than ``SCORE_EPS``) and the node has fewer than
``max_parents`` parents. Ties go to the lower variable index (the features by column,
then the class).

Missing values: for the search only, a missing value is one more state of its variable,
so that every candidate family is scored on the same rows (available-case counts would
favour parents with many missing values). CPTs are estimated available-case as always.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners import sizing
from bnserve.trainer.learners.structure import ranked
from bnserve.trainer.progress import stage

SCORE_EPS = 1e-9  # nats: a log-score gain at or below this is rounding noise, not an increase


Parents = dict[int, list[int]]  # variable index -> parents in the order K2 added them


@dataclass(frozen=True)
class SearchData:
    """The class and the features as indexed variables: features 0..n-1 by column, the class n.

    ``columns`` code a missing value as the extra state ``cards[i] - 1`` of a variable
    that has missing values (for scoring); ``raw`` keep -1 (for CI tests, available-case).
    """

    names: tuple[str, ...]
    columns: tuple[np.ndarray, ...]
    cards: tuple[int, ...]
    raw: tuple[np.ndarray, ...]
    raw_cards: tuple[int, ...]
    weights: np.ndarray | None = None  # per row: the counts scored are sums of weights

    @staticmethod
    def of(data: EncodedData) -> SearchData:
        raw = [data.X[:, i].astype(np.int64) for i in range(len(data.features))] + [data.y.astype(np.int64)]
        raw_cards = [*data.cards, data.n_classes]
        columns, cards = [], []
        for col, card in zip(raw, raw_cards):
            missing = col < 0
            if missing.any():
                col, card = np.where(missing, card, col), card + 1
            columns.append(col)
            cards.append(card)
        return SearchData(
            tuple(v.name for v in data.variables),
            tuple(columns),
            tuple(cards),
            tuple(raw),
            tuple(raw_cards),
            data.weights,
        )

    @property
    def class_index(self) -> int:
        return len(self.names) - 1

    def named(self, parents: Mapping[int, Sequence[int]]) -> dict[str, tuple[str, ...]]:
        return {self.names[node]: tuple(self.names[p] for p in ps) for node, ps in parents.items()}


def family_score(v: SearchData, node: int, parents: Sequence[int]) -> float:
    """log Cooper–Herskovits score of ``node`` with ``parents``, over the parent configurations that occur."""
    if parents:
        config, q = stats.occurring_instantiations([v.columns[p] for p in parents])
    else:
        config, q = np.zeros_like(v.columns[node]), 1
    r = v.cards[node]
    counts = np.bincount(config * r + v.columns[node], v.weights, minlength=q * r).reshape(q, r).T
    return stats.cooper_herskovits_from_counts(counts)


def k2_family(v: SearchData, node: int, candidates: Sequence[int], max_parents: int | None) -> tuple[list[int], float]:
    """K2's greedy parent search for ``node`` among ``candidates`` (its predecessors).

    ``max_parents`` None: no bound but the score's own stopping rule; a parent that would make
    the CPT past the training limits' cell limit (``sizing.allows``) is not considered, which
    also bounds the table each candidate is counted in (the occurring configurations × r × cj).

    Returns (parents in the order added, the family's log score). Each round scores every
    remaining candidate with one bincount over the occurring configurations of the
    current parents: O(p · |candidates| · m·r²) for p parents found, m rows, r states.
    """
    x, r = v.columns[node], v.cards[node]
    config, q = np.zeros_like(x), 1
    score = stats.cooper_herskovits_from_counts(np.bincount(x, v.weights, minlength=r)[:, None])
    parents: list[int] = []
    cells = v.raw_cards[node]  # of the CPT the parents so far give
    pool = [int(c) for c in candidates if c != node]
    values = np.full(len(v.names), -np.inf)
    while max_parents is None or len(parents) < max_parents:
        pool = [j for j in pool if sizing.allows(cells * v.raw_cards[j])]
        if not pool:
            break
        # code (config · cj + x_j) · r + x, as config · cj r + x, made once per cardinality cj
        # this round, plus x_j · r: one pass per candidate instead of four, the same codes
        bases: dict[int, np.ndarray] = {}
        for j in pool:
            cj = v.cards[j]
            if cj not in bases:
                bases[cj] = config * (cj * r) + x
            counts = np.bincount(bases[cj] + v.columns[j] * r, v.weights, minlength=q * cj * r)
            values[j] = stats.cooper_herskovits_from_counts(counts.reshape(q * cj, r).T)
        best = int(ranked(values, pool)[0])
        if not values[best] - score > SCORE_EPS:
            break
        parents.append(best)
        pool.remove(best)
        score = float(values[best])
        cells *= v.raw_cards[best]
        config, q = stats.occurring_instantiations([v.columns[p] for p in parents])
    return parents, score


def k2_search(v: SearchData, order: Sequence[int], max_parents: int | None) -> tuple[Parents, dict[int, float]]:
    """K2 over the variables in ``order`` (indices): each node's parents come from its
    predecessors. Returns parents and log family score per node. O(n² · p · m·r²)."""
    parents: Parents = {}
    scores: dict[int, float] = {}
    with stage("k2: parents", len(order), "node") as bar:
        for pos, node in enumerate(order):
            parents[node], scores[node] = k2_family(v, node, order[:pos], max_parents)
            bar.update()
    return parents, scores
