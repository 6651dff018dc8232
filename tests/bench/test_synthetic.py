"""The synthetic k-dependence generator of the benchmarks (bench/synthetic.py)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.synthetic import bayes_optimal, calibrate, random_network, sample
from bnserve.store.predictor import compile_model
from bnserve.trainer.fit import fit
from bnserve.trainer.stats import joint_counts


def test_same_seed_same_network_and_rows():
    a = random_network(5, n_features=8, k=2, strength=0.4)
    b = random_network(5, n_features=8, k=2, strength=0.4)
    assert a.model.checksum() == b.model.checksum()
    da, db = sample(a, 500, 9), sample(b, 500, 9)
    assert np.array_equal(da.X, db.X) and np.array_equal(da.y, db.y)
    assert da.X.dtype == np.int32 and da.y.dtype == np.int64
    assert da.fingerprint() == db.fingerprint()
    other = sample(a, 500, 10)
    assert not np.array_equal(da.X, other.X)
    assert random_network(6, n_features=8).model.checksum() != a.model.checksum()


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_structure_is_k_dependent_in_a_random_order(k):
    net = random_network(k, n_features=12, max_states=5, n_classes=4, k=k)
    assert sorted(net.order) == list(range(12))
    position = {i: p for p, i in enumerate(net.order)}
    for i, parents in enumerate(net.parents):
        assert len(parents) == min(position[i], k) <= k
        assert all(position[j] < position[i] for j in parents)  # earlier features only
        assert len(set(parents)) == len(parents)
    assert all(2 <= c <= 5 for c in net.cards)
    model = net.model
    assert model.class_variable.cardinality == 4
    network = model.networks[0]
    for node in network.nodes:
        if node.name != "class":
            assert node.parents[0] == "class" and len(node.parents) <= k + 1
    assert network.node("class").parents == ()


def test_strength_mixes_shared_and_class_specific_draws():
    net = random_network(1, n_features=5, strength=0.0)
    for i in range(5):
        cpt = net.cpt(i)
        assert np.allclose(cpt, cpt[:, :1])  # no class signal at all
    strong = net.with_strength(1.0)
    assert np.allclose(strong.cpt(2), strong.specific[2])
    half = net.with_strength(0.5)
    assert np.allclose(half.cpt(3), 0.5 * net.shared[3] + 0.5 * net.specific[3])
    with pytest.raises(ValueError):
        net.with_strength(1.5)


def test_empirical_frequencies_match_the_cpts():
    """Conditional frequencies of every node given its parents (class included), over a large
    sample, are within 5 standard errors (+ 0.002) of the CPT entries."""
    net = random_network(2, n_features=6, max_states=3, n_classes=2, k=2, strength=0.6)
    data = sample(net, 200_000, 3)
    prior = np.bincount(data.y, minlength=2) / data.n_rows
    assert np.allclose(prior, net.prior, atol=5 * np.sqrt(0.25 / data.n_rows) + 0.002)
    for i in range(6):
        family = [data.X[:, i], data.y, *(data.X[:, j] for j in net.parents[i])]
        cards = [net.cards[i], 2, *(net.cards[j] for j in net.parents[i])]
        counts = joint_counts(family, cards).astype(float)
        totals = counts.sum(axis=0)
        cpt = net.cpt(i)
        seen = totals > 0
        freq = np.divide(counts, totals, out=np.zeros_like(counts), where=seen)
        se = np.sqrt(cpt * (1 - cpt) / np.maximum(totals, 1))
        assert np.all(np.abs(freq - cpt)[:, seen] <= 5 * se[:, seen] + 0.002), i


def test_bayes_optimal_beats_every_learner_on_the_same_test_rows():
    net = random_network(4, n_features=10, k=2, strength=0.3)
    train, test = sample(net, 4000, 1), sample(net, 20_000, 2)
    best = bayes_optimal(net, test)
    assert 0.0 < best.accuracy <= 1.0 and best.rows == 20_000
    for algo, params in (("nb", {}), ("tan", {}), ("kdb", {"k": 2}), ("fkdb", {"k": 2})):
        proba = compile_model(fit(algo, train, **params)).predict_proba(test.X)
        accuracy = float(np.mean(proba.argmax(axis=1) == test.y))
        assert accuracy <= best.accuracy, algo


def test_calibrate_reaches_the_target_accuracy():
    net = random_network(0, n_features=20, k=2)
    tuned = calibrate(net, 0.8, rows=5000)
    check = bayes_optimal(tuned, sample(tuned, 20_000, 99))
    assert abs(check.expected_accuracy - 0.8) < 0.015
    assert abs(check.accuracy - 0.8) < 0.02
    half = tuned.with_strength(tuned.strength / 2)
    assert bayes_optimal(half, sample(half, 20_000, 99)).expected_accuracy < check.expected_accuracy - 0.05
