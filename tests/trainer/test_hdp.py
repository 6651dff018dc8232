"""HDP CPT estimates (trainer/learners/hdp.py): the limits the method promises, the
posterior-mean step by hand, reproducibility, and a fitted model against the reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bnserve.store.model import CLASS, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.hdp import EXACT_STIRLING_MAX_N, hdp_cpt, hdp_probabilities, log_stirling
from tests.reference import reference_proba


def cpt(counts: np.ndarray, sweeps: int = 200, seed: int = 0) -> np.ndarray:
    return hdp_cpt(np.asarray(counts, dtype=np.float64), sweeps=sweeps, rng=np.random.default_rng(seed))


def test_no_data_is_uniform() -> None:
    assert np.allclose(cpt(np.zeros((3, 2, 4))), 1 / 3)
    assert np.allclose(cpt(np.zeros(4)), 1 / 4)


def test_large_counts_approach_the_frequencies_of_each_configuration() -> None:
    rng = np.random.default_rng(1)
    counts = rng.dirichlet(np.ones(3), size=(2, 3)).transpose(2, 0, 1) * 1e6  # (node, pa1, pa2)
    assert np.allclose(cpt(counts, sweeps=50), counts / counts.sum(axis=0), atol=2e-3)


def test_an_unseen_configuration_takes_its_parents_estimate() -> None:
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 30, size=(3, 2, 3)).astype(float)
    counts[:, 1, 2] = 0  # (pa1 = 1, pa2 = 2) never seen
    tables = [rng.integers(1, 4, size=(3, 2)), np.minimum(counts, 2)]
    tables[0] = np.minimum(tables[0], tables[1].sum(axis=2))
    concentrations = [2.0, 3.0, 5.0]
    p = hdp_probabilities(counts, tables, concentrations)
    depth1 = hdp_probabilities(tables[1].sum(axis=2), tables[:1], concentrations[:2])
    assert np.allclose(p[:, 1, 2], depth1[:, 1])
    sampled = cpt(counts)
    assert np.all(sampled[:, 1, 2] > 0)
    assert not np.allclose(sampled[:, 1, 2], sampled[:, 0, 2])  # pa1 = 1's own estimate, not pa1 = 0's


def test_identical_configurations_pool_to_the_overall_frequencies() -> None:
    rng = np.random.default_rng(3)
    shared = np.array([0.6, 0.3, 0.1])
    counts = np.stack([rng.multinomial(5, shared) for _ in range(60)], axis=1).reshape(3, 6, 10).astype(float)
    pooled = counts.sum(axis=(1, 2)) / counts.sum()
    ml = counts / counts.sum(axis=0)
    p = cpt(counts, sweeps=500)
    # shrunk well towards the pooled frequencies (partly: the concentrations' Gamma(2, 1) prior)
    assert np.abs(p - pooled[:, None, None]).mean() < 0.07
    assert np.abs(p - pooled[:, None, None]).mean() < np.abs(ml - pooled[:, None, None]).mean() / 2


def test_posterior_mean_by_hand() -> None:
    """X with 2 states, one parent with 2 states; leaf counts (3, 1) and (0, 2), table counts
    (2, 1) and (0, 1), so the root sees n = (2, 2); concentrations: root 2, depth 1 c = 1."""
    counts = np.array([[3.0, 0.0], [1.0, 2.0]])
    tables = [np.array([[2, 0], [1, 1]])]
    root = (np.array([2.0, 2.0]) + 2 * 0.5) / (4 + 2)  # (0.5, 0.5)
    first = (np.array([3.0, 1.0]) + 1 * root) / (4 + 1)  # (0.7, 0.3)
    second = (np.array([0.0, 2.0]) + 1 * root) / (2 + 1)  # (1/6, 5/6)
    p = hdp_probabilities(counts, tables, [2.0, 1.0])
    assert np.allclose(p[:, 0], first) and np.allclose(p[:, 1], second)
    assert np.allclose(p, [[0.7, 1 / 6], [0.3, 5 / 6]])
    assert np.allclose(hdp_probabilities(np.array([3.0, 1.0]), [], [2.0]), [4 / 6, 2 / 6])


def test_log_stirling_exact_and_saddle_point() -> None:
    assert np.allclose(np.exp(log_stirling(np.array([4, 4, 4, 4]), np.array([1, 2, 3, 4]))), [6, 11, 6, 1])
    n = EXACT_STIRLING_MAX_N
    t = np.arange(2, n - 1)
    exact = log_stirling(np.full(t.shape, n), t)
    # the saddle point's own figure at n (where the exact table stops) vs the recurrence
    from bnserve.trainer.learners.hdp import _saddle_log_stirling

    assert np.abs(_saddle_log_stirling(np.full(t.shape, float(n)), t.astype(float)) - exact).max() < 0.09
    big = log_stirling(np.array([n + 10, n + 10, n + 10]), np.array([1, n + 9, n + 10]))
    assert np.isfinite(big).all() and big[2] == 0.0


def test_reproducible_for_a_seed_and_proper() -> None:
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 15, size=(4, 3, 2, 3)).astype(float)
    a, b, c = cpt(counts, 60, seed=1), cpt(counts, 60, seed=1), cpt(counts, 60, seed=2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    for p in (a, c):
        assert p.shape == counts.shape
        assert np.allclose(p.sum(axis=0), 1.0)
        assert np.all(p > 0)


@pytest.fixture(scope="module")
def small() -> EncodedData:
    rng = np.random.default_rng(7)
    m = 80
    y = rng.integers(0, 3, m)
    a = (y + rng.integers(0, 2, m)) % 2
    b = (a + y + rng.integers(0, 2, m)) % 3
    c = (b + rng.integers(0, 2, m)) % 2
    X = np.stack([a, b, c], axis=1).astype(np.int32)
    X[[3, 17, 40], [0, 1, 2]] = -1
    variables = (
        Variable("a", ("a0", "a1")),
        Variable("b", ("b0", "b1", "b2")),
        Variable("c", ("c0", "c1")),
        Variable("class", ("x", "y", "z"), CLASS),
    )
    return EncodedData(variables, X, y.astype(np.int64), source="small")


def test_fitted_hdp_model_predicts_as_the_reference(small: EncodedData) -> None:
    model = fit("kdb", small, "hdp:40", k=2)
    assert model.metadata["estimator"] == "hdp:40"
    assert str(fit("nb", small, "hdp").metadata["estimator"]) == "hdp"
    rows = np.array(list(itertools.product([-1, 0, 1], [-1, 0, 1, 2], [-1, 0, 1])), dtype=np.int32)
    assert np.allclose(compile_model(model).predict_proba(rows), reference_proba(model, rows), atol=1e-6)
    laplace = fit("kdb", small, "laplace", k=2)
    assert not np.allclose(model.networks[0].nodes[1].cpt, laplace.networks[0].nodes[1].cpt)


@pytest.mark.parametrize("bucketed_rows", [0, None])
def test_tables_sampled_together_equal_each_sampled_alone(bucketed_rows, monkeypatch) -> None:
    """hdp_cpts batches a network's tables into one sampler; each table, drawing from its own
    generator, must get the CPT the one-table sampler (tests/trainer/hdp_one_tree.py) gives it:
    depths 0 to 3, one state, no data, sparse and dense tables, counts past the exact Stirling table;
    with its counts drawn in buckets by their spans (``BUCKETED_ROWS`` 0) and in one width."""
    from bnserve.trainer.learners import hdp
    from bnserve.trainer.learners.hdp import hdp_cpts

    if bucketed_rows is not None:
        monkeypatch.setattr(hdp, "BUCKETED_ROWS", bucketed_rows)
    from tests.trainer.hdp_one_tree import one_tree_cpt

    rng = np.random.default_rng(11)
    shapes = [(3,), (2, 3), (4, 3, 2), (1, 3, 2), (3, 2, 4, 3), (5, 2, 3), (2, 2, 2, 2), (3, 4)]
    tables = [rng.poisson(rng.uniform(0.2, 8), size=shape).astype(float) for shape in shapes]
    tables.append(np.zeros((3, 2, 2)))
    tables.append(rng.integers(0, 3000, size=(3, 2, 2)).astype(float))  # past EXACT_STIRLING_MAX_N
    for sweeps in (1, 12):
        together = hdp_cpts(tables, sweeps=sweeps, rngs=[np.random.default_rng([5, i]) for i in range(len(tables))])
        for i, (table, cpt_) in enumerate(zip(tables, together)):
            alone = one_tree_cpt(table, sweeps=sweeps, rng=np.random.default_rng([5, i]))
            np.testing.assert_allclose(cpt_, alone, rtol=0, atol=1e-12, err_msg=f"table {i} {table.shape}")


def test_an_ensembles_networks_are_sampled_together_as_each_alone(small: EncodedData, monkeypatch) -> None:
    """AODE's networks go to one hdp sampler (one call, not one per network), and each gets
    the CPTs ``estimate`` gives it alone."""
    from bnserve.trainer.learners import hdp
    from bnserve.trainer.learners.parameters import Estimator, estimate
    from bnserve.trainer.learners.structure import Structure

    calls = []
    sample = hdp.hdp_cpts
    monkeypatch.setattr(hdp, "hdp_cpts", lambda *a, **kw: calls.append(1) or sample(*a, **kw))
    model = fit("aode", small, "hdp")
    assert len(model.networks) > 1 and len(calls) == 1
    for net in model.networks:
        parents = {node.name: node.parents for node in net.nodes}
        alone = estimate(Structure(parents, ()), small, Estimator.parse("hdp"))
        for node, single in zip(net.nodes, alone.nodes):
            np.testing.assert_array_equal(node.cpt, single.cpt)


class _Counted:
    """A real generator that counts the calls for uniforms made on it."""

    def __init__(self, seed: list[int]) -> None:
        self.rng, self.calls = np.random.default_rng(seed), 0

    def random(self, size: int) -> np.ndarray:
        self.calls += 1
        return self.rng.random(size)

    def beta(self, a, b):
        return self.rng.beta(a, b)

    def gamma(self, shape, scale):
        return self.rng.gamma(shape, scale)


def test_a_tree_draws_its_uniforms_once_per_depth_and_sweep_as_it_would_one_by_one() -> None:
    """The sampler asks each tree's generator for a depth's uniforms in one call (not one per
    value of the last parent), and still gets the CPT the one-table reference gets."""
    from bnserve.trainer.learners.hdp import hdp_cpts
    from tests.trainer.hdp_one_tree import one_tree_cpt

    rng = np.random.default_rng(3)
    tables = [rng.poisson(4, size=shape).astype(float) for shape in [(3, 4, 5), (2, 3, 6, 2), (4, 5)]]
    sweeps = 6
    counted = [_Counted([9, i]) for i in range(len(tables))]
    together = hdp_cpts(tables, sweeps=sweeps, rngs=counted)
    for i, (table, generator) in enumerate(zip(tables, counted)):
        assert generator.calls <= sweeps * (table.ndim - 1)
        alone = one_tree_cpt(table, sweeps=sweeps, rng=np.random.default_rng([9, i]))
        np.testing.assert_allclose(together[i], alone, rtol=0, atol=1e-12)


def test_a_count_is_drawn_among_exactly_the_values_its_window_allows() -> None:
    """``_allowed`` (the run a table count may move in one step, which sizes its draw's
    columns) against the window checked value by value."""
    from bnserve.trainer.learners.hdp import MAX_TABLES, WINDOW, _allowed

    rng = np.random.default_rng(4)
    n = rng.integers(2, 40, 500)
    n[:5] = MAX_TABLES + 7
    t = np.minimum(n, rng.integers(1, 30, 500))
    parent_t = rng.integers(1, 20, 500)
    parent_n = parent_t + rng.integers(0, 25, 500)
    first, spans = _allowed(n, t, parent_n, parent_t)
    for i in range(500):
        window = [
            v
            for v in range(t[i] - WINDOW, t[i] + WINDOW + 1)
            if 1 <= v <= min(n[i], MAX_TABLES) and parent_n[i] - t[i] + v >= parent_t[i]
        ]
        assert list(range(first[i], first[i] + spans[i])) == window or (spans[i] <= 0 and window == [])
