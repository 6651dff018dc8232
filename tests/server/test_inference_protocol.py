"""The Open Inference Protocol (KServe v2) service of the real server, driven by tritonclient.

The server runs in this process on a real port, as in test_predict.py; the client is
tritonclient's InferenceServerClient (raw tensor data), and for typed ``contents``
tritonclient's own generated messages. Random DAGs with nominal and numeric features;
every input form must give the reference P(c | x) within 1e-6 (FP32 output).
"""

from __future__ import annotations

import importlib.metadata
import math
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tc
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from tritonclient.grpc import service_pb2 as triton_pb
from tritonclient.grpc import service_pb2_grpc as triton_grpc

from bnserve.server.api import grpc_service_pb2
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.store.db import ModelStore
from bnserve.store.errors import StoreUnavailable
from bnserve.store.model import MEAN_JOINT, MEAN_POSTERIOR, NOMINAL, NUMERIC
from bnserve.store.predictor import compile_model
from tests.in_process_server import running_app
from tests.model_factory import random_model
from tests.reference import reference_proba

SERVICE = "inference.GRPCInferenceService"
CONTENTS_FIELD = {
    "BYTES": "bytes_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
}
NUMPY_TYPE = {"BYTES": np.object_, "FP32": np.float32, "FP64": np.float64, "INT32": np.int32, "INT64": np.int64}
OUTPUT_CHOICES = [None, ["label"], ["probabilities"], ["probabilities", "label"]]


def _models() -> dict:
    rng = np.random.default_rng(11)
    out = {}
    for i in range(10):
        if i % 5 == 4:
            combination = MEAN_JOINT if i % 10 == 4 else MEAN_POSTERIOR
            out[f"m{i}"] = random_model(
                rng,
                n_features=int(rng.integers(1, 5)),
                n_networks=3,
                combination=combination,
                all_features=False,
                numeric=0.5,
            )
        else:
            out[f"m{i}"] = random_model(rng, n_features=int(rng.integers(1, 6)), numeric=0.5)
    while True:  # one model with nominal and numeric features, for the error cases
        model = random_model(rng, n_features=3, numeric=0.5)
        if {v.kind for v in model.features} == {NOMINAL, NUMERIC}:
            out["mixed"] = model
            return out


MODELS = _models()
VERSIONS = [random_model(np.random.default_rng(seed), n_features=2, numeric=0.5) for seed in (1, 2, 3)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("store")
    with ModelStore(
        f"sqlite:///{directory / 'store.db'}", create=True
    ) as store:  # the alias first; running_app adds the rest
        for model in VERSIONS:
            store.publish("multi", model)
        store.set_alias("multi", "production", 2)
    with running_app(directory, MODELS) as app:
        client = tc.InferenceServerClient(f"127.0.0.1:{app.port}")
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            _wait_ready(client)
            yield client, triton_grpc.GRPCInferenceServiceStub(channel), channel
        client.close()


def _wait_ready(client: tc.InferenceServerClient, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not client.is_server_ready():
        assert time.monotonic() < deadline, "the server did not become ready"
        time.sleep(0.05)


# ---------------------------------------------------------------- building requests


def _rows(draw, model, n: int) -> np.ndarray:
    return np.array(
        [[draw(st.integers(-1, v.cardinality - 1)) for v in model.features] for _ in range(n)], dtype=np.int64
    ).reshape(n, len(model.features))


def _bounds(variable, code: int) -> tuple[float, float]:
    cuts = variable.cuts
    return (cuts[code - 1] if code > 0 else -math.inf), (cuts[code] if code < len(cuts) else math.inf)


def _numbers_in(variable, code: int, datatype: str) -> list[float]:
    """Raw numbers of ``datatype`` that fall in interval ``code``, edges included."""
    low, high = _bounds(variable, code)
    if datatype.startswith("INT"):
        near = [f(x) + d for x in (low, high) if math.isfinite(x) for f in (math.floor, math.ceil) for d in (-1, 0, 1)]
        return sorted({x for x in [0, 7, -7, *near] if low < x <= high})
    choices = [high, (low + high) / 2, low + 1e-9, high - 1e-3, low + 7.0, 0.0, -1e300, 1e300]
    if datatype == "FP32":
        choices = [float(np.float32(x)) for x in choices if abs(x) < 1e38]
    return [x for x in choices if low < x <= high]


def _feature_tensors(draw, model, codes: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """One (name, datatype, array) per feature sent, each in a datatype it may take;
    a feature with no value in any row may be left out."""
    tensors = []
    rows = len(codes)
    for j, v in enumerate(model.features):
        column = codes[:, j]
        if (column < 0).all() and draw(st.booleans()):
            continue
        datatypes = ["BYTES"]
        if v.kind == NUMERIC:
            datatypes += ["FP32", "FP64"]
            if (column >= 0).all() and all(_numbers_in(v, c, "INT64") for c in column):
                datatypes += ["INT32", "INT64"]
        datatype = draw(st.sampled_from(datatypes))
        if datatype == "BYTES":
            values = [b"" if c < 0 else _text_of(draw, v, c).encode() for c in column]
        else:
            values = [math.nan if c < 0 else draw(st.sampled_from(_numbers_in(v, c, datatype))) for c in column]
        shape = draw(st.sampled_from([(rows,), (rows, 1)]))
        tensors.append((v.name, datatype, np.array(values, dtype=NUMPY_TYPE[datatype]).reshape(shape)))
    return draw(st.permutations(tensors))


def _text_of(draw, variable, code: int) -> str:
    """A state label, or for a numeric feature sometimes a number in its interval."""
    if variable.kind == NUMERIC and draw(st.booleans()):
        return repr(draw(st.sampled_from(_numbers_in(variable, code, "FP64"))))
    return variable.states[code]


def _infer(
    client, name: str, tensors, outputs=None, request_id: str = "", version: str = "", parameters=None
) -> tc.InferResult:
    requested = None if outputs is None else [tc.InferRequestedOutput(o) for o in outputs]
    return client.infer(
        name,
        [_input(t) for t in tensors],
        model_version=version,
        outputs=requested,
        request_id=request_id,
        parameters=parameters,
    )


def _input(tensor: tuple[str, str, np.ndarray]) -> tc.InferInput:
    name, datatype, array = tensor
    return tc.InferInput(name, list(array.shape), datatype).set_data_from_numpy(array)


def _contents_request(name: str, tensors, outputs=None, request_id: str = "") -> triton_pb.ModelInferRequest:
    """The request with each tensor's data in its typed contents, in tritonclient's messages."""
    request = triton_pb.ModelInferRequest(model_name=name, id=request_id)
    for tensor_name, datatype, array in tensors:
        tensor = request.inputs.add(name=tensor_name, datatype=datatype, shape=array.shape)
        getattr(tensor.contents, CONTENTS_FIELD[datatype]).extend(array.ravel().tolist())
    for output in outputs or []:
        request.outputs.add(name=output)
    return request


def _check(result: tc.InferResult, model, expected: np.ndarray, outputs, request_id: str = "") -> None:
    response = result.get_response()
    assert response.model_version == "1" and response.id == request_id
    assert [o.name for o in response.outputs] == (outputs or ["label", "probabilities"])
    probabilities = result.as_numpy("probabilities")
    if outputs is None or "probabilities" in outputs:
        assert probabilities.dtype == np.float32 and probabilities.shape == expected.shape
        np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-6)
    else:
        assert probabilities is None
    labels = result.as_numpy("label")
    if outputs is None or "label" in outputs:
        assert labels.shape == (len(expected),)
        assert labels.tolist() == [model.class_variable.states[i].encode() for i in expected.argmax(axis=1)]
    else:
        assert labels is None


# ---------------------------------------------------------------- inference


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_input_form_equals_the_reference(server, data):
    client, stub, _ = server
    name = data.draw(st.sampled_from(sorted(MODELS)))
    model = MODELS[name]
    codes = _rows(data.draw, model, data.draw(st.integers(1, 5)))
    expected = reference_proba(model, codes)
    request_id = data.draw(st.sampled_from(["", "req-1"]))

    # (a) one tensor per feature: raw (tritonclient), then typed contents
    tensors = _feature_tensors(data.draw, model, codes)
    if tensors:
        outputs = data.draw(st.sampled_from(OUTPUT_CHOICES))
        _check(_infer(client, name, tensors, outputs, request_id), model, expected, outputs, request_id)
        outputs = data.draw(st.sampled_from(OUTPUT_CHOICES))
        response = stub.ModelInfer(_contents_request(name, tensors, outputs, request_id))
        _check(tc.InferResult(response), model, expected, outputs, request_id)

    # (b) one codes tensor, in the order of the features in ModelMetadata
    datatype = data.draw(st.sampled_from(["INT32", "INT64"]))
    tensors = [("codes", datatype, codes.astype(NUMPY_TYPE[datatype]))]
    outputs = data.draw(st.sampled_from(OUTPUT_CHOICES))
    _check(_infer(client, name, tensors, outputs, request_id), model, expected, outputs, request_id)
    response = stub.ModelInfer(_contents_request(name, tensors, None, request_id))
    _check(tc.InferResult(response), model, expected, None, request_id)


def test_an_absent_feature_and_an_empty_text_are_missing(server):
    client, _, _ = server
    model = MODELS["mixed"]
    first, *_ = model.features
    tensors = [(first.name, "BYTES", np.array([b"", first.states[0].encode()], dtype=np.object_))]
    expected = reference_proba(model, np.array([[-1] * 3, [0, -1, -1]]))
    _check(_infer(client, "mixed", tensors), model, expected, None)


def test_an_empty_batch_is_an_empty_answer(server):
    client, _, _ = server
    model = MODELS["mixed"]
    tensors = [(model.features[0].name, "BYTES", np.array([], dtype=np.object_))]
    result = _infer(client, "mixed", tensors)
    assert result.as_numpy("label").shape == (0,)
    assert result.as_numpy("probabilities").shape == (0, model.class_variable.cardinality)


def test_versions_default_to_production_then_latest(server):
    client, _, _ = server
    codes = np.array([[0, -1], [1, 0]], dtype=np.int32)
    for asked, answered in [("", "2"), ("1", "1"), ("3", "3")]:
        result = _infer(client, "multi", [("codes", "INT32", codes)], version=asked)
        assert result.get_response().model_version == answered
        expected = reference_proba(VERSIONS[int(answered) - 1], codes)
        np.testing.assert_allclose(result.as_numpy("probabilities"), expected, rtol=0, atol=1e-6)
    assert client.get_model_metadata("multi").versions == ["1", "2", "3"]


# ---------------------------------------------------------------- readiness, metadata


def test_liveness_readiness_and_server_metadata(server):
    client, _, channel = server
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("m0") and client.is_model_ready("m0", "1") and client.is_model_ready("multi", "3")
    assert not client.is_model_ready("nope") and not client.is_model_ready("m0", "2")
    metadata = client.get_server_metadata()
    assert metadata.name == "bnserve" and metadata.version == importlib.metadata.version("bnserve")
    assert list(metadata.extensions) == []
    check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=SERVICE))
    assert check.status == health_pb2.HealthCheckResponse.SERVING


def test_model_metadata_lists_both_input_forms_and_the_outputs(server):
    client, _, _ = server
    for name, model in MODELS.items():
        metadata = client.get_model_metadata(name)
        assert (metadata.name, list(metadata.versions), metadata.platform) == (name, ["1"], "bnserve")
        n, classes = len(model.features), model.class_variable.cardinality
        assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [
            *((v.name, "BYTES", [-1]) for v in model.features),
            ("codes", "INT32", [-1, n]),
        ]
        assert [(t.name, t.datatype, list(t.shape)) for t in metadata.outputs] == [
            ("label", "BYTES", [-1]),
            ("probabilities", "FP32", [-1, classes]),
        ]


def test_server_ready_follows_health(tmp_path, monkeypatch):
    """Not ready (nor any model) until the store has been read; then ready, as health says."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as store:
        store.publish("m", MODELS["m0"])
    app = App(ServeConfig(store_url=url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=0.05))
    store_up = threading.Event()
    refresh = app.repository.refresh

    def refresh_when_up() -> None:
        if not store_up.is_set():
            raise StoreUnavailable("the store is not reachable yet")
        refresh()

    monkeypatch.setattr(app.repository, "refresh", refresh_when_up)
    app.start()
    client = tc.InferenceServerClient(f"127.0.0.1:{app.port}")
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    health = health_pb2_grpc.HealthStub(channel)
    try:
        assert client.is_server_live() and not client.is_server_ready() and not client.is_model_ready("m")
        status = health.Check(health_pb2.HealthCheckRequest(service=SERVICE)).status
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        store_up.set()
        _wait_ready(client)
        assert client.is_model_ready("m")
        status = health.Check(health_pb2.HealthCheckRequest(service=SERVICE)).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()
        client.close()
        app.stop()


# ---------------------------------------------------------------- errors


def _status(call) -> tuple[str, str]:
    """(status code, message) of a failing call through tritonclient or its raw stub."""
    try:
        call()
    except tc.InferenceServerException as exc:
        return exc.status(), exc.message()
    except grpc.RpcError as exc:
        return str(exc.code()), exc.details()
    raise AssertionError("the call succeeded")


def test_bad_requests_get_invalid_argument_naming_the_culprit(server):
    client, stub, _ = server
    model = MODELS["mixed"]
    nominal = next(v for v in model.features if v.kind == NOMINAL)
    numeric = next(v for v in model.features if v.kind == NUMERIC)
    n = len(model.features)

    def text(name, *values):
        return (name, "BYTES", np.array([x.encode() if isinstance(x, str) else x for x in values], dtype=np.object_))

    def number(name, datatype, *values):
        return (name, datatype, np.array(values, dtype=NUMPY_TYPE[datatype]))

    def codes(datatype, array):
        return ("codes", datatype, np.array(array, dtype=NUMPY_TYPE[datatype]))

    def raw(*inputs, raw_contents):
        request = triton_pb.ModelInferRequest(model_name="mixed", raw_input_contents=raw_contents)
        for name, datatype, shape in inputs:
            request.inputs.add(name=name, datatype=datatype, shape=shape)
        return lambda: stub.ModelInfer(request)

    def contents(name, datatype, shape, **fields):
        request = triton_pb.ModelInferRequest(model_name="mixed")
        tensor = request.inputs.add(name=name, datatype=datatype, shape=shape)
        for field, values in fields.items():
            getattr(tensor.contents, field).extend(values)
        return lambda: stub.ModelInfer(request)

    infer = lambda *tensors, **kw: lambda: _infer(client, "mixed", tensors, **kw)  # noqa: E731
    one_row = [0] * n
    bad = [
        (infer(text("zz", "a")), "'zz'"),
        (infer(text("class", model.class_variable.states[0])), "'class'"),
        (infer((nominal.name, "BOOL", np.array([True]))), repr(nominal.name)),
        (infer((nominal.name, "BYTES", np.array([[b"a", b"b"]], dtype=np.object_))), repr(nominal.name)),
        (infer(text(nominal.name, "", ""), text(numeric.name, "")), repr(numeric.name)),
        (infer(codes("INT32", [one_row]), text(nominal.name, "")), "'codes'"),
        (infer(codes("INT32", [one_row + [0]])), "'codes'"),
        (infer(("codes", "FP32", np.zeros((1, n), dtype=np.float32))), "'codes'"),
        (infer(codes("INT64", [[v.cardinality if v is nominal else 0 for v in model.features]])), repr(nominal.name)),
        (infer(codes("INT32", [[-2] + one_row[1:]])), "'codes'"),
        (infer(number(nominal.name, "FP64", 1.0)), repr(nominal.name)),
        (infer(number(nominal.name, "INT32", 0)), repr(nominal.name)),
        (infer(text(nominal.name, "nope"), parameters={"unknown": "error"}), "'nope'"),
        (infer(text(nominal.name, "nope"), parameters={"unknown": "ignore"}), "'ignore'"),
        (infer(text(nominal.name, "nope"), parameters={"unknown": True}), "string_param"),
        (infer(text(numeric.name, "abc")), repr(numeric.name)),
        (infer(text(numeric.name, "nan")), "or a number"),
        (infer(text(nominal.name, b"\xff")), repr(nominal.name)),
        (infer(text(nominal.name, ""), text(nominal.name, "")), repr(nominal.name)),
        (infer(), "no inputs"),
        (infer(text(nominal.name, ""), outputs=["nope"]), "'nope'"),
        (infer(text(nominal.name, ""), version="abc"), "'abc'"),
        (infer(text(nominal.name, ""), version="0"), "'0'"),
        (infer(text(nominal.name, ""), version="-1"), "'-1'"),
        (
            lambda: client.infer(
                "mixed", [_input(text(nominal.name, ""))], outputs=[tc.InferRequestedOutput("label", class_count=2)]
            ),
            "classification",
        ),
        (
            raw((nominal.name, "BYTES", [1]), (numeric.name, "FP64", [1]), raw_contents=[b"\0\0\0\0"]),
            "raw_input_contents",
        ),
        (raw((numeric.name, "FP64", [2]), raw_contents=[b"\0" * 12]), repr(numeric.name)),
        (raw((numeric.name, "FP32", [2, 1]), raw_contents=[b"\0" * 4]), repr(numeric.name)),
        (raw((nominal.name, "BYTES", [1]), raw_contents=[b"\5\0\0\0ab"]), repr(nominal.name)),
        (raw((nominal.name, "BYTES", [1]), raw_contents=[b"\1\0"]), repr(nominal.name)),
        (raw((nominal.name, "BYTES", [2]), raw_contents=[b"\1\0\0\0a"]), repr(nominal.name)),
        (raw((nominal.name, "BYTES", [-1]), raw_contents=[b""]), repr(nominal.name)),
        (contents(numeric.name, "FP64", [1], int64_contents=[1]), repr(numeric.name)),
        (contents(numeric.name, "FP64", [2], fp64_contents=[1.0]), repr(numeric.name)),
        (contents("codes", "INT32", [1, n], int_contents=one_row[1:]), "'codes'"),
    ]
    both = _contents_request("mixed", [text(nominal.name, "")])
    both.raw_input_contents.append(b"\0\0\0\0")
    bad += [
        (lambda: stub.ModelInfer(both), repr(nominal.name)),
        (lambda: client.is_model_ready("mixed", "abc"), "'abc'"),
    ]
    for call, culprit in bad:
        code, details = _status(call)
        assert code == "StatusCode.INVALID_ARGUMENT", (culprit, code, details)
        assert culprit in details, (culprit, details)


def test_unknown_models_and_versions_are_not_found(server):
    client, _, _ = server
    tensors = [("codes", "INT32", np.zeros((1, len(MODELS["m0"].features)), dtype=np.int32))]
    for call, culprit in [
        (lambda: _infer(client, "nope", tensors), "'nope'"),
        (lambda: _infer(client, "m0", tensors, version="99"), "99"),
        (lambda: client.get_model_metadata("nope"), "'nope'"),
        (lambda: client.get_model_metadata("m0", "99"), "99"),
    ]:
        code, details = _status(call)
        assert code == "StatusCode.NOT_FOUND" and culprit in details, (code, details)


# ---------------------------------------------------------------- wiring


def test_reflection_lists_and_describes_the_inference_service(server):
    _, _, channel = server
    database = ProtoReflectionDescriptorDatabase(channel)
    assert {SERVICE, "bnserve.v1.Predictor", "grpc.health.v1.Health"} <= set(database.get_services())
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName(SERVICE)
    assert [m.name for m in service.methods] == [
        "ServerLive",
        "ServerReady",
        "ModelReady",
        "ServerMetadata",
        "ModelMetadata",
        "ModelInfer",
    ]
    assert pool.FindServiceByName("bnserve.v1.Predictor").methods_by_name["Predict"]


def test_metrics_label_the_service_and_count_rows(server):
    client, _, _ = server

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    method = dict(grpc_type="UNARY", grpc_service=SERVICE, grpc_method="ModelInfer")
    ok, bad = (
        sample("grpc_server_handled_total", **method, grpc_code="OK"),
        sample("grpc_server_handled_total", **method, grpc_code="INVALID_ARGUMENT"),
    )
    classes = MODELS["m1"].class_variable.states
    rows = sample("bnserve_prediction_rows_total", model="m1")
    per_class = [sample("bnserve_predicted_class_rows_total", model="m1", **{"class": c}) for c in classes]
    batches = sample("bnserve_request_rows_count", model="m1")
    small = sample("bnserve_request_rows_bucket", model="m1", le="5.0")
    codes = np.full((3, len(MODELS["m1"].features)), -1, dtype=np.int64)
    _infer(client, "m1", [("codes", "INT64", codes)])
    with pytest.raises(tc.InferenceServerException):
        _infer(client, "m1", [("codes", "INT64", np.zeros((1, 99), dtype=np.int64))])
    assert sample("grpc_server_handled_total", **method, grpc_code="OK") == ok + 1
    assert sample("grpc_server_handled_total", **method, grpc_code="INVALID_ARGUMENT") == bad + 1
    assert sample("bnserve_prediction_rows_total", model="m1") == rows + 3
    # the three all-missing rows share the prior's most probable class; one batch of 3 rows
    winner = classes[int(np.argmax(compile_model(MODELS["m1"]).predict_proba(codes[:1])))]
    after = [sample("bnserve_predicted_class_rows_total", model="m1", **{"class": c}) for c in classes]
    assert [a - b for a, b in zip(after, per_class)] == [3.0 if c == winner else 0.0 for c in classes]
    assert sample("bnserve_request_rows_count", model="m1") == batches + 1
    assert sample("bnserve_request_rows_bucket", model="m1", le="5.0") == small + 1
    assert sample("bnserve_request_rows_sum", model="m1") >= 3
    assert sample("bnserve_request_seconds_count", model="m1") == batches + 1  # the refused call is not timed


def test_messages_match_tritonclients_field_for_field():
    """Names, numbers, types and oneofs of every message we define equal Triton's."""

    def fields(message: Descriptor) -> dict:
        out = {}
        for f in message.fields:
            kind = f.message_type.full_name if f.message_type else f.type
            oneof = f.containing_oneof.name if f.containing_oneof else None
            out[f.name] = (f.number, kind, f.is_repeated, oneof)
        for nested in message.nested_types:
            out[nested.name] = fields(nested)
        return out

    ours, theirs = grpc_service_pb2.DESCRIPTOR, triton_pb.DESCRIPTOR
    for name, message in ours.message_types_by_name.items():
        assert fields(message) == fields(theirs.message_types_by_name[name]), name
    their_methods = theirs.services_by_name["GRPCInferenceService"].methods_by_name
    for method in ours.services_by_name["GRPCInferenceService"].methods:
        other = their_methods[method.name]
        assert (method.input_type.full_name, method.output_type.full_name) == (
            other.input_type.full_name,
            other.output_type.full_name,
        )


def test_every_method_has_its_grpc_series_at_zero_before_its_first_call(tmp_path):
    """So that rate() and increase() see a method's first calls (go-grpc-prometheus's
    InitializeMetrics): in a fresh process, a built server has every method's series at 0."""
    import json
    import subprocess
    import sys

    from bnserve.store.db import upgrade_store

    upgrade_store(f"sqlite:///{tmp_path / 'store.db'}")
    probe = f"""
import json
from prometheus_client import REGISTRY
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
app = App(ServeConfig(store_url="sqlite:///{tmp_path / "store.db"}", host="127.0.0.1", port=0, metrics_port=-1))
get = REGISTRY.get_sample_value
echo = dict(grpc_type="UNARY", grpc_service="bnserve.v1.Diagnostics", grpc_method="Echo")
watch = dict(grpc_type="SERVER_STREAM", grpc_service="grpc.health.v1.Health", grpc_method="Watch")
infer = dict(grpc_type="UNARY", grpc_service="inference.GRPCInferenceService", grpc_method="ModelInfer")
print(json.dumps([get("grpc_server_started_total", echo), get("grpc_server_handled_total", dict(echo, grpc_code="OK")),
                  get("grpc_server_handling_seconds_count", infer), get("grpc_server_started_total", watch)]))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0.0, 0.0, 0.0, 0.0]
