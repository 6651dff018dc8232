"""Cross-validated accuracy of candidate structures: the score that wrapper learners
(FSS, BSEJ, K2-AS, CB) search with.

The folds are fixed once per search, so every candidate is scored on the same splits;
scores are memoised by the candidate's parent sets. Within a fold, each family's log-CPT
column for the test rows, (rows, classes), is computed once and reused by every candidate
that has the family (bnclassify's per-fold CPT cache): a candidate's log P(c, x) on
complete test rows is the sum of its families that contain the class (the others are
constant in c). A fold whose test rows miss a value of the candidate's features is scored
through the compiled model, which marginalises exactly.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bnserve.store.model import Model
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.learners.parameters import estimate, laplace_cpt
from bnserve.trainer.learners.structure import Structure

WRAPPER_FOLDS = 5  # paper 003 scores BSEJ and FSS candidates by 5-fold stratified CV
FAMILY_CACHE_BYTES = 256 * 2**20  # per fold; past it the fold's family cache starts afresh


class CrossValidatedAccuracy:
    """``score(parents)`` = accuracy over ``folds`` stratified folds of ``data``.

    ``parents`` maps each node of a candidate network (the class included) to its
    ordered parents; features it leaves out are not in the network. A candidate costs
    O(folds · m · n) for the sum, plus O(m + CPT size) per fold for each family not seen
    before; a fold with missing test values costs an estimate and a compile.
    """

    def __init__(self, data: EncodedData, folds: int = WRAPPER_FOLDS, seed: int = 0):
        folds = max(2, min(folds, int(np.bincount(data.y).max())))
        fold = stratified_folds(data.y, folds, seed)
        self._splits = [(data.subset(fold != f), data.subset(fold == f)) for f in range(folds)]
        self._variables = data.variables
        self._n = data.n_rows
        self._cache: dict[frozenset, float] = {}
        self._class = data.class_variable.name
        self._index = {v.name: i for i, v in enumerate(data.features)}
        self._cards = {v.name: v.cardinality for v in data.variables}
        self._incomplete = [set(np.flatnonzero((test.X < 0).any(axis=0)).tolist()) for _, test in self._splits]
        self._families: list[dict[tuple[str, tuple[str, ...]], np.ndarray]] = [{} for _ in self._splits]
        self._family_bytes = [0 for _ in self._splits]

    def __call__(self, parents: Mapping[str, tuple[str, ...]]) -> float:
        key = frozenset((node, tuple(ps)) for node, ps in parents.items())
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._score(parents)
        return hit

    def _score(self, parents: Mapping[str, tuple[str, ...]]) -> float:
        structure = Structure(dict(parents), ())
        used = {self._index[v] for v in parents if v != self._class}
        correct = 0
        for f, (train, test) in enumerate(self._splits):
            if used & self._incomplete[f]:
                model = Model(self._variables, (estimate(structure, train),), "candidate")
                log_joint = compile_model(model).predict_proba(test.X)
            else:
                log_joint = np.zeros((test.n_rows, test.n_classes))
                for v, ps in parents.items():
                    if v == self._class or self._class in ps:  # the other families are constant in c
                        log_joint = log_joint + self._family(f, v, tuple(ps))  # (1, classes) broadcasts
            correct += int(np.count_nonzero(np.argmax(log_joint, axis=1) == test.y))
        return correct / self._n

    def _family(self, fold: int, node: str, parents: tuple[str, ...]) -> np.ndarray:
        """log P(node | parents) at each test row of ``fold``, for every class: (rows, classes)."""
        key = (node, parents)
        hit = self._families[fold].get(key)
        if hit is None:
            train, test = self._splits[fold]
            family = (node, *parents)
            log_cpt = np.log(laplace_cpt([self._column(train, v) for v in family], [self._cards[v] for v in family]))
            k = self._cards[self._class]
            at = [np.arange(k)[None, :] if v == self._class else self._column(test, v)[:, None] for v in family]
            hit = log_cpt[tuple(at)]
            if self._family_bytes[fold] + hit.nbytes > FAMILY_CACHE_BYTES:
                self._families[fold].clear()
                self._family_bytes[fold] = 0
            self._families[fold][key] = hit
            self._family_bytes[fold] += hit.nbytes
        return hit

    def _column(self, data: EncodedData, name: str) -> np.ndarray:
        return data.y if name == self._class else data.X[:, self._index[name]]
