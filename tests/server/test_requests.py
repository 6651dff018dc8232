"""The per-model lookup tables decode a request exactly as coding each value alone does.

``codes_from_instances`` and ``codes_from_columns`` look values up in ``FeatureTables``;
the oracle here is the straightforward path they replaced: every value through
``Variable.code_of`` (or ``codes_of``) and every number through ``interval_codes``, one at
a time, checks in the same order. On random models (nominal, numeric, whole-number-coded
and missing-state features) and random requests (labels, numbers as text, "14.0",
padded and unknown texts, unknown and class names, NaN and infinite numbers, a feature in
both maps) both give the same codes, or the same InvalidInput message.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.requests import _numeric_feature, _refuse, codes_from_columns, codes_from_instances, feature_column
from bnserve.store.errors import InvalidInput
from bnserve.store.model import MISSING, MISSING_LABEL, NOMINAL, NUMERIC, UNKNOWN, UNKNOWN_POLICIES, Variable
from bnserve.store.model.discretization import interval_codes
from bnserve.store.predictor import compile_model
from tests.model_factory import CLASS_NAME, random_model


def _relabelled(model, rng):
    """The model with some nominal features' states renamed (same cardinality): whole
    numbers ("-3", "5", "14", ...), or labels ending in the missing state."""
    variables = []
    for v in model.variables:
        kind = rng.integers(3) if v.role != "class" and v.kind == NOMINAL else 0
        if kind == 1:
            numbers = np.sort(rng.choice(np.arange(-5, 20), size=v.cardinality, replace=False))
            v = Variable(v.name, tuple(str(n) for n in numbers), v.role)
        elif kind == 2:
            v = Variable(v.name, (*v.states[:-1], MISSING_LABEL), v.role, missing_state=True)
        variables.append(v)
    return dataclasses.replace(model, variables=tuple(variables)).validate()


def _models():
    rng = np.random.default_rng(16)
    return [
        _relabelled(random_model(rng, n_features=int(rng.integers(1, 6)), cardinalities=(2, 5), numeric=0.4), rng)
        for _ in range(8)
    ]


MODELS = _models()
COMPILED = [compile_model(m) for m in MODELS]


def _slow_instances(compiled, class_name, instances, unknown, unseen):
    codes = np.full((len(instances), len(compiled.features)), MISSING, dtype=np.int64)
    for r, (values, numbers) in enumerate(instances):
        for name, text in values.items():
            column = feature_column(compiled, name, class_name)
            variable = compiled.features[column]
            code = variable.code_of(text)
            if code == UNKNOWN:
                if not (unknown == "missing" and variable.kind == NOMINAL):
                    _refuse(variable, text, f"instance {r}")
                code = MISSING
                unseen[column] = unseen.get(column, 0) + 1
            codes[r, column] = code
        for name, number in numbers.items():
            variable = _numeric_feature(compiled, name, class_name, f"instance {r}")
            if name in values:
                raise InvalidInput(f"instance {r}: feature {name!r} is in both values and numbers")
            codes[r, compiled.feature_index[name]] = interval_codes(variable.cuts, np.array([number]))[0]
    return codes


def _slow_columns(compiled, class_name, rows, texts, numbers, unknown, unseen):
    codes = np.full((rows, len(compiled.features)), MISSING, dtype=np.int64)
    for name, column in texts.items():
        j = feature_column(compiled, name, class_name)
        variable = compiled.features[j]
        coded = variable.codes_of(column)
        if unknown == "missing" and variable.kind == NOMINAL and (coded == UNKNOWN).any():
            unseen[j] = unseen.get(j, 0) + int(np.count_nonzero(coded == UNKNOWN))
            coded[coded == UNKNOWN] = MISSING
        left = np.flatnonzero(coded == UNKNOWN)
        if left.size:
            _refuse(variable, column[int(left[0])], f"row {int(left[0])}")
        codes[:, compiled.feature_index[name]] = coded
    for name, numeric in numbers.items():
        variable = _numeric_feature(compiled, name, class_name)
        if name in texts:
            raise InvalidInput(f"feature {name!r} is given both as text and as numbers")
        codes[:, compiled.feature_index[name]] = interval_codes(variable.cuts, numeric)
    return codes


def _outcome(decode):
    try:
        return decode()
    except InvalidInput as exc:
        return f"InvalidInput: {exc.message}"


def _same(fast, slow):
    if isinstance(slow, str) or isinstance(fast, str):
        assert fast == slow
    else:
        assert fast.dtype == np.int64 and fast.shape == slow.shape
        np.testing.assert_array_equal(fast, slow)


def _number_texts(variable: Variable) -> list[str]:
    """Texts that are (or look like) numbers near the variable's cut points or states."""
    anchors = [*variable.cuts]
    anchors += [float(s) for s in variable.states if s.lstrip("-").isdigit()]
    out = []
    for x in anchors or [0.0]:
        out += [repr(x), f"{x:.1f}", f" {x} ", f"{x:e}", repr(x + 0.5), repr(x - 1e-9)]
    return out


@st.composite
def texts_for(draw, model):
    v = draw(st.sampled_from(model.features))
    return draw(
        st.one_of(
            st.sampled_from(v.states),
            st.sampled_from(_number_texts(v)),
            st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "1e309", "14.0", "1.4e1", "-0", "0x10", "ø"]),
            st.sampled_from([s + " " for s in v.states] + [" " + s for s in v.states]),
            st.text(max_size=6),
        )
    )


def _names(model):
    return st.sampled_from([v.name for v in model.features] + [CLASS_NAME, "zz", ""])


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, 0.25, -12.5, 12.5]),
)


@st.composite
def requests(draw):
    k = draw(st.integers(0, len(MODELS) - 1))
    model = MODELS[k]
    names = _names(model)
    mostly_features = st.one_of(st.sampled_from([v.name for v in model.features]), names)
    instances = []
    for _ in range(draw(st.integers(0, 4))):
        values = draw(st.dictionaries(mostly_features, texts_for(model), max_size=len(model.features) + 1))
        if draw(st.booleans()):  # mostly well formed: the model's own labels
            values = {v.name: draw(st.sampled_from(v.states)) for v in model.features if draw(st.booleans())}
        raw = draw(st.dictionaries(mostly_features, numbers, max_size=3))
        instances.append(pb.Instance(values=values, numbers=raw))
    return k, instances, draw(st.sampled_from(UNKNOWN_POLICIES))


@settings(max_examples=1500, deadline=None)
@given(request=requests())
def test_instances_through_the_tables_equal_coding_each_value(request):
    """... and count the same values unseen in training, per feature column."""
    k, instances, unknown = request
    compiled = COMPILED[k]
    pairs = [(i.values, i.numbers) for i in instances]
    fast_unseen, slow_unseen = {}, {}
    fast = _outcome(lambda: codes_from_instances(compiled, CLASS_NAME, iter(pairs), unknown, fast_unseen))
    slow = _outcome(lambda: _slow_instances(compiled, CLASS_NAME, pairs, unknown, slow_unseen))
    _same(fast, slow)
    if not isinstance(slow, str):
        assert fast_unseen == slow_unseen


@st.composite
def column_requests(draw):
    k = draw(st.integers(0, len(MODELS) - 1))
    model = MODELS[k]
    rows = draw(st.sampled_from([0, 1, 2, 5]))
    names = draw(
        st.lists(
            st.one_of(st.sampled_from([v.name for v in model.features]), _names(model)),
            max_size=len(model.features) + 1,
            unique=True,
        )
    )
    texts, raw = {}, {}
    for name in names:
        if draw(st.integers(0, 3)) == 0:
            raw[name] = np.array(draw(st.lists(numbers, min_size=rows, max_size=rows)), dtype=np.float64)
        else:
            states = next((v.states for v in model.features if v.name == name), ("a",))
            column = (
                st.sampled_from(states) if draw(st.booleans()) else st.one_of(st.sampled_from(states), texts_for(model))
            )
            texts[name] = draw(st.lists(column, min_size=rows, max_size=rows))
    if texts and raw and draw(st.integers(0, 4)) == 0:  # one feature both ways
        raw[next(iter(texts))] = np.zeros(rows)
    return k, rows, texts, raw, draw(st.sampled_from(UNKNOWN_POLICIES))


@settings(max_examples=1000, deadline=None)
@given(request=column_requests())
def test_columns_through_the_tables_equal_coding_each_column(request):
    k, rows, texts, raw, unknown = request
    compiled = COMPILED[k]
    fast_unseen, slow_unseen = {}, {}
    fast = _outcome(lambda: codes_from_columns(compiled, CLASS_NAME, rows, texts, raw, unknown, fast_unseen))
    slow = _outcome(lambda: _slow_columns(compiled, CLASS_NAME, rows, texts, raw, unknown, slow_unseen))
    _same(fast, slow)
    if not isinstance(slow, str):
        assert fast_unseen == slow_unseen


def test_the_models_cover_every_kind_of_feature():
    features = [v for m in MODELS for v in m.features]
    assert any(v.kind == NUMERIC for v in features)
    assert any(v.missing_state for v in features)
    assert any(v.kind == NOMINAL and v.states[0].lstrip("-").isdigit() for v in features)
    assert any(v.kind == NOMINAL and not v.missing_state and not v.states[0].lstrip("-").isdigit() for v in features)
