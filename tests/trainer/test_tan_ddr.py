"""ddr-ChowLiu (Zhang 2005, paper 004): TAN on the dependence-derivative weight I_D."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from bnserve.store.model import CLASS, FEATURE, Variable
from bnserve.trainer import stats
from bnserve.trainer.data import EncodedData
from bnserve.trainer.evaluation.cross_validation import cross_validate
from bnserve.trainer.learners.tan import tan_ddr
from tests.data_helpers import dataset


def slow_i_d(xi, xj, c, ci, cj, n_classes):
    """Eq. 17 (two classes) or eq. 18-19 (more), from dict counts, one row at a time."""
    rows = [(a, b, k) for a, b, k in zip(xi.tolist(), xj.tolist(), c.tolist()) if a >= 0 and b >= 0 and k >= 0]
    n = Counter(rows)
    n_c = Counter(k for _, _, k in rows)
    n_ab = Counter((a, b) for a, b, _ in rows)
    classes = [k for k in range(n_classes) if n_c[k] > 0]
    if len(classes) < 2:
        return 0.0

    def p(a, b, k):  # Laplace-smoothed p(a, b | k)
        return (n[(a, b, k)] + 1) / (n_c[k] + ci * cj)

    def d(a, b, k):  # ln p(a | b, k) / p(a | k)
        p_a = sum(p(a, bb, k) for bb in range(cj))
        p_b = sum(p(aa, b, k) for aa in range(ci))
        return math.log(p(a, b, k) / (p_a * p_b))

    total = 0.0
    for (a, b), count in n_ab.items():
        ds = [d(a, b, k) for k in classes]
        if n_classes == 2:
            spread = (ds[0] - ds[1]) ** 2
        else:
            avg = sum(ds) / len(ds)
            spread = sum((v - avg) ** 2 for v in ds)
        total += count / len(rows) * spread
    return total


def random_data(rng, m, cards, n_classes, missing=0.05):
    X = np.stack([rng.integers(0, k, m) for k in cards], axis=1).astype(np.int32)
    X[:, 1] = np.where(rng.random(m) < 0.7, X[:, 0] % cards[1], X[:, 1])  # some real dependence
    X[rng.random(X.shape) < missing] = -1
    y = rng.integers(0, n_classes, m).astype(np.int64)
    variables = tuple(Variable(f"f{i}", tuple(str(s) for s in range(k)), FEATURE) for i, k in enumerate(cards))
    variables += (Variable("class", tuple(str(s) for s in range(n_classes)), CLASS),)
    return EncodedData(variables, X, y, 0, "random")


@pytest.mark.parametrize("n_classes, seed", [(2, 0), (2, 1), (3, 2), (5, 3)])
def test_weights_equal_a_slow_computation_of_eq_17_18(n_classes, seed):
    rng = np.random.default_rng(seed)
    cards = [int(k) for k in rng.integers(2, 5, 5)]
    d = random_data(rng, 150, cards, n_classes)
    w = stats.dependence_derivative_information_matrix(d.X, d.y, d.cards, d.n_classes)
    assert np.array_equal(w, w.T) and not w.diagonal().any()
    for i, j in itertools.combinations(range(len(cards)), 2):
        expected = slow_i_d(d.X[:, i], d.X[:, j], d.y, cards[i], cards[j], n_classes)
        assert w[i, j] == pytest.approx(expected, rel=1e-10, abs=1e-14)
        assert expected > 0


def test_eq_18_is_half_of_eq_17_for_two_classes():
    rng = np.random.default_rng(7)
    n = rng.integers(0, 20, (3, 4, 2))
    eq17 = stats.dependence_derivative_information_from_counts(n)
    # the same table with a third, empty class goes through eq. 18 (empty classes are left out)
    eq18 = stats.dependence_derivative_information_from_counts(np.concatenate([n, np.zeros((3, 4, 1))], axis=2))
    assert eq18 == pytest.approx(eq17 / 2)


def test_dependence_spread_evenly_over_classes_weighs_nothing():
    """Paper 004's point: I_D measures how the dependence differs between classes, not its strength."""
    same = np.zeros((2, 2, 2))
    same[0, 0, :] = same[1, 1, :] = 50  # Y = X in both classes: strong dependence
    assert stats.conditional_mutual_information_from_counts(same) == pytest.approx(math.log(2))
    assert stats.dependence_derivative_information_from_counts(same) == 0.0
    differs = same.copy()
    differs[:, :, 1] = 25  # Y = X in class 0 only
    assert stats.dependence_derivative_information_from_counts(differs) > 1.0
    assert stats.dependence_derivative_information_from_counts(same[:, :, :1]) == 0.0  # one class


@pytest.mark.parametrize("n_classes, seed", [(2, 4), (3, 5)])
def test_tree_is_a_maximum_spanning_tree_of_the_weights(n_classes, seed):
    rng = np.random.default_rng(seed)
    cards = [int(k) for k in rng.integers(2, 5, 6)]
    d = random_data(rng, 200, cards, n_classes)
    n = len(cards)
    w = stats.dependence_derivative_information_matrix(d.X, d.y, d.cards, d.n_classes)
    mi = stats.class_mutual_information(d.X, d.y, d.cards, d.n_classes)
    s = tan_ddr(d)
    names = [v.name for v in d.features]
    edges = []
    for node, parents in s.parents.items():
        if node == "class":
            assert parents == ()
            continue
        assert parents[0] == "class" and len(parents) <= 2
        if len(parents) == 2:
            edges.append((names.index(parents[1]), names.index(node)))
    roots = [v for v in names if len(s.parents[v]) == 1]
    assert roots == [names[int(np.argmax(mi))]] == [s.order[0]]
    assert len(edges) == n - 1 and len({frozenset(e) for e in edges}) == n - 1
    best = max(  # brute force over every spanning tree
        sum(w[a, b] for a, b in subset)
        for subset in itertools.combinations(itertools.combinations(range(n), 2), n - 1)
        if _spans(subset, n)
    )
    assert sum(w[a, b] for a, b in edges) == pytest.approx(best, rel=1e-12)
    assert list(s.scores[1:]) == pytest.approx([w[names.index(s.parents[v][1]), names.index(v)] for v in s.order[1:]])


def _spans(edges, n):
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[ra] = rb
    return True


@pytest.fixture(scope="module")
def dermatology():
    d = dataset("dermatology")
    age = [v.name for v in d.features].index("Age")  # the one numeric column: no discretiser yet
    return EncodedData(d.variables[:age] + d.variables[age + 1 :], np.delete(d.X, age, axis=1), d.y, 0, "dermatology")


def test_dermatology_matches_zhang_table_2(dermatology):
    """Paper 004, Table 2: dermatology, ChowLiu 97.7 ± 0.17, ddr-ChowLiu 97.7 ± 0.17 (20 × 5-fold CV).
    Here 5 × 5-fold CV (seeds 0-4), Age dropped; the spread allowed is 2 sd, the larger of the
    paper's and ours over repeats. TAN is not held to the figure (ours: 96.6, see the report);
    ddr-ChowLiu must not lose to it, as in the paper."""
    ddr = [cross_validate("tan-ddr", dermatology, folds=5, seed=s).accuracy * 100 for s in range(5)]
    tan = [cross_validate("tan", dermatology, folds=5, seed=s).accuracy * 100 for s in range(5)]
    sd = max(0.17, float(np.std(ddr, ddof=1)))
    assert abs(np.mean(ddr) - 97.7) <= 2 * sd
    assert np.mean(ddr) >= np.mean(tan) - sd
