"""SKDB, ESKDB and A2DE: the leave-one-out choice against a brute-force search, and the
fitted models' probabilities against the enumerating reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput
from bnserve.store.model import CLASS, FEATURE, MEAN_JOINT, MEAN_POSTERIOR, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.kdb import kdb_structure
from bnserve.trainer.learners.skdb import capped, ordering, stochastic_orders
from bnserve.trainer.stats import joint_counts
from tests.data_helpers import write
from tests.reference import reference_proba
from tests.trainer.conftest import run

TIE = 1e-12


def random_data(rng: np.random.Generator, m: int, cards: list[int], n_classes: int, missing: float) -> EncodedData:
    """Rows with some dependence between the first features and the class, and missing cells."""
    y = rng.integers(0, n_classes, m).astype(np.int64)
    X = np.stack([rng.integers(0, c, m) for c in cards], axis=1)
    for j, c in enumerate(cards[:3]):
        X[:, j] = np.where(rng.random(m) < 0.6, (y + j) % c, X[:, j])
    if len(cards) > 3:
        X[:, 3] = np.where(rng.random(m) < 0.5, X[:, 0] % cards[3], X[:, 3])
    X[rng.random(X.shape) < missing] = -1
    variables = tuple(Variable(f"f{i}", tuple(str(s) for s in range(c)), FEATURE) for i, c in enumerate(cards))
    variables += (Variable("class", tuple(str(s) for s in range(n_classes)), CLASS),)
    return EncodedData(variables, X.astype(np.int32), y, 0, "random")


def brute_force(data: EncodedData, k: int, loss: str) -> tuple[int, int, float]:
    """(attributes, k', loss) by recounting without each row, for every (s, k') separately.

    The posterior of KDB k' on the first s features of KDB's order: the Laplace prior, times
    each present family's Laplace factor from the counts without the row, normalised after
    each feature; ties (within 1e-12) to fewer features, then the smaller k'."""
    mi, cmi = data.statistics.class_mi(), data.statistics.cmi_matrix()
    order, parents, _ = kdb_structure(mi, cmi, k)
    X, y, C = data.X, data.y, data.n_classes
    cards = data.cards
    n = len(order)
    total = np.zeros((n + 1, k + 1))
    for r in range(data.n_rows):
        Xr, yr = np.delete(X, r, axis=0), np.delete(y, r)
        row = X[r]
        for kk in range(k + 1):
            counts = np.bincount(yr, minlength=C)
            post = (counts + 1.0) / (len(yr) + C)
            post = post / post.sum()
            total[0, kk] += _row_loss(post, y[r], loss)
            for s, i in enumerate(order, start=1):
                pa = parents[i][:kk]
                if row[i] >= 0 and all(row[p] >= 0 for p in pa):
                    table = joint_counts(
                        [Xr[:, i], yr, *(Xr[:, p] for p in pa)], [cards[i], C, *(cards[p] for p in pa)]
                    )
                    at = tuple(int(row[p]) for p in pa)
                    numerator = table[(int(row[i]), slice(None), *at)]
                    denominator = table.sum(axis=0)[(slice(None), *at)]
                    post = post * ((numerator + 1.0) / (denominator + cards[i]))
                post = post / post.sum()
                total[s, kk] += _row_loss(post, y[r], loss)
    best = (0, 0)
    for s, kk in itertools.product(range(n + 1), range(k + 1)):
        if total[s, kk] < total[best] - TIE:
            best = (s, kk)
    mean = total[best] / data.n_rows
    return best[0], best[1], float(mean if loss == "zero-one" else np.sqrt(mean))


def _row_loss(post: np.ndarray, label: int, loss: str) -> float:
    if loss == "zero-one":
        return float(np.argmax(post) != label)
    return float((1.0 - post[label]) ** 2)


CASES = [  # seed, rows, cards, classes, missing, k
    (0, 40, [2, 3, 2, 3], 2, 0.0, 2),
    (1, 30, [3, 2, 2, 2, 3], 3, 0.1, 3),
    (2, 50, [2, 2, 3], 2, 0.15, 2),
    (3, 25, [3, 3, 2, 2], 2, 0.05, 1),
    (4, 60, [2, 3, 3, 2, 2], 3, 0.0, 3),
    (5, 12, [2, 2], 2, 0.2, 2),
]


@pytest.mark.parametrize("seed, rows, cards, n_classes, missing, k", CASES)
@pytest.mark.parametrize("loss", ["rmse", "zero-one"])
def test_skdb_chooses_as_a_brute_force_leave_one_out(seed, rows, cards, n_classes, missing, k, loss):
    data = random_data(np.random.default_rng(seed), rows, cards, n_classes, missing)
    attributes, best_k, best_loss = brute_force(data, k, loss)
    model = fit("skdb", data, k=k, loss=loss)
    selection = model.metadata["selection"]
    assert (len(selection["attributes"]), selection["k"]) == (attributes, best_k)
    assert selection["loo_loss"] == pytest.approx(best_loss, abs=1e-8)
    kept = selection["attributes"]
    assert [n.name for n in model.networks[0].nodes] == [v.name for v in data.variables if v.name in {*kept, "class"}]
    assert max(len(n.parents) for n in model.networks[0].nodes) <= best_k + 1


def test_skdb_keeps_kdb_when_every_feature_and_parent_helps():
    """Class = x0 xor x1 needs both features and the arc between them."""
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2, (400, 3))
    y = (x[:, 0] ^ x[:, 1]).astype(np.int64)
    variables = tuple(Variable(f"f{i}", ("0", "1"), FEATURE) for i in range(3)) + (
        Variable("class", ("0", "1"), CLASS),
    )
    model = fit("skdb", EncodedData(variables, x.astype(np.int32), y, 0, "xor"), k=2)
    selection = model.metadata["selection"]
    assert selection["k"] >= 1 and {"f0", "f1"} <= set(selection["attributes"])
    assert selection["loo_loss"] < 0.05 < selection["loo_loss_prior"]


def test_stochastic_orders_are_distinct_seeded_and_start_with_kdbs():
    mi = np.array([0.3, 0.0, 0.2, 0.05, 0.1])
    orders = stochastic_orders(mi, 6, 1)
    assert orders[0] == (0, 2, 4, 3, 1) and len(set(orders)) == 6
    assert all(o[-1] == 1 and sorted(o) == list(range(5)) for o in orders)  # zero I(X;C) last
    assert orders == stochastic_orders(mi, 6, 1) and orders != stochastic_orders(mi, 6, 2)
    assert len(stochastic_orders(np.array([0.2, 0.1, 0.0]), 10, 0)) == 2  # only 2! distinct orders


def test_eskdb_members_and_their_selections():
    data = random_data(np.random.default_rng(3), 80, [2, 3, 2, 3, 2], 2, 0.05)
    model = fit("eskdb", data, k=2, members=4, sample_seed=3)
    assert model.combination == MEAN_POSTERIOR and len(model.networks) == 4
    assert len(model.metadata["selection"]) == 4
    first = fit("skdb", data, k=2).metadata["selection"]
    assert model.metadata["selection"][0] == first  # the first member is SKDB


def test_a2de_refuses_too_many_features():
    data = random_data(np.random.default_rng(0), 10, [2] * 50, 2, 0.0)
    with pytest.raises(InvalidInput, match="50 features.*at most"):
        fit("a2de", data)


# ------------------------------------------------------------------ against the reference

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def small_data(draw, max_features: int = 4) -> EncodedData:
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, max_features))
    cards = draw(st.lists(st.integers(2, 3), min_size=n, max_size=n))
    rows = draw(st.integers(4, 40))
    return random_data(
        np.random.default_rng(seed), rows, cards, draw(st.integers(2, 3)), draw(st.sampled_from([0, 0.1]))
    )


def _assert_matches_reference(model, data: EncodedData) -> None:
    codes = np.vstack([data.X, np.full((1, data.X.shape[1]), -1, dtype=np.int32)])
    got = compile_model(model).predict_proba(codes)
    np.testing.assert_allclose(got, reference_proba(model, codes), rtol=0, atol=1e-9)


@SETTINGS
@given(small_data(), st.integers(0, 3), st.sampled_from(["rmse", "zero-one"]))
def test_skdb_model_equals_the_reference(data, k, loss):
    _assert_matches_reference(fit("skdb", data, k=k, loss=loss), data)


@SETTINGS
@given(small_data(), st.integers(1, 4), st.integers(0, 5))
def test_eskdb_model_equals_the_reference(data, members, seed):
    _assert_matches_reference(fit("eskdb", data, k=2, members=members, sample_seed=seed), data)


@SETTINGS
@given(small_data())
def test_a2de_model_equals_the_reference(data):
    model = fit("a2de", data)
    assert model.combination == MEAN_JOINT
    n = len(data.features)
    assert len(model.networks) == max(n * (n - 1) // 2, 1)
    _assert_matches_reference(model, data)


def test_cli_gives_eskdb_its_own_members_and_k(capsys, store, tmp_path):
    """--members and --k are declared by eskdb with its own defaults; the CLI takes them by name."""
    data = random_data(np.random.default_rng(1), 120, [2, 3, 2], 2, 0.05)
    lines = ["f0,f1,f2,class"] + [
        ",".join("" if v < 0 else str(v) for v in row) + f",{c}" for row, c in zip(data.X, data.y)
    ]
    path = write(tmp_path, "\n".join(lines) + "\n")
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "eskdb",
        "--members",
        "2",
        "--k",
        "1",
        "--data",
        path,
        "--name",
        "m",
        "--store",
        store,
        "--chunk-rows",
        "50",
    )
    assert (code, err) == (0, "") and "members=2" in out and "k=1" in out


def test_parents_stop_before_a_mostly_empty_table():
    """16-state features, 200 rows: a family table may have 65536 cells, so at most 2 parents."""
    data = random_data(np.random.default_rng(2), 200, [16, 16, 16, 16], 2, 0.0)
    model = fit("skdb", data, k=3, loss="zero-one")
    assert all(node.cpt.size <= 65536 for node in model.networks[0].nodes)
    o = capped(ordering((0, 1, 2, 3), data.statistics.cmi_matrix(), 3), data)
    assert [len(o.parents[i]) for i in o.order] == [0, 1, 2, 2]
