"""Row weights (``--weight COLUMN``, ``sample_weight``): a row of whole-number weight w gives
the model of the data with that row repeated w times (0: dropped), for every learner and
estimator that takes weights; the others refuse them naming themselves; bad weights are
refused naming the line and value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.store.errors import InvalidInput
from bnserve.store.model import Model
from bnserve.trainer.data import Preprocessing, load, prepare
from bnserve.trainer.data.columns import columns_of
from bnserve.trainer.data.encoded import prepare_weighted
from bnserve.trainer.data.missing import AVAILABLE_CASE, STATE
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from bnserve.trainer.io import RawTable
from bnserve.trainer.learners.registry import LEARNERS
from tests.data_helpers import write
from tests.trainer.test_streaming import assert_same_model

WEIGHTED = sorted(name for name, learner in LEARNERS.items() if not learner.unweighted)
REFUSING = sorted(name for name, learner in LEARNERS.items() if learner.unweighted)
RUNS = [(name, {}) for name in WEIGHTED] + [("kdb", {"k": 2}), ("fkdb", {"k": 2, "fd_min_count": 2})]
ESTIMATORS = ("laplace", "dirichlet:0.5", "m:2", "hdp:3")
HEADER = ("n1", "n2", "n3", "num", "cls")


def _table(rows: list[tuple[str, ...]]) -> RawTable:
    cells = np.array(rows, dtype=object).reshape(len(rows), len(HEADER))
    return RawTable.of_cells("generated", HEADER, cells, np.arange(2, len(rows) + 2))


def _same_model(a: Model, b: Model) -> None:
    assert a.variables == b.variables
    assert len(a.networks) == len(b.networks)
    for net_a, net_b in zip(a.networks, b.networks):
        assert [(n.name, n.parents) for n in net_a.nodes] == [(n.name, n.parents) for n in net_b.nodes]
        for node_a, node_b in zip(net_a.nodes, net_b.nodes):
            np.testing.assert_array_equal(node_a.cpt, node_b.cpt, err_msg=node_a.name)


nominal = st.sampled_from(["a", "b", "c", ""])
row = st.tuples(nominal, nominal, st.sampled_from(["x", "y"]), st.sampled_from(["1", "2.5", "4", "7", ""]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.lists(st.tuples(row, st.sampled_from(["p", "q", "r"]), st.integers(0, 3)), min_size=4, max_size=16),
    missing=st.sampled_from([AVAILABLE_CASE, STATE]),
)
def test_whole_number_weights_equal_repeated_rows(data, missing) -> None:
    weights = [w for _, _, w in data]
    if not any(weights):
        weights[0] = 1
    rows = [(*features, cls) for features, cls, _ in data]
    repeated = [r for r, w in zip(rows, weights) for _ in range(w)]
    preprocessing = Preprocessing(missing=missing)
    try:
        expected = prepare(columns_of(_table(repeated), None, preprocessing), preprocessing)
    except InvalidInput:  # e.g. a column every kept row leaves empty: the weighted data must be refused alike
        with pytest.raises(InvalidInput):
            prepare_weighted(_table(rows), None, preprocessing, weights)
        return
    weighted = prepare_weighted(_table(rows), None, preprocessing, weights)
    assert weighted.total_weight() == expected.n_rows
    for algo, params in RUNS:
        for estimator in ESTIMATORS:
            _same_model(fit(algo, weighted, estimator, **params), fit(algo, expected, estimator, **params))


def test_without_weights_every_count_is_an_integer_as_before(tmp_path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("a,b,cls\nx,1,p\ny,2,q\nx,3,p\n")
    data = load(str(path))
    assert data.weights is None and not data.weighted
    assert data.class_totals().dtype == np.int64
    assert data.statistics.class_feature[0].dtype == np.int64
    assert fit("nb", data).metadata["training"].keys().isdisjoint({"weight_column", "total_weight"})


@pytest.mark.parametrize("algo", REFUSING)
def test_a_learner_that_cannot_take_weights_refuses_them_naming_itself(algo) -> None:
    weighted = prepare_weighted(
        _table([("a", "b", "x", "1", "p"), ("b", "a", "y", "2", "q")]), None, Preprocessing(), [1, 2]
    )
    with pytest.raises(InvalidInput, match=f"algorithm {algo!r} does not take row weights: it "):
        fit(algo, weighted)


def test_fractional_weights_with_hdp_are_refused() -> None:
    table = _table([("a", "b", "x", "1", "p"), ("b", "a", "y", "2", "q"), ("a", "a", "y", "2", "q")])
    with pytest.raises(InvalidInput, match="estimator hdp .* whole numbers"):
        fit("nb", prepare_weighted(table, None, Preprocessing(), [1, 0.5, 1]), "hdp")
    fit("nb", prepare_weighted(table, None, Preprocessing(), [1, 0.5, 1]), "laplace")  # fractional: fine


@pytest.mark.parametrize("algo", ["nb", "tan"])
def test_alr_with_whole_weights_fits_the_repeated_rows_model(algo) -> None:
    """alr minimises a weighted log-loss: the optimum of the repeated rows' loss, found by
    L-BFGS along sums in another order, so equal to within the optimiser's tolerance."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 3, size=(80, 4))
    rows = [("abc"[a], "ab"[b % 2], "xy"[c % 2], str(d), "pq"[(a + b) % 2]) for a, b, c, d in codes.tolist()]
    weights = rng.integers(0, 4, size=len(rows)).tolist()
    repeated = [r for r, w in zip(rows, weights) for _ in range(w)]
    weighted = fit(algo, prepare_weighted(_table(rows), None, Preprocessing(), weights), "alr")
    expected = fit(algo, prepare(columns_of(_table(repeated), None, Preprocessing()), Preprocessing()), "alr")
    unweighted = fit(algo, prepare(columns_of(_table(rows), None, Preprocessing()), Preprocessing()), "alr")
    for a, b in zip(weighted.networks[0].nodes, expected.networks[0].nodes):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-4, err_msg=a.name)
    assert any(
        not np.allclose(a.cpt, c.cpt, atol=1e-3)
        for a, c in zip(weighted.networks[0].nodes, unweighted.networks[0].nodes)
    )


def test_a_weight_column_is_not_a_feature_and_is_recorded(tmp_path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("a,w,cls\nx,2,p\ny,0,q\nx,1.5,p\nz,1,q\n")
    data = load(str(path), preprocessing=Preprocessing(weight="w"))
    assert [v.name for v in data.features] == ["a"]
    assert data.features[0].states == ("x", "z")  # the row of weight 0 is dropped before typing
    np.testing.assert_array_equal(data.weights, [2.0, 1.5, 1.0])
    training = fit("nb", data).metadata["training"]
    assert training["weight_column"] == "w"
    assert training["total_weight"] == 4.5
    assert training["class_counts"] == {"p": 3.5, "q": 1.0}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "line 3: column 'w': a missing weight"),
        ("?", "line 3: column 'w': a missing weight"),
        ("heavy", "line 3: column 'w': weight 'heavy' is not a number"),
        ("-1", "line 3: weight -1.0 is not a finite non-negative number"),
        ("inf", "line 3: weight inf is not a finite non-negative number"),
    ],
)
def test_a_bad_weight_is_refused_naming_its_line_and_value(tmp_path, value, message) -> None:
    path = tmp_path / "d.csv"
    path.write_text(f"a,w,cls\nx,1,p\ny,{value},q\n")
    with pytest.raises(InvalidInput, match=message):
        load(str(path), preprocessing=Preprocessing(weight="w"))


def test_all_zero_weights_a_missing_column_and_the_class_as_weight_are_refused(tmp_path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("a,w,cls\nx,0,p\ny,0,q\n")
    with pytest.raises(InvalidInput, match="every weight is 0"):
        load(str(path), preprocessing=Preprocessing(weight="w"))
    with pytest.raises(InvalidInput, match="--weight: no column 'weight'"):
        load(str(path), preprocessing=Preprocessing(weight="weight"))
    with pytest.raises(InvalidInput, match="--weight: 'cls' is the class column"):
        load(str(path), preprocessing=Preprocessing(weight="cls"))


def test_sample_weight_arrays_are_checked_like_a_column() -> None:
    table = _table([("a", "b", "x", "1", "p"), ("b", "a", "y", "2", "q")])
    with pytest.raises(InvalidInput, match="row 2: weight nan is not a finite non-negative number"):
        prepare_weighted(table, None, Preprocessing(), [1, float("nan")])
    with pytest.raises(InvalidInput, match="3 sample weights for 2 rows"):
        prepare_weighted(table, None, Preprocessing(), [1, 1, 1])


def _weighted_csv(rows: int, seed: int) -> str:
    """Nominal, integer and real columns with missing values, and a column "w" of weights
    (0 among them, and binary fractions, whose sums are exact in any order)."""
    rng = np.random.default_rng(seed)
    lines = ["colour,w,size,level,class"]
    for _ in range(rows):
        c = int(rng.integers(0, 3))
        colour = "" if rng.random() < 0.05 else "rgb"[(c + rng.integers(0, 2)) % 3]
        size = "" if rng.random() < 0.05 else f"{rng.normal(c, 1.0):.2f}"
        weight = ["0", "1", "2", "3", "0.5", "1.25"][int(rng.integers(0, 6))]
        lines.append(f"{colour},{weight},{size},{int(c + rng.integers(0, 3))},{'ABC'[c]}")
    return "\n".join(lines) + "\n"


STREAMED = [name for name in WEIGHTED if LEARNERS[name].counts_only]


@pytest.mark.parametrize("algo", STREAMED)
@pytest.mark.parametrize("chunk_rows", [1, 64, 10_000])
def test_weights_read_in_chunks_give_the_in_memory_model(tmp_path, algo, chunk_rows) -> None:
    path = write(tmp_path, _weighted_csv(300, len(algo) + chunk_rows))
    prep = Preprocessing(weight="w")
    streamed = load_streamed(path, None, prep, None, chunk_rows)
    in_memory = load(path, preprocessing=prep)
    assert streamed.weighted and streamed.class_totals().tolist() == in_memory.class_totals().tolist()
    assert_same_model(fit(algo, streamed), fit(algo, in_memory))  # the fingerprint and total weight too


@pytest.mark.parametrize("algo", ["kdb", "tan"])
def test_weights_counted_in_parts_by_processes_give_the_same_model(tmp_path, monkeypatch, algo) -> None:
    from bnserve.trainer.data import streaming

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    path = write(tmp_path, _weighted_csv(900, 13))
    prep = Preprocessing(weight="w")
    in_parts = load_streamed(path, None, prep, None, 64, jobs=3)
    assert len(in_parts.reader.parts) == 3
    assert_same_model(fit(algo, in_parts), fit(algo, load(path, preprocessing=prep)))


def test_a_chunk_of_zero_weights_is_fine_but_a_file_of_them_is_refused(tmp_path) -> None:
    path = write(tmp_path, "a,w,cls\nx,0,p\ny,0,q\nx,2,p\nz,1,q\n")
    assert load_streamed(path, None, Preprocessing(weight="w"), None, 2).total_weight() == 3.0
    path = write(tmp_path, "a,w,cls\nx,0,p\ny,0,q\n")
    with pytest.raises(InvalidInput, match="column 'w': no row with a class has a weight above 0"):
        load_streamed(path, None, Preprocessing(weight="w"), None, 1)
    path = write(tmp_path, "a,w,cls\nx,1,p\ny,-2,q\n")
    with pytest.raises(InvalidInput, match="line 3: weight -2.0 is not a finite non-negative number"):
        load_streamed(path, None, Preprocessing(weight="w"), None, 1)


def test_a_bad_weight_in_a_part_read_apart_is_named_by_its_line(tmp_path, monkeypatch) -> None:
    from bnserve.trainer.data import streaming

    monkeypatch.setattr(streaming, "MIN_PART_BYTES", 1024)
    lines = _weighted_csv(900, 13).splitlines()
    colour, _, rest = lines[800].partition(",")
    lines[800] = f"{colour},heavy,{rest.partition(',')[2]}"
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(InvalidInput, match="line 801: column 'w': weight 'heavy' is not a number"):
        load_streamed(path, None, Preprocessing(weight="w"), None, 64, jobs=3)


def test_the_training_summary_names_the_weight_column_and_total(tmp_path) -> None:
    from bnserve.trainer.data.summary import summary_text

    path = write(tmp_path, "a,w,cls\nx,2,p\ny,0,q\nx,1.5,p\nz,1,q\n")
    for data in (
        load(path, preprocessing=Preprocessing(weight="w")),
        load_streamed(path, None, Preprocessing(weight="w"), None, 2),
    ):
        text, _ = summary_text(data)
        assert text.splitlines()[0].endswith(
            "3 rows, weighted by column 'w' (total weight 4.5), 1 features, class 'cls'"
        )
        assert "'w'" not in text.splitlines()[2]  # not a feature row
    assert "weighted" not in summary_text(load(path))[0]


def test_auto_refuses_weights_whether_fitting_or_evaluated() -> None:
    from bnserve.trainer.auto import cross_validate_auto, fit_auto

    rows = [("abc"[i % 3], "ab"[i % 2], "xy"[i % 2], str(i), "pq"[i % 2]) for i in range(20)]
    weighted = prepare_weighted(_table(rows), None, Preprocessing(), [1, 2] * 10)
    for run in (lambda: fit_auto(weighted), lambda: cross_validate_auto(weighted, folds=2)):
        with pytest.raises(InvalidInput, match="--algo auto does not take row weights"):
            run()


@pytest.mark.parametrize("algo", ["ffss", "stan"])
def test_the_tests_of_independence_count_weights_as_repeated_rows(algo) -> None:
    """ffss and stan keep what reliable G-tests say: on rows enough for them to be trusted
    (small random data rarely are), the weighted model is still the repeated rows' one."""
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(150):
        c = int(rng.integers(0, 2))
        a = c if rng.random() < 0.8 else int(rng.integers(0, 2))
        b = a if rng.random() < 0.7 else int(rng.integers(0, 2))
        rows.append(("ab"[a], "ab"[b], "xy"[int(rng.integers(0, 2))], str(int(rng.integers(0, 3))), "pq"[c]))
    weights = rng.integers(0, 4, size=len(rows)).tolist()
    repeated = [r for r, w in zip(rows, weights) for _ in range(w)]
    weighted = fit(algo, prepare_weighted(_table(rows), None, Preprocessing(), weights))
    expected = fit(algo, prepare(columns_of(_table(repeated), None, Preprocessing()), Preprocessing()))
    assert weighted.metadata["selected"] == expected.metadata["selected"] and expected.metadata["selected"]
    assert weighted.metadata["order_scores"] == expected.metadata["order_scores"]  # p-values, I(X;C), CMIs
    _same_model(weighted, expected)


def test_the_docs_list_every_learner_where_it_stands_on_weights() -> None:
    """docs/training.md's Row weights section: a row of the table for each learner that takes
    weights, and the paragraph after it names each one that refuses them."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    section = text[text.index("## Row weights") :]
    section = section[: section.index("\n## ")]
    table, _, refusals = section.partition("The others refuse weights")
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    assert {name for name in WEIGHTED if not any(f"`{name}`" in row for row in rows)} == set()
    assert {name for name in REFUSING if f"`{name}`" not in refusals} == set()
    assert {name for name in WEIGHTED if f"`{name}`" in refusals} == set()
