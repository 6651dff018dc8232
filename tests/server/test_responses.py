"""Predict's responses written as bytes are the messages built field by field, byte for byte.

The oracle is the straightforward build: one ``predictions.add(label=..., probabilities=row)``
per row, or the dense arrays extended from lists. Random class lists (long and non-ASCII
labels, more than 128 classes), row counts whose lengths need multi-byte varints, and
float32 probabilities.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.responses import predict_response


def _field_by_field(model, version, classes, proba, winners, dense) -> pb.PredictResponse:
    response = pb.PredictResponse(model=model, version=version, classes=classes)
    if dense:
        response.dense.labels.extend(winners.tolist())
        response.dense.probabilities.extend(proba.ravel().tolist())
    else:
        for w, row in zip(winners.tolist(), proba.tolist()):
            response.predictions.add(label=classes[w], probabilities=row)
    return response


labels = st.one_of(st.text(min_size=1, max_size=8), st.sampled_from(["x" * 200, "état", "類", "a b"]))
class_lists = st.one_of(
    st.lists(labels, min_size=2, max_size=6, unique=True),
    st.integers(120, 140).map(lambda n: [f"c{i}" for i in range(n)]),
)


@settings(max_examples=300, deadline=None)
@given(
    classes=class_lists,
    rows=st.sampled_from([0, 1, 2, 17, 300, 3000]),
    seed=st.integers(0, 2**32 - 1),
    float32=st.booleans(),
    dense=st.booleans(),
)
def test_written_responses_equal_the_field_by_field_build(classes, rows, seed, float32, dense):
    rng = np.random.default_rng(seed)
    classes = tuple(classes)
    proba = rng.dirichlet(np.ones(len(classes)), size=rows).reshape(rows, len(classes))
    if float32:
        proba = proba.astype(np.float32)
    if rows and rng.random() < 0.3:  # exact zeros, ones and ties
        proba[0] = 0
        proba[0, -1] = 1
    winners = np.argmax(proba, axis=1)
    version = int(rng.integers(1, 2**40))
    expected = _field_by_field("m", version, classes, proba, winners, dense)
    got = predict_response("m", version, classes, proba, winners, dense)
    assert got == expected
    assert got.SerializeToString() == expected.SerializeToString()
    assert got.HasField("dense") == dense
