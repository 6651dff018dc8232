"""Scores and the papers' statistics, against slow or independent computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import friedmanchisquare

from bnserve.trainer.evaluation import comparison, metrics
from bnserve.trainer.evaluation.comparison import compare
from bnserve.trainer.evaluation.cross_validation import cross_validate_many
from bnserve.trainer.fit import fit


def slow_auc(score, positive):
    pairs = [(s_p, s_n) for s_p, s_n in itertools.product(score[positive], score[~positive])]
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs)


def test_auc_is_the_probability_a_positive_outranks_a_negative(rng):
    score = rng.integers(0, 5, 60).astype(float)  # many ties
    positive = rng.random(60) < 0.4
    assert metrics.binary_auc(score, positive) == pytest.approx(slow_auc(score, positive))
    proba = rng.dirichlet(np.ones(3), 90)
    y = rng.integers(0, 3, 90)
    assert metrics.auc(proba, y) == pytest.approx(np.mean([slow_auc(proba[:, c], y == c) for c in range(3)]))
    assert np.isnan(metrics.binary_auc(score, np.zeros(60, dtype=bool)))


def test_sum_mi_of_fkdb_is_the_sum_of_its_greedy_scores(chess):
    model = fit("fkdb", chess, k=2)
    assert metrics.sum_mi(model, chess) == pytest.approx(sum(model.metadata["order_scores"]))
    assert metrics.sum_mi(fit("nb", chess), chess) < metrics.sum_mi(model, chess)


def test_win_draw_loss_and_sign_test():
    w = comparison.win_draw_loss("A", "B", [0.1, 0.2, 0.3, 0.3, 0.1], [0.2, 0.3, 0.4, 0.3, 0.05])
    assert (w.wins, w.draws, w.losses) == (3, 1, 1)
    assert w.p_a_better == pytest.approx(5 / 16)  # P(X >= 3), X ~ Bin(4, 1/2)
    assert w.p_b_better == pytest.approx(15 / 16)


def test_friedman_matches_scipy_and_ranks_best_first(rng):
    losses = {name: rng.random(8) + shift for name, shift in (("a", 0.0), ("b", 0.3), ("c", 0.6))}
    f = comparison.friedman(losses)
    expected = friedmanchisquare(*losses.values())
    assert f.statistic == pytest.approx(expected.statistic) and f.p_value == pytest.approx(expected.pvalue)
    assert min(f.average_ranks, key=f.average_ranks.get) == "a"
    assert sum(f.average_ranks.values()) == pytest.approx(6)  # ranks 1..3 on each data set


def test_paired_t_test_edge_cases():
    assert comparison.paired_t_test([0.9, 0.8], [0.9, 0.8]) == (0.0, 1.0)
    t, p = comparison.paired_t_test([0.9, 0.8, 0.85], [0.8, 0.75, 0.8])
    assert t > 0 and 0 < p < 0.1


def test_every_algorithm_sees_the_same_folds(chess):
    a, b = cross_validate_many([("nb", {}), ("kdb", {"k": 0})], chess, folds=4)  # KDB k=0 is NB
    assert a.fold_accuracies == b.fold_accuracies
    result = compare([a, b])
    assert result.paired_t[a.dataset][f"nb vs {b.label}"] == (0.0, 1.0)
    assert (result.win_draw_loss[0].wins, result.win_draw_loss[0].draws) == (0, 1)
