"""Selective KDB (Martínez, Webb, Chen & Zaidi 2016, "Scalable learning of Bayesian network
classifiers", JMLR 17(44)) and its ensemble ESKDB (Zhang, Petitjean & Buntine 2020,
"Bayesian network classifiers using ensembles and smoothing", Knowledge and Information
Systems 62).

``skdb``: the KDB of the largest ``k`` (order by I(X;C), each feature's parents the up to k
earlier features with the largest I(Xi;Xj|C), ``kdb.kdb_structure``) nests every smaller
model: KDB k' < k keeps the first k' parents of each feature, and the model on the first s
features of the order is a prefix. One more pass over the rows (``TrainingView.blocks``)
scores all (s, k') for s in 0..n and k' in 0..k at once by leave-one-out: for each row, the
posterior of every nested model with that row's counts taken out of the Laplace estimates,
built up one feature at a time (adding a feature multiplies in one factor). The model with
the least loss is kept, ties to fewer features, then to the smaller k'. The loss is the
paper's RMSE of the posterior, sqrt(mean (1 - P(y | x))^2), or with ``--loss zero-one``
the error rate.

A feature's parents stop before the first that would make its family's table larger than
max(4 x rows, 65536) cells (``capped``): a mostly empty table, costly to count and to serve.

A factor whose feature or (k'-prefix) parents are missing in a row is left out of that
row's leave-one-out posterior (the counts are available-case, as the final CPTs').

``eskdb``: ``members`` SKDBs, each on its own attribute order, posteriors averaged
(``mean_posterior``). The first member's order is SKDB's; the others are drawn as the
paper's stochastic order: feature after feature without replacement, each with
probability proportional to its I(X;C) among those left (features with I(X;C) = 0 follow
in SKDB's order). Orders are distinct (at most (number of features with I(X;C) > 0)!
members). Each member's parents are the up to k earlier features in its order with the
largest I(Xi;Xj|C), and each selects its own (s, k'). All members are counted in one pass
and scored in one more pass over the rows. The paper estimates the CPTs by hierarchical
Dirichlet processes: its setting is ``--estimator hdp``.

Losses are summed as integers (each row's squared error in units of 2^-32), so the choice
and the reported loss do not depend on how the rows are split into blocks (``--chunk-rows``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bnserve.store.model import MEAN_POSTERIOR
from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners import sizing
from bnserve.trainer.learners.base import (
    Learned,
    Learner,
    Member,
    Param,
    int_or_range,
    non_negative_int,
    one_of,
    positive_int,
)
from bnserve.trainer.learners.kdb import kdb_structure
from bnserve.trainer.learners.structure import Structure, ranked
from bnserve.trainer.progress import stage

RMSE, ZERO_ONE = "rmse", "zero-one"
LOSS_UNIT = 2.0**32  # a row's squared error is counted in units of 2^-32 (int64 sums, exact)
ROWS_PER_STEP = 1 << 15  # rows scored at once: (k+1) x rows x classes floats in memory
CELLS_PER_ROW, MIN_CELLS = 4, 1 << 16  # a family's table may have max(4 rows, 65536) cells


@dataclass(frozen=True)
class Ordering:
    """An attribute order (column indices) and each column's KDB parents, best first (up to k)."""

    order: tuple[int, ...]
    parents: tuple[tuple[int, ...], ...]

    def families(self) -> Iterator[tuple[int, ...]]:
        """(feature, class, first j parents) for every feature in order and j = 0..its parents."""
        for i in self.order:
            for j in range(len(self.parents[i]) + 1):
                yield (i, -1, *self.parents[i][:j])


@dataclass(frozen=True)
class Selection:
    """The leave-one-out choice for one ordering: the first ``attributes`` features of the
    order, KDB with ``k`` parents; ``loss`` (k_max + 1, n + 1): the loss of every (k', s)."""

    attributes: int
    k: int
    loss: np.ndarray


def ordering(order: Sequence[int], cmi: np.ndarray, k: int) -> Ordering:
    """KDB's parents for a given order: per feature the up to k earlier features with the
    largest I(Xi;Xj|C), ties to the lower column."""
    parents: list[tuple[int, ...]] = [() for _ in range(cmi.shape[0])]
    for pos, i in enumerate(order):
        parents[i] = tuple(int(j) for j in ranked(cmi[i], order[:pos])[: min(pos, k)])
    return Ordering(tuple(int(i) for i in order), tuple(parents))


def capped(o: Ordering, data: TrainingView) -> Ordering:
    """Each feature's parents up to the first whose family table (x, c, parents) would exceed
    max(CELLS_PER_ROW x rows, MIN_CELLS) cells, or the training limits' cell limit
    (``sizing.allows``). Such a table is mostly empty (its cells hold
    Laplace's 1/|X|), and counting it, and its dense CPT if chosen, would dominate memory:
    KDB 5 on letter (16 features of up to 16 states) would count 630M cells."""
    limit = max(CELLS_PER_ROW * data.total_weight(), MIN_CELLS)
    parents = []
    for i, ps in enumerate(o.parents):
        cells, keep = data.cards[i] * data.n_classes, 0
        for p in ps:
            cells *= data.cards[p]
            if cells > limit or not sizing.allows(cells):
                break
            keep += 1
        parents.append(ps[:keep])
    return Ordering(o.order, tuple(parents))


def select(data: TrainingView, orderings: Sequence[Ordering], k: int, loss: str) -> list[Selection]:
    """Score every nested model of every ordering by leave-one-out; one pass to count the
    families (all orderings at once) and one over the rows. O(n k) families; the row pass
    is O(m n (k + 1) c) per ordering, vectorised over the rows. Weighted rows: each row's
    loss counts its weight, and leaving it out takes min(weight, 1) from the counts, so a
    whole-number weight w scores as w copies of the row."""
    families = list(dict.fromkeys(f for o in orderings for f in o.families()))
    tables = {f: _Family(t) for f, t in zip(families, data.family_counts(families))}
    class_counts = data.class_totals()
    dtype = np.float64 if data.weighted else np.int64
    totals = [np.zeros((k + 1, len(o.order) + 1), dtype=dtype) for o in orderings]
    with stage("skdb: leave-one-out", data.n_rows, "row") as bar:
        for X, y, weights in data.blocks():
            for start in range(0, y.shape[0], ROWS_PER_STEP):
                rows = slice(start, start + ROWS_PER_STEP)
                w = weights[rows] if weights is not None else None
                for total, o in zip(totals, orderings):
                    total += _block_losses(X[rows], y[rows], w, o, tables, data.cards, class_counts, k, loss)
                bar.update(y[rows].shape[0])
    return [_choose(total, data.total_weight(), loss) for total in totals]


class _Family:
    """A family's counts N(x, c, pa) and N(c, pa), flat, for gathering by row."""

    def __init__(self, counts: np.ndarray) -> None:
        self.card, self.n_classes = counts.shape[0], counts.shape[1]
        self.per_class = math.prod(counts.shape[2:])  # parent configurations
        self.joint = counts.reshape(-1)
        self.parents = counts.sum(axis=0).reshape(-1)


def _block_losses(
    X: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | None,
    o: Ordering,
    tables: dict[tuple[int, ...], _Family],
    cards: Sequence[int],
    class_counts: np.ndarray,
    k: int,
    loss: str,
) -> np.ndarray:
    """(k + 1, n + 1) summed losses of these rows: [k', s] for KDB k' on the first s features
    (``weights``: each row's loss times its weight, and min(weight, 1) of it left out)."""
    n_rows, n_classes = y.shape[0], class_counts.shape[0]
    own = np.zeros((n_rows, n_classes), dtype=bool)
    own[np.arange(n_rows), y] = True
    if weights is None:
        prior = (class_counts[None, :] - own + 1.0) / (class_counts.sum() - 1.0 + n_classes)
    else:
        left_out = np.minimum(weights, 1.0)[:, None]
        own = own * left_out  # float: the weight each row takes from its own counts
        prior = (class_counts[None, :] - own + 1.0) / (class_counts.sum() - left_out + n_classes)
    posterior = np.repeat((prior / prior.sum(axis=1, keepdims=True))[None], k + 1, axis=0)
    out = np.zeros((k + 1, len(o.order) + 1), dtype=np.int64 if weights is None else np.float64)
    out[:, 0] = _loss(posterior, y, loss, weights)
    for s, i in enumerate(o.order, start=1):
        factors = list(_factors(X, own, i, o.parents[i], tables, cards))
        posterior *= np.stack(factors)[np.minimum(np.arange(k + 1), len(factors) - 1)]
        posterior /= posterior.sum(axis=2, keepdims=True)
        out[:, s] = _loss(posterior, y, loss, weights)
    return out


def _factors(
    X: np.ndarray,
    own: np.ndarray,
    i: int,
    parents: tuple[int, ...],
    tables: dict[tuple[int, ...], _Family],
    cards: Sequence[int],
) -> Iterator[np.ndarray]:
    """(rows, classes) per j = 0..len(parents): the Laplace P(x_i | c, first j parents) of each
    row with the row's own count taken out (its class only); 1 where the row misses the
    feature or one of those parents. The parents' joint code grows by one parent per j."""
    present = X[:, i] >= 0
    x = np.maximum(X[:, i], 0).astype(np.int64)
    parent_code = np.zeros_like(x)
    for j in range(len(parents) + 1):
        if j:
            column = X[:, parents[j - 1]]
            present = present & (column >= 0)
            parent_code = parent_code * cards[parents[j - 1]] + np.maximum(column, 0)
        family = tables[(i, -1, *parents[:j])]
        offsets = np.arange(family.n_classes, dtype=np.int64) * family.per_class
        numerator = family.joint[(x * (family.n_classes * family.per_class) + parent_code)[:, None] + offsets]
        denominator = family.parents[parent_code[:, None] + offsets]
        mine = own * present[:, None] if own.dtype != bool else own & present[:, None]
        factor = (numerator - mine + 1.0) / (denominator - mine + family.card)
        factor[~present] = 1.0
        yield factor


def _loss(posterior: np.ndarray, y: np.ndarray, loss: str, weights: np.ndarray | None = None) -> np.ndarray:
    """(k + 1,) summed loss of the rows under each k' posterior (k + 1, rows, classes), each
    row's integer loss times its weight when given (float64)."""
    if loss == ZERO_ONE:
        per_row = (posterior.argmax(axis=2) != y[None, :]).astype(np.int64)
    else:
        error = 1.0 - np.take_along_axis(posterior, y[None, :, None], axis=2)[:, :, 0]
        per_row = np.rint(error * error * LOSS_UNIT).astype(np.int64)
    return per_row.sum(axis=1) if weights is None else (per_row * weights[None, :]).sum(axis=1)


def _choose(total: np.ndarray, n_rows: float, loss: str) -> Selection:
    """The least total loss, ties to fewer features (s), then to the smaller k'."""
    best_k, best_s = 0, 0
    for s in range(total.shape[1]):
        for kk in range(total.shape[0]):
            if total[kk, s] < total[best_k, best_s]:
                best_k, best_s = kk, s
    return Selection(best_s, best_k, loss_values(total, n_rows, loss))


def loss_values(total: np.ndarray, n_rows: float, loss: str) -> np.ndarray:
    """Summed integer losses as RMSE (or error rate); ``n_rows``: the rows' total weight."""
    mean = total / max(n_rows, 1)
    return mean if loss == ZERO_ONE else np.sqrt(mean / LOSS_UNIT)


def selected_structure(data: TrainingView, o: Ordering, chosen: Selection, mi: np.ndarray) -> Structure:
    """KDB k' on the first s features of the order; the others are not nodes. ``scores``: I(X;C)."""
    names = [v.name for v in data.features]
    cls = data.class_variable.name
    kept = o.order[: chosen.attributes]
    parents = {names[i]: (cls, *(names[p] for p in o.parents[i][: chosen.k])) for i in kept}
    parents[cls] = ()
    return Structure(parents, tuple(names[i] for i in kept), tuple(float(mi[i]) for i in kept))


def _summary(data: TrainingView, o: Ordering, chosen: Selection, k: int, loss: str) -> dict[str, Any]:
    names = [v.name for v in data.features]
    n = len(o.order)
    return {
        "k": chosen.k,
        "attributes": [names[i] for i in o.order[: chosen.attributes]],
        "loss": loss,
        "loo_loss": round(float(chosen.loss[chosen.k, chosen.attributes]), 9),
        "loo_loss_full_kdb": round(float(chosen.loss[k, n]), 9),
        "loo_loss_prior": round(float(chosen.loss[0, 0]), 9),
    }


def skdb(data: TrainingView, k: int, loss: str) -> Learned:
    """Selective KDB: KDB k' on the first s features of KDB's order, (s, k') by leave-one-out."""
    mi, cmi = data.statistics.class_mi(), data.statistics.cmi_matrix()
    order, parents, _ = kdb_structure(mi, cmi, k)
    o = capped(Ordering(tuple(order), tuple(tuple(p) for p in parents)), data)
    chosen = select(data, [o], k, loss)[0]
    return Learned.single(selected_structure(data, o, chosen, mi), data, selection=_summary(data, o, chosen, k, loss))


def stochastic_orders(mi: np.ndarray, members: int, seed: int) -> list[tuple[int, ...]]:
    """KDB's order first, then distinct orders drawn feature by feature with probability
    proportional to I(X;C) among the features left; features with I(X;C) = 0 come last in
    KDB's order. At most (number of features with I(X;C) > 0)! orders; deterministic for ``seed``."""
    first = tuple(int(i) for i in ranked(mi, range(mi.shape[0])))
    informative = [i for i in first if mi[i] > 0]
    tail = tuple(i for i in first if mi[i] <= 0)
    possible = 1
    for j in range(2, len(informative) + 1):
        possible *= j
        if possible >= members:
            break
    target = min(members, possible)
    rng = np.random.default_rng(seed)
    orders, seen = [first], {first}
    for _ in range(1000 * members):
        if len(orders) >= target:
            break
        left, drawn = list(informative), []
        while left:
            weights = mi[left] / mi[left].sum()
            pick = min(int(np.searchsorted(np.cumsum(weights), rng.random(), side="right")), len(left) - 1)
            drawn.append(left.pop(pick))
        candidate = (*drawn, *tail)
        if candidate not in seen:
            seen.add(candidate)
            orders.append(candidate)
    return orders


def eskdb(data: TrainingView, k: int, loss: str, members: int, sample_seed: int) -> Learned:
    """ESKDB: SKDBs on stochastic attribute orders, posteriors averaged. The paper's CPTs
    are HDP estimates: fit with ``--estimator hdp`` for its setting."""
    mi, cmi = data.statistics.class_mi(), data.statistics.cmi_matrix()
    orderings = [capped(ordering(order, cmi, k), data) for order in stochastic_orders(mi, members, sample_seed)]
    chosen = select(data, orderings, k, loss)
    learned = tuple(Member(selected_structure(data, o, c, mi), data) for o, c in zip(orderings, chosen))
    selection = [_summary(data, o, c, k, loss) for o, c in zip(orderings, chosen)]
    return Learned(learned, MEAN_POSTERIOR, {"selection": selection})


K_MAX = Param(
    "k",
    int_or_range,
    5,
    "the largest k tried (default 5, as Martínez et al.); the leave-one-out picks k' <= k",
    non_negative_int,
)
LOSS = Param(
    "loss",
    str,
    RMSE,
    "leave-one-out loss that selects the model: rmse (the paper's, default) or zero-one",
    one_of(RMSE, ZERO_ONE),
)
MEMBERS = Param("members", int, 5, "number of ensemble members (default 5)", positive_int)
SAMPLE_SEED = Param("sample_seed", int, 0, "seed of the random attribute orders (default 0)", non_negative_int)

LEARNERS = (
    Learner(
        "skdb",
        skdb,
        "selective KDB: k and the features kept chosen by leave-one-out (Martínez et al. 2016)",
        (K_MAX, LOSS),
        unweighted="",
    ),
    Learner(
        "eskdb",
        eskdb,
        "ensemble of selective KDBs on stochastic attribute orders (Zhang et al. 2020; paper: --estimator hdp)",
        (K_MAX, LOSS, MEMBERS, SAMPLE_SEED),
        unweighted="",
    ),
)
