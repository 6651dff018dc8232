"""Accuracy and log-loss by stratified k-fold cross-validation or on a hold-out set.

Predictions come from ``store.inference``, the same compiled path the server uses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from store.errors import InvalidInput
from store.inference import compile_model
from store.model import Model
from trainer.data import EncodedData
from trainer.fit import fit
from trainer.folds import stratified_folds

PROBABILITY_FLOOR = 1e-15  # log-loss of a zero probability is capped at -log(1e-15)


@dataclass(frozen=True)
class Evaluation:
    """Accuracy (mean and std over folds; std 0 for a hold-out) and mean log-loss (nats) over all scored rows."""

    accuracy: float
    accuracy_std: float
    log_loss: float
    fold_accuracies: tuple[float, ...]
    n_rows: int

    def to_dict(self) -> dict:
        return asdict(self)


def predict_scores(model: Model, data: EncodedData) -> tuple[np.ndarray, np.ndarray]:
    """(correct, log-loss) per row of ``data`` under ``model``."""
    proba = compile_model(model).predict_proba(data.X)
    correct = np.argmax(proba, axis=1) == data.y
    p_true = proba[np.arange(data.n_rows), data.y]
    return correct, -np.log(np.maximum(p_true, PROBABILITY_FLOOR))


def cross_validate(algo: str, data: EncodedData, *, folds: int = 10, seed: int = 0, **params: Any) -> Evaluation:
    """Stratified ``folds``-fold CV; deterministic for a given seed."""
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= data.n_rows:
        raise InvalidInput(f"folds must be an integer from 2 to the number of rows ({data.n_rows}), got {folds!r}")
    fold = stratified_folds(data.y, folds, seed)
    accuracies, losses = [], []
    for f in range(folds):
        model = fit(algo, data.subset(fold != f), **params)
        correct, loss = predict_scores(model, data.subset(fold == f))
        accuracies.append(float(correct.mean()))
        losses.append(loss)
    return Evaluation(
        accuracy=float(np.mean(accuracies)),
        accuracy_std=float(np.std(accuracies, ddof=1)),
        log_loss=float(np.concatenate(losses).mean()),
        fold_accuracies=tuple(accuracies),
        n_rows=data.n_rows,
    )


def holdout(algo: str, train: EncodedData, test: EncodedData, **params: Any) -> Evaluation:
    """Learn on ``train``, score on ``test`` (coded against the same variables)."""
    if test.variables != train.variables:
        raise InvalidInput("the test data must be coded against the training variables")
    if test.n_rows == 0:
        raise InvalidInput(f"{test.source}: no rows to score")
    correct, loss = predict_scores(fit(algo, train, **params), test)
    accuracy = float(correct.mean())
    return Evaluation(accuracy, 0.0, float(loss.mean()), (accuracy,), test.n_rows)
