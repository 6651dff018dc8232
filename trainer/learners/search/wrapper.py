"""Cross-validated accuracy of candidate structures: the score that wrapper learners
(FSS, BSEJ, K2-AS, CB) search with.

The folds are fixed once per search, so every candidate is scored on the same splits;
scores are memoised by the candidate's parent sets. Each family's log-CPT column for the
test rows of every fold, (rows, classes), is computed once and reused by every candidate
that has the family (bnclassify's per-fold CPT cache), its counts for all folds from one
pass over the rows (a fold's training counts are the total less its test counts). A
candidate's log P(c, x) on complete test rows is the sum of its families that contain the
class (the others are constant in c), summed in the candidate's node order. A fold whose
test rows miss a value of the candidate's features is scored through the compiled model,
which marginalises exactly.

Incremental scoring, exact. Summing every family for every candidate dominated the
searches; but a wrapper's candidates differ from one another by a move or two. Per fold,
the sum of one scored network (the anchor) is kept; a candidate's sum is then approximated
as the anchor's, less its families the candidate lacks, plus those it adds. The
approximation can differ from the sum in the candidate's own order only by rounding, which
is bounded (every family value is a log-probability, <= 0, so the sum of absolute values
is minus the sum): a row whose best class leads the next by more than twice that bound has
the same argmax as the exact sum; the other rows (ties, near-ties) are summed exactly, in
the order the candidate gives. So every accuracy, and every model, is the one the plain
sum gives, bit for bit. A candidate more than ``REANCHOR_FAMILIES`` families away from the
anchor is summed exactly and becomes the anchor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from bnserve.store.model import Model
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.learners.parameters import LAPLACE_ESTIMATOR, estimate
from bnserve.trainer.learners.structure import Structure
from bnserve.trainer.stats import shifted_codes

WRAPPER_FOLDS = 5  # paper 003 scores BSEJ and FSS candidates by 5-fold stratified CV
FAMILY_CACHE_BYTES = 256 * 2**20  # per fold; past it the family cache starts afresh
REANCHOR_FAMILIES = 6  # a candidate further than this from the anchor is summed in full
ROUNDING = np.finfo(np.float64).eps / 2  # unit roundoff of float64

Family = tuple[str, tuple[str, ...]]  # (node, parents)


class CrossValidatedAccuracy:
    """``score(parents)`` = accuracy over ``folds`` stratified folds of ``data``.

    ``parents`` maps each node of a candidate network (the class included) to its
    ordered parents; features it leaves out are not in the network. A candidate near the
    anchor costs O(folds · m · moved families) (see the module docstring), one far from it
    O(folds · m · n); each family not seen before costs O(m + folds · CPT size); a fold with
    missing test values costs an estimate and a compile.
    """

    def __init__(self, data: EncodedData, folds: int = WRAPPER_FOLDS, seed: int = 0):
        folds = max(2, min(folds, int(np.bincount(data.y).max())))
        self._data = data
        self._fold = stratified_folds(data.y, folds, seed)
        self._folds = folds
        self._tests = [np.flatnonzero(self._fold == f) for f in range(folds)]
        self._test_y = [data.y[rows] for rows in self._tests]
        self._variables = data.variables
        self._n = data.n_rows
        self._cache: dict[frozenset, float] = {}
        self._class = data.class_variable.name
        self._index = {v.name: i for i, v in enumerate(data.features)}
        self._cards = {v.name: v.cardinality for v in data.variables}
        self._incomplete = [set(np.flatnonzero((data.X[rows] < 0).any(axis=0)).tolist()) for rows in self._tests]
        self._has_missing = {v.name: bool((data.X[:, i] < 0).any()) for i, v in enumerate(data.features)}
        self._ids: dict[Family, int] = {}  # each family seen, numbered
        self._keys: list[Family] = []
        self._families: dict[int, list[tuple[np.ndarray, float]]] = {}
        self._family_bytes = 0
        # per fold: the anchor's families, their sum (classes, rows), its largest absolute value
        self._anchors: list[tuple[frozenset[int], np.ndarray, float] | None] = [None] * folds
        # per fold: where each test row's own class sits in a flattened (classes, rows) array
        self._flat_y = [y * y.shape[0] + np.arange(y.shape[0]) for y in self._test_y]

    def __call__(self, parents: Mapping[str, tuple[str, ...]]) -> float:
        key = frozenset((node, tuple(ps)) for node, ps in parents.items())
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._score(parents)
        return hit

    def _score(self, parents: Mapping[str, tuple[str, ...]]) -> float:
        used = {self._index[v] for v in parents if v != self._class}
        # the families that contain the class, in the candidate's order (the others are constant in c)
        keys = [(v, tuple(ps)) for v, ps in parents.items() if v == self._class or self._class in ps]
        families = [self._id(key) for key in keys]  # ids: a family's key is hashed once, not per fold
        members = frozenset(families)
        correct = 0
        for f in range(self._folds):
            if used & self._incomplete[f]:
                train = self._data.subset(self._fold != f)
                model = Model(self._variables, (estimate(Structure(dict(parents), ()), train),), "candidate")
                log_joint = compile_model(model).predict_proba(self._data.X[self._tests[f]])
                correct += int(np.count_nonzero(np.argmax(log_joint, axis=1) == self._test_y[f]))
            else:
                correct += self._correct(f, families, members)
        return correct / self._n

    def _id(self, key: Family) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._keys)
            self._keys.append(key)
        return found

    def _correct(self, fold: int, families: list[int], members: frozenset[int]) -> int:
        """Test rows of ``fold`` whose argmax of the summed ``families`` (ids) is their class."""
        y = self._test_y[fold]
        anchor = self._anchors[fold]
        if anchor is not None:
            removed = [key for key in anchor[0] if key not in members]
            added = [key for key in families if key not in anchor[0]]
        if anchor is None or len(removed) + len(added) > max(REANCHOR_FAMILIES, len(families) // 2):
            log_joint = self._sum(fold, families)
            self._anchors[fold] = (members, log_joint, float(np.abs(log_joint).max(initial=0.0)))
            return int(np.count_nonzero(_first_argmax(log_joint) == y))
        approx, spread = anchor[1], anchor[2]
        for key in removed:
            values, largest = self._family(key)[fold]
            approx = approx - values
            spread += largest
        for key in added:
            values, largest = self._family(key)[fold]
            approx = approx + values
            spread += largest
        if approx.shape[1] != y.shape[0]:  # an anchor of the class's family alone
            approx = np.broadcast_to(approx, (approx.shape[0], y.shape[0]))
        # Every family value is <= 0, so the absolute values of the anchor's, the removed and
        # the added families sum to at most ``spread`` (the anchor's largest |sum|, then each
        # family's largest |value|); the sum in full and the approximation each round off by
        # at most (terms) u times that. Twice that, for safety, on each side.
        terms = len(anchor[0]) + len(families) + len(removed) + len(added) + 2
        floor = approx.max(axis=0)
        top = floor.copy()
        floor -= 4.0 * terms * ROUNDING * spread
        sure = np.count_nonzero(approx >= floor, axis=0) == 1
        correct = int(np.count_nonzero(sure & (approx.ravel()[self._flat_y[fold]] == top)))
        unsure = np.flatnonzero(~sure)
        if unsure.size:
            correct += int(np.count_nonzero(_first_argmax(self._sum(fold, families, unsure)) == y[unsure]))
        return correct

    def _sum(self, fold: int, families: list[int], rows: np.ndarray | None = None) -> np.ndarray:
        """log P(c, x) up to a constant, (classes, rows), at the test rows of ``fold`` (or those
        of them at ``rows``): the families summed one by one in the candidate's order."""
        size = self._test_y[fold].shape[0] if rows is None else rows.shape[0]
        log_joint = np.zeros((self._cards[self._class], size))
        for key in families:
            values = self._family(key)[fold][0]
            if rows is not None and values.shape[1] > 1:
                values = values[:, rows]
            log_joint = log_joint + values  # (classes, 1) broadcasts
        return log_joint

    def _family(self, family_id: int) -> list[tuple[np.ndarray, float]]:
        """log P(node | parents) at each test row of every fold, for every class, as
        (classes, rows) ((classes, 1) for the class's own family), with its largest absolute
        value, per fold. The counts of every fold come from one bincount over all rows with
        the fold as the first axis; a fold's training counts are the total less its own, the
        same integers as counting its training rows."""
        hit = self._families.get(family_id)
        if hit is None:
            node, parents = self._keys[family_id]
            family = (node, *parents)
            cards = [self._cards[v] for v in family]
            columns = [self._column(v) for v in family]
            if any(self._has_missing.get(v, False) for v in family):  # they land in a state 0, cut off
                cells = math.prod(c + 1 for c in cards)
                codes = shifted_codes(columns, cards) + self._fold * cells
                by_fold = np.bincount(codes, minlength=cells * self._folds)
                by_fold = by_fold.reshape(self._folds, *(c + 1 for c in cards))
                by_fold = by_fold[(slice(None), *(slice(1, None),) * len(cards))]
            else:  # the same counts, without a table (4/3)^k times larger for 3-valued columns
                cells = math.prod(cards)
                codes = self._fold * cells
                for column, stride in zip(columns, _strides(cards)):
                    codes += column.astype(np.int64) * stride
                by_fold = np.bincount(codes, minlength=cells * self._folds).reshape(self._folds, *cards)
            total = by_fold.sum(axis=0)
            k = self._cards[self._class]
            hit = []
            for f, rows in enumerate(self._tests):
                log_cpt = np.log(LAPLACE_ESTIMATOR.cpt(np.ascontiguousarray(total - by_fold[f])))
                at = [np.arange(k)[:, None] if v == self._class else self._column(v)[rows][None, :] for v in family]
                values = np.ascontiguousarray(log_cpt[tuple(at)])
                hit.append((values, float(-values.min()) if values.size else 0.0))
            size = sum(values.nbytes for values, _ in hit)
            if self._family_bytes + size > FAMILY_CACHE_BYTES * self._folds:
                self._families.clear()
                self._family_bytes = 0
            self._families[family_id] = hit
            self._family_bytes += size
        return hit

    def _column(self, name: str) -> np.ndarray:
        return self._data.y if name == self._class else self._data.X[:, self._index[name]]


def _first_argmax(log_joint: np.ndarray) -> np.ndarray:
    """Per column of (classes, rows), the first class with the largest value: ``np.argmax``
    over axis 0, without its per-row loop over a short axis."""
    top = log_joint.max(axis=0)
    best = np.zeros(log_joint.shape[1], dtype=np.int64)
    for c in range(log_joint.shape[0] - 1, -1, -1):
        best[log_joint[c] == top] = c
    return best


def _strides(cards: list[int]) -> list[int]:
    """Of each axis in a C-ordered table of shape ``cards``."""
    return [math.prod(cards[i + 1 :]) for i in range(len(cards))]
