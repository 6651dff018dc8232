"""Fuzzing the real server: thousands of random and adversarial requests on a real port.

Predict, GetModelMetadata and ModelInfer get well-formed messages with wrong contents
(unknown names, duplicate features, codes out of range, NaN and infinities, deeply wrong
shapes, huge and empty batches, oversized strings) and plain random bytes. Every answer
must be OK or one of the documented statuses, never UNKNOWN or INTERNAL, and afterwards
the server still answers a known request exactly.
"""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bnserve.server.api import grpc_service_pb2 as ipb
from bnserve.server.api import grpc_service_pb2_grpc, predictor_pb2_grpc
from bnserve.server.api import predictor_pb2 as pb
from bnserve.store.predictor import compile_model
from tests.in_process_server import running_app
from tests.model_factory import random_model

DOCUMENTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
}
MAX_ROWS = 50
MAX_MESSAGE_BYTES = 256 * 1024
MODELS = {
    "nominal": random_model(np.random.default_rng(1), n_features=4),
    "numeric": random_model(np.random.default_rng(2), n_features=4, numeric=0.5),
}
FEATURES = sorted({v.name for m in MODELS.values() for v in m.variables})
SETTINGS = settings(max_examples=700, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_app(
        tmp_path_factory.mktemp("store"), MODELS, max_rows=MAX_ROWS, max_message_bytes=MAX_MESSAGE_BYTES
    ) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield channel


def status_of(call) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


# ------------------------------------------------------------------ strategies

texts = st.one_of(
    st.sampled_from(["", "0", "1", "a", "nan", "NaN", "inf", "-inf", "1e309", "-0", "s0", "class", " "]),
    st.sampled_from(FEATURES),
    st.text(max_size=20),
    st.just("x" * 100_000),  # oversized string, still under the message limit
)
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1e308, -1e-308]))
codes = st.one_of(st.integers(-3, 6), st.sampled_from([-(2**31), 2**31 - 1, -1, 0]))
model_names = st.one_of(
    st.sampled_from([*MODELS, "", "missing", "nominal ", "NOMINAL", "x" * 10_000]), st.text(max_size=10)
)
names = st.one_of(st.sampled_from(FEATURES), texts)


@st.composite
def predict_requests(draw) -> pb.PredictRequest:
    request = pb.PredictRequest(
        model=draw(model_names),
        unseen_as_missing=draw(st.booleans()),
        unknown=draw(st.sampled_from(["", "missing", "error", "Error", "x" * 1000])),
        dense_response=draw(st.booleans()),
    )
    selector = draw(st.sampled_from(["none", "version", "alias"]))
    if selector == "version":
        request.version = draw(st.sampled_from([-1, 0, 1, 2, 2**62]))
    elif selector == "alias":
        request.alias = draw(st.sampled_from(["production", "", "x" * 300, "none"]))
    form = draw(st.sampled_from(["instances", "dense", "both", "neither"]))
    if form in ("instances", "both"):
        for _ in range(draw(st.sampled_from([0, 1, 3]))):
            instance = request.instances.add()
            for key, value in draw(st.dictionaries(names, texts, max_size=5)).items():
                instance.values[key] = value
            for key, value in draw(st.dictionaries(names, numbers, max_size=3)).items():
                instance.numbers[key] = value
        if draw(st.integers(0, 9)) == 0:  # a batch at or over the row limit, its rows copies of the first
            first = request.instances[0] if request.instances else pb.Instance()
            request.instances.extend([first] * (MAX_ROWS - len(request.instances) + draw(st.integers(0, 1))))
    if form in ("dense", "both"):
        features = draw(st.lists(names, max_size=6))
        request.dense.features.extend(features)
        rows = draw(st.sampled_from([0, 1, 2, MAX_ROWS + 1]))
        size = rows * len(features) + draw(st.sampled_from([0, 0, 0, 1, -1]))
        if draw(st.booleans()):
            request.dense.codes.extend(draw(st.lists(codes, min_size=max(size, 0), max_size=max(size, 0))))
        else:
            request.dense.values.extend(draw(st.lists(numbers, min_size=max(size, 0), max_size=max(size, 0))))
        if draw(st.booleans()):  # codes and values both
            request.dense.values.append(1.0)
            request.dense.codes.append(0)
    return request


DATATYPES = ["BYTES", "INT32", "INT64", "FP32", "FP64", "FP16", "BOOL", "", "UINT8"]
SHAPES = st.one_of(
    st.lists(st.integers(-2, 4), max_size=3),
    st.sampled_from([[2**40], [2**31, 2**31], [MAX_ROWS + 1], [MAX_ROWS + 1, 4], [0], [0, 4]]),
)


@st.composite
def infer_requests(draw) -> ipb.ModelInferRequest:
    request = ipb.ModelInferRequest(
        model_name=draw(model_names),
        model_version=draw(st.sampled_from(["", "1", "0", "-1", "x", "99", "1.5"])),
        id=draw(st.text(max_size=5)),
    )
    raw = draw(st.booleans())
    for _ in range(draw(st.integers(0, 5))):
        tensor = request.inputs.add(
            name=draw(st.one_of(names, st.just("codes"))), datatype=draw(st.sampled_from(DATATYPES))
        )
        shape = draw(SHAPES)
        tensor.shape.extend(shape)
        count = math.prod(shape) if shape and all(0 <= d <= 64 for d in shape) else draw(st.integers(0, 8))
        count = max(0, count + draw(st.sampled_from([0, 0, 1, -1])))
        if raw:
            request.raw_input_contents.append(draw(st.binary(max_size=8 * count + 8)))
        elif tensor.datatype == "BYTES":
            tensor.contents.bytes_contents.extend(
                s.encode() for s in draw(st.lists(texts, min_size=count, max_size=count))
            )
        elif tensor.datatype in ("FP32", "FP64"):
            tensor.contents.fp64_contents.extend(draw(st.lists(numbers, min_size=count, max_size=count)))
        else:
            tensor.contents.int64_contents.extend(draw(st.lists(codes, min_size=count, max_size=count)))
    if raw and draw(st.booleans()):
        request.raw_input_contents.append(b"extra")
    for name in draw(st.lists(st.sampled_from(["label", "probabilities", "nope", ""]), max_size=3)):
        request.outputs.add(name=name)
    return request


# ------------------------------------------------------------------ the fuzz tests


@SETTINGS
@given(request=predict_requests())
def test_predict_answers_ok_or_a_documented_status(server, request):
    stub = predictor_pb2_grpc.PredictorStub(server)
    assert status_of(lambda: stub.Predict(request, timeout=30)) in DOCUMENTED


@SETTINGS
@given(request=infer_requests())
def test_model_infer_answers_ok_or_a_documented_status(server, request):
    stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(server)
    assert status_of(lambda: stub.ModelInfer(request, timeout=30)) in DOCUMENTED


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model=model_names,
    version=st.sampled_from([None, -1, 0, 1, 7]),
    alias=st.one_of(st.none(), texts),
    parameters=st.booleans(),
)
def test_get_model_metadata_answers_ok_or_a_documented_status(server, model, version, alias, parameters):
    request = pb.GetModelMetadataRequest(model=model, include_parameters=parameters)
    if version is not None:
        request.version = version
    elif alias is not None:
        request.alias = alias
    stub = predictor_pb2_grpc.PredictorStub(server)
    assert status_of(lambda: stub.GetModelMetadata(request, timeout=30)) in DOCUMENTED


METHODS = [
    "/bnserve.v1.Predictor/Predict",
    "/bnserve.v1.Predictor/GetModelMetadata",
    "/inference.GRPCInferenceService/ModelInfer",
    "/inference.GRPCInferenceService/ModelMetadata",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(METHODS), body=st.binary(max_size=200))
def test_random_bytes_as_a_message_are_invalid_argument_not_internal(server, method, body):
    call = server.unary_unary(method, request_serializer=None, response_deserializer=None)
    assert status_of(lambda: call(body, timeout=30)) in DOCUMENTED


# ------------------------------------------------------------------ limits, and still correct after


def test_limits_refuse_cheaply_with_resource_exhausted(server):
    stub = predictor_pb2_grpc.PredictorStub(server)
    model = MODELS["nominal"]
    names = [v.name for v in model.features]
    too_many = pb.PredictRequest(
        model="nominal", dense=pb.DenseBatch(features=names, codes=[0] * len(names) * (MAX_ROWS + 1))
    )
    with pytest.raises(grpc.RpcError) as rows:
        stub.Predict(too_many, timeout=10)
    assert (
        rows.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and f"at most {MAX_ROWS} rows" in rows.value.details()
    )
    instances = pb.PredictRequest(model="nominal", instances=[pb.Instance() for _ in range(MAX_ROWS + 1)])
    with pytest.raises(grpc.RpcError) as rows:
        stub.Predict(instances, timeout=10)
    assert rows.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    infer = grpc_service_pb2_grpc.GRPCInferenceServiceStub(server)
    wide = ipb.ModelInferRequest(model_name="nominal")
    wide.inputs.add(name="codes", datatype="INT64", shape=[MAX_ROWS + 1, len(names)])
    with pytest.raises(grpc.RpcError) as rows:
        infer.ModelInfer(wide, timeout=10)
    assert rows.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    huge = pb.PredictRequest(model="nominal", instances=[pb.Instance(values={names[0]: "x" * MAX_MESSAGE_BYTES})])
    with pytest.raises(grpc.RpcError) as size:
        stub.Predict(huge, timeout=10)
    assert size.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    exactly = pb.PredictRequest(model="nominal", dense=pb.DenseBatch(features=names, codes=[0] * len(names) * MAX_ROWS))
    assert len(stub.Predict(exactly, timeout=10).predictions) == MAX_ROWS


def test_after_the_fuzz_the_server_still_answers_exactly(server):
    stub = predictor_pb2_grpc.PredictorStub(server)
    for name, model in MODELS.items():
        rows = np.array([[0] * len(model.features), [1] * len(model.features)])
        request = pb.PredictRequest(
            model=name, dense=pb.DenseBatch(features=[v.name for v in model.features], codes=rows.ravel().tolist())
        )
        reply = stub.Predict(request, timeout=10)
        np.testing.assert_allclose(
            [p.probabilities for p in reply.predictions], compile_model(model).predict_proba(rows), rtol=0, atol=1e-12
        )
