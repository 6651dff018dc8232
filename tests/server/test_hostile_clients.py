"""Clients that hold the server's capacity without a token, and replies over the size limit,
on the real server in this process.

- Open Health.Watch streams (health is open by design) take no thread: the event loop
  holds them as coroutines, and calls without a token that send their headers but never a
  body are refused at the headers, so authorised Predicts and Health Checks keep being
  answered, whatever ``--threads`` is.
- A reply over ``--max-message-bytes`` is refused with RESOURCE_EXHAUSTED by the server
  itself, and counted so in /metrics (grpc would refuse it after the handler returned,
  counted OK).
"""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from bench.serving import OWN_CONNECTION
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from tests.in_process_server import running_app
from tests.model_factory import random_model
from tests.reliability import record

MODEL = random_model(np.random.default_rng(5), n_features=3)
TOKEN = "hostile-test-token"
HELD_WATCHES = 64
HELD_BODILESS = 64
AUTHORISED_CALLS = 200


def test_held_streams_without_a_token_do_not_starve_authorised_calls(tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKEN + "\n")
    # Two pool threads: the held calls outnumber them 64 to 1.
    with running_app(tmp_path, {"m": MODEL}, threads=2, auth_token_file=str(token_file)) as app:
        target = f"127.0.0.1:{app.port}"
        # Each channel its own TCP connection (grpc would share one): 32 held calls each.
        attackers = [grpc.insecure_channel(target, options=OWN_CONNECTION) for _ in range(4)]
        release = threading.Event()

        def never_a_body():
            release.wait()
            yield from ()

        watches = [
            health_pb2_grpc.HealthStub(attackers[i % 4]).Watch(health_pb2.HealthCheckRequest(service=""))
            for i in range(HELD_WATCHES)
        ]
        bodiless = [
            attackers[i % 4]
            .stream_unary("/bnserve.v1.Predictor/Predict", request_serializer=None, response_deserializer=None)
            .future(never_a_body())
            for i in range(HELD_BODILESS)
        ]
        try:
            for watch in watches:  # each stream is open: its first status has arrived
                assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
                stub = predictor_pb2_grpc.PredictorStub(channel)
                health = health_pb2_grpc.HealthStub(channel)
                request = pb.PredictRequest(model="m", instances=[pb.Instance()])
                seconds = []
                for _ in range(AUTHORISED_CALLS):
                    t0 = time.perf_counter()
                    reply = stub.Predict(request, timeout=5, metadata=[("authorization", f"Bearer {TOKEN}")])
                    seconds.append(time.perf_counter() - t0)
                    assert len(reply.predictions) == 1
                    status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
                    assert status == health_pb2.HealthCheckResponse.SERVING
            for call in bodiless:  # refused at their headers, not held waiting for a body
                assert call.exception(timeout=5).code() == grpc.StatusCode.UNAUTHENTICATED
            record(
                f"hostile: {HELD_WATCHES} Health.Watch streams and {HELD_BODILESS} bodiless calls without a token",
                "sqlite",
                requests=2 * AUTHORISED_CALLS,
                errors=0,
                faults=HELD_WATCHES + HELD_BODILESS,
                lost=0,
                authorised_predict_p50_ms=round(float(np.percentile(seconds, 50)) * 1e3, 2),
                authorised_predict_p99_ms=round(float(np.percentile(seconds, 99)) * 1e3, 2),
                pool_threads=2,
            )
        finally:
            release.set()
            for watch in watches:
                watch.cancel()
            for call in bodiless:
                call.cancel()
            for channel in attackers:
                channel.close()


def test_a_reply_over_the_size_limit_is_refused_and_counted_so(tmp_path):
    big = random_model(np.random.default_rng(6), n_features=12, cardinalities=(6, 8), max_parents=3)
    with running_app(tmp_path, {"big": big}, max_message_bytes=4096) as app:
        labels = dict(grpc_type="UNARY", grpc_service="bnserve.v1.Predictor", grpc_method="GetModelMetadata")

        def handled(code: str) -> float:  # the server's metrics: this process's registry
            return REGISTRY.get_sample_value("grpc_server_handled_total", labels | {"grpc_code": code}) or 0.0

        before = handled("RESOURCE_EXHAUSTED"), handled("OK")
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)
            assert stub.GetModelMetadata(pb.GetModelMetadataRequest(model="big"), timeout=10).name == "big"
            try:
                stub.GetModelMetadata(pb.GetModelMetadataRequest(model="big", include_parameters=True), timeout=10)
                raise AssertionError("a reply over --max-message-bytes was sent")
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--max-message-bytes" in error.details()
        assert handled("RESOURCE_EXHAUSTED") == before[0] + 1
        assert handled("OK") == before[1] + 1


def test_one_connection_holds_at_most_its_streams(tmp_path):
    with running_app(tmp_path, {"m": MODEL}, max_streams_per_connection=8) as app:
        target = f"127.0.0.1:{app.port}"
        release = threading.Event()

        def never_a_body():
            release.wait()
            yield from ()

        request = pb.PredictRequest(model="m", instances=[pb.Instance()])
        with (
            grpc.insecure_channel(target, options=OWN_CONNECTION) as greedy,
            grpc.insecure_channel(target, options=OWN_CONNECTION) as other,
        ):
            predictor_pb2_grpc.PredictorStub(greedy).Predict(request, timeout=5)  # connected
            held = [greedy.stream_unary("/bnserve.v1.Predictor/Predict").future(never_a_body()) for _ in range(8)]
            try:
                try:  # a ninth call on that connection waits for a stream: past its deadline
                    predictor_pb2_grpc.PredictorStub(greedy).Predict(request, timeout=1)
                    raise AssertionError("a connection opened more streams than --max-streams-per-connection")
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                assert len(predictor_pb2_grpc.PredictorStub(other).Predict(request, timeout=5).predictions) == 1
            finally:
                release.set()
                for call in held:
                    call.cancel()


def test_a_status_echoing_a_huge_name_reaches_a_default_client_with_its_own_code(tmp_path):
    """A status message travels in a trailer, which grpc's clients refuse past their metadata
    limit (8 KiB soft, 16 KiB hard by default), reporting RESOURCE_EXHAUSTED instead. Before,
    the server echoed a 100,000-character model, alias, feature or value name whole, so a
    client with default options saw RESOURCE_EXHAUSTED "received metadata size exceeds hard
    limit" for what is NOT_FOUND or INVALID_ARGUMENT. Now the message is cut in its middle."""
    long = "é" + "x" * 100_000  # non-ASCII too: the trailer is percent-encoded
    with running_app(tmp_path, {"m": MODEL}) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:  # grpc's default limits
            stub = predictor_pb2_grpc.PredictorStub(channel)
            cases = [
                (pb.PredictRequest(model=long), grpc.StatusCode.NOT_FOUND, "model 'é", "' not found"),
                (pb.PredictRequest(model="m", alias=long), grpc.StatusCode.NOT_FOUND, "has no alias 'é", "x'"),
                (
                    pb.PredictRequest(model="m", instances=[pb.Instance(values={long: "a"})]),
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "unknown feature 'é",
                    "x'",
                ),
                (
                    pb.PredictRequest(model="m", instances=[pb.Instance(values={"f0": long})], unknown="error"),
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "feature 'f0' has no state 'é",
                    "; allowed: ",
                ),
            ]
            for request, code, start, end in cases:
                try:
                    stub.Predict(request, timeout=10)
                    raise AssertionError("a request naming what the server does not hold was answered")
                except grpc.RpcError as error:
                    assert error.code() == code, error.details()
                    details = error.details()
                    assert start in details and end in details and "characters cut" in details
                    assert len(details.encode()) < 1200
            assert stub.Predict(pb.PredictRequest(model="m", instances=[pb.Instance()]), timeout=5).model == "m"


def test_reflection_messages_are_parsed_and_charged_as_unary_requests_are(tmp_path):
    """Reflection is a bidirectional stream, which grpc parsed itself before: bytes that were
    no ServerReflectionRequest ended the call UNKNOWN with the parser's exception in the
    message (and a traceback in the log), and its messages, up to --max-message-bytes each,
    were never charged against the memory budget (three of 60 MB took the server's RSS up by
    400 MB and held health for a second). Now each message is charged before it is parsed,
    and one that does not parse is INVALID_ARGUMENT."""
    from grpc_reflection.v1alpha import reflection_pb2 as rpb

    with running_app(tmp_path, {"m": MODEL}, max_connection_inflight_bytes=24 * 1024 * 1024) as app:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
            reflect = channel.stream_stream(method, response_deserializer=rpb.ServerReflectionResponse.FromString)
            listing = rpb.ServerReflectionRequest(list_services="").SerializeToString()
            replies = list(reflect(iter([listing, listing]), timeout=10))
            assert len(replies) == 2
            assert "bnserve.v1.Predictor" in {s.name for s in replies[0].list_services_response.service}
            for messages, code, text in [
                ([listing, b"\x0a\x02\xff\xfe"], grpc.StatusCode.INVALID_ARGUMENT, "not a valid"),  # bad UTF-8
                (
                    [rpb.ServerReflectionRequest(file_containing_symbol="s" * (2 * 1024 * 1024)).SerializeToString()],
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "--max-connection-inflight-bytes",
                ),
            ]:
                try:
                    list(reflect(iter(messages), timeout=10))
                    raise AssertionError("a reflection stream took a message it should refuse")
                except grpc.RpcError as error:
                    assert error.code() == code, error.details()
                    assert text in error.details() and "DecodeError" not in error.details()
        assert REGISTRY.get_sample_value("bnserve_inflight_request_bytes") == 0  # every charge released
