"""Hill climbing with tabu over k-dependence augmented networks (``hc``), scored by BIC.

Like KDB and FKDB, every feature has the class as a parent and at most k feature parents.
Unlike them, no order of the features is imposed: the search moves through DAGs one
change at a time (add an arc, replace a parent, reverse an arc, making room at its new
child if need be, delete an arc), each step taking the move that raises the score most
(the greedy search of Heckerman, Geiger & Chickering 1995, restricted to the augmented
family), then continues as a tabu search (Glover; bnlearn's ``tabu``) to leave the local
maximum. KDB and FKDB may only point an arc from a feature ranked earlier by their order;
where the true dependencies run against it they cannot be represented: on the benchmark's
k = 2 network (docs/performance.md, item 1) that costs fkdb 4 points of accuracy against
the Bayes-optimal classifier at a million rows. Starting from FKDB's network, this search
recovers most of the rest.

The score is decomposable: the sum over features of
BIC(X_i | C, Pa_i) = LL - (log m / 2) (r_i - 1) c q_i, with LL the maximised
log-likelihood of the family (``stats.family_log_likelihood``) and q_i the number of
configurations of the feature parents (the class's own term is the same for every
structure). Only the changed families are re-counted after a move: a feature with no
feature parents reads its candidates from the pairwise tables every pairwise learner
shares; one with parents counts N(x_i, pa_i, x_j, c) for every candidate j, one bincount
per group of candidate columns (``stats.ColumnGroups``).

Missing values: in the search a missing value is one more state of its feature (as in
K2), so every candidate family is scored on the same rows; CPTs are estimated
available-case as always. Ties go by the kind of move (add, replace, reverse, delete),
then the lower child column, then the lower parent column.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.learners import sizing
from bnserve.trainer.learners.base import Learned, Learner, Param, non_negative_int, one_of
from bnserve.trainer.learners.kdb import K, fkdb_structure
from bnserve.trainer.learners.structure import TIE_DECIMALS, Structure
from bnserve.trainer.progress import stage

SCORE_EPS = 1e-6  # nats: a BIC gain at or below this is rounding noise, not an improvement


NONE = -1  # no parent dropped
ADD, REPLACE, REVERSE, DELETE = "add", "replace", "reverse", "delete"  # in the order ties are broken


@dataclass(frozen=True)
class Move:
    """One step of the search. ``add``: parent -> child; ``replace``: parent -> child in place of
    dropped -> child; ``reverse``: parent -> child becomes child -> parent, and dropped -> parent
    goes when parent has no room; ``delete``: parent -> child goes."""

    gain: float
    kind: str
    child: int
    parent: int
    dropped: int

    def pairs(self) -> frozenset[frozenset[int]]:
        """The pairs of features whose arc the move changes."""
        changed = {frozenset((self.child, self.parent))}
        if self.dropped != NONE:
            changed.add(frozenset((self.dropped, self.child if self.kind == REPLACE else self.parent)))
        return frozenset(changed)

    def rank(self) -> tuple:
        return (
            -round(self.gain, TIE_DECIMALS),
            (ADD, REPLACE, REVERSE, DELETE).index(self.kind),
            self.child,
            self.parent,
            self.dropped,
        )


class _Search:
    """The current DAG over the features and, per feature, its family score and the gain of
    each move that changes its parents."""

    def __init__(self, data: EncodedData, k: int) -> None:
        self.data = data
        self.k = k
        self.n = len(data.features)
        self.m = data.total_weight()  # the rows, or their total weight: BIC's sample size
        self.c = data.n_classes
        self.groups = stats.ColumnGroups(data.X, data.cards, weights=data.weights)
        self.cols = self.groups.columns  # state 0: missing, state s + 1: code s (the pairwise tables' coding)
        self.ext = self.groups.ext
        self.states = [int(card) + int(bool((col == 0).any())) for card, col in zip(data.cards, self.cols)]
        self.y = np.asarray(data.y, dtype=np.int64)
        self.parents: list[list[int]] = [[] for _ in range(self.n)]
        self.score = np.zeros(self.n)  # BIC of each feature's family
        self.change_gain: list[dict[int, np.ndarray]] = [{} for _ in range(self.n)]  # see refresh
        self.delete_gain: list[dict[int, float]] = [{} for _ in range(self.n)]  # [i][j]: of deleting j -> i
        for i in range(self.n):
            self.refresh(i)

    # ---------------------------------------------------------------- scores

    def bic(self, table: np.ndarray, child: int, parents: list[int]) -> float:
        """BIC of ``child`` with the class and ``parents``; ``table`` axes (class, *parents, child)."""
        configurations = self.c * math.prod(self.states[p] for p in parents)
        return stats.family_log_likelihood(table) - stats.bic_penalty(self.m, self.states[child], configurations)

    def family_table(self, child: int, parents: list[int]) -> np.ndarray:
        """N(c, *parents, child) over extended states."""
        code = self.context(child, parents)
        shape = (self.c, *(self.ext[p] for p in parents), self.ext[child])
        return np.bincount(code, self.data.weights, minlength=math.prod(shape)).reshape(shape)

    def within_limits(self, child: int, parents: Sequence[int]) -> list[int]:
        """``parents`` up to the first that would make ``child``'s family table past the
        training limits' cell limit (``sizing.allows``)."""
        cells, kept = self.c * self.ext[child], []
        for p in parents:
            cells *= self.ext[p]
            if not sizing.allows(cells):
                break
            kept.append(int(p))
        return kept

    def context(self, child: int, parents: list[int]) -> np.ndarray:
        """Each row's flat index in the table of axes (class, *parents, child), extended states."""
        code = self.y
        for p in parents:
            code = code * self.ext[p] + self.cols[p]
        return code * self.ext[child] + self.cols[child]

    def refresh(self, i: int) -> None:
        """Recompute feature ``i``'s family score and the gains of every move that changes its parents."""
        parents = self.parents[i]
        table = self.family_table(i, parents)
        self.score[i] = self.bic(table, i, parents)
        self.delete_gain[i] = {
            p: self.bic(table.sum(axis=1 + a), i, parents[:a] + parents[a + 1 :]) - self.score[i]
            for a, p in enumerate(parents)
        }
        # gains of new parents q: added (key -1) while there is room, or in place of a parent r (key r)
        self.change_gain[i] = {}
        for r in ([NONE] if len(parents) < self.k else []) + list(parents):
            kept = [p for p in parents if p != r]
            gains = np.full(self.n, -np.inf)
            for q, counts in self.candidate_tables(i, kept, skip=parents):  # axes (class, *kept, q, child)
                gains[q] = self.bic(counts, i, [*kept, q]) - self.score[i]
            self.change_gain[i][r] = gains

    def candidate_tables(self, i: int, parents: list[int], skip: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        """(j, N(c, *parents, x_j, x_i)) for every feature j but ``i`` and those in ``skip``; a j
        whose table would be past the training limits' cell limit is not counted (``sizing.allows``)."""
        candidates = [j for j in range(self.n) if j != i and j not in skip]
        if not parents:  # the pairwise tables hold them: (lower, higher, class), missing state first
            pairs = self.data.statistics.pairs
            for j in candidates:
                t = pairs[(i, j)] if i < j else pairs[(j, i)]
                t = t[..., 1:]  # the class is never missing
                yield j, np.transpose(t, (2, 1, 0) if i < j else (2, 0, 1))
            return
        shape = (self.c, *(self.ext[p] for p in parents), self.ext[i])
        too_large = [j for j in candidates if not sizing.allows(math.prod(shape) * self.ext[j])]
        context = self.context(i, parents)
        for j, table in self.groups.counts(context, math.prod(shape), skip=[i, *skip, *too_large]):
            yield j, np.swapaxes(table.reshape(*shape, self.ext[j]), -1, -2)

    # ---------------------------------------------------------------- the DAG

    def descendants(self, node: int) -> set[int]:
        """Every feature ``node`` has a directed path to."""
        children: dict[int, list[int]] = {}
        for child, parents in enumerate(self.parents):
            for p in parents:
                children.setdefault(p, []).append(child)
        seen: set[int] = set()
        stack = [node]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return seen

    def best_move(self, floor: float = SCORE_EPS, tabu: frozenset[frozenset[int]] = frozenset()) -> Move | None:
        """The move with the largest gain above ``floor`` that keeps the graph acyclic and
        touches no pair of features in ``tabu`` (ties: see the module docstring), or None."""
        moves: list[Move] = []
        below = [self.descendants(i) for i in range(self.n)]
        for i in range(self.n):
            for r, gains in self.change_gain[i].items():  # add or replace a parent of i
                rounded = np.round(gains, TIE_DECIMALS)
                for q in np.argsort(-rounded, kind="stable"):
                    if not rounded[q] > floor:
                        break
                    move = Move(float(gains[q]), ADD if r == NONE else REPLACE, i, int(q), r)
                    if int(q) not in below[i] and not move.pairs() & tabu:  # q -> i closes no cycle
                        moves.append(move)
                        break
        for i in range(self.n):
            for j, loss in self.delete_gain[i].items():  # j -> i becomes i -> j, room made at j if need be
                for r, gains in self.change_gain[j].items():
                    if gains[i] + loss > floor and not self.other_path(j, i, below):
                        moves.append(Move(float(gains[i] + loss), REVERSE, i, j, r))
        for i in range(self.n):
            moves.extend(Move(float(loss), DELETE, i, j, NONE) for j, loss in self.delete_gain[i].items())
        moves = [m for m in moves if m.gain > floor and not m.pairs() & tabu]
        return min(moves, key=Move.rank) if moves else None

    def other_path(self, j: int, i: int, below: list[set[int]]) -> bool:
        """Whether ``j`` reaches ``i`` other than by its arc j -> i (reversing it would close a cycle)."""
        return any(i in below[child] for child in range(self.n) if child != i and j in self.parents[child])

    def apply(self, move: Move) -> None:
        i, j, r = move.child, move.parent, move.dropped
        if move.kind == REVERSE:
            self.parents[i].remove(j)
            if r != NONE:
                self.parents[j].remove(r)
            self.parents[j].append(i)
            self.refresh(i)
            self.refresh(j)
            return
        if move.kind in (DELETE, REPLACE):
            self.parents[i].remove(j if move.kind == DELETE else r)
        if move.kind in (ADD, REPLACE):
            self.parents[i].append(j)
        self.refresh(i)

    def topological_order(self) -> list[int]:
        """Features parents-first, the lowest column first among those ready."""
        placed: list[int] = []
        done = np.zeros(self.n, dtype=bool)
        while len(placed) < self.n:
            ready = next(i for i in range(self.n) if not done[i] and all(done[p] for p in self.parents[i]))
            done[ready] = True
            placed.append(ready)
        return placed


def hill_climbing(data: EncodedData, k: int, start: str, tabu: int, tabu_steps: int) -> Learned:
    """The ``hc`` structure; ``scores`` are each feature's family BIC, in topological order.

    Climbs from ``start`` (``fkdb``: FKDB's network for the same k, from the pairwise
    statistics already counted; ``empty``: naive Bayes) while a move improves the score.
    Then tabu search: the best move that touches no pair of features changed in the last
    ``tabu`` moves is taken even when it lowers the score, and the search ends after
    ``tabu_steps`` moves without a new best; the best network seen is kept. ``tabu`` 0 is
    plain hill climbing. Each move re-counts the changed families: a pass over the rows per
    group of candidate columns for each of the k + 1 ways to change a full family.
    The metadata keep the moves made and the best BIC.
    """
    search = _Search(data, k)
    if start == "fkdb" and search.n:
        initial = fkdb_structure(data.statistics.class_mi(), data.statistics.cmi_matrix(), k)[1]
        for i in range(search.n):
            search.parents[i] = search.within_limits(i, initial[i])
            search.refresh(i)
    names = [v.name for v in data.features]
    moves: list[list] = []
    recent: list[Move] = []
    best_score, best_parents, stale = search.score.sum(), [list(p) for p in search.parents], 0
    with stage("hill climbing", unit="move") as bar:
        while stale <= tabu_steps:
            move = search.best_move()
            if move is None:
                if not tabu:
                    break
                move = search.best_move(-np.inf, frozenset(pair for m in recent for pair in m.pairs()))
                if move is None:
                    break
            search.apply(move)
            moves.append(
                [
                    move.kind,
                    names[move.parent],
                    names[move.child],
                    names[move.dropped] if move.dropped != NONE else None,
                    round(move.gain, 6),
                ]
            )
            recent = (recent + [move])[-tabu:] if tabu else []
            if search.score.sum() > best_score + SCORE_EPS:
                best_score, best_parents, stale = search.score.sum(), [list(p) for p in search.parents], 0
            else:
                stale += 1
            bar.note(f"BIC {best_score:.1f}")
            bar.update()
    for i in range(search.n):
        if search.parents[i] != best_parents[i]:
            search.parents[i] = best_parents[i]
            search.refresh(i)
    order = search.topological_order()
    structure = Structure.augmented(data, search.parents, order, [float(search.score[i]) for i in order])
    return Learned.single(structure, data, search_moves=moves, bic=round(float(best_score), 6))


START = Param(
    "start", str, "fkdb", "the network the search starts from, fkdb or empty (default fkdb)", one_of("fkdb", "empty")
)
TABU = Param(
    "tabu",
    int,
    10,
    "moves a changed pair of features stays tabu; 0 = plain hill climbing (default 10)",
    non_negative_int,
)
TABU_STEPS = Param(
    "tabu_steps", int, 20, "moves without a better score before the search stops (default 20)", non_negative_int
)

LEARNERS = (
    Learner(
        "hc",
        hill_climbing,
        "hill climbing with tabu over k-dependence augmented networks by BIC: no feature order imposed",
        (K, START, TABU, TABU_STEPS),
        unweighted="",
    ),
)
