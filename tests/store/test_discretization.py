"""Numeric variables: interval states from cut points, raw values to codes, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bnserve.store.errors import InvalidModel
from bnserve.store.model import CLASS, MISSING, NUMERIC, UNKNOWN, Model, Network, Node, Variable
from bnserve.store.model.discretization import interval_code, interval_codes, interval_labels, number_of

CUTS = (-1.5, 2.45, 4.75)


def test_interval_codes_put_a_cut_point_in_the_lower_interval_and_nan_missing():
    values = np.array([-math.inf, -1.5, -1.4999, 2.45, 3.0, 4.75, 4.76, 1e300, math.inf, math.nan])
    assert interval_codes(CUTS, values).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 3, -1]
    assert [interval_code(CUTS, v) for v in values[:-1]] == [0, 0, 1, 1, 2, 2, 3, 3, 3]


def test_interval_labels_follow_weka_and_round_trip_the_cut_points():
    assert interval_labels(CUTS) == ("(-inf--1.5]", "(-1.5-2.45]", "(2.45-4.75]", "(4.75-inf)")
    assert interval_labels(()) == ("(-inf-inf)",)
    cut = 0.1 + 0.2  # shortest repr keeps every bit
    assert float(interval_labels((cut,))[0][len("(-inf-") : -1]) == cut


def test_code_of_takes_a_label_or_a_number_and_codes_of_agrees_with_it():
    v = Variable("x", interval_labels(CUTS), kind=NUMERIC, cuts=CUTS)
    assert v.code_of("(2.45-4.75]") == 2
    assert v.code_of("3") == 2
    assert v.code_of("2.45") == 1  # a cut point falls in the lower interval
    assert v.code_of(" 1e3 ") == 3
    assert v.code_of("-inf") == 0
    assert v.code_of("") == MISSING
    for bad in ("nan", "three", "(2.45-4.75"):
        assert v.code_of(bad) == UNKNOWN
    nominal = Variable("n", ("1", "2"))
    assert nominal.code_of("2") == 1
    assert nominal.code_of("2.0") == 1  # whole-number codes: a number equal to one is that state
    assert nominal.code_of("2.5") == UNKNOWN and Variable("t", ("1", "b")).code_of("1.0") == UNKNOWN
    for text in ("١٣", "1_000", "１２", "\xa012", "1_2.5"):  # float() reads them; they are not ASCII decimals
        assert v.code_of(text) == UNKNOWN and number_of(text) != number_of(text)
    assert (
        Variable("n", ("12", "13")).code_of("١٣") == UNKNOWN and Variable("n", ("12", "13")).code_of("1_3") == UNKNOWN
    )
    for variable in (v, nominal):
        texts = ["(2.45-4.75]", "3", "2.45", " 1e3 ", "-inf", "", "nan", "three", "1", "2", "2.0", "2.5", "١", "1_0"]
        assert variable.codes_of(texts).tolist() == [variable.code_of(t) for t in texts]


def _model(feature: Variable) -> Model:
    cls = Variable("c", ("a", "b"), CLASS)
    cpt = np.full((feature.cardinality, 2), 1.0 / feature.cardinality)
    return Model(
        (feature, cls), (Network((Node("c", (), np.array([0.5, 0.5])), Node(feature.name, ("c",), cpt))),), "t"
    )


def test_a_numeric_variable_validates_and_only_its_dict_carries_cuts():
    v = Variable("x", interval_labels(CUTS), kind=NUMERIC, cuts=CUTS)
    _model(v).validate()
    assert Variable.from_dict(v.to_dict()) == v
    assert "cuts" not in Variable("n", ("a",)).to_dict()


@pytest.mark.parametrize(
    "variable, message",
    [
        (Variable("x", ("a", "b"), kind=NUMERIC, cuts=(1.0, 2.0)), "needs 3 interval states"),
        (Variable("x", ("a", "b", "c"), kind=NUMERIC, cuts=(2.0, 1.0)), "strictly increasing"),
        (Variable("x", ("a", "b"), kind=NUMERIC, cuts=(math.inf,)), "finite"),
        (Variable("x", ("a", "b"), cuts=(1.0,)), "nominal variable 'x' has cut points"),
    ],
)
def test_bad_cut_points_are_refused(variable, message):
    with pytest.raises(InvalidModel, match=message):
        _model(variable).validate()


def test_the_class_cannot_be_numeric():
    cls = Variable("c", ("(-inf-0.0]", "(0.0-inf)"), CLASS, NUMERIC, (0.0,))
    feature = Variable("f", ("a", "b"))
    model = Model(
        (feature, cls), (Network((Node("c", (), np.array([0.5, 0.5])), Node("f", ("c",), np.full((2, 2), 0.5)))),), "t"
    )
    with pytest.raises(InvalidModel, match="must be nominal"):
        model.validate()
