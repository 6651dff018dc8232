"""Derived features (``--projections lda``) as the trainer learns and reads them.

The class of these rows is the sign of b - a: no interval of a or of b holds it, the one
linear discriminant does. So a model that computes its derived feature gets nearly every
row right and one that leaves it missing does not: each reader below (``trainer predict``
on CSV and Parquet, ``evaluate --test``, the estimator on a frame and on an array) is checked against the codes ``encode_like`` gives the same rows, and the
value rule against an obvious loop, with hypothesis.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve import BayesNetClassifier
from bnserve.store.model import NUMERIC, Variable
from bnserve.store.model.discretization import interval_labels
from bnserve.store.model.projection import Projection, derive_codes
from bnserve.store.predictor import compile_model
from bnserve.trainer.cli import main
from bnserve.trainer.data.encoded import encode_like, load
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.data.projections import discriminants
from bnserve.trainer.plan import TrainingSpec, train


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    frame = pd.DataFrame({"a": a, "b": b, "c": rng.choice(["x", "y", "z"], n), "class": np.where(b > a, "p", "q")})
    frame.loc[3, "a"] = np.nan
    frame.loc[5, ["a", "b"]] = np.nan  # every input missing: the derived feature is missing
    return frame


@pytest.fixture
def files(tmp_path):
    train_path, test_path = tmp_path / "train.csv", tmp_path / "test.csv"
    _frame(400, 0).to_csv(train_path, index=False)
    test = _frame(200, 1)
    test.to_csv(test_path, index=False)
    test.drop(columns="class").to_parquet(tmp_path / "test.parquet")
    return train_path, test_path


def test_lda_learns_one_direction_across_a_and_b_and_the_model_holds_it(files):
    model = train(TrainingSpec("nb", projections="lda"), str(files[0]))
    (derived,) = [v for v in model.features if v.projection is not None]
    assert derived.name == "ld1" and derived.kind == NUMERIC
    assert derived.projection.inputs == ("a", "b")
    w = derived.projection.weights
    assert w[0] * w[1] < 0 and abs(abs(w[0] / w[1]) - 1) < 0.25  # the direction b - a
    assert model.metadata["preprocessing"]["projections"] == "lda"


def test_a_discriminant_is_fishers_on_two_gaussian_classes():
    """Two classes of a shared covariance: the direction is Sigma^-1 (mu1 - mu0), up to scale."""
    rng = np.random.default_rng(4)
    cov = np.array([[2.0, 0.8], [0.8, 1.0]])
    mu = np.array([[0.0, 0.0], [1.0, -1.0]])
    y = rng.integers(0, 2, 20_000)
    X = mu[y] + rng.multivariate_normal([0, 0], cov, size=y.size)
    (p,) = discriminants(("u", "v"), X, y, 2, None)
    expected = np.linalg.solve(cov, mu[1] - mu[0])
    got = np.array(p.weights)
    assert abs(np.dot(got, expected)) / (np.linalg.norm(got) * np.linalg.norm(expected)) > 0.999


def test_one_column_has_no_discriminant_and_auto_does_not_try_one(tmp_path):
    """A discriminant of one column is the column again (a feature counted twice): none is
    made of a single numeric column of many values, and auto's stage 0 does not score the
    option; two such columns make one."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 400)
    a, b = rng.normal(size=400) + y, rng.normal(size=400) - y
    assert discriminants(("a",), a[:, None], y, 2, None) == []
    assert len(discriminants(("a", "b"), np.column_stack([a, b]), y, 2, None)) == 1
    kinds = ["".join("xyz"[int(v)] for v in rng.integers(0, 3, 2)) for _ in range(400)]
    lines = ["a,k,class"] + [f"{x:.5f},{k},{'pq'[c]}" for x, k, c in zip(a.tolist(), kinds, y.tolist())]
    (tmp_path / "one.csv").write_text("\n".join(lines) + "\n")
    model = train(TrainingSpec("auto", candidates=("nb",), estimator="laplace"), str(tmp_path / "one.csv"))
    methods = [c["method"] for c in model.metadata["selection"]["discretization"]["candidates"]]
    assert methods and not any(m.endswith("+lda") for m in methods)


def _codes_through_the_trainer(train_path, test_path, model):
    data = load(str(train_path), preprocessing=Preprocessing(projections="lda"))
    test = load(str(test_path), preprocessing=Preprocessing(projections="lda"))
    assert data.variables == model.variables
    return encode_like(test.columns, data.variables).X  # type: ignore[arg-type]


def _fit(data, *flags: str) -> int:
    """``trainer fit --algo nb --projections lda FLAGS`` of ``data`` as model ``m``."""
    return main(["fit", "--algo", "nb", "--projections", "lda", *flags, "--data", str(data), "--name", "m"])


def test_trainer_predict_and_evaluate_test_compute_the_derived_feature(files, tmp_path, capsys):
    train_path, test_path = files
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert _fit(train_path, "--store", store, "--quiet") == 0
    from bnserve.store.db import ModelStore

    with ModelStore(store) as models:
        model = models.load("m").model
    expected = compile_model(model).predict_proba(_codes_through_the_trainer(train_path, test_path, model))
    for data in (test_path, tmp_path / "test.parquet"):
        out = tmp_path / "out.csv"
        assert main(["predict", "m", "--data", str(data), "--out", str(out), "--store", store]) == 0
        got = pd.read_csv(out)[["p_p", "p_q"]].to_numpy()
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    truth = pd.read_csv(test_path)["class"]
    assert (np.where(expected[:, 0] > 0.5, "p", "q") == truth).mean() > 0.95
    capsys.readouterr()
    assert (
        main(["evaluate", "--algo", "nb", "--projections", "lda", "--data", str(train_path), "--test", str(test_path)])
        == 0
    )
    accuracy = float(capsys.readouterr().out.split("\n")[2].split()[1])
    assert accuracy > 0.95


def test_the_estimator_computes_it_on_a_frame_and_on_an_array(files):
    train_frame, test_frame = pd.read_csv(files[0]), pd.read_csv(files[1])
    X, y, X_test = train_frame.drop(columns="class"), train_frame["class"], test_frame.drop(columns="class")
    fitted = BayesNetClassifier("nb", projections="lda").fit(X, y)
    assert fitted.n_features_in_ == 3 and list(fitted.feature_names_in_) == ["a", "b", "c"]
    proba = fitted.predict_proba(X_test)
    model = fitted.model_
    codes = _codes_through_the_trainer(*files, model)
    np.testing.assert_allclose(proba, compile_model(model).predict_proba(codes), rtol=0, atol=1e-12)
    assert (fitted.predict(X_test) == test_frame["class"]).mean() > 0.95
    numbers = X.assign(c=X["c"].map({"x": 0, "y": 1, "z": 2}))
    on_array = BayesNetClassifier("nb", projections="lda", nominal=[2]).fit(numbers.to_numpy(), y)
    array_test = X_test.assign(c=X_test["c"].map({"x": 0, "y": 1, "z": 2})).to_numpy()
    assert (on_array.predict(array_test) == test_frame["class"]).mean() > 0.95
    plain = BayesNetClassifier("nb", projections="none").fit(X, y)
    assert (plain.predict(X_test) == test_frame["class"]).mean() < 0.93  # the rows need the discriminant


def test_a_published_model_loaded_back_predicts_as_fitted_and_needs_its_inputs(files, tmp_path):
    """publish then ``bnserve.load``: the derived feature travels with the model; a frame
    without one of its inputs is refused naming it (a derived feature is never a column)."""
    from bnserve import load, publish

    train_frame, test_frame = pd.read_csv(files[0]), pd.read_csv(files[1]).drop(columns="class")
    fitted = BayesNetClassifier("nb", projections="lda").fit(train_frame.drop(columns="class"), train_frame["class"])
    store = f"sqlite:///{tmp_path / 'p.db'}"
    publish(fitted, "m", store=store)
    loaded = load("m", store=store)
    np.testing.assert_array_equal(loaded.predict_proba(test_frame), fitted.predict_proba(test_frame))
    with pytest.raises(ValueError, match="missing:\\n- b"):
        loaded.predict_proba(test_frame.drop(columns="b"))


def test_export_to_bif_is_refused_naming_the_derived_feature(files, tmp_path, capsys):
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert _fit(files[0], "--store", store, "--quiet") == 0
    capsys.readouterr()
    out = tmp_path / "m.bif"
    assert main(["export", "m", "--format", "bif", "--out", str(out), "--store", store]) != 0
    assert "feature 'ld1' is derived from 'a', 'b'" in capsys.readouterr().err
    assert not out.exists()
    assert main(["show", "m", "--store", store]) == 0
    assert "derived: " in capsys.readouterr().out


def test_training_in_chunks_refuses_projections(files, capsys):
    assert _fit(files[0], "--chunk-rows", "100") == 2
    assert "--projections lda" in capsys.readouterr().err


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_derive_codes_equals_the_obvious_loop(data):
    n_inputs = data.draw(st.integers(1, 4))
    rows = data.draw(st.integers(0, 6))
    finite = st.floats(-1e3, 1e3, allow_nan=False)
    projection = Projection(
        tuple(f"x{i}" for i in range(n_inputs)),
        tuple(data.draw(st.lists(finite, min_size=n_inputs, max_size=n_inputs))),
        tuple(data.draw(st.lists(finite, min_size=n_inputs, max_size=n_inputs))),
    )
    cuts = tuple(sorted(set(data.draw(st.lists(finite, min_size=0, max_size=4)))))
    derived = Variable("d", interval_labels(cuts), kind=NUMERIC, cuts=cuts, projection=projection)
    numbers = {
        name: np.array(data.draw(st.lists(st.one_of(finite, st.just(math.nan)), min_size=rows, max_size=rows)))
        for name in projection.inputs
    }
    codes = np.full((rows, 1), 99, dtype=np.int64)
    derive_codes([derived], codes, numbers)
    for r in range(rows):
        present = [(numbers[n][r], c, w) for n, c, w in zip(projection.inputs, projection.centres, projection.weights)]
        present = [t for t in present if not math.isnan(t[0])]
        expected = -1 if not present else bisect.bisect_left(cuts, sum((x - c) * w for x, c, w in present))
        assert codes[r, 0] == expected
