"""χ² (G) tests of independence with the reliability rule, and the CV-accuracy wrapper score."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2_contingency

from bnserve.trainer import stats
from bnserve.trainer.data.folds import stratified_folds
from bnserve.trainer.evaluation.cross_validation import cross_validate
from bnserve.trainer.learners.search.wrapper import CrossValidatedAccuracy


def test_independence_test_is_the_g_test(rng):
    x = rng.integers(0, 3, 500)
    c = (x + rng.integers(0, 2, 500)) % 2
    test = stats.independence_test(x, c, 3, 2)
    g, p, dof, _ = chi2_contingency(stats.joint_counts([x, c], [3, 2]), correction=False, lambda_="log-likelihood")
    assert test.statistic == pytest.approx(g) and test.p_value == pytest.approx(p) and test.dof == dof
    assert test.reliable and test.rejects_independence == (p < 0.05)


def test_conditional_test_sums_the_per_class_g_statistics(rng):
    x, y, c = rng.integers(0, 2, 400), rng.integers(0, 3, 400), rng.integers(0, 2, 400)
    test = stats.conditional_independence_test(x, y, c, 2, 3, 2)
    g = sum(
        chi2_contingency(
            stats.joint_counts([x[c == k], y[c == k]], [2, 3]), correction=False, lambda_="log-likelihood"
        )[0]
        for k in range(2)
    )
    assert test.statistic == pytest.approx(g) and test.dof == (2 - 1) * (3 - 1) * 2


def test_unreliable_tests_never_reject():
    x = np.array([0, 1] * 10)
    c = x.copy()  # perfectly dependent, but 20 rows over 4 cells is 5 per cell: reliable
    assert stats.independence_test(x, c, 2, 2).rejects_independence
    few = stats.independence_test(x[:19], c[:19], 2, 2)  # 19 / 4 < 5
    assert not few.reliable and not few.rejects_independence


def test_joint_column_codes_the_combination_and_propagates_missing():
    codes, card = stats.joint_column([np.array([0, 1, 2, -1]), np.array([1, 0, 1, 0])], [3, 2])
    assert card == 6 and codes.tolist() == [1, 2, 5, -1]


def test_wrapper_score_is_pooled_cv_accuracy(chess):
    score = CrossValidatedAccuracy(chess, folds=5, seed=0)
    cls = chess.class_variable.name
    nb = {cls: (), **{f.name: (cls,) for f in chess.features}}
    evaluation = cross_validate("nb", chess, folds=5, seed=0)
    sizes = np.bincount(stratified_folds(chess.y, 5, 0))
    assert score(nb) == pytest.approx(np.dot(evaluation.fold_accuracies, sizes) / sizes.sum())
    # a selective model: one feature only
    assert 0.5 < score({cls: (), "rimmx": (cls,)}) < score(nb)


def test_cached_family_scores_equal_the_compiled_model(chess, rng):
    """The wrapper sums cached log-CPT columns; that must equal estimating and compiling."""
    from bnserve.store.model import Model
    from bnserve.store.predictor import compile_model
    from bnserve.trainer.learners.parameters import estimate
    from bnserve.trainer.learners.structure import Structure

    score = CrossValidatedAccuracy(chess, folds=5, seed=0)
    fold = stratified_folds(chess.y, 5, 0)
    cls = chess.class_variable.name
    names = [f.name for f in chess.features]
    for _ in range(5):
        chosen = [names[i] for i in rng.choice(len(names), 8, replace=False)]
        parents = {cls: ()}
        for i, name in enumerate(chosen):  # a random DAG: the class and up to two earlier chosen features
            extra = [chosen[j] for j in rng.choice(i, min(i, 2), replace=False)] if i else []
            parents[name] = (cls, *extra)
        correct = 0
        for f in range(5):
            train, test = chess.subset(fold != f), chess.subset(fold == f)
            model = Model(chess.variables, (estimate(Structure(parents, ()), train),), "check")
            correct += int((compile_model(model).predict_proba(test.X).argmax(axis=1) == test.y).sum())
        assert score(parents) == pytest.approx(correct / chess.n_rows)


def test_cb_counts_its_tests_from_kept_codes_on_complete_data_with_the_same_result():
    """CITests' shortcuts for complete data (kept codes; tests skipped when the chain rule's
    lower bound rejects) remove the same edges with the same separating sets as the plain tests."""
    from bnserve.trainer.learners.search.cb import CITests, pc_level

    rng = np.random.default_rng(4)

    def noisy(x):  # x, one time in ten replaced by noise
        return np.where(rng.random(3000) < 0.9, x, rng.integers(0, 3, 3000))

    a = rng.integers(0, 3, 3000)
    b = noisy(a)
    raw = [a, b, noisy(b), rng.integers(0, 2, 3000), noisy(a)]  # a -> b -> c: a ⊥ c | b
    cards = [3, 3, 3, 2, 3]
    results = []
    for complete in (False, True):
        adj, sepsets, tests = ~np.eye(5, dtype=bool), {}, CITests(raw, cards, complete=complete)
        for level in range(3):
            pc_level(tests, adj, sepsets, level)
        results.append((adj, sepsets))
    (plain_adj, plain_sepsets), (kept_adj, kept_sepsets) = results
    assert (
        (kept_adj == plain_adj).all() and kept_sepsets == plain_sepsets and any(len(s) for s in kept_sepsets.values())
    )


@pytest.mark.parametrize("seed", range(6))
def test_cb_tests_answered_by_the_chain_rule_bound_agree_with_counting_them(seed):
    """On complete data CITests skips a test when I(a;b|S∖z) − I(a;z|S∖z) already rejects;
    on random networks of ten variables over three orders the edges removed and their
    separating sets are those of the tests all counted, and the bound does answer tests."""
    from bnserve.trainer.learners.search.cb import CITests, pc_level

    rng = np.random.default_rng(seed)
    m, cards, raw = 4000, [], []
    for i in range(10):
        card = int(rng.integers(2, 4))
        parents = [raw[p] for p in rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False)]
        mixed = sum((p * (j + 2) for j, p in enumerate(parents)), np.zeros(m, dtype=np.int64)) % card
        noise = rng.random(m) < (0.2 if parents else 1.0)
        raw.append(np.where(noise, rng.integers(0, card, m), mixed))
        cards.append(card)
    bounded, results = [], []
    for complete in (False, True):
        adj, sepsets, tests = ~np.eye(10, dtype=bool), {}, CITests(raw, cards, complete=complete)
        for level in range(3):
            pc_level(tests, adj, sepsets, level)
        results.append((adj, sepsets))
        bounded.append(tests.bounded)
    assert (results[0][0] == results[1][0]).all() and results[0][1] == results[1][1]
    assert bounded[0] == 0 and bounded[1] > 0
