"""Concurrent large requests stay within the server's memory budget, and the memory comes
back after the burst (issue 27 item 2), on a running `server serve`.

Before: nothing bounded the bytes held by calls in flight, and a packed-integer request
takes about ten times its size once parsed: six to twelve 60 MB messages took the server to
4.5 GB, held afterwards. Now each request is charged 24 times its size against
``--max-inflight-bytes`` before it is parsed, the calls past it are RESOURCE_EXHAUSTED at
once, small calls keep being answered, and the allocator returns the memory afterwards.
"""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest

from bench.serving import OWN_CONNECTION, Server
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.server.limits import HELD_CALL_BYTES
from tests.e2e.serving import status, store_of
from tests.model_factory import random_model
from tests.reliability import record

MiB = 1024 * 1024
FEATURES = 40
ROWS = 100_000  # --max-rows: a valid request of 4 million one-byte codes, about 4 MB
CONCURRENT = 8
BUDGET = 200 * MiB  # admits two such requests at once (each charged 24 x 4 MB)
MARGIN = 96 * MiB  # the refused requests' bytes as received, grpc's buffers, the allocator
RETURNED = 64 * MiB  # what the burst may leave held, over the RSS before it
MODEL = random_model(np.random.default_rng(7), n_features=FEATURES, cardinalities=(2, 3), max_parents=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = store_of(tmp_path_factory.mktemp("store"), MODEL)
    extra = ("--max-inflight-bytes", str(BUDGET), "--max-connection-inflight-bytes", str(BUDGET))
    with Server(url, extra=extra) as running:
        yield running


def large_request() -> bytes:
    names = [v.name for v in MODEL.features]
    codes = np.zeros(ROWS * FEATURES, dtype=np.int32)
    return pb.PredictRequest(model="m", dense=pb.DenseBatch(features=names, codes=codes)).SerializeToString()


def test_concurrent_large_requests_stay_within_the_budget_and_the_memory_comes_back(server):
    pid = server.pids()[0]
    request = large_request()
    target = server.target
    with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:  # one answered, alone: warm
        assert len(channel.unary_unary("/bnserve.v1.Predictor/Predict")(request, timeout=60)) > 0
    time.sleep(1)
    before = status(pid, "VmRSS")
    codes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(CONCURRENT + 1)

    def attack() -> None:
        with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
            call = channel.unary_unary("/bnserve.v1.Predictor/Predict")
            start.wait()
            try:
                call(request, timeout=60)
                code = "OK"
            except grpc.RpcError as error:
                code = error.code().name
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
                assert "--max-inflight-bytes" in error.details() or "--max-connection" in error.details()
            with lock:
                codes.append(code)

    attackers = [threading.Thread(target=attack) for _ in range(CONCURRENT)]
    for thread in attackers:
        thread.start()
    small = []
    with grpc.insecure_channel(target, options=OWN_CONNECTION) as channel:
        stub = predictor_pb2_grpc.PredictorStub(channel)
        stub.Predict(pb.PredictRequest(model="m", instances=[pb.Instance()]), timeout=10)  # connected
        start.wait()
        while any(thread.is_alive() for thread in attackers):  # a small call keeps being answered
            reply = stub.Predict(pb.PredictRequest(model="m", instances=[pb.Instance()]), timeout=10)
            small.append(len(reply.predictions))
            time.sleep(0.05)
    for thread in attackers:
        thread.join()
    peak = status(pid, "VmHWM")
    grown = peak - before
    assert grown <= BUDGET + MARGIN, f"RSS grew {grown / MiB:.0f} MiB, over the budget + {MARGIN // MiB} MiB"
    assert small and set(small) == {1}
    assert "OK" in codes and "RESOURCE_EXHAUSTED" in codes, codes
    deadline = time.monotonic() + 10
    while status(pid, "VmRSS") - before > RETURNED and time.monotonic() < deadline:
        time.sleep(0.2)
    after = status(pid, "VmRSS")
    assert after - before <= RETURNED, f"RSS stayed {(after - before) / MiB:.0f} MiB over its level before the burst"
    record(
        f"hostile: {CONCURRENT} concurrent {len(request) / MiB:.1f} MiB packed-integer Predicts "
        f"against --max-inflight-bytes {BUDGET // MiB} MiB",
        "sqlite",
        requests=CONCURRENT + len(small),
        errors=0,
        faults=CONCURRENT,
        lost=0,
        answered=codes.count("OK"),
        refused=codes.count("RESOURCE_EXHAUSTED"),
        small_calls_answered=len(small),
        rss_before_mib=round(before / MiB),
        peak_growth_mib=round(grown / MiB),
        held_after_mib=round((after - before) / MiB),
    )


HOLDERS = 32  # connections, each holding as many bodiless calls as it may open
STREAMS = 100  # --max-streams-per-connection's default
CAP = 4
HEADERS = [("x-pad", "a" * 14 * 1024)]  # within --max-metadata-bytes


def test_held_bodiless_calls_are_bounded_by_the_connection_cap(server):
    """32 connections each open 100 calls with 14 KiB of headers and never a body, against
    --max-connections 4: the server holds the calls of 4 connections at most (refusing the
    others at their headers), its RSS grows by less than 4 x 100 held calls + 32 MiB, and
    every held call ends at --body-seconds."""
    release = threading.Event()

    def never_a_body():
        release.wait()
        yield from ()

    body_seconds = 30  # opening 3,200 calls took 18 s on 2 busy cores; the held ones must outlast it
    extra = ("--max-connections", str(CAP), "--body-seconds", str(body_seconds))
    with Server(server.store_url, extra=extra) as capped:
        pid = capped.pids()[0]
        time.sleep(0.5)
        before = status(pid, "VmRSS")
        channels = [grpc.insecure_channel(capped.target, options=OWN_CONNECTION) for _ in range(HOLDERS)]
        try:
            started = time.monotonic()
            calls = [
                channel.stream_unary("/bnserve.v1.Predictor/Predict").future(never_a_body(), metadata=HEADERS)
                for channel in channels
                for _ in range(STREAMS)
            ]
            time.sleep(2)  # every call has reached the server
            held = status(pid, "VmRSS") - before
            opened = time.monotonic() - started
            # all end: refused, or at --body-seconds
            codes = [call.exception(timeout=body_seconds + 15).code() for call in calls]
        finally:
            release.set()
            for channel in channels:
                channel.close()
    bound = CAP * STREAMS * HELD_CALL_BYTES + 32 * MiB  # grpc's and the allocator's own
    assert held <= bound, f"RSS grew {held / MiB:.0f} MiB holding bodiless calls, over {bound / MiB:.0f} MiB"
    assert set(codes) == {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED}, set(codes)
    # the first held calls must not have ended (freeing their connection's place) before the last were opened
    assert opened < body_seconds, f"opening the calls took {opened:.1f} s, past --body-seconds on this machine"
    assert codes.count(grpc.StatusCode.DEADLINE_EXCEEDED) <= CAP * STREAMS
    record(
        f"hostile: {HOLDERS} connections x {STREAMS} bodiless calls with 14 KiB of headers against "
        f"--max-connections {CAP}",
        "sqlite",
        requests=HOLDERS * STREAMS,
        errors=0,
        faults=HOLDERS * STREAMS,
        lost=0,
        held_calls=codes.count(grpc.StatusCode.DEADLINE_EXCEEDED),
        refused_at_headers=codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED),
        rss_growth_mib=round(held / MiB, 1),
    )
