"""Predict's responses, built from the class probabilities without a Python object per row.

Both forms are written as the bytes protobuf itself writes for them and merged into the
response in one call (parsed in C, no message per row), so the response is the same
message, and serialises to the same bytes, as one built field by field
(tests/server/test_responses.py):

- one Prediction per row: the winning class's head (the field's tag and length, the label,
  the probabilities' tag and length, taken from protobuf once per class list), then the
  row's probabilities as little-endian doubles;
- ``dense``: the labels packed one byte each (a class index below 128), and the
  probabilities as little-endian doubles.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from bnserve.server.api import predictor_pb2 as pb

DOUBLE = np.dtype("<f8")
ONE_BYTE_VARINT = 128  # below it, a varint is that one byte
PREDICTIONS = 4 << 3 | 2  # the tag of PredictResponse.predictions (field 4, length-delimited)
DENSE = 5 << 3 | 2  # PredictResponse.dense
LABELS = 1 << 3 | 2  # DensePredictions.labels, packed
PROBABILITIES = 2 << 3 | 2  # DensePredictions.probabilities, packed


def predict_response(
    model: str, version: int, classes: tuple[str, ...], proba: np.ndarray, winners: np.ndarray, dense: bool
) -> pb.PredictResponse:
    """The PredictResponse of ``proba`` (rows, classes) and each row's most probable class
    ``winners``: one Prediction per row, or with ``dense`` the two flat arrays."""
    response = pb.PredictResponse(model=model, version=version, classes=classes)
    if not dense:
        response.MergeFromString(_predictions(classes, proba, winners))
    elif len(classes) <= ONE_BYTE_VARINT:
        response.MergeFromString(_dense(proba, winners))
    else:
        response.dense.labels.extend(winners.tolist())
        response.dense.probabilities.extend(proba.ravel().tolist())
    return response


def _predictions(classes: tuple[str, ...], proba: np.ndarray, winners: np.ndarray) -> bytes:
    heads = _prediction_heads(classes)
    size = DOUBLE.itemsize * len(classes)
    data = np.ascontiguousarray(proba, dtype=DOUBLE).tobytes()
    return b"".join([heads[w] + data[i * size : (i + 1) * size] for i, w in enumerate(winners.tolist())])


@lru_cache(maxsize=4096)
def _prediction_heads(classes: tuple[str, ...]) -> tuple[bytes, ...]:
    """Per class, the bytes of a PredictResponse holding one Prediction of that label, less
    its probabilities (which protobuf writes last)."""
    probabilities = [float(k) for k in range(1, len(classes) + 1)]
    marker = np.array(probabilities, dtype=DOUBLE).tobytes()
    heads = []
    for label in classes:
        written = pb.PredictResponse(
            predictions=[pb.Prediction(label=label, probabilities=probabilities)]
        ).SerializeToString()
        if not written.endswith(marker):
            raise AssertionError("protobuf no longer writes a Prediction's probabilities last")
        heads.append(written[: len(written) - len(marker)])
    return tuple(heads)


def _dense(proba: np.ndarray, winners: np.ndarray) -> bytes:
    labels = np.asarray(winners, dtype=np.uint8).tobytes()
    data = np.ascontiguousarray(proba, dtype=DOUBLE).tobytes()
    body = _field(LABELS, labels) + _field(PROBABILITIES, data)
    return _field(DENSE, body)


def _field(tag: int, data: bytes) -> bytes:
    """A length-delimited field: its tag (one byte here), the length as a varint, the bytes."""
    length = bytearray()
    n = len(data)
    while n >= ONE_BYTE_VARINT:
        length.append(n & 0x7F | 0x80)
        n >>= 7
    length.append(n)
    return bytes([tag]) + bytes(length) + data
