"""Cut points: MDL (Fayyad & Irani), equal frequency, equal width; typing and learning of numeric columns."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.store.model import NUMERIC
from bnserve.trainer.data import IMPUTE, Preprocessing, load
from bnserve.trainer.data.discretize import Method, equal_frequency_cuts, equal_width_cuts, mdl_cuts
from tests.data_helpers import dataset, dataset_path, write

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


def test_mdl_cuts_a_separable_column_once_at_the_midpoint():
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0, 13.0] * 5)
    y = (x > 5).astype(np.int64)
    assert mdl_cuts(x, y, 2) == (7.0,)


def test_mdl_finds_three_class_blocks_and_never_splits_ties():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(0, 1, 60), rng.uniform(2, 3, 60), rng.uniform(4, 5, 60)]).round(2)
    y = np.repeat([0, 1, 2], 60)
    cuts = mdl_cuts(x, y, 3)
    assert len(cuts) == 2 and 1 < cuts[0] < 2 and 3 < cuts[1] < 4
    assert not set(cuts) & set(x.tolist())


def test_mdl_keeps_no_cut_when_the_class_does_not_depend_on_the_value():
    rng = np.random.default_rng(1)
    x = rng.normal(size=400)
    y = rng.integers(0, 2, size=400)
    assert mdl_cuts(x, y, 2) == ()


def test_mdl_with_bins_cuts_only_a_column_it_leaves_whole_into_equal_frequency_intervals():
    rng = np.random.default_rng(1)
    noise, y = rng.integers(1, 14, size=400).astype(float), rng.integers(0, 2, size=400)
    assert Method.parse("mdl:16").cuts(noise, y, 2) == tuple(v + 0.5 for v in range(1, 13))  # 13 values: one each
    assert Method.parse("mdl:4").cuts(noise, y, 2) == equal_frequency_cuts(noise, 4)
    separable = np.arange(8.0)
    assert Method.parse("mdl:4").cuts(separable, (separable > 3).astype(int), 2) == (3.5,)  # MDL's own cut


def test_mdl_criterion_by_hand():
    """y = 0 0 0 1 0 1 1 1 over x = 0..7: the best split (after x = 2) gains
    1 - 5/8·H(1/5) = 0.549 bits, under (log2 7 + log2 7 - (2·1 - 1·0 - 2·0.722)) / 8 = 0.632,
    so Fayyad & Irani keep no cut; a perfect split of 4 rows gains 1 > 0.598 and is kept."""
    assert mdl_cuts(np.arange(8.0), np.array([0, 0, 0, 1, 0, 1, 1, 1]), 2) == ()
    assert mdl_cuts(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1]), 2) == (2.5,)


def test_equal_frequency_and_equal_width():
    x = np.arange(1.0, 101.0)
    assert equal_frequency_cuts(x, 4) == (25.5, 50.5, 75.5)
    assert equal_width_cuts(np.array([0.0, 10.0, 3.0]), 5) == (2.0, 4.0, 6.0, 8.0)
    assert equal_width_cuts(np.array([3.0, 3.0]), 5) == ()
    assert equal_frequency_cuts(np.array([1.0] * 9 + [2.0]), 3) == (1.5,)  # a run of ties moves the cut to its end
    assert equal_frequency_cuts(np.array([1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 3.0]), 2) == (
        2.5,
    )  # rank 4: the nearer end of the run


@pytest.mark.parametrize("method", ["mdl", "mdl:16", "equal-frequency:5", "pkid", "wpkid", "equal-width:4"])
def test_a_numeric_column_with_infinities_gets_finite_cut_points(tmp_path, method):
    """A third of the rows -inf, a few inf: a cut between -inf and the smallest number was
    -inf, which the model refuses ('needs finite, strictly increasing cut points'), and
    equal-width over an infinite range cut nothing. inf and -inf fall in the end intervals."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = np.where(x > 0, "p", "q")
    texts = [repr(float(v)) for v in x]
    texts[::3] = ["-inf"] * len(texts[::3])
    texts[1::50] = ["inf"] * len(texts[1::50])
    path = write(tmp_path, "x,class\n" + "".join(f"{t},{c}\n" for t, c in zip(texts, y)))
    data = load(path, preprocessing=Preprocessing(numeric=("x",), discretize=Method.parse(method)))
    cuts = data.features[0].cuts
    assert cuts and all(np.isfinite(cuts)) and list(cuts) == sorted(set(cuts))
    finite = np.array([t not in ("inf", "-inf") for t in texts])
    if not method.startswith("equal-width"):  # the 133 rows of -inf make an interval of their own
        assert cuts[0] < float(np.min(x[finite]))
    codes = data.X[:, 0]
    assert set(codes[np.array(texts) == "-inf"].tolist()) == {0}
    assert set(codes[np.array(texts) == "inf"].tolist()) == {len(cuts)}


def test_proportional_k_interval_counts_grow_with_the_rows():
    """pkid: sqrt(n) intervals of sqrt(n) rows (100 rows: 10 of 10; 400: 20 of 20); wpkid: t(t + 30)
    = n, at least 30 rows an interval (100 rows: 3; 400: 10 of 40); missing values do not count."""
    y = np.zeros(400, dtype=np.int64)
    for n, pkid, wpkid in ((100, 10, 3), (400, 20, 10)):
        x = np.arange(float(n))
        assert Method.parse("pkid").cuts(x, y[:n], 1) == equal_frequency_cuts(x, pkid)
        assert Method.parse("wpkid").cuts(x, y[:n], 1) == equal_frequency_cuts(x, wpkid)
    with_missing = np.concatenate([np.arange(100.0), np.full(300, np.nan)])
    assert len(Method.parse("pkid").cuts(with_missing, y, 1)) == 9


@pytest.mark.parametrize("method", ["pkid", "wpkid"])
def test_proportional_cut_points_stream(method):
    """Their interval count comes from the value table's rows, which chunks add up to."""
    from bnserve.trainer.data.streaming import load_streamed

    path, prep = str(dataset_path("ecoli")), Preprocessing(discretize=Method.parse(method))
    in_memory = load(path, preprocessing=prep)
    assert [v.cuts for v in load_streamed(path, None, prep, None, 23).features] == [v.cuts for v in in_memory.features]
    assert max(len(v.cuts) for v in in_memory.features) > 5


def test_a_pkid_model_serves_its_cut_points_from_the_store(tmp_path):
    """The cut rule runs at training only: the model stores its cuts, and the store's copy,
    compiled, answers raw numbers as the fitted model does."""
    import pandas as pd

    from bnserve import BayesNetClassifier, publish
    from bnserve import load as load_model

    rng = np.random.default_rng(3)
    X = pd.DataFrame({"a": rng.normal(size=400), "b": rng.normal(size=400)})
    y = np.where(X["a"] + 0.5 * X["b"] + rng.normal(scale=0.5, size=400) > 0, "yes", "no")
    fitted = BayesNetClassifier("nb", discretize="pkid").fit(X, y)
    assert fitted.model_.metadata["preprocessing"]["discretization"] == {"a": "pkid", "b": "pkid"}
    assert [v.cuts for v in fitted.model_.variables[:2]] == [
        equal_frequency_cuts(X[c].to_numpy(), 20) for c in ("a", "b")
    ]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    publish(fitted, "pkid", store=url)
    loaded = load_model("pkid", store=url)
    assert [v.cuts for v in loaded.model_.variables] == [v.cuts for v in fitted.model_.variables]
    assert np.array_equal(loaded.predict_proba(X), fitted.predict_proba(X))


@pytest.mark.parametrize(
    "text, method",
    [
        ("mdl", Method("mdl")),
        ("equal-frequency:3", Method("equal-frequency", 3)),
        ("equal-width:10", Method("equal-width", 10)),
        ("mdl:16", Method("mdl", 16)),
        ("pkid", Method("pkid")),
        ("wpkid", Method("wpkid")),
    ],
)
def test_method_parses_and_prints_back(text, method):
    assert Method.parse(text) == method and str(method) == text


@pytest.mark.parametrize(
    "text", ["mdl:1", "mdl:x", "pkid:4", "wpkid:0", "equal-width", "equal-width:0", "equal-frequency:x", "kmeans:3"]
)
def test_bad_method_is_refused(text):
    with pytest.raises(InvalidInput, match="expected mdl, mdl:N, pkid, wpkid, equal-frequency:N or equal-width:N"):
        Method.parse(text)


NUMERIC_CSV = (
    "x,code,word,c\n"
    + "".join(f"{x},{i % 3},{'ab'[i % 2]},{'yn'[x > 50]}\n" for i, x in enumerate(range(0, 100, 2)))
    + ",1,a,y\n"
)


def test_columns_are_typed_numeric_nominal_codes_and_words(tmp_path):
    data = load(write(tmp_path, NUMERIC_CSV))
    x, code, word = data.features
    assert x.kind == NUMERIC and x.cuts == (51.0,) and x.states == ("(-inf-51.0]", "(51.0-inf)")
    assert code.kind == "nominal" and code.states == ("0", "1", "2")
    assert word.kind == "nominal"
    assert data.X[:, 0].tolist() == [int(v > 51) for v in range(0, 100, 2)] + [-1]


def test_types_can_be_forced_and_columns_ignored(tmp_path):
    path = write(tmp_path, NUMERIC_CSV)
    data = load(path, preprocessing=Preprocessing(nominal=("x",), numeric=("code",), ignore=("word",)))
    assert [v.name for v in data.features] == ["x", "code"]
    assert data.features[0].kind == "nominal" and len(data.features[0].states) == 50
    assert data.features[1].kind == NUMERIC
    per_column = Preprocessing(per_column={"x": Method("equal-width", 2)})
    assert load(path, preprocessing=per_column).features[0].cuts == (49.0,)


def test_only_ascii_decimals_make_a_column_numeric(tmp_path):
    """Python's float reads "١٣" and "1_000"; a column holding them is nominal, and forced or
    declared numeric it is refused naming the value (issue 17)."""
    rows = "".join(f"{x},{'yn'[i % 2]}\n" for i, x in enumerate(["1_000", "2000", "١٣", "3500", "4100", "52"] * 3))
    path = write(tmp_path, "x,c\n" + rows)
    x = load(path).features[0]
    assert x.kind == "nominal" and {"1_000", "١٣"} <= set(x.states)
    with pytest.raises(InvalidInput, match=r"line 2: column 'x' is numeric, but has the value '1_000'"):
        load(path, preprocessing=Preprocessing(numeric=("x",)))
    arff = write(tmp_path, "@relation r\n@attribute x numeric\n@attribute c {y,n}\n@data\n12,y\n١٣,n\n", "data.arff")
    with pytest.raises(InvalidInput, match=r"column 'x' is numeric, but has the value '١٣'"):
        load(arff)
    assert Method.parse("mdl:16").bins == 16
    with pytest.raises(InvalidInput, match="bad discretisation 'mdl:١٦'"):
        Method.parse("mdl:١٦")


@pytest.mark.parametrize(
    "prep, pieces",
    [
        (Preprocessing(numeric=("word",)), ["line 2", "'word'", "'a'"]),
        (Preprocessing(numeric=("nope",)), ["--numeric", "'nope'"]),
        (Preprocessing(ignore=("c",)), ["class column"]),
        (Preprocessing(numeric=("x",), nominal=("x",)), ["both"]),
    ],
)
def test_bad_typing_is_refused_naming_the_column(tmp_path, prep, pieces):
    with pytest.raises(InvalidInput) as err:
        load(write(tmp_path, NUMERIC_CSV), preprocessing=prep)
    for piece in pieces:
        assert piece in err.value.message


def test_impute_fills_training_rows_with_modes_and_means(tmp_path):
    data = load(
        write(tmp_path, "x,n,c\n1,a,y\n2,a,y\n,,y\n9,b,n\n10,,n\n"),
        preprocessing=Preprocessing(numeric=("x",), discretize=Method("equal-width", 2), missing=IMPUTE),
    )
    assert (data.X >= 0).all()
    assert data.X[2].tolist() == [int(5.5 > data.features[0].cuts[0]), 0]  # mean 5.5, mode "a"


def test_split_learns_cut_points_on_the_training_rows_only(tmp_path):
    data = load(write(tmp_path, NUMERIC_CSV))
    train_rows = np.arange(data.n_rows) % 2 == 0
    train, test = data.split(train_rows, ~train_rows)
    assert train.features[0].cuts != data.features[0].cuts  # learned again, from half the rows
    assert test.variables == train.variables
    assert test.X[:, 0].tolist() == [int(v > train.features[0].cuts[0]) for v in range(2, 100, 4)]


WEKA_CUTS = json.loads((FIXTURES / "weka_mdl_cuts.json").read_text())


def test_the_weka_fixture_covers_33_columns_of_five_data_sets():
    assert {file: len(columns) for file, columns in WEKA_CUTS.items()} == {
        "wine.csv": 13,
        "ecoli.csv": 7,
        "hepatitis.csv": 6,
        "dermatology.csv": 1,
        "adult-train.csv": 6,
    }


@pytest.mark.parametrize("file", sorted(WEKA_CUTS))
def test_mdl_cut_points_equal_wekas(file):
    """tests/fixtures/weka_mdl_cuts.json: Weka 3.6.14's weka.filters.supervised.attribute.Discretize
    (Fayyad & Irani MDL, its defaults) on wine, ecoli, hepatitis, dermatology (shipped in
    tests/data) and adult-train (too big to ship: ../shared/datasets)."""
    expected = WEKA_CUTS[file]
    data = dataset(file.removesuffix(".csv"), preprocessing=Preprocessing(numeric=tuple(expected)))
    cuts = {v.name: v.cuts for v in data.features if v.name in expected}
    assert set(cuts) == set(expected)
    for name, values in expected.items():
        assert cuts[name] == pytest.approx(values, rel=1e-9, abs=1e-9), (file, name)


def test_declared_types_win_over_inference_and_keep_the_declared_label_order(tmp_path):
    arff = (
        "@relation t\n@attribute scale numeric\n@attribute colour {red, green, blue}\n@attribute c {n, y}\n@data\n"
        + "".join(f"{1 + i % 5},{('red', 'green')[i % 2]},{'ny'[i % 5 > 2]}\n" for i in range(60))
    )
    data = load(write(tmp_path, arff, "t.arff"))
    scale, colour = data.features
    assert scale.kind == NUMERIC and scale.cuts == (3.5,)  # in a CSV, 1-5 would read as nominal codes
    assert colour.states == ("red", "green", "blue")
    assert data.class_variable.states == ("n", "y")
    csv_data = load(
        write(
            tmp_path,
            "scale,colour,c\n"
            + "".join(f"{1 + i % 5},{('red', 'green')[i % 2]},{'ny'[i % 5 > 2]}\n" for i in range(60)),
        )
    )
    assert csv_data.features[0].kind == "nominal"


def test_cut_points_are_short_midpoints_and_separate_even_neighbouring_floats():
    from bnserve.trainer.data.discretize import _midpoint

    assert _midpoint(12.18, 12.19) == 12.185  # (a + b) / 2 is 12.184999999999999 in floats
    a = 1.0
    b = float(np.nextafter(a, 2.0))
    assert a <= _midpoint(a, b) < b
    x = np.array([a] * 20 + [b] * 20)
    cuts = mdl_cuts(x, np.repeat([0, 1], 20), 2)
    assert len(cuts) == 1 and a <= cuts[0] < b


def test_a_declared_numeric_column_with_no_value_is_one_interval_and_an_empty_csv_column_is_refused(tmp_path):
    arff = "@relation t\n@attribute x numeric\n@attribute f {a,b}\n@attribute c {n,y}\n@data\n?,a,n\n?,b,y\n"
    data = load(write(tmp_path, arff, "t.arff"))
    assert data.features[0].cuts == () and data.X[:, 0].tolist() == [-1, -1]
    with pytest.raises(InvalidInput, match="column 'x': every value is empty"):
        load(write(tmp_path, "x,f,c\n,a,n\n,b,y\n"))


@pytest.mark.parametrize("method", ["mdl", "equal-frequency:5", "equal-width:4"])
def test_value_tables_of_chunks_merge_to_the_same_cut_points(method):
    from bnserve.trainer.data.discretize import merge_value_tables, value_table

    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, size=3000)
    x = np.round(rng.normal(y, 1.0), 2)
    x[rng.random(3000) < 0.05] = np.nan
    chunks = [value_table(x[i : i + 700], y[i : i + 700], 3) for i in range(0, 3000, 700)]
    values, counts = merge_value_tables(chunks)
    whole = value_table(x, y, 3)
    np.testing.assert_array_equal(values, whole[0])
    np.testing.assert_array_equal(counts, whole[1])
    m = Method.parse(method)
    assert m.cuts_from_table(values, counts) == m.cuts(x, y, 3) and len(m.cuts(x, y, 3)) >= 2
