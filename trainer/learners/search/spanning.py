"""Maximum-weight spanning trees and forests: the one engine behind TAN's Chow–Liu tree (and
ddr-ChowLiu's) and the augmenting forests of STAN and ASB (paper 003, Algorithm 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bnserve.trainer.learners.structure import TIE_DECIMALS, ranked


@dataclass(frozen=True)
class SpanningForest:
    """``order``: nodes as added; ``parent[i]``: the node that added i (-1 for a root);
    ``roots``: one per tree, in the order the trees were grown; ``gains[t]``: for
    ``order[t]``, its rank if it is a root, else the weight of the edge that added it."""

    order: tuple[int, ...]
    parent: tuple[int, ...]
    roots: tuple[int, ...]
    gains: tuple[float, ...]

    @property
    def arcs(self) -> tuple[tuple[int, int], ...]:
        """(parent, child) in the order the children were added: arcs point away from each root."""
        return tuple((self.parent[i], i) for i in self.order if self.parent[i] >= 0)


def maximum_spanning_forest(weights: np.ndarray, rank: np.ndarray) -> SpanningForest:
    """Prim's algorithm on a dense symmetric (n, n) weight matrix, -inf where there is no edge.

    Each tree starts at the unplaced node of largest ``rank`` (ties: the lower index), so
    every root ranks highest in its tree, and grows by the heaviest edge to a node not yet
    placed (weights equal to ``TIE_DECIMALS`` decimals are tied: the lower child, then the
    lower parent, wins); a tree ends when no edge reaches further. With every weight finite
    that is one tree, the maximum spanning tree. O(n^2).
    """
    n = weights.shape[0]
    w = np.round(weights, TIE_DECIMALS)
    parent = np.full(n, -1, dtype=np.intp)
    best = np.full(n, -np.inf)
    placed = np.zeros(n, dtype=bool)
    order: list[int] = []
    roots: list[int] = []
    gains: list[float] = []
    for _ in range(n):
        out = np.flatnonzero(~placed)
        node = int(out[np.argmax(best[out])])  # argmax returns the first, i.e. lowest index
        if best[node] == -np.inf:  # nothing reaches further: a new tree at the best-ranked node left
            node = int(ranked(rank, out)[0])
            roots.append(node)
            gains.append(float(rank[node]))
        else:
            gains.append(float(weights[parent[node], node]))
        placed[node] = True
        order.append(node)
        closer = ~placed & ((w[node] > best) | ((w[node] == best) & (w[node] > -np.inf) & (node < parent)))
        best[closer] = w[node][closer]
        parent[closer] = node  # a root never had one: nothing reached it
    return SpanningForest(tuple(order), tuple(int(p) for p in parent), tuple(roots), tuple(gains))
