"""One training plan seen from both doors: ``BayesNetClassifier(algo).fit`` and ``trainer fit
--algo algo`` build the same spec and so learn the same model, bit for bit, for every learner
and for auto; the spec travels in the model's metadata, so ``load`` gives back the
estimator's parameters and ``clone(load(…)).fit`` learns the model again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from bnserve import BayesNetClassifier, load, publish
from bnserve.store.db import ModelStore
from bnserve.store.model import Model
from bnserve.store.predictor import compile_model
from bnserve.trainer.cli import main as trainer
from bnserve.trainer.learners.registry import LEARNERS
from bnserve.trainer.plan import TRAINING_SPEC

ROWS = 240


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory) -> Path:
    """Numeric columns with missing values (one the class drives, one noise that MDL leaves
    whole), a nominal one with missing values, and a text class, last."""
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, ROWS)
    frame = pd.DataFrame(
        {
            "signal": np.round(rng.normal(y * 1.5, 1.0), 3),
            "noise": np.round(rng.uniform(0, 10, ROWS), 3),
            "drift": np.round(rng.normal(y * 0.7, 1.0), 3),
            "colour": np.where(rng.random(ROWS) < 0.5 + 0.3 * (y - 0.5), "red", "blue"),
            "outcome": np.where(y == 1, "yes", "no"),
        }
    )
    for column in ("signal", "noise", "colour"):
        frame.loc[rng.random(ROWS) < 0.08, column] = None
    path = tmp_path_factory.mktemp("plan") / "small.csv"
    frame.to_csv(path, index=False)
    return path


def cli_model(path: Path, tmp_path: Path, *argv: str) -> Model:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert trainer(["fit", *argv, "--data", str(path), "--name", "m", "--store", url, "--quiet"]) == 0
    with ModelStore(url) as store:
        return store.load("m").model


def assert_same_model(ours: Model, theirs: Model) -> None:
    assert [(v.name, v.kind, v.states, v.cuts) for v in ours.variables] == [
        (v.name, v.kind, v.states, v.cuts) for v in theirs.variables
    ]
    assert (ours.algorithm, dict(ours.params), ours.combination) == (
        theirs.algorithm,
        dict(theirs.params),
        theirs.combination,
    )
    assert len(ours.networks) == len(theirs.networks)
    for a, b in zip(ours.networks, theirs.networks):
        assert a.arcs == b.arcs
        for x, y in zip(a.nodes, b.nodes, strict=True):
            assert (x.name, x.parents) == (y.name, y.parents)
            assert x.cpt.tobytes() == y.cpt.tobytes(), x.name


@pytest.mark.parametrize("algo", [*LEARNERS, "auto"])
def test_the_estimator_learns_the_model_trainer_fit_learns(algo, csv_file, tmp_path):
    """Same typing, same discretisation defaults (auto's mdl:16 on both doors), same model."""
    frame = pd.read_csv(csv_file)
    X, y = frame.drop(columns="outcome"), frame["outcome"]
    auto = ["--work-budget", "none"] if algo == "auto" else []  # every default candidate, no work limit
    theirs = cli_model(csv_file, tmp_path, "--algo", algo, *auto)
    ours = BayesNetClassifier(algo, **({"work_budget": None} if algo == "auto" else {})).fit(X, y).model_
    assert_same_model(ours, theirs)
    if algo == "auto":  # auto cut the noise column, as the command line's auto does
        assert next(v for v in ours.variables if v.name == "noise").cuts


def test_load_gives_back_the_parameters_and_clone_learns_the_same_model(csv_file, tmp_path):
    frame = pd.read_csv(csv_file)
    X, y = frame.drop(columns="outcome"), frame["outcome"]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fitted = BayesNetClassifier("kdb", k=1, cpt_estimator="dirichlet:0.5", nominal=["colour"]).fit(X, y)
    publish(fitted, "m", store=url)
    loaded = load("m", store=url)
    assert loaded.get_params() == fitted.get_params()
    assert (
        " ".join(repr(loaded).split())
        == "BayesNetClassifier(algo='kdb', cpt_estimator='dirichlet:0.5', k=1, nominal=['colour'])"
    )
    assert_same_model(clone(loaded).fit(X, y).model_, fitted.model_)


def test_auto_parameters_come_back_too(csv_file, tmp_path):
    frame = pd.read_csv(csv_file)
    X, y = frame.drop(columns="outcome"), frame["outcome"]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fitted = BayesNetClassifier("auto", candidates=("nb", "tan"), k=1, work_budget=None, discretize="mdl").fit(X, y)
    publish(fitted, "m", store=url)
    assert load("m", store=url).get_params() == fitted.get_params()


def test_a_model_published_before_specs_were_recorded_still_loads(csv_file, tmp_path):
    frame = pd.read_csv(csv_file)
    X, y = frame.drop(columns="outcome"), frame["outcome"]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fitted = BayesNetClassifier("tan").fit(X, y)
    old = fitted.model_
    old = replace(old, metadata={k: v for k, v in old.metadata.items() if k != TRAINING_SPEC})
    publish(old, "m", store=url)
    loaded = load("m", store=url)
    assert loaded.get_params() == BayesNetClassifier("tan").get_params()
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))


def test_max_cpt_cells_bounds_the_estimators_fit_and_comes_back(csv_file, tmp_path):
    frame = pd.read_csv(csv_file)
    X, y = frame.drop(columns="outcome"), frame["outcome"]
    with pytest.raises(ValueError, match="past --max-cpt-cells 3;"):
        BayesNetClassifier("kdb", k=1, max_cpt_cells=3).fit(X, y)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fitted = BayesNetClassifier("kdb", k=1, max_cpt_cells=None).fit(X, y)
    publish(fitted, "m", store=url)
    loaded = load("m", store=url)
    assert loaded.get_params() == fitted.get_params() and loaded.max_cpt_cells is None
    assert_same_model(clone(loaded).fit(X, y).model_, fitted.model_)


def test_a_loaded_model_reads_predict_rows_with_its_own_missing_markers(tmp_path):
    """A model trained with ``--na-values ''`` (only the empty text missing), on a file whose
    'NA' is a real label (North America), predicts a row holding 'NA' with that state, as
    ``trainer predict`` and the server do: not as a missing value, the default markers' rule."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 300)
    region = np.where(rng.random(300) < 0.2 + 0.6 * y, "NA", "EU")
    lines = ["region,size,label"] + [
        f"{r},{'big' if rng.random() < 0.5 else 'small'},{'yes' if c else 'no'}" for r, c in zip(region, y)
    ]
    path = tmp_path / "regions.csv"
    path.write_text("\n".join(lines) + "\n")
    model = cli_model(path, tmp_path, "--algo", "nb", "--na-values", "")
    assert model.variables[0].states == ("EU", "NA")
    loaded = load("m", store=f"sqlite:///{tmp_path / 'store.db'}")
    rows = pd.DataFrame({"region": ["NA", "EU", None], "size": ["big", "big", "big"]})
    proba = loaded.predict_proba(rows)
    codes = np.array([[1, 0], [0, 0], [-1, 0]])
    expected = compile_model(model).predict_proba(codes)[:, loaded._class_order()]
    np.testing.assert_allclose(proba, expected, rtol=0, atol=1e-12)
    assert not np.allclose(proba[0], proba[2])  # 'NA' is not read as missing
