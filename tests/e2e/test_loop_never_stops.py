"""No single request stops the event loop (issue 27 items 1 and 2), on a running `server serve`.

Before: ``limits.infer_rows`` counted a BYTES input of shape [1] as one row, so the loop
answered it inline, and ``tensors.read_inputs`` split every element of its raw entry (16M
empty ones, 62 KB gzipped: 5.5 s) before comparing anything with the shape; 300,000
one-element inputs were each decoded (2.7 s); a dense Predict's feature names were each
looked up (7M: 3 s). Health waited as long. Now the work a request implies is counted and
checked against the model before any decode, the inputs per request are capped, and only a
request small by measure is answered on the loop. And metadata beyond
``--max-metadata-bytes`` is refused at its headers.
"""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.serving import OWN_CONNECTION, Server
from bnserve.server.api import grpc_service_pb2 as ipb
from bnserve.server.api import grpc_service_pb2_grpc, predictor_pb2_grpc
from bnserve.server.api import predictor_pb2 as pb
from tests.e2e.serving import status, store_of
from tests.model_factory import random_model
from tests.reliability import record

MODEL = random_model(np.random.default_rng(5), n_features=3)
FEATURES = [v.name for v in MODEL.features]
HEALTH_DEADLINE = 0.25  # the promise: health answers within 250 ms during any request
LATE_FORGIVEN = 1
EMPTY_ELEMENTS = 4_000_000  # a raw entry of empty BYTES elements for an input of shape [1] (16 MB)
ONE_ELEMENT_INPUTS = 300_000
DENSE_NAMES = 2_000_000
# These requests test what comes after admission (parsing, the checks, the loop), so the
# request budget (charged 24x their size; tests/e2e/test_memory_budget.py) lets them in.
PAST_THE_BUDGET = ("--max-inflight-bytes", str(2**31), "--max-connection-inflight-bytes", str(2**31))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = store_of(tmp_path_factory.mktemp("store"), MODEL)
    with Server(url, extra=("--max-metadata-bytes", "4096", *PAST_THE_BUDGET)) as running:
        yield running


def during(target: str, call: Callable[[], object]) -> tuple[grpc.RpcError | None, list[float], int]:
    """Run ``call`` (the hostile request) while another thread polls Health.Check with a
    250 ms deadline on its own connection; (the call's error, each poll's seconds, the
    polls that missed the deadline)."""
    done = threading.Event()
    seconds: list[float] = []
    missed = 0

    def poll() -> None:
        nonlocal missed
        with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            health.Check(health_pb2.HealthCheckRequest(), timeout=5)  # connected before the attack
            started.set()
            while not done.is_set():
                t0 = time.perf_counter()
                try:
                    health.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_DEADLINE)
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error
                    missed += 1
                seconds.append(time.perf_counter() - t0)
                time.sleep(0.01)

    started = threading.Event()
    poller = threading.Thread(target=poll)
    poller.start()
    started.wait(10)
    error = None
    try:
        call()
    except grpc.RpcError as exc:
        error = exc
    finally:
        time.sleep(0.1)  # a poll or two after the reply: the loop may still be busy with it
        done.set()
        poller.join()
    return error, seconds, missed


def sender(target: str, method: str, request: bytes) -> Callable[[], object]:
    """A call of ``method`` with the request already serialized: serializing megabytes in
    the call would hold this process's GIL, and the health poller with it."""

    def call() -> object:
        with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
            return channel.unary_unary(method)(request, timeout=60)

    return call


def empty_elements_for_one() -> ipb.ModelInferRequest:
    request = ipb.ModelInferRequest(model_name="m", raw_input_contents=[b"\0\0\0\0" * EMPTY_ELEMENTS])
    request.inputs.add(name=FEATURES[0], datatype="BYTES", shape=[1])
    return request


def one_element_inputs() -> ipb.ModelInferRequest:
    request = ipb.ModelInferRequest(model_name="m")
    for i in range(ONE_ELEMENT_INPUTS):
        request.inputs.add(name=f"x{i}", datatype="FP32", shape=[1]).contents.fp32_contents.append(1.0)
    return request


def dense_names() -> pb.PredictRequest:
    names = [FEATURES[i % len(FEATURES)] for i in range(DENSE_NAMES)]  # the model's own, repeated
    return pb.PredictRequest(model="m", dense=pb.DenseBatch(features=names, codes=[0] * DENSE_NAMES))


ATTACKS = {
    f"ModelInfer BYTES input of shape [1] with {EMPTY_ELEMENTS:,} empty raw elements": (
        empty_elements_for_one,
        grpc.StatusCode.INVALID_ARGUMENT,
        "its shape needs 1",
    ),
    f"ModelInfer with {ONE_ELEMENT_INPUTS:,} one-element inputs": (
        one_element_inputs,
        grpc.StatusCode.INVALID_ARGUMENT,
        "takes at most 4 inputs",
    ),
    f"dense Predict with {DENSE_NAMES:,} feature names": (
        dense_names,
        grpc.StatusCode.INVALID_ARGUMENT,
        "the model has 3 features",
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_health_answers_within_250_ms_while_a_hostile_request_is_refused(server, attack):
    build, code, says = ATTACKS[attack]
    request = build()
    if isinstance(request, pb.PredictRequest):
        method = "/bnserve.v1.Predictor/Predict"
    else:
        method = "/inference.GRPCInferenceService/ModelInfer"
    call = sender(server.target, method, request.SerializeToString())
    t0 = time.perf_counter()
    error, seconds, missed = during(server.target, call)
    refused_seconds = time.perf_counter() - t0
    # One late check is forgiven to a shared, loaded machine; the request held the loop
    # before for 1 s and more (4, 10 and 3 late checks in a row).
    assert missed <= LATE_FORGIVEN, f"{missed} of {len(seconds)} health checks took over 250 ms"
    assert error is not None, "the hostile request was answered"
    assert error.code() == code, error.details()
    assert says in error.details()
    record(
        f"hostile: {attack}",
        "sqlite",
        requests=len(seconds),
        errors=missed,
        faults=1,
        lost=0,
        health_max_ms=round(max(seconds) * 1e3, 1),
        refused_in_s=round(refused_seconds, 2),
        request_bytes=request.ByteSize(),
    )


def test_valid_calls_are_still_answered(server):
    with grpc.insecure_channel(server.target) as channel:
        infer_stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = ipb.ModelInferRequest(model_name="m")
        for name in FEATURES:
            request.inputs.add(name=name, datatype="BYTES", shape=[2]).contents.bytes_contents.extend([b"", b""])
        assert infer_stub.ModelInfer(request, timeout=10).outputs[0].shape == [2]
        rows = 1000  # over the inline measure: answered on the pool
        codes = pb.DenseBatch(features=FEATURES, codes=[0] * (rows * len(FEATURES)))
        reply = predictor_pb2_grpc.PredictorStub(channel).Predict(
            pb.PredictRequest(model="m", dense=codes, dense_response=True), timeout=10
        )
        assert len(reply.dense.labels) == rows


def test_metadata_over_the_limit_is_refused_at_its_headers(server):
    """The module's server runs with --max-metadata-bytes 4096: 6 KiB of headers (which
    grpc's default 8 KiB soft limit let through) and a mebibyte of them are refused, every
    time; 1 KiB is answered."""
    mebibyte = [(f"x-pad-{i}", "a" * 8192) for i in range(128)]
    with grpc.insecure_channel(server.target, options=OWN_CONNECTION) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        attempts = ([("x-pad", "a" * 3072), ("x-pad-2", "a" * 3072)], mebibyte) * 5
        for metadata in attempts:
            with pytest.raises(grpc.RpcError) as refused:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=10, metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
        small = [("x-pad", "a" * 1024)]
        reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=10, metadata=small)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    record(
        "hostile: calls with 6 KiB and 1 MiB of metadata against --max-metadata-bytes 4096",
        "sqlite",
        requests=len(attempts) + 1,
        errors=0,
        faults=len(attempts),
        lost=0,
        refused=len(attempts),
    )


def test_a_server_short_of_memory_says_so_and_does_not_blame_the_request(tmp_path):
    """A valid request the server has no memory to parse is RESOURCE_EXHAUSTED, logged: the
    server's state, not the client's fault (before: INVALID_ARGUMENT, "not a valid message").
    The server's address space is capped (prlimit) 200 MiB above what it holds; the request
    is a 30 MB dense batch whose parsed codes need 240 MB."""
    url = store_of(tmp_path, MODEL)
    with Server(url, extra=PAST_THE_BUDGET) as server:
        limit = status(server.process.pid, "VmSize") + 200 * 2**20
        resource.prlimit(server.process.pid, resource.RLIMIT_AS, (limit, limit))
        codes = 10_000_000 * len(FEATURES)
        request = pb.PredictRequest(model="m", dense=pb.DenseBatch(features=FEATURES, codes=[0] * codes))
        with grpc.insecure_channel(server.target) as channel:
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary("/bnserve.v1.Predictor/Predict")(request.SerializeToString(), timeout=60)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
            assert "out of memory" in refused.value.details()
            small = pb.PredictRequest(model="m", instances=[pb.Instance()])
            assert len(predictor_pb2_grpc.PredictorStub(channel).Predict(small, timeout=10).predictions) == 1
        assert "out of memory parsing a" in server.output()
