"""Calls that hold the server without sending their body, on the real server in this process
(issue 27 item 2): a call without a token is refused at its headers, a body that never
comes ends the call within ``--body-seconds``, and calls from more connections than
``--max-connections`` are refused at their headers (health still answers). Before, each was held for as long as
the client liked, its metadata with it."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from bench.serving import OWN_CONNECTION
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from tests.in_process_server import running_app
from tests.model_factory import random_model
from tests.reliability import record

MODEL = random_model(np.random.default_rng(5), n_features=3)
TOKEN = "admission-test-token"
BODILESS = 32
PREDICT = "/bnserve.v1.Predictor/Predict"
REQUEST = pb.PredictRequest(model="m", instances=[pb.Instance()])
SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def release():
    """Set at the end of a test: every held call's request stream then ends."""
    event = threading.Event()
    yield event
    event.set()


def bodiless(channel: grpc.Channel, release: threading.Event, metadata=()) -> grpc.Future:
    """A Predict call that sends its headers and no message until ``release``."""

    def never_a_body():
        release.wait()
        yield from ()

    return channel.stream_unary(PREDICT).future(never_a_body(), metadata=metadata)


def ended(calls: list[grpc.Future], within: float) -> tuple[list[grpc.StatusCode], float]:
    """Each call's status code, waiting at most ``within`` seconds in all; and the seconds waited."""
    t0 = time.perf_counter()
    codes = [call.exception(timeout=max(0.0, within - (time.perf_counter() - t0))).code() for call in calls]
    return codes, time.perf_counter() - t0


def test_calls_without_a_token_are_refused_at_their_headers(tmp_path, release):
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKEN + "\n")
    with running_app(tmp_path, {"m": MODEL}, auth_token_file=str(token_file)) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}", options=OWN_CONNECTION) as channel:
            t0 = time.perf_counter()
            calls = [bodiless(channel, release) for _ in range(BODILESS)]
            codes, _ = ended(calls, within=5)  # before: held until the body came, for ever
            seconds = time.perf_counter() - t0
            assert codes == [grpc.StatusCode.UNAUTHENTICATED] * BODILESS
            stub = predictor_pb2_grpc.PredictorStub(channel)
            authorised = stub.Predict(REQUEST, timeout=5, metadata=[("authorization", f"Bearer {TOKEN}")])
            assert len(authorised.predictions) == 1
    record(
        f"hostile: {BODILESS} bodiless calls without a token",
        "sqlite",
        requests=BODILESS + 1,
        errors=0,
        faults=BODILESS,
        lost=0,
        all_refused_in_s=round(seconds, 3),
    )


def test_a_body_that_never_comes_ends_the_call_within_body_seconds(tmp_path, release):
    with running_app(tmp_path, {"m": MODEL}, body_seconds=1.0) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}", options=OWN_CONNECTION) as channel:
            t0 = time.perf_counter()
            calls = [bodiless(channel, release) for _ in range(BODILESS)]
            codes, _ = ended(calls, within=10)  # before: held for as long as the client liked
            seconds = time.perf_counter() - t0
            assert codes == [grpc.StatusCode.DEADLINE_EXCEEDED] * BODILESS
            assert "--body-seconds" in calls[0].exception().details()
            assert 1.0 <= seconds < 5.0
            assert len(predictor_pb2_grpc.PredictorStub(channel).Predict(REQUEST, timeout=5).predictions) == 1
    record(
        f"hostile: {BODILESS} bodiless calls against --body-seconds 1",
        "sqlite",
        requests=BODILESS + 1,
        errors=0,
        faults=BODILESS,
        lost=0,
        all_ended_in_s=round(seconds, 2),
    )


def test_calls_from_more_connections_than_the_cap_are_refused_at_their_headers(tmp_path, release):
    cap = 4
    with running_app(tmp_path, {"m": MODEL}, max_connections=cap) as app:
        target = f"127.0.0.1:{app.port}"
        holders = [grpc.insecure_channel(target, options=OWN_CONNECTION) for _ in range(cap)]
        late = grpc.insecure_channel(target, options=OWN_CONNECTION)
        try:
            held = [bodiless(channel, release) for channel in holders for _ in range(8)]
            stub = predictor_pb2_grpc.PredictorStub(late)
            time.sleep(0.5)  # the held calls have reached their handlers
            assert not any(call.done() for call in held)
            t0 = time.perf_counter()
            refused = 0
            for _ in range(20):
                with pytest.raises(grpc.RpcError) as error:
                    stub.Predict(REQUEST, timeout=5)
                assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value.details()
                assert "--max-connections" in error.value.details()
                refused += 1
            seconds = (time.perf_counter() - t0) / refused
            health = health_pb2_grpc.HealthStub(late)  # probes answer whoever holds the connections
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING
            release.set()  # the held calls send no message and end: their connections are free
            for call in held:
                call.exception(timeout=5)
            assert len(stub.Predict(REQUEST, timeout=5).predictions) == 1
        finally:
            for channel in [*holders, late]:
                channel.close()
    record(
        f"hostile: {cap} connections holding {cap * 8} bodiless calls against --max-connections {cap}",
        "sqlite",
        requests=refused + 1,
        errors=0,
        faults=cap * 8,
        lost=0,
        refused_in_ms=round(seconds * 1e3, 2),
    )


def test_a_request_past_a_budget_is_refused_before_parsing_and_every_charge_is_released(tmp_path):
    """Each request is charged 24 times its size: one past --max-connection-inflight-bytes
    or --max-inflight-bytes alone is refused naming that flag; after calls answered,
    refused and failed, nothing stays charged (bnserve_inflight_request_bytes is 0)."""
    names = [v.name for v in MODEL.features]

    def dense(rows: int) -> pb.PredictRequest:
        return pb.PredictRequest(model="m", dense=pb.DenseBatch(features=names, codes=[0] * (rows * len(names))))

    limits = dict(max_connection_inflight_bytes=2**20, max_inflight_bytes=3 * 2**20)
    with running_app(tmp_path, {"m": MODEL}, **limits) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}", options=OWN_CONNECTION) as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            assert len(stub.Predict(dense(10_000), timeout=10).predictions) == 10_000  # 30 KB: 720 KB charged
            with pytest.raises(grpc.RpcError) as refused:
                stub.Predict(dense(20_000), timeout=10)  # 60 KB: 1.4 MB charged
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--max-connection-inflight-bytes of 1,048,576" in refused.value.details()
            with pytest.raises(grpc.RpcError) as failed:
                stub.Predict(pb.PredictRequest(model="nope", instances=[pb.Instance()]), timeout=10)
            assert failed.value.code() == grpc.StatusCode.NOT_FOUND
    (tmp_path / "total").mkdir()
    with running_app(tmp_path / "total", {"m": MODEL}, max_inflight_bytes=2**20) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}", options=OWN_CONNECTION) as channel:
            with pytest.raises(grpc.RpcError) as refused:
                predictor_pb2_grpc.PredictorStub(channel).Predict(dense(20_000), timeout=10)
            assert "--max-inflight-bytes of 1,048,576" in refused.value.details()
    assert REGISTRY.get_sample_value("bnserve_inflight_request_bytes") == 0
