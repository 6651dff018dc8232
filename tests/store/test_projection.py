"""A derived feature in the contract: what validation refuses, and its value rule."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from bnserve.store.errors import InvalidModel
from bnserve.store.model import NUMERIC, Model, Variable
from bnserve.store.model.projection import Projection
from tests.model_factory import random_model


def _with(model: Model, name: str, **changes: object) -> Model:
    variables = tuple(dataclasses.replace(v, **changes) if v.name == name else v for v in model.variables)
    return dataclasses.replace(model, variables=variables)


@pytest.fixture
def derived_model() -> Model:
    return random_model(np.random.default_rng(3), n_features=3, numeric=1.0, derived=1, cardinalities=(2, 3))


def test_a_model_with_a_derived_feature_is_valid_and_names_its_inputs(derived_model):
    d0 = next(v for v in derived_model.variables if v.name == "d0")
    assert d0.kind == NUMERIC and d0.projection is not None
    assert set(d0.projection.inputs) <= {"f0", "f1", "f2"}
    assert Variable.from_dict(d0.to_dict()) == d0


@pytest.mark.parametrize(
    "projection, fault",
    [
        (Projection(("nowhere",), (0.0,), (1.0,)), "reads 'nowhere', which is not a numeric feature"),
        (Projection(("class",), (0.0,), (1.0,)), "reads 'class', which is not a numeric feature"),
        (Projection(("d0",), (0.0,), (1.0,)), "reads 'd0', which is not a numeric feature"),
        (Projection(("f0", "f0"), (0.0, 0.0), (1.0, 1.0)), "needs distinct inputs"),
        (Projection(("f0",), (0.0, 1.0), (1.0,)), "needs distinct inputs, each with one centre"),
        (Projection((), (), ()), "needs distinct inputs"),
        (Projection(("f0",), (math.inf,), (1.0,)), "not finite"),
        (Projection(("f0",), (0.0,), (math.nan,)), "not finite"),
    ],
)
def test_validation_refuses_a_projection_that_cannot_be_computed(derived_model, projection, fault):
    with pytest.raises(InvalidModel, match=fault):
        _with(derived_model, "d0", projection=projection).validate()


def test_only_a_numeric_feature_is_derived(derived_model):
    projection = Projection(("f0",), (0.0,), (1.0,))
    with pytest.raises(InvalidModel, match="only a numeric feature is derived"):
        _with(derived_model, "class", projection=projection).validate()


def test_the_value_is_the_weighted_sum_of_present_inputs_and_missing_when_none_is():
    p = Projection(("a", "b"), (1.0, -2.0), (0.5, 3.0))
    a = np.array([3.0, np.nan, 3.0, np.nan])
    b = np.array([0.0, 0.0, np.nan, np.nan])
    values = p.values([a, b])
    assert values[:3].tolist() == [0.5 * 2 + 3.0 * 2, 3.0 * 2, 0.5 * 2]
    assert math.isnan(values[3])
    assert [p.values([a[r : r + 1], b[r : r + 1]])[0] for r in range(3)] == values[:3].tolist()  # row by row
    assert math.isnan(p.values([a[3:], b[3:]])[0])
