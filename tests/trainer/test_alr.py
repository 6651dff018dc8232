"""The ``alr`` estimator (trainer/learners/discriminative.py): the conversion of weighted
tables into CPTs keeps every posterior, the gradient is right, its two limits (no penalty:
the empirical posterior; a huge one: Laplace), and fitted models against the reference."""

from __future__ import annotations

import itertools
from unittest.mock import patch

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.fit import fit
from bnserve.trainer.learners import discriminative
from bnserve.trainer.learners.discriminative import (
    LOG_FLOOR,
    Layout,
    _check_size,
    networks_to_cpts,
    objective,
    perfect,
    to_cpts,
)
from bnserve.trainer.learners.parameters import Estimator
from bnserve.trainer.learners.structure import Structure
from tests.reference import reference_proba
from tests.trainer.conftest import run


def _log_joint(tables: dict[str, np.ndarray], parents: dict[str, tuple[str, ...]], x: dict[str, int]) -> float:
    return sum(float(t[(x[n], *(x[p] for p in parents[n]))]) for n, t in tables.items())


@st.composite
def weighted_networks(draw):
    """(parents, order, cards, phi): a random augmented network made perfect, random log tables."""
    n = draw(st.integers(1, 5))
    order = [f"x{i}" for i in range(n)]
    parents: dict[str, tuple[str, ...]] = {"c": ()}
    for i, f in enumerate(order):
        chosen = draw(st.lists(st.sampled_from(order[:i]), max_size=2, unique=True)) if i else []
        parents[f] = ("c", *chosen)
    parents = perfect(parents, order, "c")
    cards = {"c": draw(st.integers(2, 3)), **{f: draw(st.integers(2, 3)) for f in order}}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    phi = {v: rng.normal(0, 2, [cards[v], *(cards[p] for p in parents[v])]) for v in parents}
    return parents, order, cards, phi


@settings(max_examples=60, deadline=None)
@given(weighted_networks())
def test_the_cpts_give_every_posterior_of_the_weighted_tables(net):
    parents, order, cards, phi = net
    cpts = to_cpts(phi, parents, order, "c")
    for cpt in cpts.values():
        np.testing.assert_allclose(cpt.sum(axis=0), 1.0, rtol=1e-12)
    for values in itertools.product(*(range(cards[f]) for f in order)):
        x = dict(zip(order, values))
        weighted = np.array([_log_joint(phi, parents, {**x, "c": c}) for c in range(cards["c"])])
        proper = np.array(
            [_log_joint({v: np.log(t) for v, t in cpts.items()}, parents, {**x, "c": c}) for c in range(cards["c"])]
        )
        np.testing.assert_allclose(
            np.exp(proper - np.logaddexp.reduce(proper)), np.exp(weighted - np.logaddexp.reduce(weighted)), atol=1e-12
        )


def _one_node_at_a_time(phi, parents, order, cls):
    """The plain conversion: each node normalised in reverse ``order``, its normaliser added
    into its last feature parent's table (or the class's) before that one is normalised."""
    phi, position = dict(phi), {f: i for i, f in enumerate(order)}

    def log_sum_exp(table):
        top = table.max(axis=0)
        return top + np.log(np.exp(table - top).sum(axis=0))

    for node in reversed(order):
        log_z = log_sum_exp(phi[node])
        phi[node] = phi[node] - log_z
        feature_parents = [p for p in parents[node] if p != cls]
        host = max(feature_parents, key=position.__getitem__) if feature_parents else cls
        target = [host, *parents[host]]
        axes = list(parents[node])
        arranged = log_z.transpose(sorted(range(len(axes)), key=lambda a: target.index(axes[a])))
        sizes = dict(zip(sorted(axes, key=target.index), arranged.shape))
        phi[host] = phi[host] + arranged.reshape([sizes.get(v, 1) for v in target])
    phi[cls] = phi[cls] - log_sum_exp(phi[cls])
    tables = {name: np.exp(np.maximum(t, LOG_FLOOR)) for name, t in phi.items()}
    return {name: t / t.sum(axis=0, keepdims=True) for name, t in tables.items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(weighted_networks(), min_size=1, max_size=4))
def test_networks_normalised_together_are_each_normalised_one_node_at_a_time(nets):
    """pooled alr (laode) normalises the tables of all its networks together, a shape at a
    time: each network's CPTs are, bit for bit, those of the plain conversion of it alone."""
    together = networks_to_cpts([(phi, parents, order) for parents, order, _, phi in nets], "c")
    for (parents, order, _, phi), cpts in zip(nets, together):
        want = _one_node_at_a_time(phi, parents, order, "c")
        assert cpts.keys() == want.keys()
        for name, table in want.items():
            assert np.array_equal(cpts[name], table), name


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_design_is_one_row_per_row_and_one_entry_per_present_feature_set(data):
    """``Layout.design``, whose codes are computed a block of feature sets at a time: each row
    has a 1 at its configuration of every family's feature set, none where one of the set's
    features is missing, whatever the block."""
    m, n = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 5))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    cards = {"c": 2, **{f"x{i}": int(rng.integers(1, 4)) for i in range(n)}}
    names = [f"x{i}" for i in range(n)]
    axes = {"c": ("c",)}
    for node in names:  # families over up to three features, some sharing a set in another order
        others = data.draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        axes[node] = (node, "c", *(o for o in others if o != node))
    X = np.column_stack([rng.integers(-1, cards[f], m) for f in names]).astype(np.int32)
    view = EncodedData(
        [*(Variable(f, [str(s) for s in range(cards[f])]) for f in names), Variable(CLASS, ["a", "b"])],
        X,
        np.zeros(m, dtype=np.int64),
        n,
        "d",
    )
    layout = Layout(CLASS, {k: tuple(CLASS if v == "c" else v for v in a) for k, a in axes.items()}, view)
    block = data.draw(st.sampled_from([1, 7, 1 << 20]))
    with patch.object(discriminative, "DESIGN_BLOCK", block):
        got = layout.design({f: X[:, j] for j, f in enumerate(names)}).shared
    rows, cols = [], []
    for key, offset in layout.groups.items():
        for r in range(m):
            values = [int(X[r, names.index(v)]) for v in key]
            if all(v >= 0 for v in values):
                rows.append(r)
                cols.append(offset + (int(np.ravel_multi_index(values, [cards[v] for v in key])) if key else 0))
    want = scipy.sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=got.shape)
    for part in ("data", "indices", "indptr"):
        assert np.array_equal(getattr(got, part), getattr(want, part)), part


def test_perfect_joins_a_nodes_feature_parents_along_the_order():
    # kdb k=2: d's parents a and b are not adjacent; b is later, so b gets a
    parents = {"c": (), "a": ("c",), "b": ("c",), "d": ("c", "a", "b"), "e": ("c", "d")}
    made = perfect(parents, ["a", "b", "d", "e"], "c")
    assert made == {"c": (), "a": ("c",), "b": ("c", "a"), "d": ("c", "a", "b"), "e": ("c", "d")}
    tan = {"c": (), "a": ("c",), "b": ("c", "a"), "d": ("c", "b")}
    assert perfect(tan, ["a", "b", "d"], "c") == tan


def test_added_arcs_that_would_blow_up_a_table_are_refused():
    # e is the last parent of three children: it would get a, b and d, 12 times the largest table
    card = dict.fromkeys(["c", "a", "b", "d", "e", "g1", "g2", "g3"], 12)
    given = {
        "c": (),
        **dict.fromkeys("abde", ("c",)),
        "g1": ("c", "a", "e"),
        "g2": ("c", "b", "e"),
        "g3": ("c", "d", "e"),
    }
    made = perfect(given, ["a", "b", "d", "e", "g1", "g2", "g3"], "c")
    assert set(made["e"]) == {"c", "a", "b", "d"}
    with pytest.raises(InvalidInput, match="alr suits nb, tan"):
        _check_size(Structure(given, ()), made, card)


def test_the_gradient_is_the_objectives():
    rng = np.random.default_rng(3)
    rows, cells, classes = 40, 7, 3
    design = scipy.sparse.csr_matrix((rng.random((rows, cells)) < 0.4).astype(float))
    log_theta = np.log(rng.dirichlet(np.ones(classes), cells))
    y = rng.integers(0, classes, rows)

    def value(w):
        return objective(w.reshape(cells, classes), design, log_theta, y, 0.7)[0]

    def grad(w):
        return objective(w.reshape(cells, classes), design, log_theta, y, 0.7)[1].ravel()

    w = rng.normal(1, 0.5, cells * classes)
    assert scipy.optimize.check_grad(value, grad, w) < 1e-5 * np.linalg.norm(grad(w))


def _data(X, y, cards, classes=2) -> EncodedData:
    variables = tuple(Variable(f"f{j}", tuple(f"s{s}" for s in range(k))) for j, k in enumerate(cards))
    cls = Variable("class", tuple(f"k{s}" for s in range(classes)), CLASS)
    return EncodedData((*variables, cls), np.asarray(X, dtype=np.int32), np.asarray(y, dtype=np.int64))


def test_without_a_penalty_one_feature_gives_the_empirical_posterior():
    # N(x, c): x=0: 6 and 2, x=1: 1 and 3, x=2: 0 and 5 less one (never observed with class 0)
    x = [0] * 8 + [1] * 4 + [2] * 4
    y = [0] * 6 + [1] * 2 + [0] + [1] * 3 + [1] * 4
    model = fit("nb", _data(np.array(x)[:, None], y, [3]), "alr:1e-9")
    proba = compile_model(model).predict_proba(np.array([[0], [1]], dtype=np.int32))
    np.testing.assert_allclose(proba, [[6 / 8, 2 / 8], [1 / 4, 3 / 4]], atol=1e-4)


def test_a_huge_penalty_gives_the_laplace_model(small):
    rows = np.array(list(itertools.product([-1, 0, 1], [-1, 0, 1, 2], [-1, 0, 1])), dtype=np.int32)
    for algo in ("nb", "tan"):
        laplace = compile_model(fit(algo, small)).predict_proba(rows)
        stiff = compile_model(fit(algo, small, "alr:1e9")).predict_proba(rows)
        np.testing.assert_allclose(stiff, laplace, atol=1e-6)


def _train_cll(model, data: EncodedData) -> float:
    proba = compile_model(model).predict_proba(data.X)
    return float(np.log(proba[np.arange(data.n_rows), data.y]).sum())


def test_it_fits_the_training_rows_better_than_laplace_where_naive_bayes_is_wrong():
    rng = np.random.default_rng(11)
    a = rng.integers(0, 2, 400)
    X = np.stack([a, a, a, rng.integers(0, 2, 400)], axis=1)  # three copies: NB counts a three times
    y = (a ^ (rng.random(400) < 0.2)).astype(int) | X[:, 3]
    data = _data(X, y, [2, 2, 2, 2])
    assert _train_cll(fit("nb", data, "alr:0.01"), data) > _train_cll(fit("nb", data), data) + 10


@pytest.fixture(scope="module")
def small() -> EncodedData:
    rng = np.random.default_rng(7)
    m = 120
    y = rng.integers(0, 3, m)
    a = (y + rng.integers(0, 2, m)) % 2
    b = (a + y + rng.integers(0, 2, m)) % 3
    c = (b + rng.integers(0, 2, m)) % 2
    X = np.stack([a, b, c], axis=1)
    X[[3, 17, 40], [0, 1, 2]] = -1
    return _data(X, y, [2, 3, 2], classes=3)


@pytest.mark.parametrize("algo, params", [("nb", {}), ("tan", {}), ("kdb", {"k": 1}), ("kdb", {"k": 2}), ("aode", {})])
def test_fitted_alr_models_predict_as_the_reference(small, algo, params):
    model = fit(algo, small, "alr:0.5", **params)
    assert model.metadata["estimator"] == "alr:0.5"
    rows = np.array(list(itertools.product([-1, 0, 1], [-1, 0, 1, 2], [-1, 0, 1])), dtype=np.int32)
    assert np.allclose(compile_model(model).predict_proba(rows), reference_proba(model, rows), atol=1e-9)


def test_alr_is_an_estimator_by_name():
    assert str(Estimator.parse("alr")) == "alr" and str(Estimator.parse("alr:0.1")) == "alr:0.1"
    assert Estimator.parse("alr").needs_rows and not Estimator.parse("hdp").needs_rows
    with pytest.raises(InvalidInput, match="finite positive"):
        Estimator.parse("alr:0")


def test_a_general_network_is_refused(small):
    with pytest.raises(InvalidInput, match="class to be a root"):
        fit("k2", small, "alr")


def test_the_cli_fits_alr_and_refuses_it_with_chunk_rows(capsys, store):
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "tan",
        "--estimator",
        "alr",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--store",
        store,
    )
    assert code == 0, err
    code, _, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--estimator",
        "alr:2",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--store",
        store,
        "--chunk-rows",
        "100",
    )
    assert code == 2 and "--estimator alr:2 fits on them" in err


def test_the_weights_are_fitted_on_one_blas_thread(small, monkeypatch):
    """L-BFGS-B's many small BLAS calls on OpenBLAS's threads cost 12x the CPU of one thread:
    while it runs, every BLAS library loaded is held to one thread."""
    from threadpoolctl import threadpool_info

    from bnserve.trainer.learners import discriminative

    seen: list[int] = []

    def counting(*args, **kwargs):
        seen.extend(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
        return objective(*args, **kwargs)

    monkeypatch.setattr(discriminative, "objective", counting)
    fit("nb", small, "alr")
    assert seen and set(seen) == {1}
