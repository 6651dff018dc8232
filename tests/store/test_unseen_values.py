"""A value unseen in training is read exactly as a missing one, by every reader of raw values.

On random models (nominal, numeric and missing-state features, one or several networks)
and random rows, a nominal feature's value replaced by text no training row had gives the
posterior of the same row with that value missing (``""``), whether the row is coded by
the trainer (``encode_columns``: batch scoring and the estimator) or by the server
(Predict's instances, ModelInfer's feature columns); the policy ``error`` refuses it in
each, and a numeric feature's non-number text is refused under either policy.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bnserve.server.requests import codes_from_columns, codes_from_instances
from bnserve.store.errors import InvalidInput
from bnserve.store.model import (
    DEFAULT_UNKNOWN,
    MISSING_LABEL,
    NOMINAL,
    READ_AS_MISSING,
    REFUSE,
    UNKNOWN,
    Variable,
    unknown_policy,
)
from bnserve.store.predictor import compile_model
from bnserve.trainer.data.encoded import encode_columns
from bnserve.trainer.io import TextColumn
from tests.model_factory import CLASS_NAME, random_model


def _with_missing_states(model, rng):
    """Some nominal features given a last state MISSING_LABEL (``--missing state``)."""
    variables = [
        Variable(v.name, (*v.states[:-1], MISSING_LABEL), v.role, missing_state=True)
        if v.role != "class" and v.kind == NOMINAL and rng.random() < 0.3
        else v
        for v in model.variables
    ]
    return dataclasses.replace(model, variables=tuple(variables)).validate()


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    networks = draw(st.sampled_from([1, 3]))
    model = random_model(
        rng, n_features=int(rng.integers(1, 6)), numeric=0.3, n_networks=networks, all_features=networks == 1
    )
    model = _with_missing_states(model, rng)
    nominal = [j for j, v in enumerate(model.features) if v.kind == NOMINAL]
    assume(nominal)
    row = [draw(st.sampled_from(["", *v.states])) for v in model.features]
    j = draw(st.sampled_from(nominal))
    unseen = draw(st.one_of(st.text(min_size=1, max_size=8), st.sampled_from(["99", "14.0", " a", "NA", "\x00"])))
    assume(model.features[j].code_of(unseen) == UNKNOWN)
    return model, row, j, unseen


def _coders(model, row: list[str], policy: str) -> list:
    """P(class | row) as the trainer and the server's two decoders code the row, one call each."""
    compiled = compile_model(model)
    features = model.features
    values = {v.name: t for v, t in zip(features, row)}
    coders = [
        lambda: encode_columns(features, [TextColumn.of([t]) for t in row], 1, unknown=policy),
        lambda: codes_from_instances(compiled, CLASS_NAME, [(values, {})], policy),
        lambda: codes_from_columns(compiled, CLASS_NAME, 1, {n: [t] for n, t in values.items()}, {}, policy),
    ]
    return [lambda code=code: compiled.predict_proba(code())[0] for code in coders]


@settings(max_examples=300, deadline=None)
@given(case=cases())
def test_an_unseen_value_has_the_posterior_of_a_missing_one(case):
    model, row, j, unseen = case
    with_unseen = [*row[:j], unseen, *row[j + 1 :]]
    with_missing = [*row[:j], "", *row[j + 1 :]]
    expected = _coders(model, with_missing, REFUSE)[0]()  # nothing unseen: any policy
    for posterior in _coders(model, with_unseen, DEFAULT_UNKNOWN):
        np.testing.assert_array_equal(posterior(), expected)
    for refused in _coders(model, with_unseen, REFUSE):
        with pytest.raises(InvalidInput, match=re.escape(repr(unseen))):
            refused()


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_text_that_is_no_number_in_a_numeric_feature_is_refused_under_either_policy(seed):
    model = random_model(np.random.default_rng(seed), n_features=3, numeric=1.0)
    for policy in (READ_AS_MISSING, REFUSE):
        for refused in _coders(model, ["1.5", "", "lots"], policy):
            with pytest.raises(InvalidInput, match="'lots'"):
                refused()


def test_the_default_is_missing_and_a_bad_policy_names_where_it_was_given():
    assert DEFAULT_UNKNOWN == READ_AS_MISSING == unknown_policy("", "x")
    assert unknown_policy("error", "x") == REFUSE
    with pytest.raises(InvalidInput, match="^--unknown must be one of missing, error, got 'ignore'$"):
        unknown_policy("ignore", "--unknown")
