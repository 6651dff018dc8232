"""Compiled prediction against the slow enumerating reference (tests/reference.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT, SINGLE, Model, Network, Node, Variable
from bnserve.store.predictor import check_codes, compile_model, gather
from bnserve.store.predictor import compiled as compiled_module
from bnserve.store.predictor.compiled import TABLE_PRECISION, ComponentPlan
from bnserve.store.predictor.elimination import FamilyGraph
from bnserve.store.predictor.precision import FLOAT32_ERROR_BOUND, float32_error
from tests.model_factory import random_model
from tests.reference import coded_rows, models, reference_joint, reference_proba

TOL = 1e-9
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_matches_reference(model: Model, codes: np.ndarray, atol: float = TOL) -> None:
    compiled = compile_model(model)
    got = compiled.predict_proba(codes)
    want = reference_proba(model, codes)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(compiled.predict_log_proba(codes)), want, rtol=0, atol=atol)


@SETTINGS
@given(st.data())
def test_fast_path_equals_reference(data):
    model = data.draw(models(SINGLE))
    codes = data.draw(coded_rows(model, allow_missing=False))
    _assert_matches_reference(model, codes)


@SETTINGS
@given(st.data())
def test_missing_path_equals_reference(data):
    model = data.draw(models(SINGLE))
    codes = data.draw(coded_rows(model))
    all_missing = np.full((1, codes.shape[1]), -1)
    _assert_matches_reference(model, np.vstack([codes, all_missing]))


@SETTINGS
@given(st.data(), st.sampled_from([SINGLE, MEAN_JOINT]))
def test_missing_path_without_the_dense_descendant_relation_equals_reference(data, combination):
    """A network wider than DENSE_DESCENDANTS finds its barren features by walking the arcs."""
    model = data.draw(models(combination))
    codes = data.draw(coded_rows(model))
    with pytest.MonkeyPatch.context() as patch:  # the relations are built with the first missing value
        patch.setattr(compiled_module, "DENSE_DESCENDANTS", 0)
        compiled = compile_model(model)
        got = compiled.predict_proba(np.vstack([codes, np.full((1, codes.shape[1]), -1)]))
        assert all(net._below_t is None for net in compiled.networks)
    want = reference_proba(model, np.vstack([codes, np.full((1, codes.shape[1]), -1)]))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)


def _wide(n_features: int, tree: bool) -> Model:
    """Binary class and features: naive Bayes, or with ``tree`` each feature also a child of
    the one before (a chain: as deep as a network gets)."""
    rng = np.random.default_rng(n_features)
    names = [f"f{i}" for i in range(n_features)]
    variables = (Variable("c", ("a", "b"), CLASS), *(Variable(v, ("0", "1")) for v in names))
    nodes = [Node("c", (), np.array([0.4, 0.6]))]
    for i, v in enumerate(names):
        parents = ("c", names[i - 1]) if tree and i else ("c",)
        cpt = rng.dirichlet([1.0, 1.0], size=2 ** len(parents)).T.reshape((2,) + (2,) * len(parents))
        nodes.append(Node(v, parents, cpt))
    return Model(variables, (Network(tuple(nodes)),), "nb" if not tree else "tan").validate()


@pytest.mark.parametrize("n_features, tree", [(2_000, False), (1_500, True)], ids=["naive Bayes", "chain"])
def test_compiling_a_wide_network_builds_nothing_quadratic(n_features, tree):
    """Issue 17: compiling a 20,000-feature NB built a 20,000 x 20,000 Python list of who
    descends from whom (and its float32 array): a MemoryError. Compiled bytes now grow with
    the features, and rows with missing values still get the exact answer."""
    model = _wide(n_features, tree)
    compiled = compile_model(model)
    assert compiled.nbytes < 400 * n_features  # a (n, n) float32 array alone: 4 n² bytes
    rows = np.random.default_rng(0).integers(0, 2, size=(3, n_features))
    rows[0, 1:4] = -1
    rows[1, -3:] = -1
    rows[2, ::2] = -1
    got = compiled.predict_proba(rows)
    with pytest.MonkeyPatch.context() as patch:  # the same network, the descendant relation dense
        patch.setattr(compiled_module, "DENSE_DESCENDANTS", n_features)
        np.testing.assert_allclose(got, compile_model(model).predict_proba(rows), rtol=0, atol=1e-12)


@SETTINGS
@given(st.data(), st.sampled_from([MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT]))
def test_ensembles_equal_reference(data, combination):
    model = data.draw(models(combination))
    codes = data.draw(coded_rows(model))
    _assert_matches_reference(model, codes)


@SETTINGS
@given(st.data())
def test_mean_joint_log_joint_is_exact(data):
    """mean_joint keeps every non-barren factor: log of the mean of the exact joints."""
    model = data.draw(models(MEAN_JOINT))
    codes = data.draw(coded_rows(model))
    got = compile_model(model).predict_log_joint(codes)
    want = np.log([reference_joint(model, row).mean(axis=0) for row in codes])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@SETTINGS
@given(st.data())
def test_batch_equals_row_by_row(data):
    combination = data.draw(st.sampled_from([SINGLE, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT]))
    model = data.draw(models(combination))
    codes = data.draw(coded_rows(model, max_rows=12))
    compiled = compile_model(model)
    batch = compiled.predict_proba(codes)
    one_by_one = np.vstack([compiled.predict_proba(row[None, :]) for row in codes])
    np.testing.assert_allclose(batch, one_by_one, rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([SINGLE, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT]),
    st.sampled_from([np.float64, np.float32]),
)
def test_shared_random_models_equal_reference(seed, combination, dtype):
    """The factory the other suites use: unsorted node lists, feature subsets, float32 CPTs."""
    rng = np.random.default_rng(seed)
    n_networks = 1 if combination == SINGLE else 3
    model = random_model(
        rng,
        n_features=5,
        n_networks=n_networks,
        combination=combination,
        all_features=combination == SINGLE,
        dtype=dtype,
    )
    codes = np.column_stack([rng.integers(-1, v.cardinality, size=8) for v in model.features])
    # float32 distributions sum to 1 only within ~1e-7, and the compiled path drops factors
    # that sum to one (barren nodes, constants) which the enumeration multiplies in
    _assert_matches_reference(model, codes, atol=TOL if dtype == np.float64 else 1e-6)


def test_model_without_features_predicts_the_prior():
    prior = np.array([0.2, 0.8])
    model = Model((Variable("C", ("a", "b"), role=CLASS),), (Network((Node("C", (), prior),)),), "prior").validate()
    np.testing.assert_allclose(compile_model(model).predict_proba(np.zeros((3, 0), dtype=np.intp)), [prior] * 3)


@pytest.mark.parametrize("combination", [SINGLE, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT])
def test_log_proba_stays_finite_where_the_probability_underflows(combination):
    """400 features, each 1e-3 as likely under class b: P(b | x) = 1e-1200 (0.0 in float64),
    its log -2763 exactly, not -inf (twice that for the product of the two networks)."""
    n, ratio = 400, 1e-3
    cpt = np.array([[0.5, ratio * 0.5], [0.5, 1 - ratio * 0.5]])  # P(f | c): rows f, columns c
    variables = (Variable("C", ("a", "b"), role=CLASS), *(Variable(f"f{i}", ("x", "y")) for i in range(n)))
    nodes = (Node("C", (), np.array([0.5, 0.5])), *(Node(f"f{i}", ("C",), cpt) for i in range(n)))
    networks = (Network(nodes),) if combination == SINGLE else (Network(nodes), Network(nodes))
    compiled = compile_model(Model(variables, networks, "nb", combination).validate())
    log = compiled.predict_log_proba(np.zeros((1, n), dtype=np.intp))
    assert compiled.predict_proba(np.zeros((1, n), dtype=np.intp))[0, 1] == 0.0
    times = 2 if combination == PRODUCT_JOINT else 1
    np.testing.assert_allclose(log[0], [0.0, times * n * np.log(ratio)], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------ a fixed structure


def _dirichlet_cpt(rng, card, parent_cards):
    return np.moveaxis(rng.dirichlet(np.ones(card), size=tuple(parent_cards)), -1, 0).copy()


def _blanket_model(combination: str = SINGLE) -> Model:
    """P -> C -> A <- S, A -> B, A -> E, D isolated: MB(C) = {P, A, S}; B, D, E outside it."""
    rng = np.random.default_rng(7)
    card = {"C": 3, "P": 2, "A": 3, "S": 2, "B": 4, "D": 2, "E": 3}
    variables = (
        Variable("C", tuple(f"c{i}" for i in range(3)), role=CLASS),
        *(Variable(v, tuple(f"s{i}" for i in range(card[v]))) for v in ("P", "A", "S", "B", "D", "E")),
    )
    parents = {"P": (), "C": ("P",), "S": (), "A": ("C", "S"), "B": ("A",), "D": (), "E": ("A",)}
    nodes = tuple(Node(v, ps, _dirichlet_cpt(rng, card[v], [card[p] for p in ps])) for v, ps in parents.items())
    networks = (Network(nodes),) if combination == SINGLE else (Network(nodes), Network(nodes[:4]))
    return Model(variables, networks, "fixed", combination).validate()


def test_nodes_outside_the_markov_blanket_are_dropped():
    compiled = compile_model(_blanket_model())
    assert compiled.networks[0].fast_nodes == ("C", "A")  # P(C | P) and P(A | C, S); the rest cancel
    assert compiled.feature_index == {"P": 0, "A": 1, "S": 2, "B": 3, "D": 4, "E": 5}
    exact = compile_model(_blanket_model(MEAN_JOINT))
    assert exact.networks[0].fast_nodes == ("P", "C", "S", "A", "B", "D", "E")  # exact joints need all


MISSING_CASES = {  # columns P, A, S, B, D, E
    "nothing": [0, 1, 1, 2, 1, 0],
    "all": [-1, -1, -1, -1, -1, -1],
    "class parent": [-1, 1, 1, 2, 1, 0],
    "class child": [0, -1, 1, 2, 1, 0],
    "spouse (parent of a class child)": [0, 1, -1, 2, 1, 0],
    "class child and spouse": [0, -1, -1, 2, 1, 0],
    "outside the blanket": [0, 1, 1, -1, -1, -1],
    "child, one grandchild observed": [1, -1, 0, 3, 0, -1],
    "child and all its descendants": [1, -1, 0, -1, 0, -1],
    "everything but a grandchild": [-1, -1, -1, 3, -1, -1],
}


@pytest.mark.parametrize("combination", [SINGLE, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT])
@pytest.mark.parametrize("case", list(MISSING_CASES))
def test_named_missing_patterns_equal_reference(case, combination):
    model = _blanket_model(combination)
    _assert_matches_reference(model, np.array([MISSING_CASES[case]]))


def _plan_count(compiled) -> int:
    return sum(isinstance(v, ComponentPlan) for v in compiled.plans.values())


def _plan(compiled, missing: set[str]):
    net = compiled.networks[0]
    return net.plan(np.array([name in missing for name in net.feature_names]).tobytes())


def test_mixed_batch_uses_fast_path_when_only_non_blanket_features_are_missing():
    compiled = compile_model(_blanket_model())
    codes = np.array([MISSING_CASES[c] for c in ("nothing", "outside the blanket", "class child", "class child")])
    _assert_matches_reference(_blanket_model(), codes)
    compiled.predict_proba(codes)
    assert _plan_count(compiled) == 1  # one plan: the class child's component, built once


def test_component_plans_hold_the_factors_that_meet_the_component():
    single = compile_model(_blanket_model())
    assert _plan(single, {"A"}).eliminated_nodes == ("A", "B", "E")
    assert _plan(single, {"P"}).eliminated_nodes == ("P", "C")
    exact = compile_model(_blanket_model(MEAN_JOINT))
    assert _plan(exact, {"S"}).eliminated_nodes == ("S", "A")  # P(S) is kept: exact joint


def test_barren_variables_never_reach_a_plan():
    compiled = compile_model(_blanket_model())
    codes = np.array([MISSING_CASES["child and all its descendants"]])
    _assert_matches_reference(_blanket_model(), codes)
    compiled.predict_proba(codes)
    assert _plan_count(compiled) == 0  # A, B, E barren: P(C | P) alone


def test_a_barren_child_counts_as_one_inside_a_shared_plan():
    """E missing (barren) in one row, observed in the other: both rows use the plan of {A}."""
    compiled = compile_model(_blanket_model())
    codes = np.array([[1, -1, 0, 3, 0, -1], [1, -1, 0, 3, 0, 2]])
    _assert_matches_reference(_blanket_model(), codes)
    compiled.predict_proba(codes)
    assert _plan_count(compiled) == 1


def test_rows_with_different_patterns_share_component_plans():
    compiled = compile_model(_blanket_model())
    codes = np.array([[0, -1, 1, 2, 1, 0], [0, -1, 1, 2, -1, 0], [-1, -1, 1, 2, 1, 0], [-1, 1, 1, 2, -1, 0]])
    _assert_matches_reference(_blanket_model(), codes)
    compiled.predict_proba(codes)
    assert _plan_count(compiled) == 2
    assert {_plan(compiled, m).component for m in ({"A"}, {"P"})} == {frozenset("A"), frozenset("P")}
    assert _plan_count(compiled) == 2  # both were built by the batch; D's is irrelevant


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda m: st.tuples(
            st.lists(st.lists(st.booleans(), min_size=m, max_size=m), min_size=1, max_size=6),
            st.sets(st.tuples(st.integers(0, m - 1), st.integers(0, m - 1))),
        )
    )
)
def test_label_components_matches_union_find(case):
    patterns, pairs = case
    patterns = np.array(patterns)
    m = patterns.shape[1]
    edges = sorted({(a, b) for a, b in pairs if a != b} | {(b, a) for a, b in pairs if a != b})
    got = FamilyGraph(m, edges).label_components(patterns)
    for p, labels in zip(patterns, got):
        want = list(range(m))  # union-find over missing endpoints, root = smallest member
        for a, b in edges:
            if p[a] and p[b]:
                ra, rb = _find(want, a), _find(want, b)
                want[max(ra, rb)] = min(ra, rb)
        assert [(_find(want, v) if p[v] else m) for v in range(m)] == labels.tolist()


def _find(parent, v):
    while parent[v] != v:
        v = parent[v]
    return v


# ------------------------------------------------------------ numeric edge cases


def _naive_bayes(cpts: list[np.ndarray], prior: np.ndarray) -> Model:
    c = prior.shape[0]
    variables = (
        Variable("C", tuple(f"c{i}" for i in range(c)), role=CLASS),
        *(Variable(f"X{i}", tuple(f"s{j}" for j in range(t.shape[0]))) for i, t in enumerate(cpts)),
    )
    nodes = (Node("C", (), prior), *(Node(f"X{i}", ("C",), t) for i, t in enumerate(cpts)))
    return Model(variables, (Network(nodes),), "nb").validate()


def test_200_features_with_small_probabilities_do_not_underflow():
    rng = np.random.default_rng(3)
    card = 50
    cpts = [_dirichlet_cpt(rng, card, [2]) for _ in range(200)]  # most entries around 1/50 or less
    prior = np.array([0.5, 0.5])
    model = _naive_bayes(cpts, prior)
    codes = rng.integers(0, card, size=(20, 200))
    codes[10:, ::3] = -1  # missing leaves: the missing path must agree too
    log = np.log(prior) + sum(np.where(codes[:, [i]] >= 0, np.log(t[codes[:, i]]), 0.0) for i, t in enumerate(cpts))
    want = np.exp(log - log.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    got = compile_model(model).predict_proba(codes)
    assert np.all(np.isfinite(got))
    assert np.exp(log[:10].max()) == 0.0  # the complete rows' joints underflow in linear space
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_hidden_class_parent_with_many_observed_children_does_not_underflow():
    """H -> C, H -> X0..X199, H missing: elimination multiplies 200 small factors over H."""
    rng = np.random.default_rng(5)
    h, c, card = 3, 2, 40
    variables = (
        Variable("C", ("a", "b"), role=CLASS),
        Variable("H", ("h0", "h1", "h2")),
        *(Variable(f"X{i}", tuple(f"s{j}" for j in range(card))) for i in range(200)),
    )
    cpts = [_dirichlet_cpt(rng, card, [h]) for _ in range(200)]
    c_given_h = _dirichlet_cpt(rng, c, [h])
    nodes = (
        Node("H", (), np.full(h, 1 / h)),
        Node("C", ("H",), c_given_h),
        *(Node(f"X{i}", ("H",), t) for i, t in enumerate(cpts)),
    )
    model = Model(variables, (Network(nodes),), "hidden").validate()
    x = rng.integers(0, card, size=(4, 200))
    codes = np.hstack([np.full((4, 1), -1), x])
    # log P(c, x) = logsumexp_h [log P(h) + log P(c | h) + sum_i log P(x_i | h)]
    log_x = np.log(1 / h) + sum(np.log(t[x[:, i]]) for i, t in enumerate(cpts))  # (rows, h)
    terms = log_x[:, None, :] + np.log(c_given_h)[None, :, :]  # (rows, c, h)
    peak = terms.max(axis=(1, 2), keepdims=True)
    joint = np.exp(terms - peak).sum(axis=2)
    want = joint / joint.sum(axis=1, keepdims=True)
    got = compile_model(model).predict_proba(codes)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_long_elimination_products_do_not_underflow():
    """H -> C, H -> Xi -> Yi, H and every Xi missing: one component; summing each Xi out
    leaves a factor over H near 1 at h = yi and near 0.003 elsewhere, and the product of
    300 of them, their peaks rotating over H, is below 1e-308 for every h."""
    h, n = 3, 300
    sharp = np.full((3, 3), 0.001) + np.eye(3) * 0.997  # columns sum to 1
    variables = (
        Variable("C", ("a", "b"), role=CLASS),
        Variable("H", ("h0", "h1", "h2")),
        *(Variable(f"X{i}", ("x0", "x1", "x2")) for i in range(n)),
        *(Variable(f"Y{i}", ("y0", "y1", "y2")) for i in range(n)),
    )
    c_given_h = np.array([[0.2, 0.5, 0.9], [0.8, 0.5, 0.1]])
    nodes = (
        Node("H", (), np.full(h, 1 / h)),
        Node("C", ("H",), c_given_h),
        *(Node(f"X{i}", ("H",), sharp) for i in range(n)),
        *(Node(f"Y{i}", (f"X{i}",), sharp) for i in range(n)),
    )
    model = Model(variables, (Network(nodes),), "hidden").validate()
    y = np.array([np.arange(n) % 3, (np.arange(n) + 1) % 3, np.arange(n) % 2])
    codes = np.hstack([np.full((3, 1 + n), -1), y])
    # log P(c, y) = logsumexp_h [log P(h) + log P(c | h) + sum_i log sum_x P(x | h) P(y_i | x)]
    log_h = np.log(1 / h) + np.log((sharp.T @ sharp.T)[:, y]).sum(axis=2).T  # (rows, h)
    assert np.exp(log_h.max()) == 0.0  # the product underflows in linear space
    terms = log_h[:, None, :] + np.log(c_given_h)[None, :, :]  # (rows, c, h)
    joint = np.exp(terms - terms.max(axis=(1, 2), keepdims=True)).sum(axis=2)
    want = joint / joint.sum(axis=1, keepdims=True)
    got = compile_model(model).predict_proba(codes)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_zero_probability_rows_are_uniform_not_nan():
    prior = np.array([0.5, 0.5, 0.0])
    x0 = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])  # P(X0 | C), columns per class
    model = _naive_bayes([x0], prior)
    got = compile_model(model).predict_proba(np.array([[0], [1], [-1]]))
    np.testing.assert_allclose(got, [[1, 0, 0], [0, 1, 0], [0.5, 0.5, 0]], atol=1e-12)
    impossible = _naive_bayes([np.array([[1.0, 1.0], [0.0, 0.0]])], np.array([0.5, 0.5]))
    got = compile_model(impossible).predict_proba(np.array([[1]]))
    np.testing.assert_allclose(got, [[0.5, 0.5]])


def test_empty_batch():
    compiled = compile_model(_blanket_model())
    assert compiled.predict_proba(np.empty((0, 6), dtype=np.intp)).shape == (0, 3)


def test_nbytes_counts_the_compiled_tables():
    compiled = compile_model(_blanket_model())
    # P(C | P): 2 x 3 entries; P(A | C, S): 3 x 2 x 3; float64
    assert compiled.nbytes >= (6 + 18) * 8
    assert compiled.classes == ("c0", "c1", "c2")


# ------------------------------------------------------------ boundary validation


@pytest.fixture(scope="module")
def compiled():
    return compile_model(_blanket_model())


def test_check_codes_accepts_and_returns_intp(compiled):
    out = check_codes(compiled, np.array([[0, 2, 1, 3, -1, 2]], dtype=np.int8))
    assert out.dtype == np.intp
    assert out.tolist() == [[0, 2, 1, 3, -1, 2]]


@pytest.mark.parametrize(
    "codes, match",
    [
        (np.array([[0, 1, 1, 2, 0]]), r"5 columns, but the model expects 6 features \(P, A, S, B, D, E\)"),
        (np.array([0, 1, 1, 2, 1, 0]), r"2-D"),
        (np.array([[0.0, 1.0, 1.0, 2.0, 1.0, 0.0]]), r"integers, got dtype float64"),
        (np.array([[0, 1, 1, 4, 1, 0]]), r"feature 'B' has code 4 in row 0; allowed codes are -1 \(missing\) to 3"),
        (
            np.array([[0, 1, 1, 0, 1, 0], [0, -2, 1, 0, 1, 0]]),
            r"feature 'A' has code -2 in row 1; allowed codes are -1",
        ),
        (np.array([[2, 1, 1, 0, 1, 0]]), r"feature 'P' has code 2 in row 0; allowed codes are -1 \(missing\) to 1"),
    ],
    ids=["width", "1-D", "float", "too large", "below -1", "just too large"],
)
def test_check_codes_rejects(compiled, codes, match):
    with pytest.raises(InvalidInput, match=match):
        check_codes(compiled, codes)


def test_predict_log_joint_is_undefined_for_mean_posterior():
    with pytest.raises(InvalidInput, match="mean_posterior"):
        compile_model(_blanket_model(MEAN_POSTERIOR)).predict_log_joint(np.array([[0, 0, 0, 0, 0, 0]]))


# ------------------------------------------------------------ large batches and float32 tables


@pytest.mark.parametrize("combination", [SINGLE, MEAN_JOINT, MEAN_POSTERIOR, PRODUCT_JOINT])
def test_a_batch_larger_than_a_gather_chunk_equals_small_batches(combination):
    """Batches beyond GATHER_ROWS go in chunks (missing values too); every row's answer is the
    one it gets in a batch of 7, and the reference's."""
    rng = np.random.default_rng(11)
    model = random_model(rng, n_features=6, n_networks=1 if combination == SINGLE else 3, combination=combination)
    rows = gather.GATHER_ROWS * 2 + 5
    codes = np.column_stack([rng.integers(0, v.cardinality, size=rows) for v in model.features])
    codes[rng.random(codes.shape) < 0.05] = -1
    compiled = compile_model(model)
    batch = compiled.predict_proba(codes)
    pieces = np.vstack([compiled.predict_proba(codes[i : i + 7]) for i in range(0, rows, 7)])
    np.testing.assert_allclose(batch, pieces, rtol=0, atol=1e-12)
    some = rng.choice(rows, size=40, replace=False)
    np.testing.assert_allclose(batch[some], reference_proba(model, codes[some]), rtol=0, atol=TOL)


def test_float32_tables_are_opt_in_smaller_and_close():
    rng = np.random.default_rng(12)
    model = random_model(rng, n_features=8, max_parents=3, class_has_parents=False)
    codes = np.column_stack([rng.integers(-1, v.cardinality, size=500) for v in model.features])
    double, single = compile_model(model), compile_model(model, dtype=np.float32)
    assert double.dtype == np.float64 and single.dtype == np.float32
    assert single.nbytes < double.nbytes
    got, want = single.predict_proba(codes), double.predict_proba(codes)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    with pytest.raises(InvalidInput, match="float64 or float32"):
        compile_model(model, dtype=np.float16)


def test_the_models_metadata_chooses_its_table_dtype_and_float32_error_measures_it():
    rng = np.random.default_rng(13)
    model = random_model(rng, n_features=8, max_parents=3, class_has_parents=False)
    codes = np.column_stack([rng.integers(-1, v.cardinality, size=500) for v in model.features])
    marked = dataclasses.replace(model, metadata={**model.metadata, TABLE_PRECISION: {"dtype": "float32"}})
    assert compile_model(model).dtype == np.float64 and compile_model(marked).dtype == np.float32
    assert compile_model(marked, dtype=np.float64).dtype == np.float64  # an explicit dtype wins
    error = float32_error(model)
    diff = np.abs(compile_model(marked).predict_proba(codes) - compile_model(model).predict_proba(codes)).max()
    assert 0 < error <= FLOAT32_ERROR_BOUND and diff <= FLOAT32_ERROR_BOUND
    bad = dataclasses.replace(model, metadata={TABLE_PRECISION: {"dtype": "float16"}})
    with pytest.raises(InvalidInput, match="table_precision.dtype must be one of float64, float32, got 'float16'"):
        compile_model(bad)
