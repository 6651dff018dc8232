"""Stratified fold assignment, shared by evaluation and the wrapper learners' searches."""

from __future__ import annotations

import numpy as np


def stratified_folds(y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold id (0..folds-1) per row: shuffle with ``seed``, group by class, deal out in turn."""
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(y.shape[0])
    by_class = shuffled[np.argsort(y[shuffled], kind="stable")]
    fold = np.empty(y.shape[0], dtype=np.int64)
    fold[by_class] = np.arange(y.shape[0]) % folds
    return fold
