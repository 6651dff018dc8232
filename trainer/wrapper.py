"""Cross-validated accuracy of candidate structures: the score that wrapper learners
(FSS, BSEJ, K2-AS, CB) search with.

The folds are fixed once per search, so every candidate is scored on the same splits;
scores are memoised by the candidate's parent sets (like bnclassify's CPT cache).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from store.inference import compile_model
from store.model import Model
from trainer.data import EncodedData
from trainer.estimate import estimate
from trainer.folds import stratified_folds
from trainer.learners.structure import Structure

WRAPPER_FOLDS = 5  # paper 003 scores BSEJ and FSS candidates by 5-fold stratified CV


class CrossValidatedAccuracy:
    """``score(parents)`` = accuracy over ``folds`` stratified folds of ``data``.

    ``parents`` maps each node of a candidate network (the class included) to its
    ordered parents; features it leaves out are not in the network. O(folds · (m·n + compile)).
    """

    def __init__(self, data: EncodedData, folds: int = WRAPPER_FOLDS, seed: int = 0):
        folds = max(2, min(folds, int(np.bincount(data.y).max())))
        fold = stratified_folds(data.y, folds, seed)
        self._splits = [(data.subset(fold != f), data.subset(fold == f)) for f in range(folds)]
        self._variables = data.variables
        self._n = data.n_rows
        self._cache: dict[frozenset, float] = {}

    def __call__(self, parents: Mapping[str, tuple[str, ...]]) -> float:
        key = frozenset((node, tuple(ps)) for node, ps in parents.items())
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._score(parents)
        return hit

    def _score(self, parents: Mapping[str, tuple[str, ...]]) -> float:
        structure = Structure(dict(parents), ())
        correct = 0
        for train, test in self._splits:
            model = Model(self._variables, (estimate(structure, train),), "candidate")
            proba = compile_model(model).predict_proba(test.X)
            correct += int(np.count_nonzero(np.argmax(proba, axis=1) == test.y))
        return correct / self._n
