"""Scores of predictions and of learned structures, as the papers report them."""

from __future__ import annotations

import numpy as np

from bnserve.store.model import Model
from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData

PROBABILITY_FLOOR = 1e-15  # log-loss of a zero probability is capped at -log(1e-15)


def log_losses(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """-log P(true class) per row, in nats."""
    return -np.log(np.maximum(proba[np.arange(y.shape[0]), y], PROBABILITY_FLOOR))


def binary_auc(score: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum (Mann–Whitney) formula, ties counted half.
    NaN when one side is empty."""
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    from scipy.stats import rankdata  # here: importing scipy.stats costs every trainer command 0.4 s

    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auc(proba: np.ndarray, y: np.ndarray) -> float:
    """Binary: the AUC of P(second class). More classes: the mean one-vs-rest AUC over
    the classes that occur (and do not make up every row)."""
    if proba.shape[1] == 2:
        return binary_auc(proba[:, 1], y == 1)
    values = [binary_auc(proba[:, c], y == c) for c in range(proba.shape[1])]
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else float("nan")


def sum_mi(model: Model, data: EncodedData) -> float:
    """Paper 001's information quantity Sum_MI of a structure, in nats: over the feature
    nodes, I(Xi;C) + the sum of I(Xi;Xj|C) over its feature parents Xj; for an ensemble,
    the mean over its networks. Counts come from ``data`` (the training rows)."""
    column = {v.name: i for i, v in enumerate(data.features)}
    cards = data.cards
    mi_cache: dict[int, float] = {}
    cmi_cache: dict[tuple[int, int], float] = {}

    def mi(i: int) -> float:
        if i not in mi_cache:
            mi_cache[i] = stats.mutual_information(data.X[:, i], data.y, cards[i], data.n_classes)
        return mi_cache[i]

    def cmi(i: int, j: int) -> float:
        key = (min(i, j), max(i, j))
        if key not in cmi_cache:
            cmi_cache[key] = stats.conditional_mutual_information(
                data.X[:, i], data.X[:, j], data.y, cards[i], cards[j], data.n_classes
            )
        return cmi_cache[key]

    totals = []
    for net in model.networks:
        total = 0.0
        for node in net.nodes:
            if node.name not in column:
                continue
            i = column[node.name]
            total += mi(i) + sum(cmi(i, column[p]) for p in node.parents if p in column)
        totals.append(total)
    return float(np.mean(totals))
