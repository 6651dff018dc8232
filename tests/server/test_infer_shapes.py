"""ModelInfer's row limit counts from each input's whole shape, and no input's data is
decoded before every input's shape is known to be one a model takes (issue 17: a BYTES
tensor of shape [1, N] was decoded, N strings, before its shape was refused; it is now
refused as a shape no model takes, and a wide [N] tensor by the row limit)."""

from __future__ import annotations

import time
import tracemalloc

import grpc
import numpy as np
import pytest

from bnserve.server.api import grpc_service_pb2 as ipb
from bnserve.server.api import grpc_service_pb2_grpc
from bnserve.server.tensors import CONTENTS_FIELD, check_inputs, join_bytes
from bnserve.store.predictor import compile_model
from tests.in_process_server import running_app
from tests.model_factory import random_model
from tests.reliability import record

MAX_ROWS = 1000
MODEL = random_model(np.random.default_rng(5), n_features=3)
FEATURE = MODEL.features[0].name
COMPILED = compile_model(MODEL)


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("store"), {"m": MODEL}, max_rows=MAX_ROWS) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)


def _request(*inputs: tuple[str, str, list[int]], raw: list[bytes] | None = None) -> ipb.ModelInferRequest:
    request = ipb.ModelInferRequest(model_name="m", raw_input_contents=raw or [])
    for name, datatype, shape in inputs:
        request.inputs.add(name=name, datatype=datatype, shape=shape)
    return request


A, B = FEATURE, MODEL.features[1].name


@pytest.mark.parametrize(
    "inputs, rows",
    [
        ([(A, "BYTES", [7])], 7),
        ([(A, "BYTES", [7, 1])], 7),
        ([("codes", "INT32", [7, 3])], 7),  # a line of state codes is a row
        ([(A, "FP32", [2]), (B, "BYTES", [9, 1])], 9),
    ],
)
def test_rows_are_counted_from_the_whole_shape(inputs, rows):
    request = _request(*inputs)
    for tensor in request.inputs:  # data that fills each declared shape
        count = int(np.prod(list(tensor.shape)))
        if tensor.datatype == "BYTES":
            tensor.contents.bytes_contents.extend([b"x"] * count)
        else:
            getattr(tensor.contents, CONTENTS_FIELD[tensor.datatype]).extend([0] * count)
    assert check_inputs(request, COMPILED, MODEL.class_variable.name).rows == rows


def test_a_wide_bytes_tensor_is_refused_by_the_row_limit_before_its_data_is_decoded(stub):
    n = 300_000
    raw = join_bytes([b"ab"] * n)  # 1.8 MB on the wire (not b"a": CPython shares one-byte objects)
    request = _request((FEATURE, "BYTES", [n]), raw=[raw])
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(grpc.RpcError) as refused:
            stub.ModelInfer(request, timeout=30)
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"the request has {n} rows; this server answers at most {MAX_ROWS}" in refused.value.details()
    assert peak < 4 * len(raw)  # the message and a copy of its data; decoded, its elements alone took 31 MB
    record(
        f"hostile: ModelInfer BYTES tensor of shape [{n:,}] against --max-rows {MAX_ROWS}",
        "sqlite",
        requests=1,
        errors=0,
        faults=1,
        lost=0,
        seconds_to_refuse=round(seconds, 3),
        peak_traced_mb=round(peak / 1e6, 1),
        status=refused.value.code().name,
    )


def test_a_shape_no_model_takes_is_refused_before_any_data_is_decoded(stub):
    garbage = b"\xff\xff\xff\xff"  # a length prefix past the end: decoding it would fail on that
    for shape, datatype in (([1, 500], "BYTES"), ([2, 3], "FP64"), ([2, 2, 2], "BYTES"), ([], "BYTES")):
        with pytest.raises(grpc.RpcError) as refused:
            stub.ModelInfer(_request((FEATURE, datatype, shape), raw=[garbage]), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details() == (
            f"input {FEATURE!r} has shape {shape}; a feature takes [batch] or [batch, 1], "
            "and 'codes' [batch, features] of INT32 or INT64"
        )
    second = _request(("codes", "INT32", [1, 3]), (FEATURE, "BYTES", [1, 2]), raw=[garbage, garbage])
    with pytest.raises(grpc.RpcError) as refused:  # the second input's shape, before the first's data
        stub.ModelInfer(second, timeout=30)
    assert refused.value.details().startswith(f"input {FEATURE!r} has shape [1, 2]")
