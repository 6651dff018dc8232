"""``--missing state``: a feature that misses values in the training rows gets a state of its
own, learned like the others and served for a missing value (empty, absent or code -1)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnserve.store.db import ModelStore
from bnserve.store.errors import InvalidInput, InvalidModel
from bnserve.store.model import MISSING, MISSING_LABEL, NUMERIC, Model, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import STATE, Preprocessing, load, load_with
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.evaluation.cross_validation import cross_validate_many
from bnserve.trainer.fit import fit
from tests.data_helpers import dataset_path, write
from tests.trainer.test_streaming import assert_same_model

TEXT = "a,b,n,class\nx,p,1.5,A\n,q,2.5,A\ny,p,,B\nx,q,3.5,B\n,p,0.5,A\ny,q,4.5,B\n"


@pytest.fixture
def data(tmp_path):
    return load(write(tmp_path, TEXT), preprocessing=Preprocessing(numeric=("n",), missing=STATE))


def test_only_features_with_missing_values_get_the_state(data):
    a, b, n, cls = data.variables
    assert a.states == ("x", "y", MISSING_LABEL) and a.missing_state and a.missing_code == 2
    assert b.states == ("p", "q") and not b.missing_state and b.missing_code == MISSING
    assert n.kind == NUMERIC and n.missing_state and n.states[-1] == MISSING_LABEL
    assert not cls.missing_state
    assert data.X[:, 0].tolist() == [0, 2, 1, 0, 2, 1]
    assert (data.X >= 0).all()  # nothing is missing any more: the state is counted
    assert data.X[2, 2] == n.missing_code


def test_the_raw_value_rule_maps_empty_to_the_state(data):
    a = data.variables[0]
    assert a.code_of("") == 2 and a.code_of(MISSING_LABEL) == 2 and a.code_of("x") == 0
    assert a.codes_of(["", "y"]).tolist() == [2, 1]
    n = data.variables[2]
    assert n.code_of("") == n.missing_code and n.code_of("100") == n.cardinality - 2


def test_a_missing_code_is_served_as_the_state(data):
    model = fit("tan", data)
    compiled = compile_model(model)
    a = data.variables[0]
    rows = np.array([[MISSING, 0, 1], [a.missing_code, 0, 1], [MISSING, MISSING, MISSING]])
    proba = compiled.predict_proba(rows)
    np.testing.assert_array_equal(proba[0], proba[1])
    assert np.isfinite(proba).all()
    explicit = np.array([[a.missing_code, 0, 1]])
    # b has no missing state: -1 there is summed out, unlike a's
    assert not np.allclose(compiled.predict_proba(np.array([[0, MISSING, 1]])), compiled.predict_proba(explicit))


def test_a_test_file_codes_empty_values_to_the_state(tmp_path, data):
    test = load_with(write(tmp_path, "a,b,n,class\n,p,,A\n", "test.csv"), data.variables)
    assert test.X.tolist() == [[2, 0, data.variables[2].missing_code]]


def test_the_model_round_trips_through_the_store(tmp_path, data):
    model = fit("nb", data)
    with ModelStore(f"sqlite:///{tmp_path}/s.db", create=True) as store:
        store.publish("m", model)
        again = store.load("m").model
    assert again.variables == model.variables
    assert Variable.from_dict(model.variables[0].to_dict()).missing_state
    assert "missing_state" not in model.variables[1].to_dict()  # older models keep their checksums


@pytest.mark.parametrize(
    "variable",
    [
        Variable("a", ("x", "y"), missing_state=True),  # the last state is not the missing one
        Variable("n", ("(-inf-1]", "(1-inf)"), kind=NUMERIC, cuts=(1.0,), missing_state=True),
    ],
)
def test_a_malformed_missing_state_is_refused(data, variable):
    model = fit("nb", data)
    variables = (variable, *model.variables[1:]) if variable.kind != NUMERIC else model.variables
    if variable.kind == NUMERIC:
        variables = (*model.variables[:2], variable, model.variables[3])
    with pytest.raises(InvalidModel, match="missing state|cut points"):
        Model(variables, model.networks, model.algorithm).validate()


def test_a_clashing_label_is_refused(tmp_path):
    path = write(tmp_path, f"a,class\n{MISSING_LABEL},A\n,B\nx,A\n")
    with pytest.raises(InvalidInput, match="clashes with --missing state"):
        load(path, preprocessing=Preprocessing(missing=STATE))


def test_streaming_gives_the_same_model(tmp_path):
    header, body = TEXT.split("\n", 1)
    path = write(tmp_path, header + "\n" + body * 5)
    prep = Preprocessing(numeric=("n",), missing=STATE)
    for chunk in (1, 4, 100):
        assert_same_model(
            fit("kdb", load_streamed(path, None, prep, None, chunk), k=2),
            fit("kdb", load(path, preprocessing=prep), k=2),
        )


def test_cross_validation_learns_the_states_per_training_fold(data):
    """A fold's model has the state only where its own training rows miss values: a test
    row's missing value is then read as missing, not as a state learned from the test fold."""
    without = np.array([1, 0, 1, 1, 0, 1], bool)  # a's two missing values are both held out
    train, test = data.split(without, ~without)
    a = train.variables[0]
    assert a.states == ("x", "y") and not a.missing_state
    assert test.X[:, 0].tolist() == [MISSING, MISSING]
    proba = compile_model(fit("nb", train)).predict_proba(test.X)
    assert np.allclose(proba.sum(axis=1), 1.0)
    train, test = data.split(~without, without)  # both in the training fold: the state is learned
    assert train.variables[0].states == ("x", "y", MISSING_LABEL) and train.variables[0].missing_state
    hepatitis = load(str(dataset_path("hepatitis")), preprocessing=Preprocessing(missing=STATE))
    (result,) = cross_validate_many([("nb", {})], hepatitis, folds=5)
    assert 0.5 < result.accuracy <= 1.0 and np.isfinite(result.log_loss)


def test_the_cli_trains_with_the_state_and_shows_it(tmp_path, capsys):
    from tests.trainer.conftest import run

    store = f"sqlite:///{tmp_path / 's.db'}"
    path = write(tmp_path, TEXT)
    code, out, err = run(
        capsys,
        "fit",
        "--algo",
        "nb",
        "--missing",
        "state",
        "--numeric",
        "n",
        "--data",
        path,
        "--name",
        "m",
        "--store",
        store,
    )
    assert code == 0, err
    code, out, _ = run(capsys, "show", "m", "--store", store, "--json")
    variables = {v["name"]: v for v in json.loads(out)["variables"]}
    assert variables["a"]["states"][-1] == MISSING_LABEL and variables["a"].get("missing_state") is True
    assert "missing_state" not in variables["b"]
