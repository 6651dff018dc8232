"""bnserve.BayesNetClassifier: scikit-learn's own estimator checks for every learner, the
same model as ``trainer fit`` on the same data, and the notebook workflows (clone, CV,
Pipeline, GridSearchCV, pickling)."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import check_estimator

from bnserve import BayesNetClassifier
from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from bnserve.trainer.cli import main as trainer
from bnserve.trainer.data import load_with
from bnserve.trainer.learners.registry import LEARNERS, PARAMETERS

DATA = Path(__file__).resolve().parents[1] / "data"
# The one check that does not run: it needs SCIPY_ARRAY_API=1, and the estimator declares
# no Array API support (its data become text columns, not array-API arrays).
SKIPPED = {"check_array_api_input"}
# The checks that fit with sample_weight: a learner that scores on rows (and auto) refuses
# weights, naming itself, so there they fail with that refusal and nothing else.
SAMPLE_WEIGHT_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data",
    "check_sample_weights_list",
    "check_sample_weights_not_an_array",
    "check_sample_weights_not_overwritten",
    "check_sample_weights_pandas_series",
    "check_sample_weights_shape",
}


@pytest.mark.parametrize("algo", [*LEARNERS, "auto"])
def test_scikit_learn_estimator_checks_pass(algo):
    small_auto = {"candidates": ("nb", "tan"), "k": 1, "cpt_estimator": "laplace"}  # seconds, not minutes
    estimator = BayesNetClassifier(algo, **(small_auto if algo == "auto" else {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: str(r["exception"])[:300] for r in results if r["status"] == "failed"}
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    refuses_weights = algo == "auto" or bool(LEARNERS[algo].unweighted)
    assert set(failed) == (SAMPLE_WEIGHT_CHECKS if refuses_weights else set())
    rewritten = "check_sample_weights_pandas_series"  # sklearn words this failure its own way
    assert all("does not take row weights" in m for name, m in failed.items() if name != rewritten)
    assert skipped <= SKIPPED
    assert len(results) >= 50


def test_every_learner_parameter_is_a_constructor_argument():
    params = BayesNetClassifier().get_params()
    assert set(PARAMETERS) <= set(params)


def hepatitis() -> tuple[pd.DataFrame, pd.Series]:
    frame = pd.read_csv(DATA / "hepatitis.csv.gz")
    return frame.drop(columns="class"), frame["class"]


def test_the_model_is_the_one_trainer_fit_learns_from_the_same_file(tmp_path):
    """Numeric columns with missing values, nominal ones, pandas' own dtypes (AGE int,
    BILIRUBIN float with NaN, text): the same cut points, structure and CPTs, so the same
    posteriors on every row as the trainer's model of the file."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    source = str(DATA / "hepatitis.csv.gz")
    assert trainer(["fit", "--algo", "kdb", "--k", "2", "--data", source, "--name", "h", "--store", url]) == 0
    with ModelStore(url) as store:
        theirs = store.load("h").model
    X, y = hepatitis()
    ours = BayesNetClassifier("kdb", k=2).fit(X, y)
    assert [(v.name, v.kind, v.cuts) for v in ours.model_.variables] == [
        (v.name, v.kind, v.cuts) for v in theirs.variables
    ]
    assert [net.arcs for net in ours.model_.networks] == [net.arcs for net in theirs.networks]
    coded = load_with(source, theirs.variables)
    expected = compile_model(theirs).predict_proba(coded.X)
    np.testing.assert_allclose(ours.predict_proba(X)[coded.y >= 0], expected, rtol=0, atol=1e-12)


def test_labels_come_back_as_given_and_proba_columns_follow_classes():
    X, y = hepatitis()
    codes = y.map({"DIE": 7, "LIVE": 3}).to_numpy()
    clf = BayesNetClassifier("nb").fit(X, codes)
    assert clf.classes_.tolist() == [3, 7]
    by_text = BayesNetClassifier("nb").fit(X, y)  # classes_ DIE, LIVE: the other order
    np.testing.assert_allclose(clf.predict_proba(X), by_text.predict_proba(X)[:, ::-1])
    assert set(clf.predict(X).tolist()) <= {3, 7}


def test_labels_of_types_that_do_not_sort_together_are_a_value_error_naming_them():
    """y of text and integers came out of fit as np.unique's raw TypeError ('<' not supported
    between instances of 'int' and 'str'); classes_ are y's labels sorted, so it is refused."""
    X, y = hepatitis()
    mixed = np.array(["LIVE" if label == "LIVE" else 0 for label in y], dtype=object)
    for labels in (mixed, mixed[::-1]):  # a text first, or a number
        with pytest.raises(ValueError, match=r"y mixes labels of types int, str, which cannot be sorted into classes_"):
            BayesNetClassifier("nb").fit(X, labels)
    assert BayesNetClassifier("nb").fit(X, mixed.astype(str)).classes_.tolist() == ["0", "LIVE"]


@pytest.mark.parametrize(
    ("label", "reads_as"), [("NA", "a missing class"), ("", "a missing class"), (" LIVE", "'LIVE'")]
)
def test_a_label_of_y_the_reading_would_change_is_refused_naming_it(label, reads_as):
    """y's labels are read as a file's texts are: a missing marker's rows were dropped, and a
    label with spaces merged with another, so classes_ named a class the model lacked and
    predict failed with 'tuple.index(x): x not in tuple'."""
    X, y = hepatitis()
    y = y.where(y == "LIVE", label)
    with pytest.raises(ValueError, match=f"y has the label {label!r}, which reads as {reads_as}"):
        BayesNetClassifier("nb").fit(X, y)


def test_missing_values_and_unseen_labels_are_summed_out_or_refused():
    X, y = hepatitis()
    clf = BayesNetClassifier("tan").fit(X, y)
    row = X.iloc[[0]].copy()
    unseen = row.copy()
    unseen["SEX"] = "unknown"
    missing = row.copy()
    missing["SEX"] = np.nan
    np.testing.assert_array_equal(clf.predict_proba(unseen), clf.predict_proba(missing))
    assert not np.allclose(clf.predict_proba(row), clf.predict_proba(missing))
    strict = BayesNetClassifier("tan", handle_unknown="error").fit(X, y)
    with pytest.raises(ValueError, match=r"column 'SEX': unknown value 'unknown'; known: female, male"):
        strict.predict(unseen)


def test_columns_are_checked_as_scikit_learn_checks_them():
    X, y = hepatitis()
    clf = BayesNetClassifier("nb").fit(X, y)
    with pytest.raises(ValueError, match="same order"):
        clf.predict(X[list(reversed(X.columns))])
    with pytest.raises(ValueError, match="AGE"):
        clf.predict(X.drop(columns="AGE"))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        by_position = clf.predict_proba(X.to_numpy())
    np.testing.assert_array_equal(by_position, clf.predict_proba(X))


def test_data_the_trainer_refuses_is_a_value_error_in_fit_and_predict():
    """The trainer's InvalidInput from reading a frame (a column type it does not read, a
    column name it refuses) came out of fit and predict as is, not as scikit-learn's ValueError."""
    X, y = hepatitis()
    durations = X.assign(AGE=pd.to_timedelta(X["AGE"], unit="D"))
    with pytest.raises(ValueError, match=r"column 'AGE': Arrow type duration\[.*\] is not read"):
        BayesNetClassifier("nb").fit(durations, y)
    with pytest.raises(ValueError, match="column 1 needs a name of 1 to 256 characters"):
        BayesNetClassifier("nb").fit(X.rename(columns={X.columns[0]: "x" * 300}), y)
    clf = BayesNetClassifier("nb").fit(X, y)
    with pytest.raises(ValueError, match=r"column 'AGE': Arrow type duration\[.*\] is not read"):
        clf.predict(durations)


def test_inf_in_x_is_a_number_as_trainer_fit_reads_it(tmp_path):
    """scikit-learn's check refused inf ("Input X contains infinity") while trainer fit reads
    inf and -inf in a numeric column as numbers: the same model from the frame and its CSV,
    and at predict an infinite value falls in the first or last interval. NaN is missing."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    y = pd.Series(np.where(X["a"] + rng.normal(scale=0.5, size=300) > 0, "yes", "no"), name="class")
    X.loc[[0, 5], "a"] = np.inf
    X.loc[[1, 7], "a"] = -np.inf
    X.loc[[2, 3], "b"] = np.nan
    path = tmp_path / "inf.csv"
    X.assign(**{"class": y}).to_csv(path, index=False)  # inf and -inf as texts
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert trainer(["fit", "--algo", "nb", "--data", str(path), "--name", "inf", "--store", url]) == 0
    with ModelStore(url) as store:
        theirs = store.load("inf").model
    for frame in (X, X.to_numpy()):
        ours = BayesNetClassifier("nb").fit(frame, y)
        assert [(v.kind, v.cuts) for v in ours.model_.features] == [(v.kind, v.cuts) for v in theirs.features]
        for mine, file_s in zip(ours.model_.networks[0].nodes, theirs.networks[0].nodes):
            np.testing.assert_array_equal(mine.cpt, file_s.cpt)
    edges = pd.DataFrame({"a": [np.inf, -np.inf, np.nan], "b": [0.0, 0.0, np.inf]})
    far = pd.DataFrame({"a": [1e300, -1e300, np.nan], "b": [0.0, 0.0, 1e300]})
    clf = BayesNetClassifier("nb").fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(edges), clf.predict_proba(far))


def test_an_array_of_text_and_numbers_is_typed_as_the_file_would_be():
    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "green", "blue"], 300)
    size = rng.normal(size=300) + (colour == "red")
    code = rng.integers(1, 4, 300)  # three whole numbers: codes of a nominal column, as in a CSV
    y = np.where(size + (code == 2) > 0.5, "big", "small")
    X = np.array([colour, size, code], dtype=object).T
    clf = BayesNetClassifier("nb").fit(X, y)
    kinds = {v.name: v.kind for v in clf.model_.features}
    assert kinds == {"x0": "nominal", "x1": "numeric", "x2": "nominal"}
    assert clf.model_.variable("x2").states == ("1", "2", "3")
    assert clf.score(X, y) > 0.8


def test_a_categorical_is_nominal_with_its_categories_as_states_in_their_order():
    """Whatever the categories' type: pandas 3 gives text categories to Arrow as large_string,
    and number categories as numbers, which read as plain values were typed numeric or lost
    their order and unused categories."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "grade": pd.Categorical(rng.choice(["lo", "hi"], 200), categories=["lo", "hi", "mid"]),
            "dose": pd.Categorical(rng.choice([2.5, 0.5, 1.5, 7.25], 200), categories=[2.5, 0.5, 1.5, 7.25]),
            "level": pd.Categorical(rng.choice([30, 10, 20], 200), categories=[30, 10, 20]),
        }
    )
    y = np.where((X["grade"] == "hi") ^ (X["dose"].astype(float) > 1), "a", "b")
    clf = BayesNetClassifier("nb").fit(X, y)
    assert {v.name: (v.kind, v.states) for v in clf.model_.features} == {
        "grade": ("nominal", ("lo", "hi", "mid")),
        "dose": ("nominal", ("2.5", "0.5", "1.5", "7.25")),
        "level": ("nominal", ("30", "10", "20")),
    }
    np.testing.assert_array_equal(clf.predict_proba(X), clf.predict_proba(X.astype(str)))


def test_scikit_learn_workflows(tmp_path):
    X, y = hepatitis()
    assert clone(BayesNetClassifier("kdb", k=1)).get_params()["k"] == 1
    scores = cross_val_score(BayesNetClassifier("nb"), X, y, cv=5)
    assert scores.shape == (5,) and scores.mean() > 0.75
    search = GridSearchCV(BayesNetClassifier(), {"algo": ["nb", "tan", "kdb"], "k": [1, 2]}, cv=3).fit(X, y)
    assert search.best_params_["algo"] in {"nb", "tan", "kdb"} and search.best_score_ > 0.75
    pipeline = Pipeline(
        [
            (
                "columns",
                ColumnTransformer(
                    [("keep", "passthrough", ["AGE", "SEX", "BILIRUBIN", "ALBUMIN", "PROTIME"])],
                    verbose_feature_names_out=False,
                ).set_output(transform="pandas"),
            ),
            ("bn", BayesNetClassifier("tan")),
        ]
    ).fit(X, y)
    assert [v.name for v in pipeline[-1].model_.features] == ["AGE", "SEX", "BILIRUBIN", "ALBUMIN", "PROTIME"]
    restored = pickle.loads(pickle.dumps(pipeline))
    np.testing.assert_array_equal(restored.predict_proba(X), pipeline.predict_proba(X))


def test_bad_parameters_are_value_errors_naming_them():
    X, y = hepatitis()
    with pytest.raises(ValueError, match="unknown algo 'kbd'"):
        BayesNetClassifier("kbd").fit(X, y)
    with pytest.raises(ValueError, match="discretize"):
        BayesNetClassifier(discretize="sometimes").fit(X, y)
    with pytest.raises(ValueError, match="handle_unknown"):
        BayesNetClassifier(handle_unknown="ignore").fit(X, y)
    with pytest.raises(ValueError, match="k"):
        BayesNetClassifier("kdb", k=-1).fit(X, y)


def test_log_proba_is_computed_in_log_space():
    """400 copies of a feature that names the class: P(wrong class) underflows to 0.0, its log
    stays finite and exp(log) is predict_proba."""
    y = np.array(["a", "b"] * 50)
    X = np.repeat(np.where(y == "a", "x", "y")[:, None], 400, axis=1)
    clf = BayesNetClassifier(algo="nb").fit(X, y)
    proba, log = clf.predict_proba(X[:2]), clf.predict_log_proba(X[:2])
    assert proba[0, 1] == 0.0 and np.isfinite(log).all() and log[0, 1] < -1000
    np.testing.assert_allclose(np.exp(log), proba, rtol=1e-12, atol=0)
